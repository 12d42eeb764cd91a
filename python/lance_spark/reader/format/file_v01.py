"""Reader for legacy Lance data files (file format 0.1; footers say 0.1 or 0.2)."""
from __future__ import annotations

import struct
from typing import List, Optional

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError

from ..._protos import file_pb2
from ..errors import LanceFormatError
from . import _arrow
from ._mapped import MappedFile
from .schema import LanceField, arrow_field

MAGIC = b"LANC"
FOOTER_LEN = 16


class FileV01Reader(MappedFile):
    """One legacy data file.  `field_ids` are DataFile.fields (they fix the page table's shape; with
    none only the metadata is read, e.g. for `num_rows`)."""

    def __init__(self, path: str, field_ids: List[int], share: Optional[MappedFile] = None):
        super().__init__(path, share)
        if self.size < FOOTER_LEN:
            raise LanceFormatError(path, f"file too short for a Lance footer ({self.size} bytes)")
        pos, self.major, self.minor, magic = struct.unpack(
            "<QHH4s", self._read(self.size - FOOTER_LEN, FOOTER_LEN).to_pybytes())
        if magic != MAGIC:
            raise LanceFormatError(path, f"bad magic {magic!r} (expected {MAGIC!r}): truncated or not a Lance file")
        if self.major != 0 or self.minor not in (1, 2):
            raise LanceFormatError(path, f"footer says file version {self.major}.{self.minor}, not a legacy (0.1) file")
        self._check(pos, 4, "metadata")
        (mlen,) = struct.unpack("<I", self._read(pos, 4).to_pybytes())
        self._check(pos + 4, mlen, "metadata")
        meta = file_pb2.Metadata()
        try:
            meta.ParseFromString(self._read(pos + 4, mlen).to_pybytes())
        except DecodeError as e:
            raise LanceFormatError(path, f"corrupt file metadata: {e}") from None
        self.metadata = meta
        offs = np.asarray(meta.batch_offsets, dtype=np.int64)
        if offs.size and (offs[0] != 0 or np.any(np.diff(offs) < 0)):
            raise LanceFormatError(path, "batch offsets are not increasing from 0")
        self.batch_offsets = offs
        self.num_batches = max(offs.size - 1, 0)
        self.num_rows = int(offs[-1]) if offs.size else 0
        ids = [i for i in field_ids if i >= 0]
        self.min_field = field_ids[0] if field_ids else 0
        self.max_field = max(ids) if ids else -1
        ncols = self.max_field - self.min_field + 1
        if ncols > 0 and self.num_batches:
            nbytes = ncols * self.num_batches * 16
            self._check(meta.page_table_position, nbytes, "page table")
            self.page_table = np.frombuffer(self._read(meta.page_table_position, nbytes),
                                            dtype="<i8").reshape(ncols, self.num_batches, 2)
        else:
            self.page_table = np.zeros((0, 0, 2), dtype=np.int64)

    def _page(self, field: LanceField, batch: int):
        row = field.id - self.min_field
        if row < 0 or row >= self.page_table.shape[0]:
            raise LanceFormatError(self.path, f"field {field.name!r} (id {field.id}) is not in the page table")
        pos, length = (int(v) for v in self.page_table[row, batch])
        return pos, length

    # -- decoding ---------------------------------------------------------------------------
    def _plain(self, typ: pa.DataType, pos: int, n: int, where: str) -> pa.Array:
        if pa.types.is_fixed_size_list(typ):
            items = self._plain(typ.value_type, pos, n * typ.list_size, where)
            return pa.Array.from_buffers(typ, n, [None], children=[items])
        if pa.types.is_null(typ):
            return pa.nulls(n)
        try:
            bits = typ.bit_width
        except ValueError:
            raise LanceFormatError(self.path, f"{where}: plain encoding for non fixed-width type {typ}") from None
        nbytes = (n * bits + 7) // 8
        self._check(pos, nbytes, where)
        return pa.Array.from_buffers(typ, n, [None, self._read(pos, nbytes)])

    def _positions(self, pos: int, n: int, dtype: str, where: str) -> np.ndarray:
        width = np.dtype(dtype).itemsize
        self._check(pos, (n + 1) * width, where)
        p = np.frombuffer(self._read(pos, (n + 1) * width), dtype=dtype).astype(np.int64)
        if p.size and np.any(np.diff(p) < 0):
            raise LanceFormatError(self.path, f"{where}: positions are not non-decreasing")
        return p

    def _binary(self, typ: pa.DataType, pos: int, n: int, nullable: bool, where: str) -> pa.Array:
        p = self._positions(pos, n, "<i8", where)
        start, end = (int(p[0]), int(p[-1])) if n else (0, 0)
        self._check(start, end - start, where + " values")
        data = self._read(start, end - start)
        ends = p[1:] - start
        large = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
        offsets = _arrow.offsets_buffer(ends, large, f"{self.path}: {where}")
        # legacy files store no validity: a nullable empty value reads as null
        validity = _arrow.bitmap_from_bools(np.diff(p) != 0) if nullable else None
        return pa.Array.from_buffers(typ, n, [validity, offsets, data])

    def _read_batch(self, field: LanceField, typ: pa.DataType, batch: int, n_rows: int) -> pa.Array:
        where = f"field {field.name!r} batch {batch}"
        if pa.types.is_struct(typ):
            kids = [self._read_batch(c, typ.field(i).type, batch, n_rows)
                    for i, c in enumerate(field.children)]
            n = len(kids[0]) if kids else n_rows
            return pa.Array.from_buffers(typ, n, [None], children=kids)
        pos, length = self._page(field, batch)
        if pa.types.is_list(typ) or pa.types.is_large_list(typ):
            # the page holds the n+1 list positions (binary pages count n values)
            if length < 1:
                raise LanceFormatError(self.path, f"{where}: empty list position page")
            length -= 1
            p = self._positions(pos, length, "<i8" if pa.types.is_large_list(typ) else "<i4", where)
            child = self._read_batch(field.children[0], typ.value_type, batch, None)
            lo, hi = (int(p[0]), int(p[-1])) if length else (0, 0)
            if hi > len(child):
                raise LanceFormatError(self.path, f"{where}: list positions reach item {hi}, "
                                                  f"the batch has {len(child)} items")
            child = child.slice(lo, hi - lo)
            if child.offset:
                child = pa.concat_arrays([child])
            offsets = _arrow.offsets_buffer(p[1:] - lo, pa.types.is_large_list(typ), f"{self.path}: {where}")
            return pa.Array.from_buffers(typ, length, [None, offsets], children=[child])
        if pa.types.is_dictionary(typ):
            idx = self._plain(typ.index_type, pos, length, where)
            if field.dictionary is None:
                raise LanceFormatError(self.path, f"{where}: dictionary field without dictionary values")
            doff, dlen = field.dictionary
            values = self._binary(typ.value_type, doff, dlen, False, where + " dictionary")
            return pa.DictionaryArray.from_arrays(idx, values, ordered=typ.ordered)
        if (pa.types.is_string(typ) or pa.types.is_binary(typ) or pa.types.is_large_string(typ)
                or pa.types.is_large_binary(typ)):
            return self._binary(typ, pos, length, field.nullable, where)
        return self._plain(typ, pos, length, where)

    def read_field(self, field: LanceField) -> pa.Array:
        typ = arrow_field(field, self.path).type
        chunks = []
        for b in range(self.num_batches):
            n = int(self.batch_offsets[b + 1] - self.batch_offsets[b])
            arr = self._read_batch(field, typ, b, n)
            if len(arr) != n:
                raise LanceFormatError(self.path, f"field {field.name!r} batch {b}: read {len(arr)} rows, "
                                                  f"metadata says {n}")
            chunks.append(arr)
        return _arrow.concat(chunks, typ)
