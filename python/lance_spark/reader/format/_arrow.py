"""Small vectorized helpers for building Arrow arrays from decoded buffers."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa

from ..errors import LanceFormatError


def bitmap_from_bools(valid: np.ndarray) -> Optional[pa.Buffer]:
    """Arrow validity bitmap (LSB first) of a bool mask, or None when everything is valid."""
    if valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())


def with_validity(arr: pa.Array, validity: Optional[pa.Buffer]) -> pa.Array:
    """`arr` (offset 0, no nulls) with the given validity bitmap."""
    if validity is None:
        return arr
    typ = arr.type
    if arr.offset != 0:
        arr = pa.concat_arrays([arr])  # materialize at offset 0
    if pa.types.is_fixed_size_list(typ) or pa.types.is_struct(typ):
        children = [arr.values] if pa.types.is_fixed_size_list(typ) else [
            arr.field(i) for i in range(typ.num_fields)]
        return pa.Array.from_buffers(typ, len(arr), [validity], children=children)
    if pa.types.is_null(typ):
        return arr
    bufs = arr.buffers()
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return pa.Array.from_buffers(typ, len(arr), [validity, bufs[1]], children=[arr.values])
    return pa.Array.from_buffers(typ, len(arr), [validity] + bufs[1:])


def concat(chunks, typ: pa.DataType) -> pa.Array:
    if not chunks:
        return pa.array([], type=typ)
    if len(chunks) == 1:
        return chunks[0]
    return pa.concat_arrays(chunks)


def offsets_buffer(ends: np.ndarray, large: bool, where: str):
    """Arrow offsets (leading 0) from end offsets."""
    dtype = np.int64 if large else np.int32
    if not large and ends.size and int(ends.max()) > np.iinfo(np.int32).max:
        raise LanceFormatError(where, "offsets exceed the 32-bit range of the declared type")
    out = np.empty(ends.size + 1, dtype=dtype)
    out[0] = 0
    out[1:] = ends
    if ends.size and np.any(np.diff(out) < 0):
        raise LanceFormatError(where, "offsets are not monotonically non-decreasing")
    return pa.py_buffer(out)
