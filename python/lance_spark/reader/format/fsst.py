"""FSST expansion (the string compression of Lance 2.1+), vectorized with numpy.

Symbol table (as the reference writes it): a little-endian u64 header (bits 0-7: the number of
symbols n; bit 24: compression on; bits 32-63: the magic "FSST"), then n symbols of 8 bytes each,
then n symbol lengths of one byte each. Compressed bytes are codes: a code c < 255 stands for the
first `len[c]` bytes of symbol c, the escape code 255 for the byte after it, taken literally.

Expansion of a whole page is one pass of numpy operations: escapes are found from runs of 0xFF
bytes (within a run, positions alternate escape / literal from the start of the run), every input
byte gets an output length (symbol length, 1 for a literal, 0 for an escape), and the output bytes
are gathered from a 512 x 8 table (the symbols, then the 256 single literal bytes).
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

MAGIC = 0x46535354
ESC = 255
TABLE_SIZE = 8 + 256 * 8 + 256


class FsstError(ValueError):
    pass


def parse_table(table: bytes) -> Tuple[bool, np.ndarray, np.ndarray]:
    """(compression on, symbols (n, 8) uint8, lengths (n,) uint8)."""
    if len(table) < 8:
        raise FsstError(f"FSST symbol table of {len(table)} bytes is too short")
    header = int.from_bytes(table[:8], "little")
    if header >> 32 != MAGIC:
        raise FsstError("FSST symbol table lacks the FSST magic")
    n = header & 0xFF
    on = bool(header >> 24 & 1)
    need = 8 + 9 * n
    if len(table) < need:
        raise FsstError(f"FSST symbol table of {len(table)} bytes cannot hold {n} symbols")
    raw = np.frombuffer(table, dtype=np.uint8)
    symbols = raw[8:8 + 8 * n].reshape(n, 8)
    lengths = raw[8 + 8 * n:8 + 9 * n]
    if n and (lengths.max() > 8 or lengths.min() < 1):
        raise FsstError("FSST symbol length outside 1..8")
    return on, symbols, lengths


def expand(table: bytes, data: np.ndarray, offsets: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Expand compressed strings (`data` uint8, `offsets` int64 with a leading 0 position of each
    string's start) into (bytes, offsets)."""
    on, symbols, lengths = parse_table(table)
    if not on:
        return data, offsets
    nbytes = data.size
    if nbytes == 0:
        return data, np.zeros_like(offsets)
    is_ff = data == ESC
    # start index of the run of 0xFF bytes each position is in
    idx = np.arange(nbytes, dtype=np.int64)
    run_start = np.where(is_ff & ~np.concatenate(([False], is_ff[:-1])), idx, 0)
    np.maximum.accumulate(run_start, out=run_start)
    escape = is_ff & ((idx - run_start) % 2 == 0)
    literal = np.concatenate(([False], escape[:-1]))
    # an escape may not end a string: its literal must be in the same string
    if escape[-1]:
        raise FsstError("FSST data ends with an escape code")
    n = symbols.shape[0]
    codes = data.astype(np.int64)
    code_ok = escape | literal | (codes < n)
    if not code_ok.all():
        bad = int(codes[~code_ok][0])
        raise FsstError(f"FSST code {bad} is not in the symbol table ({n} symbols)")
    table512 = np.zeros((512, 8), dtype=np.uint8)
    table512[:n] = symbols
    table512[256:, 0] = np.arange(256, dtype=np.uint8)
    lens512 = np.zeros(512, dtype=np.int64)
    lens512[:n] = lengths
    lens512[256:] = 1
    ext = np.where(literal, codes + 256, codes)
    out_len = np.where(escape, 0, lens512[ext])
    ends = np.cumsum(out_len)
    total = int(ends[-1])
    starts = ends - out_len
    out = np.empty(total, dtype=np.uint8)
    # byte k of every code whose output is longer than k: at most 8 passes over the codes
    for k in range(8):
        sel = np.flatnonzero(out_len > k) if k else np.flatnonzero(out_len)
        if not sel.size:
            break
        out[starts[sel] + k] = table512[ext[sel], k]
    bounds = np.concatenate(([0], ends))
    return out, bounds[offsets]
