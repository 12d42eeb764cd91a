"""Page layouts of file versions 2.1 / 2.2: one page's buffers -> levels and values.

`decode_page(layout, buffers, num_rows, read_at)` returns a `PageData`: the rep/def layers
(innermost first), repetition and definition levels (uint16, or None when absent), the number of
rep/def entries and the page's values (a block of `encodings_v21`, or an Arrow scalar source for
constant pages). Layouts:

- mini-block: chunk metadata words (16-bit in 2.1, 32-bit with `has_large_chunk` in 2.2: bits
  0-3 log2 of the chunk's values, 0 for the last; above, 8-byte words in the chunk minus one);
  each chunk: u16 level count, u16 rep and def sizes (when present), the value buffers' sizes
  (u16, u32 with large chunks), padding to 8, then rep, def and value buffers each padded to 8.
  Headers and buffer positions of all chunks are computed together; chunks are then decoded
  together by `encodings_v21.mb_decode`. Optional dictionary (buffer 2) and repetition index.
- full-zip: control words (rep in the high bits, def in the low bits; 0, 1, 2 or 4 bytes), then
  the value (fixed width, or a size prefix and bytes for variable width; only visible values
  carry bytes, and for variable width only valid ones); buffer 1 is the repetition index (each
  row's starting byte). Rows are unzipped in rounds, round k taking the k-th entry of every row.
- constant: one value (inline bytes, or buffer 0) for every visible valid item; levels as raw
  u16 buffers unless compressed; 2.1's all-null layout (no value).
- blob (2.1, `lance-encoding:blob`): the inner layout holds one (position, size) description
  per entry of a value stored elsewhere in the file; a null's description smuggles its levels
  (size 0, position = def << 16 | rep). The values are read at their positions (`read_at`) and
  returned as the page's values, nulls as empty slots.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional

import numpy as np

from . import encodings_v21 as enc21
from .encodings_v21 import DecodeError, Fixed, Var
from .repdef import ALL_VALID_ITEM, LIST_LAYERS, _codes

#: reads `size` bytes at absolute file position `pos` (for blob values)
ReadAt = Callable[[int, int], np.ndarray]


@dataclass
class PageData:
    kinds: List[int]
    rep: Optional[np.ndarray]
    defs: Optional[np.ndarray]
    n_entries: int
    values: object = None                    # a Block, or None for an all-null page
    dictionary: Optional[object] = None      # a Block of dictionary items (values are indices)
    constant: Optional[object] = None        # ("inline", bytes) / ("buffer", np.ndarray) for constant pages
    codecs: List[str] = field(default_factory=list)


def _u16(b: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return b[pos].astype(np.int64) | (b[pos + 1].astype(np.int64) << 8)


def _u32(b: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return (b[pos].astype(np.int64) | (b[pos + 1].astype(np.int64) << 8)
            | (b[pos + 2].astype(np.int64) << 16) | (b[pos + 3].astype(np.int64) << 24))


def _pad8(x: np.ndarray) -> np.ndarray:
    return (x + 7) & ~np.int64(7)


def decode_page(layout, bufs: List[np.ndarray], num_rows: int, read_at: ReadAt) -> PageData:
    kind = layout.WhichOneof("layout")
    if kind == "mini_block_layout":
        return _miniblock(layout.mini_block_layout, bufs, num_rows)
    if kind == "full_zip_layout":
        return _fullzip(layout.full_zip_layout, bufs, num_rows)
    if kind == "constant_layout":
        return _constant(layout.constant_layout, bufs, num_rows)
    if kind == "blob_layout":
        return _blob(layout.blob_layout, bufs, num_rows, read_at)
    raise DecodeError(f"unsupported page layout {kind!r}")


# -- mini-block --------------------------------------------------------------------------------------

def inline_widths(l, bufs: List[np.ndarray]) -> List[int]:
    """Bit widths of the FastLanes groups of a mini-block page whose values are inline bit-packed
    (the first group of each chunk), for `inspect`."""
    enc = l.value_compression
    if enc.WhichOneof("compression") != "inline_bitpacking":
        return []
    bits = int(enc.inline_bitpacking.uncompressed_bits_per_value)
    ch = _chunk_views(l, bufs)[3]
    if ch is None or bits not in (8, 16, 32, 64):
        return []
    wb = bits // 8
    pos = ch.pos[0][ch.size[0] >= wb]
    first = np.zeros(pos.size, np.int64)
    for k in range(wb):  # per byte of the word
        first |= ch.data[pos + k].astype(np.int64) << (8 * k)
    return sorted(set(first.tolist()))


def _miniblock(l, bufs: List[np.ndarray], num_rows: int) -> PageData:
    kinds = list(l.layers)
    codecs = [f"{'32' if l.has_large_chunk else '16'}-bit chunk words"]
    num_items = int(l.num_items)
    has_rep = l.HasField("rep_compression")
    has_def = l.HasField("def_compression")
    counts, nlev, levels, chunks, _ = _chunk_views(l, bufs)
    if counts is None:
        vals = enc21.empty_block(l.value_compression)
        return PageData(kinds, np.empty(0, np.uint16) if has_rep else None,
                        np.empty(0, np.uint16) if has_def else None, 0, vals, codecs=codecs)
    rep = defs = None
    (rep_pos, rep_sz), (def_pos, def_sz) = levels
    if has_rep:
        rep = enc21.levels_chunks(l.rep_compression, chunks.data, rep_pos, rep_sz, nlev, "repetition levels")
    if has_def:
        defs = enc21.levels_chunks(l.def_compression, chunks.data, def_pos, def_sz, nlev, "definition levels")
    values = enc21.mb_decode(l.value_compression, chunks)
    n_entries = int(nlev.sum()) if (has_rep or has_def) else num_items
    if values.n != num_items:
        raise DecodeError(f"decoded {values.n} values, the page has {num_items}")
    pd = PageData(kinds, rep, defs, n_entries, values, codecs=codecs)
    if l.HasField("dictionary"):
        nd = int(l.num_dictionary_items)
        pd.dictionary = enc21.block_decode(l.dictionary, bufs[2], nd)
        if pd.dictionary.n != nd:
            raise DecodeError(f"dictionary decoded to {pd.dictionary.n} items, {nd} expected")
    return pd


def _chunk_views(l, bufs: List[np.ndarray]):
    """(values per chunk, levels per chunk, ((rep positions, sizes), (def positions, sizes)), the
    value buffers of every chunk (`encodings_v21.Chunks`), None) of a mini-block page, every header
    and bound checked for all chunks at once; counts is None for an empty page."""
    has_rep = l.HasField("rep_compression")
    has_def = l.HasField("def_compression")
    nb = int(l.num_buffers)
    num_items = int(l.num_items)
    need = 2 + (1 if l.HasField("dictionary") else 0) + (1 if l.repetition_index_depth else 0)
    if len(bufs) < need:
        raise DecodeError(f"mini-block page has {len(bufs)} buffers, needs {need}")
    meta, data = bufs[0], bufs[1]
    wbytes = 4 if l.has_large_chunk else 2
    if meta.size % wbytes:
        raise DecodeError(f"chunk metadata of {meta.size} bytes is not a whole number of {8 * wbytes}-bit words")
    words = meta.view(f"<u{wbytes}").astype(np.int64)
    nchunks = words.size
    if nchunks == 0:
        if num_items:
            raise DecodeError(f"mini-block page of {num_items} items has no chunks")
        return None, None, ((None, None), (None, None)), None, None
    logs = words & 0xF
    sizes = ((words >> 4) + 1) * 8
    ends = np.cumsum(sizes)
    starts = ends - sizes
    if int(ends[-1]) > data.size:
        raise DecodeError(f"chunk metadata words point past the data buffer: chunks take {int(ends[-1])} "
                          f"bytes, the buffer has {data.size}")
    counts = np.left_shift(np.int64(1), logs)
    counts[-1] = num_items - int(counts[:-1].sum())
    if counts[-1] <= 0 or (logs[-1] and counts[-1] != 1 << int(logs[-1])):
        raise DecodeError(f"chunk value counts ({int(counts[:-1].sum())} before the last chunk) do not add "
                          f"up to the page's {num_items} items")
    b = data
    hdr = 2 + 2 * (has_rep + has_def) + wbytes * nb
    if int(sizes.min()) < hdr:
        raise DecodeError("a chunk is smaller than its header")
    nlev = _u16(b, starts)
    p = starts + 2
    rep_sz = def_sz = None
    if has_rep:
        rep_sz = _u16(b, p)
        p = p + 2
    if has_def:
        def_sz = _u16(b, p)
        p = p + 2
    buf_sz = []
    for i in range(nb):
        buf_sz.append(_u32(b, p) if wbytes == 4 else _u16(b, p))
        p = p + wbytes
    p = _pad8(p)
    rep_pos = def_pos = None
    if has_rep:
        rep_pos = p
        p = _pad8(p + rep_sz)
    if has_def:
        def_pos = p
        p = _pad8(p + def_sz)
    buf_pos = []
    for i in range(nb):
        buf_pos.append(p)
        p = p + buf_sz[i]
        if i < nb - 1:
            p = _pad8(p)
    over = np.flatnonzero(p > ends)
    if over.size:
        c = int(over[0])
        raise DecodeError(f"chunk {c}: its buffers end at byte {int(p[c] - starts[c])}, past the chunk's "
                          f"{int(sizes[c])} bytes")
    if (has_rep or has_def) and np.any(nlev[:-1] == 0):
        raise DecodeError("a chunk has no rep/def levels")
    levels = ((rep_pos, rep_sz), (def_pos, def_sz))
    return counts, nlev, levels, enc21.Chunks(b, buf_pos, buf_sz, counts), None


# -- full zip ----------------------------------------------------------------------------------------

def _cw_bytes(bits: int) -> int:
    if bits == 0:
        return 0
    return 1 if bits <= 8 else 2 if bits <= 16 else 4


def _read_le(b: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros(pos.size, dtype=np.int64)
    for k in range(width):  # per byte of the word
        out |= b[pos + k].astype(np.int64) << (8 * k)
    return out


def _fullzip(l, bufs: List[np.ndarray], num_rows: int) -> PageData:
    kinds = list(l.layers)
    if not bufs:
        raise DecodeError("full-zip page without a data buffer")
    data = bufs[0]
    bits_rep, bits_def = int(l.bits_rep), int(l.bits_def)
    cw = _cw_bytes(bits_rep + bits_def)
    detail = l.WhichOneof("details")
    if detail is None:
        raise DecodeError("full-zip layout without bits per value / offset")
    fixed = detail == "bits_per_value"
    width = int(l.bits_per_value if fixed else l.bits_per_offset)
    if width % 8:
        raise DecodeError(f"full-zip {detail} {width} is not a whole number of bytes")
    width //= 8
    num_items = int(l.num_items)
    layer_of, _ = _codes(kinds)
    first_list = next((j for j, k in enumerate(kinds) if k in LIST_LAYERS), len(kinds))
    max_rep = sum(k in LIST_LAYERS for k in kinds)
    def_mask = (1 << bits_def) - 1
    if max_rep and bits_rep == 0:
        raise DecodeError("full-zip page with list layers but no repetition bits")

    def parse_cw(pos: np.ndarray):
        if cw == 0:
            return np.zeros(pos.size, np.int64), np.zeros(pos.size, np.int64)
        word = _read_le(data, pos, cw)
        return word >> bits_def, word & def_mask

    def visible_of(d: np.ndarray) -> np.ndarray:
        if d.size and int(d.max()) >= layer_of.size:
            raise DecodeError(f"definition level {int(d.max())} exceeds what the layers allow")
        return layer_of[d] < first_list

    if bits_rep == 0:
        n = num_items
        if fixed:
            stride = cw + width
            if data.size < n * stride:
                raise DecodeError(f"full-zip data of {data.size} bytes, {n} items of {stride} bytes need more")
            pos = np.arange(n, dtype=np.int64) * stride
            _, d = parse_cw(pos)
            rows = data[:n * stride].reshape(n, stride)
            vals = np.ascontiguousarray(rows[:, cw:]).reshape(-1)
            values = enc21.per_value_fixed(l.value_compression, vals, n)
            return PageData(kinds, None, d.astype(np.uint16) if bits_def else None, n, values,
                            codecs=[f"control words {cw} byte(s)"])
        starts = _rep_index(bufs, n, data.size)[:-1]
        _, d = parse_cw(starts)
        valid = d == 0
        lens = np.zeros(n, np.int64)
        if valid.any():
            vp = starts[valid] + cw
            if int(vp.max()) + width > data.size:
                raise DecodeError("full-zip value size runs past the data buffer")
            lens[valid] = _read_le(data, vp, width)
        vstart = starts + cw + width
        _check_var_bounds(vstart, lens, valid, data.size)
        var = _gather_var(data, vstart, lens)
        values = enc21.per_value_variable(l.value_compression, var)
        return PageData(kinds, None, d.astype(np.uint16) if bits_def else None, n, values,
                        codecs=[f"control words {cw} byte(s)", f"{8 * width}-bit sizes"])
    # with repetition: every row may hold several entries; unzip in rounds over the rows
    row_bounds = _rep_index(bufs, num_rows, data.size)
    pos = row_bounds[:-1].copy()
    end = row_bounds[1:]
    order_row, order_k, e_rep, e_def, e_vpos, e_len, e_vis = [], [], [], [], [], [], []
    active = np.flatnonzero(pos < end)
    k = 0
    while active.size:  # one round per entry index within a row
        p = pos[active]
        r, d = parse_cw(p)
        vis = visible_of(d)
        valid = vis & (d == 0)
        vstart = p + cw
        if fixed:
            ln = np.where(vis, width, 0)
            size = cw + ln
        else:
            ln = np.zeros(p.size, np.int64)
            if valid.any():
                vp = vstart[valid]
                if int(vp.max()) + width > data.size:
                    raise DecodeError("full-zip value size runs past the data buffer")
                ln[valid] = _read_le(data, vp, width)
            vstart = vstart + width
            size = np.where(valid, cw + width + ln, cw)
        order_row.append(active)
        order_k.append(np.full(active.size, k, np.int64))
        e_rep.append(r)
        e_def.append(d)
        e_vpos.append(vstart)
        e_len.append(ln)
        e_vis.append(vis)
        pos[active] = p + size
        if np.any(pos[active] > end[active]):
            raise DecodeError("a full-zip entry runs past the end of its row (repetition index)")
        active = active[pos[active] < end[active]]
        k += 1
    if not order_row:
        empty = np.empty(0, np.int64)
        order_row, order_k, e_rep, e_def, e_vpos, e_len, e_vis = ([empty], [empty], [empty], [empty], [empty],
                                                                 [empty], [np.empty(0, bool)])
    rows = np.concatenate(order_row)
    ks = np.concatenate(order_k)
    order = np.lexsort((ks, rows))
    rep = np.concatenate(e_rep)[order]
    d = np.concatenate(e_def)[order]
    vpos = np.concatenate(e_vpos)[order]
    ln = np.concatenate(e_len)[order]
    vis = np.concatenate(e_vis)[order]
    n_entries = int(rep.size)
    if n_entries != num_items:
        raise DecodeError(f"full-zip page unzipped to {n_entries} entries, layout says {num_items}")
    vpos, ln = vpos[vis], ln[vis]
    if fixed:
        nv = int(vpos.size)
        if nv and int(vpos.max()) + width > data.size:
            raise DecodeError("full-zip value runs past the data buffer")
        idx = (vpos[:, None] + np.arange(width, dtype=np.int64)[None, :]).reshape(-1)
        values = enc21.per_value_fixed(l.value_compression, data[idx], nv)
    else:
        values = enc21.per_value_variable(l.value_compression, _gather_var(data, vpos, ln))
    return PageData(kinds, rep.astype(np.uint16), d.astype(np.uint16) if bits_def else None, n_entries, values,
                    codecs=[f"control words {cw} byte(s)", "repetition index"])


def _rep_index(bufs: List[np.ndarray], rows: int, limit: int) -> np.ndarray:
    if len(bufs) < 2:
        raise DecodeError("full-zip page lacks its repetition index")
    ri = bufs[1]
    if rows + 1 == 0 or ri.size % (rows + 1):
        raise DecodeError(f"repetition index of {ri.size} bytes does not hold {rows + 1} entries")
    w = ri.size // (rows + 1)
    if w not in (1, 2, 4, 8):
        raise DecodeError(f"repetition index entries of {w} bytes")
    idx = ri.view(f"<u{w}").astype(np.int64)
    if np.any(np.diff(idx) < 0) or (idx.size and (idx[0] < 0 or idx[-1] > limit)):
        raise DecodeError("repetition index points outside the data buffer or goes backwards")
    return idx


def _check_var_bounds(vstart: np.ndarray, lens: np.ndarray, valid: np.ndarray, size: int) -> None:
    if valid.any() and int((vstart + lens)[valid].max()) > size:
        raise DecodeError("a full-zip value runs past the data buffer")


def _gather_var(data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> Var:
    offs = np.zeros(lens.size + 1, np.int64)
    np.cumsum(lens, out=offs[1:])
    total = int(offs[-1])
    if total:
        src = np.repeat(starts - offs[:-1], lens) + np.arange(total, dtype=np.int64)
        return Var(offs, data[src])
    return Var(offs, np.empty(0, np.uint8))


# -- constant / all null -----------------------------------------------------------------------------

def _constant(l, bufs: List[np.ndarray], num_rows: int) -> PageData:
    kinds = list(l.layers)
    inline = l.inline_value if l.HasField("inline_value") else None
    nbuf = len(bufs)
    source = None
    rep_buf = def_buf = None
    if inline is not None:
        if nbuf not in (0, 2):
            raise DecodeError(f"constant page with an inline value has {nbuf} buffers (0 or 2 expected)")
        source = ("inline", bytes(inline))
        if nbuf == 2:
            rep_buf, def_buf = bufs
    else:
        if nbuf in (1, 3):
            source = ("buffer", bufs[0])
            if nbuf == 3:
                rep_buf, def_buf = bufs[1], bufs[2]
        elif nbuf == 2:
            rep_buf, def_buf = bufs  # 2.1 all-null with levels
        elif nbuf != 0:
            raise DecodeError(f"constant page has {nbuf} buffers")
    rep = defs = None
    if rep_buf is not None and rep_buf.size:
        n = int(l.num_rep_values) if l.HasField("rep_compression") else rep_buf.size // 2
        rep = enc21.levels(l.rep_compression if l.HasField("rep_compression") else None, rep_buf, n,
                           "repetition levels")
    if def_buf is not None and def_buf.size:
        n = int(l.num_def_values) if l.HasField("def_compression") else def_buf.size // 2
        defs = enc21.levels(l.def_compression if l.HasField("def_compression") else None, def_buf, n,
                            "definition levels")
    if rep is not None:
        n_entries = int(rep.size)
    elif defs is not None:
        n_entries = int(defs.size)
    else:
        n_entries = num_rows
    if rep is not None and defs is not None and rep.size != defs.size:
        raise DecodeError(f"{rep.size} repetition levels but {defs.size} definition levels")
    if source is None and defs is None:  # every value null, no levels: null at the innermost nullable layer
        if all(k in (ALL_VALID_ITEM,) for k in kinds):
            raise DecodeError("all-null page whose layers allow no nulls")
        defs = np.ones(n_entries, np.uint16)
    return PageData(kinds, rep, defs, n_entries, None, constant=source, codecs=[])


# -- blob ------------------------------------------------------------------------------------------

def blob_descriptions(desc, n: int, what: str):
    """(position, size) of `n` descriptions decoded as a packed struct of two u64 (or as 128-bit
    values), as int64 arrays; values beyond the int64 range are an error."""
    if isinstance(desc, enc21.Struct) and len(desc.children) == 2 and all(
            isinstance(c, Fixed) and c.bits == 64 for c in desc.children):
        pos, size = (c.ints() for c in desc.children)
    elif isinstance(desc, Fixed) and desc.bits == 128:
        pairs = desc.data.view("<u8").reshape(-1, 2)
        pos, size = pairs[:, 0], pairs[:, 1]
    else:
        raise DecodeError(f"{what} are not (position, size) pairs of u64")
    if pos.size != n or size.size != n:
        raise DecodeError(f"{pos.size} {what} for {n} entries")
    return positions_and_sizes(pos, size, what)


def positions_and_sizes(pos: np.ndarray, size: np.ndarray, what: str):
    """u64 positions and sizes as int64 (beyond 2^62 is an error: no file is that large)."""
    if (pos.size and int(pos.max()) >= 1 << 62) or (size.size and int(size.max()) >= 1 << 62):
        raise DecodeError(f"{what}: a position or size beyond the 62-bit range")
    return pos.astype(np.int64), size.astype(np.int64)


def read_blobs(pos: np.ndarray, size: np.ndarray, read_at: ReadAt) -> Var:
    """The values at (pos, size) in the file, as one Var block (size 0: an empty value, nothing
    read). One read per non-empty value: each is a separate out-of-line range of the file (a
    zero-copy view of the mapped file), copied once into the result."""
    offs = np.zeros(size.size + 1, np.int64)
    np.cumsum(size, out=offs[1:])
    nz = np.flatnonzero(size)
    if nz.size == 0:
        return Var(offs, np.empty(0, np.uint8))
    parts = [read_at(p, s) for p, s in zip(pos[nz].tolist(), size[nz].tolist())]  # per value: own range
    return Var(offs, np.concatenate(parts))


def _blob(l, bufs: List[np.ndarray], num_rows: int, read_at: ReadAt) -> PageData:
    """Each entry's description is (position, size) of its value in the file; size 0 with position
    0 is an empty value, size 0 with another position a null whose repetition level is the
    position's low 16 bits and definition level the next 16. Every entry is a value slot (nulls get
    an empty value). Blobs inside lists are refused: the descriptions of valid values carry no
    repetition levels."""
    kinds = list(l.layers)
    if any(k in LIST_LAYERS for k in kinds):
        raise DecodeError("blob values inside lists are not supported")
    inner = decode_page(l.inner_layout, bufs, num_rows, read_at)
    if inner.values is None:
        raise DecodeError("blob page without descriptions")
    pos, size = blob_descriptions(inner.values, inner.n_entries, "blob descriptions")
    null = (size == 0) & (pos != 0)
    defs = None
    if any(k != ALL_VALID_ITEM for k in kinds):
        if null.any() and int(pos[null].max()) > 0xFFFFFFFF:
            raise DecodeError("a null blob's description holds levels beyond 32 bits")
        if np.any((pos[null] & 0xFFFF) != 0):
            raise DecodeError("a null blob outside any list has a repetition level")
        defs = np.where(null, pos >> 16, 0).astype(np.uint16)
        if np.any(null & (defs == 0)):
            raise DecodeError("a null blob with definition level 0")
    elif null.any():
        raise DecodeError(f"{int(null.sum())} null blob(s) in a page whose layers allow no nulls")
    pos = np.where(null, 0, pos)
    size = np.where(null, 0, size)
    values = read_blobs(pos, size, read_at)
    return PageData(kinds, None, defs, int(pos.size), values, codecs=["blob"] + inner.codecs)
