"""Reader for Lance data files at file version 2.0 (footer says 0.3): the container.

Footer, column metadata, global buffers (file descriptor, page statistics) and where each page's
buffers lie; a page's ArrayEncoding is decoded by `encodings_v2.PageDecoder`. Struct and list
columns are assembled here from their own pages and their children's columns.
"""
from __future__ import annotations

import struct
from typing import Dict, List, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError

from ..._protos import encodings_pb2, file2_pb2, file_pb2
from ..errors import LanceFormatError
from . import _arrow
from ._mapped import MappedFile
from .encodings_v2 import BufferFn, PageDecoder
from .schema import LanceField, arrow_field, build_fields, to_arrow_schema

MAGIC = b"LANC"
FOOTER_LEN = 40
_FOOTER = struct.Struct("<QQQIIHH4s")

PAGE_STATS_KEY = "lance_spark:page_stats_buffer"
PAGE_STATS_VERSION_KEY = b"lance_spark:page_stats_version"


class FileV2Reader(MappedFile):
    """One 2.0 data file, memory-mapped (the 2.1/2.2 reader shares this container)."""

    #: (major, minor) footer versions this class reads
    VERSIONS = ((0, 3), (2, 0))

    def __init__(self, path: str, share: Optional[MappedFile] = None):
        super().__init__(path, share)
        if self.size < FOOTER_LEN:
            raise LanceFormatError(path, f"file too short for a Lance 2.0 footer ({self.size} bytes)")
        (self.cm_start, self.cm_table, self.gb_table, self.num_global_buffers, self.num_columns,
         self.major, self.minor, magic) = _FOOTER.unpack(self._read(self.size - FOOTER_LEN, FOOTER_LEN).to_pybytes())
        if magic != MAGIC:
            raise LanceFormatError(path, f"bad magic {magic!r} (expected {MAGIC!r}): truncated or not a Lance file")
        if (self.major, self.minor) not in self.VERSIONS:
            wanted = ", ".join("2.0" if v == (0, 3) else f"{v[0]}.{v[1]}" for v in self.VERSIONS if v != (2, 0))
            raise LanceFormatError(path, f"unsupported Lance file version {self.major}.{self.minor} "
                                         f"(this reader expects {wanted})")
        end_meta = self.size - FOOTER_LEN
        for name, pos, n in (("column metadata offset table", self.cm_table, self.num_columns),
                             ("global buffer offset table", self.gb_table, self.num_global_buffers)):
            if pos + 16 * n > end_meta:
                raise LanceFormatError(path, f"{name} ({n} entries at {pos}) runs past the footer")
        self._cm_offsets = np.frombuffer(self._read(self.cm_table, 16 * self.num_columns),
                                         dtype="<u8").reshape(-1, 2)
        self._gb_offsets = np.frombuffer(self._read(self.gb_table, 16 * self.num_global_buffers),
                                         dtype="<u8").reshape(-1, 2)
        for i, (pos, sz) in enumerate(self._gb_offsets):
            self._check(int(pos), int(sz), f"global buffer {i}")
        self._columns: Dict[int, object] = {}
        self._descriptor = None
        self._decoder = PageDecoder(path)

    # -- raw access -------------------------------------------------------------------------

    @property
    def descriptor(self):
        if self._descriptor is None:
            if self.num_global_buffers < 1:
                raise LanceFormatError(self.path, "no global buffers (file descriptor missing)")
            pos, sz = (int(v) for v in self._gb_offsets[0])
            d = file_pb2.FileDescriptor()
            try:
                d.ParseFromString(self._read(pos, sz).to_pybytes())
            except DecodeError as e:
                raise LanceFormatError(self.path, f"corrupt file descriptor: {e}") from None
            self._descriptor = d
        return self._descriptor

    def page_statistics(self) -> Optional[pa.Table]:
        """The per-page statistics lance_spark writes (docs/page-statistics.md), or None.

        One row per (column, page): column_index, field_id, page_index, first_row, num_rows, and
        one struct column per field id {null_count, min_value, max_value}."""
        key = self.descriptor.schema.metadata.get(PAGE_STATS_KEY)
        if key is None:
            return None
        try:
            idx = int(key.decode())
        except ValueError:
            raise LanceFormatError(self.path, f"{PAGE_STATS_KEY} is not a buffer index: {key!r}") from None
        if not 0 < idx < self.num_global_buffers:
            raise LanceFormatError(self.path, f"page statistics buffer {idx} does not exist")
        pos, sz = (int(v) for v in self._gb_offsets[idx])
        try:
            table = pa.ipc.open_stream(self._read(pos, sz)).read_all()
        except pa.ArrowInvalid as e:
            raise LanceFormatError(self.path, f"corrupt page statistics: {e}") from None
        version = (table.schema.metadata or {}).get(PAGE_STATS_VERSION_KEY)
        if version == b"1":
            return table
        if version == b"2":
            return self._stats_by_field(table)
        raise LanceFormatError(self.path, f"unknown page statistics version {version!r}")

    def _stats_by_field(self, table: pa.Table) -> pa.Table:
        """Layout 2 (raw little-endian or UTF-8 bound bytes in two binary columns) in the shape
        of layout 1: a struct column {null_count, min_value, max_value} per field id, typed
        as the field, set on that field's rows."""
        types: Dict[int, pa.DataType] = {}

        def walk(fs: List[LanceField]) -> None:
            for f in fs:
                if not f.children:
                    types[f.id] = arrow_field(f, self.path).type
                walk(f.children)

        walk(build_fields(self.descriptor.schema.fields, self.path))
        fid = table["field_id"].to_numpy()
        n = table.num_rows
        cols = {name: table[name] for name in ("column_index", "field_id", "page_index", "first_row", "num_rows")}
        for field_id in sorted(set(fid.tolist())):
            if field_id not in types:
                raise LanceFormatError(self.path, f"page statistics of field {field_id}, which the file does not hold")
            mine = fid == field_id
            take = pa.array(np.flatnonzero(mine))
            typ = types[field_id]
            parts = {"null_count": table["null_count"].take(take).combine_chunks()}
            for key in ("min_value", "max_value"):
                parts[key] = _bounds_as(table[key].take(take).combine_chunks(), typ, self.path)
            sub = pa.StructArray.from_arrays(list(parts.values()), names=list(parts))
            # spread the field's rows back over the whole table (null elsewhere)
            at = np.full(n, -1, dtype=np.int64)
            at[mine] = np.arange(int(mine.sum()))
            cols[str(field_id)] = sub.take(pa.array(at, mask=at < 0))
        return pa.table(cols, metadata=table.schema.metadata)

    @property
    def num_rows(self) -> int:
        return int(self.descriptor.length)

    def column(self, idx: int):
        if idx < 0 or idx >= self.num_columns:
            raise LanceFormatError(self.path, f"column {idx} does not exist (file has {self.num_columns})")
        cm = self._columns.get(idx)
        if cm is None:
            pos, sz = (int(v) for v in self._cm_offsets[idx])
            self._check(pos, sz, f"column {idx} metadata")
            cm = file2_pb2.ColumnMetadata()
            try:
                cm.ParseFromString(self._read(pos, sz).to_pybytes())
            except DecodeError as e:
                raise LanceFormatError(self.path, f"corrupt metadata of column {idx}: {e}") from None
            self._check_column_encoding(cm, idx)
            self._columns[idx] = cm
        return cm

    def _check_column_encoding(self, cm, idx: int) -> None:
        if cm.HasField("encoding"):
            col_enc = self._unwrap(cm.encoding, encodings_pb2.ColumnEncoding(), f"column {idx}")
            kind = col_enc.WhichOneof("column_encoding")
            if kind not in (None, "values", "blob"):  # blob: pages of (position, size) descriptions
                raise LanceFormatError(self.path, f"column {idx}: unsupported column encoding {kind!r}")

    def _unwrap(self, enc, msg, what: str):
        loc = enc.WhichOneof("location")
        if loc == "direct":
            raw = enc.direct.encoding
        elif loc == "indirect":
            raw = self._read(enc.indirect.buffer_location, enc.indirect.buffer_length).to_pybytes()
        else:
            raise LanceFormatError(self.path, f"{what}: missing encoding")
        try:
            wrapper = any_pb2.Any()
            wrapper.ParseFromString(raw)
            msg.ParseFromString(wrapper.value)
        except DecodeError as e:
            raise LanceFormatError(self.path, f"{what}: corrupt encoding: {e}") from None
        return msg

    def _page_buffers(self, cm, page, where: str) -> BufferFn:
        def get(b) -> pa.Buffer:
            idx = b.buffer_index
            if b.buffer_type == encodings_pb2.Buffer.page:
                offs, sizes, kind = page.buffer_offsets, page.buffer_sizes, "page"
            elif b.buffer_type == encodings_pb2.Buffer.column:
                offs, sizes, kind = cm.buffer_offsets, cm.buffer_sizes, "column"
            else:
                if idx >= len(self._gb_offsets):
                    raise LanceFormatError(self.path, f"{where}: file buffer {idx} does not exist")
                pos, sz = (int(v) for v in self._gb_offsets[idx])
                return self._read(pos, sz)
            if idx >= len(offs) or idx >= len(sizes):
                raise LanceFormatError(self.path, f"{where}: {kind} buffer {idx} does not exist")
            self._check(offs[idx], sizes[idx], f"{where}: {kind} buffer {idx}")
            return self._read(offs[idx], sizes[idx])
        return get

    def _pages(self, col_idx: int, what: str):
        cm = self.column(col_idx)
        for pno, page in enumerate(cm.pages):
            where = f"{what}, column {col_idx} page {pno}"
            enc = self._unwrap(page.encoding, encodings_pb2.ArrayEncoding(), where)
            yield where, page, enc, self._page_buffers(cm, page, where)

    def _blob_v1(self, col: int, typ: pa.DataType, what: str) -> pa.Array:
        """A 2.0 blob column: each page a packed struct of (position u64, size u64) per row, the
        value's bytes at that position of this file; size 0 at position 1 is a null (at 0: empty)."""
        pos_parts: List[np.ndarray] = []
        size_parts: List[np.ndarray] = []
        for where, page, enc, bufs in self._pages(col, what):
            if enc.WhichOneof("array_encoding") != "packed_struct":
                raise self._decoder.unsupported(where, enc)
            widths = []
            for e in enc.packed_struct.inner:
                while e.WhichOneof("array_encoding") == "nullable" and e.nullable.WhichOneof("nullability") == "no_nulls":
                    e = e.nullable.no_nulls.values
                widths.append(e.flat.bits_per_value if e.WhichOneof("array_encoding") == "flat" else 0)
            if widths != [64, 64]:
                raise LanceFormatError(self.path, f"{where}: blob descriptions of {widths} bits, not (u64, u64)")
            n = int(page.length)
            buf = bufs(enc.packed_struct.buffer)
            if buf.size < 16 * n:
                raise LanceFormatError(self.path, f"{where}: {buf.size} bytes for {n} blob descriptions")
            d = np.frombuffer(buf, dtype=np.uint64, count=2 * n).reshape(n, 2)
            pos_parts.append(d[:, 0].astype(np.int64))
            size_parts.append(d[:, 1].astype(np.int64))
        pos = np.concatenate(pos_parts) if pos_parts else np.empty(0, np.int64)
        size = np.concatenate(size_parts) if size_parts else np.empty(0, np.int64)
        valid = ~((size == 0) & (pos == 1))
        offs = np.zeros(size.size + 1, np.int64)
        np.cumsum(size, out=offs[1:])
        parts = []
        for p, z in zip(pos[size > 0].tolist(), size[size > 0].tolist()):
            self._check(p, z, f"{what}: blob value")
            parts.append(np.frombuffer(self._read(p, z), dtype=np.uint8))
        data = pa.py_buffer(np.concatenate(parts)) if parts else pa.py_buffer(b"")
        arr = pa.Array.from_buffers(pa.large_binary(), size.size,
                                    [_arrow.bitmap_from_bools(valid), pa.py_buffer(offs), data])
        return arr.cast(typ)

    # -- fields -----------------------------------------------------------------------------
    def read_field(self, field: LanceField, columns: Dict[int, int]) -> pa.Array:
        """All rows of a (possibly nested) field; `columns` maps field id -> column index."""
        typ = arrow_field(field, self.path).type
        return self._read_field(field, typ, columns)

    def _col(self, field: LanceField, columns: Dict[int, int]) -> int:
        if field.id not in columns:
            raise LanceFormatError(self.path, f"field {field.name!r} (id {field.id}) has no column in this file")
        return columns[field.id]

    def _read_field(self, field: LanceField, typ: pa.DataType, columns: Dict[int, int]) -> pa.Array:
        what = f"field {field.name!r}"
        col = self._col(field, columns)
        if pa.types.is_struct(typ):
            n = 0
            for where, page, enc, _ in self._pages(col, what):
                if enc.WhichOneof("array_encoding") != "struct":
                    raise self._decoder.unsupported(where, enc)
                n += page.length
            kids = [self._read_field(c, typ.field(i).type, columns) for i, c in enumerate(field.children)]
            for c, k in zip(field.children, kids):
                if len(k) != n:
                    raise LanceFormatError(self.path, f"{what}: child {c.name!r} has {len(k)} rows, struct has {n}")
            return pa.Array.from_buffers(typ, n, [None], children=kids)
        if pa.types.is_list(typ) or pa.types.is_large_list(typ):
            ends_parts: List[np.ndarray] = []
            valid_parts: List[np.ndarray] = []
            base = 0
            for where, page, enc, bufs in self._pages(col, what):
                if enc.WhichOneof("array_encoding") != "list":
                    raise self._decoder.unsupported(where, enc)
                lst = enc.list
                page_ends, page_valid = self._decoder.list_offsets(lst, page.length, bufs, where)
                ends_parts.append(page_ends + base)
                valid_parts.append(page_valid)
                base += int(lst.num_items)
            ends = np.concatenate(ends_parts) if ends_parts else np.empty(0, np.int64)
            valid = np.concatenate(valid_parts) if valid_parts else np.empty(0, bool)
            child = self._read_field(field.children[0], typ.value_type, columns)
            if len(child) != base:
                raise LanceFormatError(self.path, f"{what}: list pages reference {base} items, "
                                                  f"item column has {len(child)}")
            offsets = _arrow.offsets_buffer(ends, pa.types.is_large_list(typ), f"{self.path}: {what}")
            return pa.Array.from_buffers(typ, len(ends), [_arrow.bitmap_from_bools(valid), offsets],
                                         children=[child])
        meta = field.metadata.get("lance-encoding:blob")
        if (meta.decode() if isinstance(meta, bytes) else meta) == "true":
            return self._blob_v1(col, typ, what)
        value_type = typ.value_type if pa.types.is_dictionary(typ) else typ
        chunks = [self._decoder.decode(enc, page.length, value_type, bufs, where)
                  for where, page, enc, bufs in self._pages(col, what)]
        arr = _arrow.concat(chunks, value_type)
        if pa.types.is_dictionary(typ):
            arr = pc.dictionary_encode(arr).cast(typ)
        return arr


def read_file_table(path: str) -> pa.Table:
    """A standalone 2.0 file as a table, using the schema in its file descriptor.

    Columns are assigned to the schema's fields in depth-first order.
    """
    r = FileV2Reader(path)
    try:
        d = r.descriptor
        top = build_fields(d.schema.fields, path)
        columns: Dict[int, int] = {}
        for f in top:
            for sub in f.walk():
                columns[sub.id] = len(columns)
        schema = to_arrow_schema(top, dict(d.schema.metadata), path)
        arrays = [r.read_field(f, columns) for f in top]
        for f, a in zip(top, arrays):
            if len(a) != r.num_rows:
                raise LanceFormatError(path, f"field {f.name!r} has {len(a)} rows, file has {r.num_rows}")
        return pa.Table.from_arrays(arrays, schema=schema)
    finally:
        r.close()


def _bounds_as(raw: pa.Array, typ: pa.DataType, path: str) -> pa.Array:
    """Raw bound bytes (binary, one value each) as an array of `typ`: fixed-width values from
    their little-endian bytes, strings from UTF-8, booleans from one byte."""
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return raw.cast(pa.string())
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return raw
    boolean = pa.types.is_boolean(typ)
    width = 1 if boolean else typ.byte_width
    valid = raw.is_valid().to_numpy(zero_copy_only=False)
    lens = pc.fill_null(pc.binary_length(raw), 0).to_numpy(zero_copy_only=False)
    if np.any(valid & (lens != width)):
        raise LanceFormatError(path, f"page statistics bounds of {sorted(set(lens[valid].tolist()))} bytes for {typ}")
    starts = np.frombuffer(raw.buffers()[1], dtype=np.int32, count=len(raw) + 1, offset=raw.offset * 4)
    body = np.frombuffer(raw.buffers()[2], dtype=np.uint8) if raw.buffers()[2] is not None else np.zeros(0, np.uint8)
    data = np.zeros(len(raw) * width, dtype=np.uint8)
    idx = np.flatnonzero(valid)
    if len(idx):
        cols = np.arange(width)[None, :]
        data[(idx[:, None] * width + cols).ravel()] = body[(starts[idx][:, None] + cols).ravel()]
    if boolean:
        return pa.array(data != 0, mask=~valid)
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(typ, len(raw), [validity, pa.py_buffer(data.tobytes())])
