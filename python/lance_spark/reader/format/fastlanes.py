"""FastLanes bit-unpacking, vectorized with numpy.

A FastLanes group holds 1024 unsigned integers of a word type of T bits (8, 16, 32, 64) packed to
W bits each, as W * 1024 / T words. The 1024 values are seen as T rows of 1024 / T lanes: lane l
of the packed words is one bit stream (word k of the lane is `packed[k * lanes + l]`, least
significant bits first) holding rows 0..T-1 of that lane, W bits each. Row r of lane l is value
number `ORDER[r // 8] * 16 + (r % 8) * 128 + l` of the group ("transposed" order).

`unpack(packed, width, word_bits)` unpacks any number of groups of the same width at once: the only
Python loop is over the T rows, every row being one numpy operation over all groups and lanes.
"""
from __future__ import annotations

import numpy as np

ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7], dtype=np.int64)
GROUP = 1024
DTYPES = {8: np.dtype("<u1"), 16: np.dtype("<u2"), 32: np.dtype("<u4"), 64: np.dtype("<u8")}


def words_per_group(width: int, word_bits: int) -> int:
    return GROUP * width // word_bits


def unpack(packed: np.ndarray, width: int, word_bits: int) -> np.ndarray:
    """`packed`: (groups, W * 1024 / T) words of T bits -> (groups, 1024) values of T bits.

    Row r = 8a + b of lane l is value `b * 128 + ORDER[a] * 16 + l`: seen as (groups, 8, T / 8,
    lanes), the output takes row r at [:, b, ORDER[a] * 16 / lanes, :], so every row is shifted and
    masked straight into its place (no scatter afterwards)."""
    dt = DTYPES[word_bits]
    lanes = GROUP // word_bits
    groups = packed.shape[0]
    out = np.empty((groups, GROUP), dtype=dt)
    if groups == 0:
        return out
    if width == 0:
        out[:] = 0
        return out
    p = packed.reshape(groups, width, lanes).astype(dt, copy=False)
    out4 = out.reshape(groups, 8, word_bits // 8, lanes)
    mask = dt.type((1 << width) - 1) if width < word_bits else None
    for r in range(word_bits):  # one numpy operation (or three) per row, over all groups and lanes
        dst = out4[:, r % 8, int(ORDER[r // 8]) * 16 // lanes, :]
        if width == word_bits:
            dst[...] = p[:, r, :]
            continue
        word, shift = divmod(r * width, word_bits)
        np.right_shift(p[:, word, :], dt.type(shift), out=dst)
        if shift + width > word_bits:
            dst |= p[:, word + 1, :] << dt.type(word_bits - shift)
        if shift + width != word_bits:
            dst &= mask
    return out
