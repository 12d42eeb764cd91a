"""FSST expansion (the string compression of Lance 2.1+), vectorized.

Symbol table (as the reference writes it): a little-endian u64 header (bits 0-7: the number of
symbols n; bit 24: compression on; bits 32-63: the magic "FSST"), then n symbols of 8 bytes each,
then n symbol lengths of one byte each. Compressed bytes are codes: a code c < 255 stands for the
first `len[c]` bytes of symbol c, the escape code 255 for the byte after it, taken literally.

Expansion of a whole page is a dictionary lookup: a 513-entry binary "dictionary" holds the
symbols (entries 0..n-1), the 256 single literal bytes (entries 256..511) and an empty entry (512,
for escape codes); every input byte is an index into it (its code; 256 + the byte for a literal
after an escape; 512 for an escape), and one Arrow `take` over all the indices writes every
output byte in order, the offsets of the result giving each code's output position. Escapes are
located from the (usually few) 0xFF bytes only: within a run of 0xFF bytes, positions alternate
escape / literal from the start of the run.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pyarrow as pa

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


def _dictionary(symbols: np.ndarray, lengths: np.ndarray, large: bool) -> pa.Array:
    """Entries 0..n-1: the symbols; n..255: empty (invalid codes, rejected before); 256..511: the
    literal bytes; 512: empty (escape codes)."""
    n = symbols.shape[0]
    lens = np.zeros(513, dtype=np.int64)
    lens[:n] = lengths
    lens[256:512] = 1
    offsets = np.zeros(514, dtype=np.int64 if large else np.int32)
    np.cumsum(lens, out=offsets[1:])
    sym_mask = np.arange(8)[None, :] < lengths[:, None].astype(np.int64)
    body = np.concatenate([symbols[sym_mask], np.arange(256, dtype=np.uint8)])
    typ = pa.large_binary() if large else pa.binary()
    return pa.Array.from_buffers(typ, 513, [None, pa.py_buffer(offsets), pa.py_buffer(body)])


def expand(table: bytes, data: np.ndarray, offsets: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Expand compressed strings (`data` uint8, `offsets` int64 with a leading 0: position of each
    string's start) into (bytes, offsets)."""
    on, symbols, lengths = parse_table(table)
    if not on:
        return data, offsets
    nbytes = data.size
    if nbytes == 0:
        return data, np.zeros_like(offsets)
    n = symbols.shape[0]
    ff = np.flatnonzero(data == ESC)
    if ff.size:
        # escapes: even positions within each run of 0xFF bytes; the byte after one is a literal
        k = np.arange(ff.size, dtype=np.int64)
        run_start = np.where(np.concatenate(([True], ff[1:] != ff[:-1] + 1)), k, 0)
        np.maximum.accumulate(run_start, out=run_start)
        esc = ff[(k - run_start) % 2 == 0]
        if esc[-1] == nbytes - 1:
            raise FsstError("FSST data ends with an escape code")
        lit = esc + 1
        # an escape may not end a string: its literal must be in the same string
        at = np.searchsorted(offsets, lit)
        if np.any(offsets[np.minimum(at, offsets.size - 1)] == lit):
            raise FsstError("an FSST string ends with an escape code")
        idx = data.astype(np.uint16)
        idx[lit] += 256
        idx[esc] = 512
        bad = (idx >= n) & (idx < 256)
        if bad.any():
            raise FsstError(f"FSST code {int(idx[bad][0])} is not in the symbol table ({n} symbols)")
    else:
        idx = data
        top = int(data.max())
        if top >= n:
            raise FsstError(f"FSST code {top} is not in the symbol table ({n} symbols)")
    large = 8 * nbytes > np.iinfo(np.int32).max
    out = _dictionary(symbols, lengths, large).take(pa.array(idx))
    bufs = out.buffers()
    pos = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32, count=nbytes + 1)
    total = int(pos[-1])
    body = np.frombuffer(bufs[2], dtype=np.uint8, count=total) if total else np.empty(0, np.uint8)
    return body, pos[offsets]
