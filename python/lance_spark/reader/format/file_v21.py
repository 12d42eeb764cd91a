"""Reader for Lance data files at file versions 2.1 and 2.2.

The container (footer, column metadata, global buffers) is 2.0's (`file_v2.FileV2Reader`); the
difference is what a column is. A 2.1 file stores only leaf columns: struct, list and map layers
above a leaf are folded into that leaf's repetition/definition levels (see `repdef`). Each page
carries a `PageLayout` (`layouts_v21`) whose values use the compressive encodings of
`encodings_v21`.

A field is read by reading each of its leaves page by page (`LeafCursor`: each page becomes the
leaf's layers + values, kept only until consumed) and assembling the Arrow array of the field
from the leaves' layers (`assemble`): a struct's validity and a list's offsets are taken from the
first leaf below them. The exception is a packed struct (`lance-encoding:packed`): the file stores
it as one column of whole rows, and it is read as a leaf whose values are the struct.

Blob columns: at 2.1 the blob page layout (`layouts_v21`) yields the values themselves; at 2.2 a
`lance.blob.v2` column is stored like a packed struct of descriptions (kind, position, size, blob
id, uri), read as a leaf and turned into the field's struct<data, uri> (`blob_v2_values`).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError as ProtoDecodeError

from ..._proto import encodings_v2_1_pb2 as pb
from ..errors import LanceFormatError
from . import _arrow
from . import encodings_v21 as enc21
from .encodings_v21 import Block, DecodeError, Fixed, Fsl, Struct, Var
from .file_v2 import FileV2Reader
from .layouts_v21 import PageData, decode_page, inline_widths, positions_and_sizes, read_blobs
from .repdef import Layer, concat_layers, layer_name, skeleton, slice_layers, visible_count
from .schema import LanceField, arrow_field

#: errors of malformed input that numpy / pyarrow / protobuf raise while decoding
_DECODE_ERRORS = (DecodeError, ValueError, IndexError, TypeError, KeyError, OverflowError, ZeroDivisionError,
                  pa.ArrowException, ProtoDecodeError, MemoryError)


def leaves(field: LanceField) -> List[LanceField]:
    """The leaf fields below (or equal to) `field`, depth first: the columns of a 2.1 file (after
    `_as_leaves`, packed structs are leaves too)."""
    if not field.children:
        return [field]
    out: List[LanceField] = []
    for c in field.children:
        out.extend(leaves(c))
    return out


def is_packed(field: LanceField, columns: Dict[int, int]) -> bool:
    """A struct the file stores as one column of whole rows (`lance-encoding:packed`): the struct
    has a column, its children none."""
    return bool(field.children) and field.id in columns and not any(
        c.id in columns for c in field.walk() if c is not field)


def _as_leaves(field: LanceField, columns: Dict[int, int]) -> LanceField:
    """`field` with packed structs below it turned into leaves (their children dropped)."""
    if not field.children:
        return field
    if is_packed(field, columns):
        return dataclasses.replace(field, children=[])
    return dataclasses.replace(field, children=[_as_leaves(c, columns) for c in field.children])


def _storage_type(typ: pa.DataType) -> pa.DataType:
    return typ.value_type if pa.types.is_dictionary(typ) else typ


def _leaf_types(field: LanceField, typ: pa.DataType, out: Dict[int, pa.DataType]) -> None:
    if not field.children:
        out[field.id] = typ
        return
    if pa.types.is_struct(typ):
        for i, c in enumerate(field.children):
            _leaf_types(c, typ.field(i).type, out)
    elif pa.types.is_map(typ):
        _leaf_types(field.children[0], pa.struct([typ.key_field, typ.item_field]), out)
    elif pa.types.is_list(typ) or pa.types.is_large_list(typ):
        _leaf_types(field.children[0], typ.value_type, out)
    else:
        raise DecodeError(f"field {field.name!r} has children but type {typ}")


# -- blocks -> Arrow -----------------------------------------------------------------------------------

def _bytes_width(typ: pa.DataType) -> int:
    try:
        return typ.bit_width
    except ValueError:
        raise DecodeError(f"values of fixed width for the variable-width type {typ}") from None


def block_to_arrow(b: Block, typ: pa.DataType) -> pa.Array:
    """A decoded block as a (null-free) Arrow array of `typ`."""
    if pa.types.is_null(typ):
        return pa.nulls(b.n)
    if isinstance(b, Fixed):
        n = b.n
        if pa.types.is_boolean(typ):
            if b.bits != 1:
                raise DecodeError(f"boolean values stored with {b.bits} bits")
            return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(np.packbits(b.data, bitorder="little"))])
        width = _bytes_width(typ)
        if width != b.bits:
            raise DecodeError(f"{b.bits}-bit values for {typ} ({width} bits)")
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(np.ascontiguousarray(b.data))])
    if isinstance(b, Var):
        large = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
        if not (large or pa.types.is_string(typ) or pa.types.is_binary(typ)):
            raise DecodeError(f"variable-width values for {typ}")
        offs = b.offsets
        if not large:
            if offs.size and offs[-1] > np.iinfo(np.int32).max:
                raise DecodeError("string offsets exceed the 32-bit range of the type")
            offs = offs.astype(np.int32)
        return pa.Array.from_buffers(typ, b.n, [None, pa.py_buffer(offs), pa.py_buffer(np.ascontiguousarray(b.data))])
    if isinstance(b, Fsl):
        if not pa.types.is_fixed_size_list(typ):
            raise DecodeError(f"fixed-size list values for {typ}")
        if typ.list_size != b.dim:
            raise DecodeError(f"fixed-size lists of {b.dim} items for {typ}")
        child = block_to_arrow(b.child, typ.value_type)
        if b.validity is not None:
            child = _arrow.with_validity(child, _arrow.bitmap_from_bools(b.validity))
        return pa.Array.from_buffers(typ, b.n, [None], children=[child])
    if isinstance(b, Struct):
        if not pa.types.is_struct(typ) or typ.num_fields != len(b.children):
            raise DecodeError(f"packed struct of {len(b.children)} fields for {typ}")
        kids = [block_to_arrow(c, typ.field(i).type) for i, c in enumerate(b.children)]
        return pa.Array.from_buffers(typ, b.n, [None], children=kids)
    raise DecodeError(f"cannot convert {type(b).__name__} to {typ}")


def zeros(typ: pa.DataType, n: int) -> pa.Array:
    """`n` placeholder (null-free) values of `typ` for slots that are null."""
    if pa.types.is_null(typ):
        return pa.nulls(n)
    if pa.types.is_boolean(typ):
        return block_to_arrow(Fixed(1, np.zeros(n, bool)), typ)
    if pa.types.is_fixed_size_list(typ):
        return pa.Array.from_buffers(typ, n, [None], children=[zeros(typ.value_type, n * typ.list_size)])
    if pa.types.is_struct(typ):
        return pa.Array.from_buffers(typ, n, [None], children=[zeros(typ.field(i).type, n)
                                                              for i in range(typ.num_fields)])
    if (pa.types.is_string(typ) or pa.types.is_binary(typ) or pa.types.is_large_string(typ)
            or pa.types.is_large_binary(typ)):
        return block_to_arrow(Var(np.zeros(n + 1, np.int64), np.empty(0, np.uint8)), typ)
    return block_to_arrow(Fixed(_bytes_width(typ), np.zeros(n * _bytes_width(typ) // 8, np.uint8)), typ)


def _constant_values(source, typ: pa.DataType, n: int) -> pa.Array:
    kind, raw = source
    raw = np.frombuffer(bytes(raw), np.uint8) if kind == "inline" else raw
    if kind == "buffer":
        if raw.size < 4:
            raise DecodeError("constant value buffer too short")
        count = int(raw[:4].view("<u4")[0])
        if count > 16 or raw.size < 4 + 4 * count:
            raise DecodeError(f"constant value buffer claims {count} buffers")
        sizes = raw[4:4 + 4 * count].view("<u4").astype(np.int64)
        pos = 4 + 4 * count
        bufs = []
        for s in sizes.tolist():
            if pos + s > raw.size:
                raise DecodeError("constant value buffer is truncated")
            bufs.append(raw[pos:pos + s])
            pos += s
        if (pa.types.is_string(typ) or pa.types.is_binary(typ) or pa.types.is_large_string(typ)
                or pa.types.is_large_binary(typ)):
            if len(bufs) < 2:
                raise DecodeError("constant string value without offsets and bytes")
            ob = bufs[-2]
            w = 8 if ob.size >= 16 and (pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)) else 4
            offs = ob.view(f"<i{w}").astype(np.int64)
            value = bufs[-1][int(offs[0]):int(offs[1])] if offs.size >= 2 else bufs[-1]
            lens = np.full(n, value.size, np.int64)
            return block_to_arrow(Var(np.concatenate(([0], np.cumsum(lens))), np.tile(value, n)), typ)
        if not bufs:
            raise DecodeError("constant value without buffers")
        raw = bufs[-1]
    if pa.types.is_boolean(typ):
        return block_to_arrow(Fixed(1, np.full(n, bool(raw.size and raw[0] & 1))), typ)
    if pa.types.is_fixed_size_list(typ):
        width = _bytes_width(typ.value_type) // 8
        if raw.size != width * typ.list_size:
            raise DecodeError(f"constant vector of {raw.size} bytes for {typ}")
        child = block_to_arrow(Fixed(width * 8, np.tile(raw, n)), typ.value_type)
        return pa.Array.from_buffers(typ, n, [None], children=[child])
    width = _bytes_width(typ)
    if raw.size * 8 != width:
        raise DecodeError(f"constant value of {raw.size} bytes for {typ} ({width} bits)")
    return block_to_arrow(Fixed(width, np.tile(raw, n)), typ)


# -- blob columns of 2.2 -------------------------------------------------------------------------------

BLOB_V2_EXTENSION = b"lance.blob.v2"
#: what a 2.2 file stores per value of a `lance.blob.v2` column (a packed struct)
BLOB_V2_DESCRIPTION = pa.struct([("kind", pa.uint8()), ("position", pa.uint64()), ("size", pa.uint64()),
                                 ("blob_id", pa.uint32()), ("blob_uri", pa.string())])
_BLOB_KINDS = {0: "inline", 1: "packed", 2: "dedicated", 3: "external"}


def is_blob_v2(field: LanceField) -> bool:
    """A 2.2 blob column: a struct<data, uri> with extension `lance.blob.v2`, stored as one column
    of descriptions (read as a leaf, like a packed struct)."""
    ext = field.metadata.get("ARROW:extension:name")
    return (ext if isinstance(ext, bytes) else str(ext or "").encode()) == BLOB_V2_EXTENSION


def blob_file_name(blob_id: int) -> str:
    """A blob file's name in `<data file stem>/`: the id's 32 bits reversed, as binary digits."""
    return f"{blob_id & 0xFFFFFFFF:032b}"[::-1] + ".blob"


def _local_path(uri: str) -> str:
    """The local file an external blob URI names (``file:`` URIs; others are refused)."""
    from urllib.parse import unquote, urlparse
    u = urlparse(uri)
    if u.scheme != "file":
        raise DecodeError(f"external blob uri {uri!r}: only file: URIs are read by the pure-Python reader")
    return unquote(u.path)


def _file_bytes(path: str, pos: int, size: Optional[int], what: str) -> np.ndarray:
    """`size` bytes at `pos` of a local file (all of it when size is None)."""
    try:
        with open(path, "rb") as f:
            total = os.fstat(f.fileno()).st_size
            if size is None:
                pos, size = 0, total
            if pos < 0 or size < 0 or pos + size > total:
                raise DecodeError(f"{what}: bytes [{pos}, {pos + size}) lie outside {path} ({total} bytes)")
            f.seek(pos)
            return np.frombuffer(f.read(size), dtype=np.uint8)
    except OSError as e:
        raise DecodeError(f"{what}: cannot read {path}: {e}") from None


def blob_v2_values(desc: pa.Array, typ: pa.DataType, read_at, data_path: Optional[str] = None) -> pa.Array:
    """`lance.blob.v2` descriptions -> the field's struct<data, uri[, position, size]> (children
    matched by name): `data` the value wherever it lives: in this data file (kind 0, "inline"),
    in one of its blob files (1 "packed", 2 "dedicated": `<data file stem>/<blob_file_name>`), or
    an external local file (3: the range [position, position + size), all of it when size is 0);
    `uri` the uri of external values; `position`/`size` where the value's bytes are and how many.
    Slots of null rows are placeholders."""
    if not pa.types.is_struct(typ):
        raise DecodeError(f"blob field of type {typ} (a struct<data, uri> expected)")
    names = [typ.field(i).name for i in range(typ.num_fields)]
    unknown = [x for x in names if x not in ("data", "uri", "position", "size")]
    if unknown:
        raise DecodeError(f"lance.blob.v2 column declared as struct<{', '.join(names)}>: unknown field(s) "
                          f"{', '.join(unknown)}")
    kind = np.asarray(desc.field(0).to_numpy(zero_copy_only=False), np.int64)
    uri = desc.field(4)
    has_uri = np.asarray(pc.binary_length(uri).fill_null(0).to_numpy(zero_copy_only=False)) > 0
    inline = kind == 0
    pos, size = positions_and_sizes(desc.field(1).to_numpy(zero_copy_only=False),
                                    desc.field(2).to_numpy(zero_copy_only=False), "blob v2 descriptions")
    pos = np.array(pos, np.int64)
    ids = np.asarray(desc.field(3).to_numpy(zero_copy_only=False), np.int64)
    uris = uri.to_pylist()
    if inline.all():
        data = block_to_arrow(read_blobs(pos, size, read_at), pa.large_binary())
        sizes_out = size
    else:
        parts: List[np.ndarray] = []
        sizes_out = size.copy()
        for i in range(len(kind)):
            k = int(kind[i])
            what = f"blob of slot {i} ({_BLOB_KINDS.get(k, 'unknown')})"
            if k == 0:
                parts.append(read_at(int(pos[i]), int(size[i])) if size[i] else np.empty(0, np.uint8))
            elif k in (1, 2):
                if data_path is None:
                    raise DecodeError(f"{what}: stored in a blob file; the data file's path is unknown")
                stem = os.path.splitext(data_path)[0]
                parts.append(_file_bytes(os.path.join(stem, blob_file_name(int(ids[i]))),
                                         int(pos[i]), int(size[i]), what))
            elif k == 3:
                if not uris[i]:
                    raise DecodeError(f"{what}: an external blob without a uri")
                b = _file_bytes(_local_path(uris[i]), int(pos[i]), int(size[i]) or None, what)
                if not size[i]:
                    pos[i], sizes_out[i] = 0, b.size
                parts.append(b)
            else:
                raise DecodeError(f"{what}: unknown blob kind {k}")
        offs = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([p.size for p in parts], out=offs[1:])
        data = block_to_arrow(Var(offs, np.concatenate(parts) if parts else np.empty(0, np.uint8)),
                              pa.large_binary())
    uri = _arrow.with_validity(uri, _arrow.bitmap_from_bools(has_uri))
    kids = {"data": data, "uri": uri, "position": pa.array(pos.astype(np.uint64), pa.uint64()),
            "size": pa.array(np.asarray(sizes_out).astype(np.uint64), pa.uint64())}
    return pa.StructArray.from_arrays([kids[x].cast(typ.field(x).type) for x in names], fields=list(typ))


# -- the file ------------------------------------------------------------------------------------------

class FileV21Reader(FileV2Reader):
    """One 2.1 / 2.2 data file, memory-mapped."""

    VERSIONS = ((2, 1), (2, 2))
    #: called with (column, page) after each page is decoded (e.g. `verify`'s progress bar)
    on_page: Optional[Callable[[int, int], None]] = None

    def _check_column_encoding(self, cm, idx: int) -> None:
        return None  # 2.1 columns carry no column-level encoding the reader needs

    def fail(self, where: str, problem: str) -> LanceFormatError:
        return LanceFormatError(self.path, f"{where}: {problem}")

    def page_layout(self, page, where: str):
        loc = page.encoding.WhichOneof("location")
        if loc == "direct":
            raw = page.encoding.direct.encoding
        elif loc == "indirect":
            self._check(page.encoding.indirect.buffer_location, page.encoding.indirect.buffer_length,
                        f"{where}: encoding")
            raw = self._read(page.encoding.indirect.buffer_location, page.encoding.indirect.buffer_length).to_pybytes()
        else:
            raise self.fail(where, "page has no encoding")
        try:
            wrapper = any_pb2.Any()
            wrapper.ParseFromString(raw)
            if not wrapper.type_url.endswith("PageLayout"):
                raise self.fail(where, f"page encoding is {wrapper.type_url!r}, not a 2.1 PageLayout")
            layout = pb.PageLayout()
            layout.ParseFromString(wrapper.value)
        except ProtoDecodeError as e:
            raise self.fail(where, f"corrupt page encoding: {e}") from None
        if layout.WhichOneof("layout") is None:
            raise self.fail(where, "unknown page layout (empty or from a newer writer)")
        return layout

    def page_buffers(self, page, where: str) -> List[np.ndarray]:
        if len(page.buffer_offsets) != len(page.buffer_sizes):
            raise self.fail(where, "page buffer offsets and sizes differ in number")
        out = []
        for i, (pos, size) in enumerate(zip(page.buffer_offsets, page.buffer_sizes)):
            self._check(int(pos), int(size), f"{where}: buffer {i}")
            out.append(np.frombuffer(self._read(int(pos), int(size)), dtype=np.uint8))
        return out

    def read_at(self, pos: int, size: int) -> np.ndarray:
        """`size` bytes at file position `pos` (a blob value), a zero-copy view."""
        if pos < 0 or size < 0 or pos + size > self.size:
            raise DecodeError(f"blob value [{pos}, {pos + size}) lies outside the file ({self.size} bytes)")
        return np.frombuffer(self._read(pos, size), dtype=np.uint8)

    def decode_page(self, col: int, pno: int, typ: pa.DataType, where: str,
                    expected_layers: Optional[int] = None,
                    blob_v2: bool = False) -> Tuple[List[Layer], pa.Array, PageData]:
        """One page of a leaf column: its layers (outermost first) and its values (Arrow, one per
        leaf slot, nulls not applied). With `blob_v2` the column holds `lance.blob.v2` descriptions
        and `typ` is the field's struct<data, uri>: the values are read (`blob_v2_values`)."""
        cm = self.column(col)
        page = cm.pages[pno]
        layout = self.page_layout(page, where)
        bufs = self.page_buffers(page, where)
        storage = BLOB_V2_DESCRIPTION if blob_v2 else _storage_type(typ)
        try:
            data = decode_page(layout, bufs, int(page.length), self.read_at)
            if expected_layers is not None and len(data.kinds) != expected_layers:
                raise DecodeError(f"page has {len(data.kinds)} rep/def layers, the field's path has "
                                  f"{expected_layers}")
            layers = skeleton(data.kinds, data.rep, data.defs, data.n_entries, int(page.length))
            nvis = layers[-1].length
            if data.values is None and data.constant is None:
                values = zeros(storage, nvis)
            elif data.constant is not None:
                values = _constant_values(data.constant, storage, nvis)
            elif data.dictionary is not None:
                items = block_to_arrow(data.dictionary, storage)
                idx = data.values.ints() if isinstance(data.values, Fixed) else None
                if idx is None:
                    raise DecodeError("dictionary indices are not integers")
                if idx.size != nvis:
                    raise DecodeError(f"{idx.size} dictionary indices for {nvis} values")
                if idx.size and len(items) == 0:
                    values = zeros(storage, nvis)
                else:
                    if idx.size and int(idx.max()) >= len(items):
                        raise DecodeError(f"dictionary index {int(idx.max())} out of range ({len(items)} items)")
                    values = items.take(pa.array(idx.astype(np.int64)))
            else:
                if data.values.n != nvis:
                    raise DecodeError(f"page holds {data.values.n} values, its levels {nvis} visible items")
                values = block_to_arrow(data.values, storage)
            if blob_v2:
                values = blob_v2_values(values, typ, self.read_at, self.path)
        except LanceFormatError:
            raise
        except _DECODE_ERRORS as e:
            raise self.fail(where, f"{type(e).__name__ if not isinstance(e, DecodeError) else ''}"
                                   f"{': ' if not isinstance(e, DecodeError) else ''}{e}") from None
        if self.on_page is not None:
            self.on_page(col, pno)
        return layers, values, data

    def describe_page(self, col: int, pno: int) -> dict:
        """Layout, codecs and layers of one page (for `inspect`)."""
        page = self.column(col).pages[pno]
        where = f"column {col} page {pno}"
        layout = self.page_layout(page, where)
        out = describe_layout(layout, int(page.length))
        if out["layout"] == "constant" and out["codec"] == "value buffer" and len(page.buffer_sizes) in (0, 2):
            out["codec"] = "all null"
        out["widths"] = []
        if layout.WhichOneof("layout") == "mini_block_layout":
            try:
                out["widths"] = inline_widths(layout.mini_block_layout, self.page_buffers(page, where))
            except _DECODE_ERRORS as e:
                raise self.fail(where, str(e)) from None
        return out

    # -- fields ---------------------------------------------------------------------------------

    def cursor(self, leaf: LanceField, typ: pa.DataType, columns: Dict[int, int], what: str) -> "LeafCursor":
        if leaf.id not in columns:
            raise LanceFormatError(self.path, f"{what}: leaf field {leaf.name!r} (id {leaf.id}) has no column "
                                              "in this file")
        return LeafCursor(self, columns[leaf.id], typ, what, blob_v2=is_blob_v2(leaf))

    def read_field(self, field: LanceField, columns: Dict[int, int]) -> pa.Array:
        """All rows of a (possibly nested) top-level field; `columns` maps leaf field id -> column."""
        return next(self.iter_field(field, columns, None))

    def iter_field(self, field: LanceField, columns: Dict[int, int],
                   batch_rows: Optional[int]) -> Iterator[pa.Array]:
        typ = arrow_field(field, self.path).type
        field = _as_leaves(field, columns)
        types: Dict[int, pa.DataType] = {}
        try:
            _leaf_types(field, typ, types)
        except DecodeError as e:
            raise LanceFormatError(self.path, str(e)) from None
        depth = _depths(field)
        curs = {lf.id: self.cursor(lf, types[lf.id], columns, f"field {field.name!r}") for lf in leaves(field)}
        for c, lf in zip(curs.values(), leaves(field)):
            c.expected_layers = depth[lf.id] + 1
        total = self.num_rows
        step = total if not batch_rows else batch_rows
        start = 0
        while True:
            n = min(step, total - start)
            parts = {k: c.take(n) for k, c in curs.items()}
            try:
                arr = assemble(field, typ, parts, 0)
            except _DECODE_ERRORS as e:
                raise LanceFormatError(self.path, f"field {field.name!r}: {e}") from None
            yield arr
            start += n
            if start >= total:
                break


def _depths(field: LanceField, d: int = 0, out: Optional[Dict[int, int]] = None) -> Dict[int, int]:
    out = {} if out is None else out
    out[field.id] = d
    for c in field.children:
        _depths(c, d + 1, out)
    return out


class LeafCursor:
    """Rows of one leaf column, decoded page by page as they are asked for."""

    def __init__(self, reader: FileV21Reader, col: int, typ: pa.DataType, what: str, blob_v2: bool = False):
        self.r = reader
        self.blob_v2 = blob_v2
        self.col = col
        self.typ = typ
        self.what = what
        self.pages = reader.column(col).pages
        self.next_page = 0
        self.layers: Optional[List[Layer]] = None
        self.values: Optional[pa.Array] = None
        self.rows = 0
        self.expected_layers: Optional[int] = None

    def _load(self) -> None:
        pno = self.next_page
        where = f"{self.what}, column {self.col} page {pno}"
        layers, values, _ = self.r.decode_page(self.col, pno, self.typ, where, self.expected_layers,
                                               self.blob_v2)
        self.next_page += 1
        if self.layers is None:
            self.layers, self.values = layers, values
        else:
            self.layers = concat_layers([self.layers, layers])
            self.values = pa.concat_arrays([self.values, values]) if len(self.values) else values
        self.rows += layers[0].length

    def take(self, n: int) -> Tuple[List[Layer], pa.Array]:
        while self.rows < n and self.next_page < len(self.pages):
            self._load()
        if self.rows < n:
            raise LanceFormatError(self.r.path, f"{self.what}, column {self.col}: pages hold {self.rows} rows, "
                                                f"the file has {n} more to read")
        if self.layers is None:  # a column without pages (empty file)
            return [], pa.array([], _storage_type(self.typ))
        head, (a, b) = slice_layers(self.layers, 0, n)
        vals = self.values.slice(a, b - a)
        tail, (c, d) = slice_layers(self.layers, n, self.rows)
        self.layers, self.values = tail, self.values.slice(c, d - c)
        self.rows -= n
        return head, vals


def assemble(field: LanceField, typ: pa.DataType, parts: Dict[int, Tuple[List[Layer], pa.Array]],
             depth: int) -> pa.Array:
    """The Arrow array of `field` (at nesting `depth`) from its leaves' layers and values."""
    lvs = leaves(field)
    layers, values = parts[lvs[0].id]
    if not layers:
        return pa.array([], typ)
    layer = layers[depth]
    validity = _arrow.bitmap_from_bools(layer.valid) if layer.valid is not None else None
    n = layer.length
    if field.children:
        for lf in lvs[1:]:
            other = parts[lf.id][0][depth]
            if other.length != n:
                raise DecodeError(f"leaves {lvs[0].name!r} and {lf.name!r} disagree on the rows of "
                                  f"{field.name!r} ({n} vs {other.length})")
        if pa.types.is_struct(typ):
            if layer.offsets is not None:
                raise DecodeError(f"struct {field.name!r} stored as a list layer")
            kids = [assemble(c, typ.field(i).type, parts, depth + 1) for i, c in enumerate(field.children)]
            return pa.Array.from_buffers(typ, n, [validity], children=kids)
        if layer.offsets is None:
            raise DecodeError(f"list {field.name!r} stored without offsets (not a list layer)")
        if pa.types.is_map(typ):
            child = assemble(field.children[0], pa.struct([typ.key_field, typ.item_field]), parts, depth + 1)
            large = False
        else:
            child = assemble(field.children[0], typ.value_type, parts, depth + 1)
            large = pa.types.is_large_list(typ)
        if len(child) != int(layer.offsets[-1]):
            raise DecodeError(f"list {field.name!r} references {int(layer.offsets[-1])} items, has {len(child)}")
        offs = layer.offsets.astype(np.int64 if large else np.int32)
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(offs)], children=[child])
    if layer.offsets is not None:
        raise DecodeError(f"leaf {field.name!r} stored as a list layer")
    if len(values) != n:
        raise DecodeError(f"leaf {field.name!r} has {len(values)} values for {n} slots")
    arr = _arrow.with_validity(values, validity)
    if pa.types.is_dictionary(typ):
        arr = pc.dictionary_encode(arr).cast(typ)
    return arr


def describe_layout(layout, num_rows: int) -> dict:
    kind = layout.WhichOneof("layout")
    out = {"rows": num_rows}
    if kind == "mini_block_layout":
        l = layout.mini_block_layout
        codec = enc21.describe(l.value_compression)
        if l.HasField("dictionary"):
            codec += f" + dictionary({l.num_dictionary_items} items: {enc21.describe(l.dictionary)})"
        out.update(layout="mini-block", codec=codec, layers=[layer_name(k) for k in l.layers],
                   rep=enc21.describe(l.rep_compression) if l.HasField("rep_compression") else None,
                   defs=enc21.describe(l.def_compression) if l.HasField("def_compression") else None,
                   chunk_words=32 if l.has_large_chunk else 16)
    elif kind == "full_zip_layout":
        l = layout.full_zip_layout
        out.update(layout="full-zip", codec=enc21.describe(l.value_compression),
                   layers=[layer_name(k) for k in l.layers])
    elif kind == "constant_layout":
        l = layout.constant_layout
        codec = "inline value" if l.HasField("inline_value") else "value buffer"
        out.update(layout="constant", codec=codec, layers=[layer_name(k) for k in l.layers])
    elif kind == "blob_layout":
        inner = describe_layout(layout.blob_layout.inner_layout, num_rows)
        out.update(layout="blob", codec=f"descriptions: {inner.get('layout')}: {inner.get('codec')}",
                   layers=[layer_name(k) for k in layout.blob_layout.layers])
    else:
        out.update(layout=str(kind), codec="?", layers=[])
    return out


def read_file_table(path: str) -> pa.Table:
    """A standalone 2.1 / 2.2 file as a table, using the schema in its file descriptor (the file's
    columns are the schema's leaves, depth first)."""
    from .schema import build_fields, to_arrow_schema

    r = FileV21Reader(path)
    try:
        d = r.descriptor
        top = build_fields(d.schema.fields, path)
        columns: Dict[int, int] = {}
        for f in top:
            for lf in leaves(f):
                columns[lf.id] = len(columns)
        schema = to_arrow_schema(top, dict(d.schema.metadata), path)
        arrays = [r.read_field(f, columns) for f in top]
        return pa.Table.from_arrays(arrays, schema=schema)
    finally:
        r.close()
