"""Fragments as a manifest lists them (data files, deletion file), and reading one data file
with the reader of its file format."""
from __future__ import annotations

import os
from dataclasses import dataclass, field as dc_field
from typing import Callable, Dict, List, Optional

import pyarrow as pa

from ..errors import LanceFormatError
from ..format.file_v01 import FileV01Reader
from ..format.file_v2 import FileV2Reader
from ..format.file_v21 import FileV21Reader
from ..format.schema import LanceField


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
        return "legacy" if self.is_legacy else f"{self.file_major_version}.{self.file_minor_version}"

    @property
    def is_legacy(self) -> bool:
        return self.file_major_version < 2


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


def read_data_file(df: DataFileInfo, fields: List[LanceField],
                   on_page: Optional[Callable[[int, int], None]] = None) -> Dict[int, pa.Array]:
    """Read top-level fields (with their children) from one data file; `on_page(column, page)` is
    called after each page of a 2.1 / 2.2 file is decoded."""
    _check_size(df)
    if df.is_legacy:
        r = FileV01Reader(df.full_path, df.fields)
        try:
            return {f.id: r.read_field(f) for f in fields}
        finally:
            r.close()
    r = open_v2(df)
    if on_page is not None and isinstance(r, FileV21Reader):
        r.on_page = on_page
    try:
        columns = column_map(df)
        return {f.id: r.read_field(f, columns) for f in fields}
    finally:
        r.close()


def column_map(df: DataFileInfo) -> Dict[int, int]:
    """Field id -> column index of a 2.x data file."""
    if df.column_indices:
        return {fid: ci for fid, ci in zip(df.fields, df.column_indices) if fid >= 0 and ci >= 0}
    return {fid: i for i, fid in enumerate(df.fields) if fid >= 0}


def open_v2(df: DataFileInfo):
    """The reader of a 2.x data file's version (2.0, or 2.1 / 2.2)."""
    version = (df.file_major_version, df.file_minor_version)
    if version == (2, 0):
        return FileV2Reader(df.full_path)
    if version in ((2, 1), (2, 2)):
        return FileV21Reader(df.full_path)
    raise LanceFormatError(df.full_path, f"unsupported data file version {df.file_version} "
                                         "(this reader handles legacy, 2.0, 2.1 and 2.2)")


def file_has_field(df: DataFileInfo, field: LanceField) -> bool:
    """Whether a data file stores `field` (2.1+ files list only the leaves of nested fields)."""
    ids = set(df.fields)
    return any(sub.id in ids for sub in field.walk())


def iter_data_file(df: DataFileInfo, fields: List[LanceField], batch_rows: int):
    """Batches of at most `batch_rows` rows ({field id: array}) of one data file, decoded page by page
    (2.1 / 2.2), or read whole (older versions)."""
    _check_size(df)
    if df.is_legacy or (df.file_major_version, df.file_minor_version) == (2, 0):
        yield read_data_file(df, fields)
        return
    r = open_v2(df)
    try:
        columns = column_map(df)
        iters = {f.id: r.iter_field(f, columns, batch_rows) for f in fields}
        while True:
            batch = {}
            for fid, it in iters.items():
                arr = next(it, None)
                if arr is None:
                    return
                batch[fid] = arr
            if not batch:
                return
            yield batch
            if all(len(a) == 0 for a in batch.values()):
                return
    finally:
        r.close()
