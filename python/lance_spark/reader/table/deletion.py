"""Deletion files: `_deletions/{fragment_id}-{read_version}-{id}.{arrow|bin}`."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import LanceFormatError

ARROW_ARRAY = 0
BITMAP = 1


def deletion_file_name(fragment_id: int, df) -> str:
    suffix = "bin" if df.file_type == BITMAP else "arrow"
    return f"{fragment_id}-{df.read_version}-{df.id}.{suffix}"


def read_deletions(path: str, file_type: int) -> np.ndarray:
    """Sorted unique uint32 row offsets deleted from a fragment."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise LanceFormatError(path, f"cannot read deletion file: {e.strerror or e}") from None
    if file_type == BITMAP:
        from pyroaring import BitMap
        try:
            bm = BitMap.deserialize(raw)
        except Exception as e:
            raise LanceFormatError(path, f"corrupt roaring bitmap deletion file: {e}") from None
        out = np.frombuffer(bm.to_array(), dtype=np.uint32) if len(bm) else np.empty(0, np.uint32)
        return out
    if file_type != ARROW_ARRAY:
        raise LanceFormatError(path, f"unknown deletion file type {file_type}")
    try:
        reader = pa.ipc.open_file(pa.py_buffer(raw))
        table = reader.read_all()
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as e:
        raise LanceFormatError(path, f"corrupt Arrow IPC deletion file: {e}") from None
    if table.num_columns != 1:
        raise LanceFormatError(path, f"deletion file must have one column, has {table.num_columns}")
    col = table.column(0)
    if col.type not in (pa.int32(), pa.uint32()):
        raise LanceFormatError(path, f"deletion offsets must be int32/uint32, not {col.type}")
    if col.null_count:
        raise LanceFormatError(path, "deletion offsets contain nulls")
    vals = col.to_numpy()
    if vals.size and vals.min() < 0:
        raise LanceFormatError(path, "negative deletion offset")
    return np.unique(vals.astype(np.uint32))
