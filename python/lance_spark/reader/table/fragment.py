"""Fragments as a manifest lists them (data files, deletion file), and reading one data file
with the reader of its file format."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field as dc_field
from typing import Callable, Dict, List, Optional, Tuple, Union

import pyarrow as pa

from ..errors import LanceFormatError
from ..format._mapped import MappedFile
from ..format.file_v01 import FileV01Reader
from ..format.file_v2 import FileV2Reader
from ..format.file_v21 import FileV21Reader
from ..format.schema import LanceField, arrow_field

#: file version (major, minor) -> its name. 0.3 is what 2.0 was called when Lance 0.15 / 0.16
#: introduced it (their manifests and 2.0 footers still say so); 0.0 is a DataFile from before
#: manifests recorded file versions.
FILE_VERSIONS: Dict[Tuple[int, int], str] = {
    (0, 0): "legacy", (0, 1): "legacy", (0, 2): "legacy", (0, 3): "2.0",
    (2, 0): "2.0", (2, 1): "2.1", (2, 2): "2.2"}

FileReader = Union[FileV01Reader, FileV2Reader, FileV21Reader]


def version_name(major: int, minor: int) -> str:
    return FILE_VERSIONS.get((major, minor), f"{major}.{minor}")


@dataclass
class DataFileInfo:
    path: str                    # as written in the manifest (relative to data/)
    full_path: str
    fields: List[int]
    column_indices: List[int]
    file_major_version: int
    file_minor_version: int
    file_size_bytes: int

    @property
    def file_version(self) -> str:
        """The version the manifest lists: legacy, 2.0 (also listed as 0.3), 2.1 or 2.2."""
        return version_name(self.file_major_version, self.file_minor_version)

    @property
    def is_legacy(self) -> bool:
        return self.file_version == "legacy"


@dataclass
class DeletionFileInfo:
    path: str
    file_type: str               # "arrow" or "bitmap"
    read_version: int
    id: int
    num_deleted_rows: int


@dataclass
class FragmentInfo:
    id: int
    physical_rows: int
    deleted_rows: int
    files: List[DataFileInfo] = dc_field(default_factory=list)
    deletion_file: Optional[DeletionFileInfo] = None

    @property
    def num_rows(self) -> int:
        return self.physical_rows - self.deleted_rows


def _check_size(df: DataFileInfo) -> None:
    if not os.path.isfile(df.full_path):
        raise LanceFormatError(df.full_path, "data file is missing")


def open_data_file(df: DataFileInfo, legacy_fields: Optional[List[int]] = None) -> FileReader:
    """The reader of a data file's version as its own footer states it (legacy and 2.x footers both
    end in u16 major, u16 minor, "LANC"): a file the manifest lists as legacy may be a 2.x file, one
    it lists as 2.x must say that version. `legacy_fields`: the page table shape of a legacy file
    (default `df.fields`; [] reads no page table)."""
    _check_size(df)
    listed = df.file_version
    if listed not in FILE_VERSIONS.values():
        raise LanceFormatError(df.full_path, f"unsupported data file version {listed} "
                                             "(this reader handles legacy, 2.0, 2.1 and 2.2)")
    f = MappedFile(df.full_path)
    try:
        major, minor = f.footer_version()
        found = FILE_VERSIONS.get((major, minor))
        if found is None or (listed != "legacy" and found != listed):
            raise LanceFormatError(df.full_path, f"the manifest lists file version {listed}, "
                                                 f"the file's footer says {major}.{minor}")
        if found == "legacy":
            return FileV01Reader(df.full_path, df.fields if legacy_fields is None else legacy_fields, share=f)
        return FileV2Reader(df.full_path, share=f) if found == "2.0" else FileV21Reader(df.full_path, share=f)
    except BaseException:
        f.close()
        raise


def data_file_rows(df: DataFileInfo) -> int:
    """A data file's row count, from its footer and metadata only."""
    r = open_data_file(df, legacy_fields=[])
    try:
        return r.num_rows
    finally:
        r.close()


def stored_part(df: DataFileInfo, f: LanceField) -> LanceField:
    """`f` less the struct sub-fields (also of a list's struct items) the data file does not store
    (added by a later mergeSchema append); `f` itself when it stores them all."""
    lt = f.logical_type
    if lt == "struct":
        kids = [stored_part(df, c) for c in f.children if file_has_field(df, c)]
        if not kids or (len(kids) == len(f.children) and all(a is b for a, b in zip(kids, f.children))):
            return f
        return dataclasses.replace(f, children=kids)
    if lt in ("list", "list.struct", "large_list", "large_list.struct") and len(f.children) == 1:
        item = stored_part(df, f.children[0])
        return f if item is f.children[0] else dataclasses.replace(f, children=[item])
    return f


def widen(arr: pa.Array, to: pa.DataType) -> pa.Array:
    """An array of a part of a struct type (or list of structs) as one of type `to`: the sub-fields
    it lacks all NULL."""
    if arr.type == to:
        return arr
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([widen(c, to) for c in arr.chunks], to)
    if pa.types.is_struct(to):
        have = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
        kids = []
        for i in range(to.num_fields):
            t = to.field(i)
            kids.append(widen(arr.field(have[t.name]), t.type) if t.name in have else pa.nulls(len(arr), t.type))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(kids, fields=[to.field(i) for i in range(to.num_fields)], mask=mask)
    if pa.types.is_list(to) or pa.types.is_large_list(to):
        values = widen(arr.values, to.value_type)
        cls = pa.LargeListArray if pa.types.is_large_list(to) else pa.ListArray
        return cls.from_arrays(arr.offsets, values, type=to, mask=arr.is_null() if arr.null_count else None)
    return arr


def _read_fields(r: FileReader, df: DataFileInfo, fields: List[LanceField]) -> Dict[int, pa.Array]:
    if isinstance(r, FileV01Reader):
        return {f.id: r.read_field(f) for f in fields}
    columns = column_map(df)
    out = {}
    for f in fields:
        part = stored_part(df, f)
        arr = r.read_field(part, columns)
        out[f.id] = arr if part is f else widen(arr, arrow_field(f, df.full_path).type)
    return out


def read_data_file(df: DataFileInfo, fields: List[LanceField],
                   on_page: Optional[Callable[[int, int], None]] = None) -> Dict[int, pa.Array]:
    """Read top-level fields (with their children) from one data file; `on_page(column, page)` is
    called after each page of a 2.1 / 2.2 file is decoded."""
    r = open_data_file(df)
    if on_page is not None and isinstance(r, FileV21Reader):
        r.on_page = on_page
    try:
        return _read_fields(r, df, fields)
    finally:
        r.close()


def column_map(df: DataFileInfo) -> Dict[int, int]:
    """Field id -> column index of a 2.x data file."""
    if df.column_indices:
        return {fid: ci for fid, ci in zip(df.fields, df.column_indices) if fid >= 0 and ci >= 0}
    return {fid: i for i, fid in enumerate(df.fields) if fid >= 0}


def open_v2(df: DataFileInfo) -> Union[FileV2Reader, FileV21Reader]:
    """The reader of a 2.x data file (2.0, or 2.1 / 2.2)."""
    r = open_data_file(df)
    if isinstance(r, FileV01Reader):
        r.close()
        raise LanceFormatError(df.full_path, "a legacy (0.1) data file, not a 2.x one")
    return r


def file_has_field(df: DataFileInfo, field: LanceField) -> bool:
    """Whether a data file stores `field` (2.1+ files list only the leaves of nested fields)."""
    ids = set(df.fields)
    return any(sub.id in ids for sub in field.walk())


def iter_data_file(df: DataFileInfo, fields: List[LanceField], batch_rows: int):
    """Batches of at most `batch_rows` rows ({field id: array}) of one data file, decoded page by page
    (2.1 / 2.2), or read whole (older versions)."""
    r = open_data_file(df)
    if not isinstance(r, FileV21Reader):
        try:
            batch = _read_fields(r, df, fields)
        finally:
            r.close()
        yield batch
        return
    try:
        columns = column_map(df)
        parts = {f.id: (f, stored_part(df, f)) for f in fields}
        iters = {fid: r.iter_field(part, columns, batch_rows) for fid, (_, part) in parts.items()}
        while True:
            batch = {}
            for fid, it in iters.items():
                arr = next(it, None)
                if arr is None:
                    return
                f, part = parts[fid]
                batch[fid] = arr if part is f else widen(arr, arrow_field(f, df.full_path).type)
            if not batch:
                return
            yield batch
            if all(len(a) == 0 for a in batch.values()):
                return
    finally:
        r.close()
