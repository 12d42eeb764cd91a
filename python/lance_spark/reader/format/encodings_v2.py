"""The 2.0 array encodings: one page's ArrayEncoding tree and its buffers decoded into Arrow.

Supported: flat (uncompressed), nullable, fixed_size_list, binary, dictionary, and the offsets
of list pages. The container (footer, column metadata, where a page's buffers lie) is
`file_v2`; it hands each page to `PageDecoder` with a function resolving its buffer references.
"""
from __future__ import annotations

from typing import Callable, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import LanceFormatError
from . import _arrow

#: resolves a `Buffer` reference of an encoding (page, column or file buffer) to its bytes
BufferFn = Callable[[object], pa.Buffer]

_UINT_DTYPES = {8: "<u1", 16: "<u2", 32: "<u4", 64: "<u8"}


class PageDecoder:
    """Decodes the pages of one 2.0 data file; errors name the file (`path`) and the page."""

    def __init__(self, path: str):
        self.path = path

    def unsupported(self, where: str, enc) -> LanceFormatError:
        return LanceFormatError(self.path, f"{where}: unsupported encoding {enc.WhichOneof('array_encoding')!r}")

    def _flat_buffer(self, flat, n: int, bits: int, bufs: BufferFn, where: str) -> pa.Buffer:
        if flat.HasField("compression") and flat.compression.scheme:
            raise LanceFormatError(self.path, f"{where}: unsupported buffer compression {flat.compression.scheme!r}")
        buf = bufs(flat.buffer)
        need = (n * bits + 7) // 8
        if buf.size < need:
            raise LanceFormatError(self.path, f"{where}: buffer holds {buf.size} bytes, {n} values of "
                                              f"{bits} bits need {need}")
        return buf

    def _uints(self, enc, n: int, bufs: BufferFn, where: str) -> np.ndarray:
        """Unsigned integers (offsets, indices) of any width as uint64."""
        kind = enc.WhichOneof("array_encoding")
        if kind == "nullable":
            nn = enc.nullable.WhichOneof("nullability")
            if nn == "no_nulls":
                return self._uints(enc.nullable.no_nulls.values, n, bufs, where)
            raise LanceFormatError(self.path, f"{where}: offsets/indices may not contain nulls ({nn})")
        if kind != "flat":
            raise self.unsupported(where, enc)
        bits = enc.flat.bits_per_value
        if bits not in _UINT_DTYPES:
            raise LanceFormatError(self.path, f"{where}: {bits}-bit offsets/indices are not supported")
        buf = self._flat_buffer(enc.flat, n, bits, bufs, where)
        return np.frombuffer(buf, dtype=_UINT_DTYPES[bits], count=n).astype(np.uint64, copy=False)

    def _bitmap(self, enc, n: int, bufs: BufferFn, where: str) -> pa.Buffer:
        kind = enc.WhichOneof("array_encoding")
        if kind != "flat" or enc.flat.bits_per_value != 1:
            raise LanceFormatError(self.path, f"{where}: validity must be a 1-bit flat buffer, not {kind}")
        return self._flat_buffer(enc.flat, n, 1, bufs, where)

    def decode(self, enc, n: int, typ: pa.DataType, bufs: BufferFn, where: str) -> pa.Array:
        """The `n` values of a page (or of an encoding nested in one) as an Arrow array of `typ`."""
        kind = enc.WhichOneof("array_encoding")
        if kind == "nullable":
            nullable = enc.nullable
            nn = nullable.WhichOneof("nullability")
            if nn == "no_nulls":
                return self.decode(nullable.no_nulls.values, n, typ, bufs, where)
            if nn == "all_nulls":
                return pa.nulls(n, typ)
            if nn == "some_nulls":
                validity = self._bitmap(nullable.some_nulls.validity, n, bufs, where)
                values = self.decode(nullable.some_nulls.values, n, typ, bufs, where)
                return _arrow.with_validity(values, validity)
            raise LanceFormatError(self.path, f"{where}: nullable encoding without a case")
        if kind == "flat":
            bits = enc.flat.bits_per_value
            if pa.types.is_boolean(typ):
                if bits != 1:
                    raise LanceFormatError(self.path, f"{where}: boolean data with {bits} bits per value")
            elif pa.types.is_null(typ):
                return pa.nulls(n)
            else:
                try:
                    width = typ.bit_width
                except ValueError:
                    raise LanceFormatError(self.path, f"{where}: flat encoding for non fixed-width type {typ}") from None
                if width != bits:
                    raise LanceFormatError(self.path, f"{where}: {bits}-bit values for {typ} ({width} bits)")
            buf = self._flat_buffer(enc.flat, n, bits, bufs, where)
            return pa.Array.from_buffers(typ, n, [None, buf])
        if kind == "fixed_size_list":
            fsl = enc.fixed_size_list
            if not pa.types.is_fixed_size_list(typ):
                raise LanceFormatError(self.path, f"{where}: fixed_size_list encoding for {typ}")
            if fsl.dimension != typ.list_size:
                raise LanceFormatError(self.path, f"{where}: dimension {fsl.dimension} != {typ.list_size}")
            if fsl.has_validity:
                raise LanceFormatError(self.path, f"{where}: fixed_size_list with inline validity is not supported")
            items = self.decode(fsl.items, n * fsl.dimension, typ.value_type, bufs, where)
            return pa.Array.from_buffers(typ, n, [None], children=[items])
        if kind == "binary":
            return self._binary(enc.binary, n, typ, bufs, where)
        if kind == "dictionary":
            d = enc.dictionary
            idx = self._uints(d.indices, n, bufs, where)
            items = self.decode(d.items, d.num_dictionary_items, typ, bufs, where)
            if idx.size and int(idx.max()) > d.num_dictionary_items:
                raise LanceFormatError(self.path, f"{where}: dictionary index out of range")
            null = idx == 0
            take = pa.array(np.where(null, 0, idx.astype(np.int64) - 1), mask=null if null.any() else None)
            return pc.take(items, take)
        raise self.unsupported(where, enc)

    def _binary(self, b, n: int, typ: pa.DataType, bufs: BufferFn, where: str) -> pa.Array:
        if not (pa.types.is_string(typ) or pa.types.is_binary(typ) or pa.types.is_large_string(typ)
                or pa.types.is_large_binary(typ)):
            raise LanceFormatError(self.path, f"{where}: binary encoding for {typ}")
        ends, valid = self._adjusted_ends(self._uints(b.indices, n, bufs, where), int(b.null_adjustment), n)
        total = int(ends[-1]) if n else 0
        data = self._flat_buffer(b.bytes.flat, total, 8, bufs, where) if b.bytes.WhichOneof(
            "array_encoding") == "flat" else None
        if data is None:
            raise self.unsupported(where + " (binary bytes)", b.bytes)
        large = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
        offsets = _arrow.offsets_buffer(ends, large, f"{self.path}: {where}")
        return pa.Array.from_buffers(typ, n, [_arrow.bitmap_from_bools(valid), offsets, data])

    @staticmethod
    def _adjusted_ends(raw: np.ndarray, adjustment: int, n: int) -> Tuple[np.ndarray, np.ndarray]:
        """End offsets and validity from 2.0's null-adjusted offsets: a value at or
        above `adjustment` (when non-zero) marks a null whose end is value % adjustment."""
        if not adjustment:
            return raw, np.ones(n, dtype=bool)
        return raw % np.uint64(adjustment), raw < adjustment

    def list_offsets(self, lst, n: int, bufs: BufferFn, where: str) -> Tuple[np.ndarray, np.ndarray]:
        """End offsets (int64, into the page's `lst.num_items` items) and validity of the `n` lists
        of a `list` page."""
        raw, valid = self._adjusted_ends(self._uints(lst.offsets, n, bufs, where), int(lst.null_offset_adjustment), n)
        if raw.size and int(raw[-1]) > lst.num_items:
            raise LanceFormatError(self.path, f"{where}: offsets reference {int(raw[-1])} items, "
                                              f"page has {lst.num_items}")
        return raw.astype(np.int64), valid
