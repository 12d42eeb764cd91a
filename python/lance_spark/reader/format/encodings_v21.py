"""The compressive encodings of file versions 2.1 / 2.2 (`CompressiveEncoding` trees).

Decoded values are "blocks" (numpy, no Arrow yet): `Fixed` (fixed-width values as raw bytes, or
booleans), `Var` (offsets + bytes), `Fsl` (fixed-size lists over a child block, with the items'
validity when stored) and `Struct` (packed structs). Three contexts decode them, as in the format:

- mini-block chunks (`mb_decode`): each chunk holds one or more buffers; all chunks of a page
  are decoded together, FastLanes groups of one width across every chunk at once;
- whole buffers (`block_decode`): dictionaries, repetition/definition levels, constant levels;
- full-zip values are unzipped in `layouts_v21` and finished here by `per_value_*`.

Every function raises `DecodeError` (a ValueError) with a message; the file reader adds the
file, column and page.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from ..._proto import encodings_v2_1_pb2 as pb
from . import fastlanes, fsst

LZ4 = pb.COMPRESSION_ALGORITHM_LZ4
ZSTD = pb.COMPRESSION_ALGORITHM_ZSTD
_UINT = {8: np.dtype("<u1"), 16: np.dtype("<u2"), 32: np.dtype("<u4"), 64: np.dtype("<u8")}


class DecodeError(ValueError):
    pass


# -- blocks --------------------------------------------------------------------------------------

@dataclass
class Fixed:
    bits: int
    data: np.ndarray  # uint8 raw bytes (n * bits / 8), or bool values when bits == 1

    @property
    def n(self) -> int:
        return int(self.data.size) if self.bits == 1 else int(self.data.size * 8 // self.bits) if self.bits else 0

    def ints(self) -> np.ndarray:
        if self.bits not in _UINT:
            raise DecodeError(f"{self.bits}-bit values cannot be read as integers")
        return self.data.view(_UINT[self.bits])


@dataclass
class Var:
    offsets: np.ndarray  # int64, n + 1, starting at 0
    data: np.ndarray     # uint8

    @property
    def n(self) -> int:
        return int(self.offsets.size - 1)


@dataclass
class Fsl:
    dim: int
    child: "Block"
    validity: Optional[np.ndarray] = None  # bool per child item

    @property
    def n(self) -> int:
        return self.child.n // self.dim if self.dim else 0


@dataclass
class Struct:
    children: List["Block"] = field(default_factory=list)
    count: int = 0

    @property
    def n(self) -> int:
        return self.count


Block = Union[Fixed, Var, Fsl, Struct]


def _kind(enc) -> str:
    if enc is None:
        raise DecodeError("missing compressive encoding")
    k = enc.WhichOneof("compression")
    if k is None:
        raise DecodeError("unknown compressive encoding (empty, or from a newer writer)")
    return k


def concat_blocks(blocks: Sequence[Block]) -> Block:
    if len(blocks) == 1:
        return blocks[0]
    b0 = blocks[0]
    if isinstance(b0, Fixed):
        return Fixed(b0.bits, np.concatenate([b.data for b in blocks]))
    if isinstance(b0, Var):
        sizes = np.array([b.data.size for b in blocks], dtype=np.int64)
        bases = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        offs = [blocks[0].offsets] + [b.offsets[1:] + base for b, base in zip(blocks[1:], bases[1:])]
        return Var(np.concatenate(offs), np.concatenate([b.data for b in blocks]))
    if isinstance(b0, Fsl):
        child = concat_blocks([b.child for b in blocks])
        val = None
        if any(b.validity is not None for b in blocks):
            val = np.concatenate([b.validity if b.validity is not None else np.ones(b.child.n, bool)
                                  for b in blocks])
        return Fsl(b0.dim, child, val)
    if isinstance(b0, Struct):
        kids = [concat_blocks([b.children[i] for b in blocks]) for i in range(len(b0.children))]
        return Struct(kids, sum(b.count for b in blocks))
    raise DecodeError(f"cannot concatenate {type(b0).__name__} blocks")


def empty_block(enc) -> Block:
    """A zero-length block of the shape `enc` decodes to."""
    k = _kind(enc)
    if k == "flat":
        bits = int(enc.flat.bits_per_value)
        return Fixed(bits, np.empty(0, bool if bits == 1 else np.uint8))
    if k in ("variable", "fsst"):
        return Var(np.zeros(1, np.int64), np.empty(0, np.uint8))
    if k == "general":
        return empty_block(enc.general.values)
    if k == "fixed_size_list":
        return Fsl(int(enc.fixed_size_list.items_per_value), empty_block(enc.fixed_size_list.values))
    if k == "packed_struct":
        return Struct([Fixed(int(b), np.empty(0, np.uint8)) for b in enc.packed_struct.bits_per_value], 0)
    if k in ("inline_bitpacking", "out_of_line_bitpacking"):
        bits = int(getattr(enc, k).uncompressed_bits_per_value)
        return Fixed(bits, np.empty(0, np.uint8))
    if k in ("rle", "byte_stream_split"):
        return empty_block(getattr(enc, k).values)
    raise DecodeError(f"unsupported encoding {k!r}")


# -- general-purpose compression -------------------------------------------------------------------

def _zstd_content_size(buf: np.ndarray) -> Optional[int]:
    """Frame content size from a zstd frame header, if it records one."""
    if buf.size < 6:
        return None
    fhd = int(buf[4])
    fcs_flag, single = fhd >> 6, (fhd >> 5) & 1
    did = (0, 1, 2, 4)[fhd & 3]
    pos = 5 + (0 if single else 1) + did
    size = {0: 1 if single else 0, 1: 2, 2: 4, 3: 8}[fcs_flag]
    if size == 0 or buf.size < pos + size:
        return None
    v = int.from_bytes(buf[pos:pos + size].tobytes(), "little")
    return v + 256 if size == 2 else v


def general_decompress(scheme: int, buf: np.ndarray) -> np.ndarray:
    """One buffer compressed by the reference's general compressors (zstd with a u64 size prefix
    or a bare frame; lz4 block with a u32 size prefix)."""
    if buf.size == 0:
        return buf
    try:
        if scheme == ZSTD:
            raw_frame = False
            if buf.size < 8:
                raw_frame = True
            elif buf[:4].tobytes() == b"\x28\xb5\x2f\xfd" and not (int(buf[4]) & 0x10):
                raw_frame = True
            if raw_frame:
                size = _zstd_content_size(buf)
                if size is None:
                    raise DecodeError("zstd frame without a content size")
                body = buf
            else:
                size = int(buf[:8].view("<u8")[0])
                body = buf[8:]
            out = pa.decompress(pa.py_buffer(body), decompressed_size=size, codec="zstd")
        elif scheme == LZ4:
            if buf.size < 4:
                raise DecodeError("lz4 buffer shorter than its size prefix")
            size = int(buf[:4].view("<u4")[0])
            out = pa.decompress(pa.py_buffer(buf[4:]), decompressed_size=size, codec="lz4_raw")
        else:
            raise DecodeError(f"unknown general compression scheme {scheme}")
    except (pa.ArrowException, OSError) as e:
        raise DecodeError(f"{pb.CompressionScheme.Name(scheme) if scheme in (LZ4, ZSTD) else scheme} "
                          f"decompression failed: {e}") from None
    return np.frombuffer(out, dtype=np.uint8)


def _buffer_compression(bc, buf: np.ndarray) -> np.ndarray:
    if bc is not None and bc.scheme:
        return general_decompress(bc.scheme, buf)
    return buf


# -- fixed-width helpers ---------------------------------------------------------------------------

def _fixed_from(buf: np.ndarray, bits: int, n: int, what: str) -> Fixed:
    if bits == 1:
        need = (n + 7) // 8
        if buf.size < need:
            raise DecodeError(f"{what}: {buf.size} bytes hold fewer than {n} bits")
        return Fixed(1, np.unpackbits(buf[:need], bitorder="little", count=n).astype(bool))
    if bits % 8:
        raise DecodeError(f"{what}: {bits}-bit values are not byte aligned")
    need = n * bits // 8
    if buf.size < need:
        raise DecodeError(f"{what}: {buf.size} bytes, {n} values of {bits} bits need {need}")
    return Fixed(bits, buf[:need])


def _view_words(buf: np.ndarray, bits: int, what: str) -> np.ndarray:
    dt = _UINT.get(bits)
    if dt is None:
        raise DecodeError(f"{what}: word size {bits} is not 8, 16, 32 or 64")
    usable = buf.size - buf.size % dt.itemsize
    return buf[:usable].view(dt) if usable else np.empty(0, dt)


def _ranges(data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """data[starts[i] : starts[i] + lens[i]] for every i, back to back (one copy per range)."""
    if starts.size == 1:
        a = int(starts[0])
        return data[a:a + int(lens[0])]
    if starts.size == 0:
        return np.empty(0, np.uint8)
    return np.concatenate([data[a:a + n] for a, n in zip(starts.tolist(), lens.tolist())])


@dataclass
class Chunks:
    """The value buffers of every chunk of a mini-block page, as positions into one byte array:
    buffer i of chunk c is `data[pos[i][c] : pos[i][c] + size[i][c]]` (8-byte aligned starts)."""
    data: np.ndarray
    pos: List[np.ndarray]    # int64, one array per buffer
    size: List[np.ndarray]   # int64, one array per buffer
    counts: np.ndarray       # int64 values per chunk

    def __len__(self) -> int:
        return int(self.counts.size)

    def lists(self) -> List[List[np.ndarray]]:
        """Each chunk's buffers (views), for the codecs decoded chunk by chunk."""
        pos = [p.tolist() for p in self.pos]
        size = [z.tolist() for z in self.size]
        return [[self.data[pos[i][c]:pos[i][c] + size[i][c]] for i in range(len(pos))] for c in range(len(self))]

    @staticmethod
    def from_lists(chunks: List[List[np.ndarray]], counts: np.ndarray) -> "Chunks":
        """Chunks from per-chunk buffers (e.g. after decompression), laid out back to back."""
        nb = len(chunks[0]) if chunks else 0
        flat = [b for c in chunks for b in c]
        sizes = np.array([b.size for b in flat], dtype=np.int64)
        padded = (sizes + 7) & ~np.int64(7)
        starts = np.cumsum(padded) - padded
        data = np.zeros(int(padded.sum()), np.uint8)
        for a, b in zip(starts.tolist(), flat):  # one copy per chunk buffer
            data[a:a + b.size] = b
        return Chunks(data, [starts[i::nb] for i in range(nb)], [sizes[i::nb] for i in range(nb)],
                      np.asarray(counts, dtype=np.int64))


def _keep_groups(out: np.ndarray, counts: np.ndarray, ngroups: np.ndarray) -> np.ndarray:
    """The first `counts[c]` values of chunk c's groups (rows of `out`, `ngroups[c]` per chunk)."""
    total = int(counts.sum())
    some = ngroups > 0
    last = (np.cumsum(ngroups) - 1)[some]
    valid = np.full(out.shape[0], fastlanes.GROUP, dtype=np.int64)
    valid[last] = (counts - (ngroups - 1) * fastlanes.GROUP)[some]
    if out.shape[0] == 0 or np.all(valid[:-1] == fastlanes.GROUP):
        return out.reshape(-1)[:total]
    return out[np.arange(fastlanes.GROUP)[None, :] < valid[:, None]]


def _unpack_inline(data: np.ndarray, pos: np.ndarray, size: np.ndarray, counts: np.ndarray, bits: int,
                   what: str) -> Fixed:
    """Inline (FastLanes, width stored in front of each group) bit-packed buffers, one per chunk
    (`data[pos[c] : pos[c] + size[c]]` holding `counts[c]` values), unpacked together: group k of
    every chunk is located in round k, then all groups of one width are unpacked at once."""
    dt = _UINT[bits]
    wb = dt.itemsize
    if np.any(pos % wb):
        raise DecodeError(f"{what}: bit-packed buffer not aligned to its {bits}-bit words")
    words = _view_words(data, bits, what)
    ngroups = (counts + fastlanes.GROUP - 1) // fastlanes.GROUP
    cur = pos // wb
    end = np.minimum((pos + size) // wb, words.size)
    gbase = np.cumsum(ngroups) - ngroups
    total_groups = int(ngroups.sum())
    if total_groups == 0:
        return Fixed(bits, np.empty(0, np.uint8))
    gstart = np.empty(total_groups, np.int64)
    gwidth = np.empty(total_groups, np.int64)
    active = np.flatnonzero(ngroups > 0)
    k = 0
    while active.size:  # one round per group index within a chunk
        c = cur[active]
        if np.any(c >= end[active]):
            raise DecodeError(f"{what}: bit-packed data ends before group {k}")
        w = words[c].astype(np.int64)
        if int(w.max()) > bits:
            raise DecodeError(f"{what}: bit width {int(w.max())} exceeds the {bits}-bit word")
        nw = w * fastlanes.GROUP // bits
        if np.any(c + 1 + nw > end[active]):
            raise DecodeError(f"{what}: group of width {int(w[np.argmax(c + 1 + nw > end[active])])} runs past "
                              "its buffer")
        gid = gbase[active] + k
        gstart[gid] = c + 1
        gwidth[gid] = w
        cur[active] = c + 1 + nw
        k += 1
        active = active[ngroups[active] > k]
    widths = np.unique(gwidth)
    out = np.empty((total_groups, fastlanes.GROUP), dtype=dt)
    for w in widths.tolist():  # per bit width
        per = fastlanes.words_per_group(w, bits)
        sel = np.flatnonzero(gwidth == w) if widths.size > 1 else None
        st = gstart if sel is None else gstart[sel]
        packed = words[st[:, None] + np.arange(per, dtype=np.int64)[None, :]] if per else np.empty((st.size, 0), dt)
        if sel is None:
            out = fastlanes.unpack(packed, w, bits)
        else:
            out[sel] = fastlanes.unpack(packed, w, bits)
    return Fixed(bits, _keep_groups(out, counts, ngroups).view(np.uint8))


# -- mini-block ------------------------------------------------------------------------------------

def mb_num_buffers(enc) -> int:
    """Value buffers per chunk an encoding produces."""
    k = _kind(enc)
    if k == "rle":
        return 2
    if k == "fixed_size_list":
        n = 1
        e = enc
        while _kind(e) == "fixed_size_list":
            n += 1 if e.fixed_size_list.has_validity else 0
            e = e.fixed_size_list.values
        return n
    return 1


def _decompressed(bc, ch: Chunks) -> Chunks:
    """`ch` with buffer 0 of every chunk decompressed by `bc` (when it names a scheme)."""
    if bc is None or not bc.scheme:
        return ch
    return Chunks.from_lists([[general_decompress(bc.scheme, c[0])] + c[1:] for c in ch.lists()], ch.counts)


def mb_decode(enc, ch: Chunks) -> Block:
    """Values of a mini-block page, all chunks together (`ch.counts[c]` values in chunk c)."""
    k = _kind(enc)
    if not len(ch):
        return empty_block(enc)
    counts = ch.counts
    if k == "flat":
        bits = int(enc.flat.bits_per_value)
        ch = _decompressed(enc.flat.data if enc.flat.HasField("data") else None, ch)
        if bits == 1 or bits % 8:
            return concat_blocks([_fixed_from(c[0], bits, n, "flat chunk")
                                  for c, n in zip(ch.lists(), counts.tolist())])
        need = counts * (bits // 8)
        short = np.flatnonzero(ch.size[0] < need)
        if short.size:
            c = int(short[0])
            raise DecodeError(f"flat chunk {c}: {int(ch.size[0][c])} bytes, {int(counts[c])} values of {bits} bits "
                              f"need {int(need[c])}")
        return Fixed(bits, _ranges(ch.data, ch.pos[0], need))
    if k == "inline_bitpacking":
        bits = int(enc.inline_bitpacking.uncompressed_bits_per_value)
        if bits not in _UINT:
            raise DecodeError(f"inline bit-packing of {bits}-bit words")
        ch = _decompressed(enc.inline_bitpacking.values if enc.inline_bitpacking.HasField("values") else None, ch)
        return _unpack_inline(ch.data, ch.pos[0], ch.size[0], counts, bits, "bit-packed chunk")
    if k == "variable":
        bits = _offset_bits(enc.variable)
        ch = _decompressed(enc.variable.values if enc.variable.HasField("values") else None, ch)
        return _binary_chunks(ch, bits)
    if k == "fsst":
        inner = mb_decode(enc.fsst.values, ch)
        return _fsst_expand(enc.fsst.symbol_table, inner)
    if k == "rle":
        vbits = _flat_bits(enc.rle.values, "RLE values")
        lbits = _flat_bits(enc.rle.run_lengths, "RLE run lengths")
        return concat_blocks([_rle(c[0], c[1], vbits, lbits, n) for c, n in zip(ch.lists(), counts.tolist())])
    if k == "byte_stream_split":
        bits = _flat_bits(enc.byte_stream_split.values, "byte stream split values")
        return concat_blocks([_bss(c[0], bits, n) for c, n in zip(ch.lists(), counts.tolist())])
    if k == "general":
        g = enc.general
        return mb_decode(g.values, _decompressed(g.compression, ch))
    if k == "fixed_size_list":
        return concat_blocks([_fsl_chunk(enc, c, n) for c, n in zip(ch.lists(), counts.tolist())])
    if k == "packed_struct":
        inner = mb_decode(enc.packed_struct.values, ch)
        return _unpack_struct(inner, [int(b) for b in enc.packed_struct.bits_per_value], int(counts.sum()))
    if k == "constant":
        return _constant(enc.constant, int(counts.sum()))
    raise DecodeError(f"unsupported mini-block encoding {k!r}")


def _binary_chunks(ch: Chunks, bits: int) -> Var:
    """Variable-width chunks (each: `counts[c] + 1` offsets relative to the chunk buffer, then the
    bytes) as one `Var`: offsets of every chunk gathered, checked and rebased together."""
    counts = ch.counts
    pos, size = ch.pos[0], ch.size[0]
    w = bits // 8
    need = (counts + 1) * w
    short = np.flatnonzero(size < need)
    if short.size:
        c = int(short[0])
        raise DecodeError(f"binary chunk {c} of {int(size[c])} bytes cannot hold {int(counts[c]) + 1} offsets")
    offs = _ranges(ch.data, pos, need).view(_UINT[bits]).astype(np.int64)
    stop = np.cumsum(counts + 1)            # one past each chunk's last offset in `offs`
    first = offs[stop - counts - 1]
    last = offs[stop - 1]
    step = np.diff(offs)
    step[stop[:-1] - 1] = 0                 # from one chunk's last offset to the next chunk's first
    if np.any(step < 0) or np.any(first < need) or np.any(last > size):
        raise DecodeError("binary chunk offsets are not increasing within the chunk")
    lens = last - first
    data = _ranges(ch.data, pos + first, lens)
    shift = np.cumsum(lens) - lens - first  # chunk c's offsets move to the bytes before it
    offs += np.repeat(shift, counts + 1)
    if counts.size > 1:
        offs = np.delete(offs, stop[:-1])   # each later chunk's first offset repeats the last one
    return Var(offs, data)


def _flat_bits(enc, what: str) -> int:
    if _kind(enc) != "flat":
        raise DecodeError(f"{what} must be flat, not {_kind(enc)!r}")
    return int(enc.flat.bits_per_value)


def _offset_bits(variable) -> int:
    if not variable.HasField("offsets"):
        return 32
    bits = _flat_bits(variable.offsets, "variable offsets")
    if bits not in (32, 64):
        raise DecodeError(f"{bits}-bit variable offsets")
    return bits


def _fsst_expand(table: bytes, inner: Block) -> Var:
    if not isinstance(inner, Var):
        raise DecodeError("FSST over non-variable data")
    try:
        data, offs = fsst.expand(table, inner.data, inner.offsets)
    except fsst.FsstError as e:
        raise DecodeError(str(e)) from None
    return Var(offs.astype(np.int64), data)


def _rle(values: np.ndarray, lengths: np.ndarray, vbits: int, lbits: int, n: int) -> Fixed:
    vw = _view_words(values, vbits, "RLE values") if vbits in _UINT else None
    if vw is None:
        raise DecodeError(f"RLE of {vbits}-bit values")
    lw = _view_words(lengths, lbits, "RLE run lengths")
    runs = min(vw.size, lw.size)
    if vw.size != lw.size:
        raise DecodeError(f"RLE has {vw.size} values but {lw.size} run lengths")
    out = np.repeat(vw[:runs], lw[:runs].astype(np.int64))
    if out.size < n:
        raise DecodeError(f"RLE runs cover {out.size} values, {n} expected")
    return Fixed(vbits, out[:n].view(np.uint8))


def _bss(buf: np.ndarray, bits: int, n: int) -> Fixed:
    b = bits // 8
    if buf.size < n * b:
        raise DecodeError(f"byte-stream-split buffer of {buf.size} bytes, {n * b} needed")
    return Fixed(bits, np.ascontiguousarray(buf[:n * b].reshape(b, n).T).reshape(-1))


def _fsl_layers(enc):
    layers = []
    e = enc
    while _kind(e) == "fixed_size_list":
        layers.append((int(e.fixed_size_list.items_per_value), bool(e.fixed_size_list.has_validity)))
        e = e.fixed_size_list.values
    if _kind(e) != "flat":
        raise DecodeError(f"fixed-size list items encoded as {_kind(e)!r}")
    return layers, int(e.flat.bits_per_value)


def _fsl_chunk(enc, bufs: List[np.ndarray], n: int) -> Block:
    layers, bits = _fsl_layers(enc)
    dims = [d for d, _ in layers]
    total = n * int(np.prod(dims))
    data = bufs[-1]
    block: Block = _fixed_from(data, bits, total, "fixed-size list items")
    val_bufs = list(bufs[:-1])
    # innermost layer first (its validity buffer is the last of the validity buffers)
    cum = [n * int(np.prod(dims[:i + 1])) for i in range(len(dims))]
    for i in range(len(layers) - 1, -1, -1):
        dim, has_val = layers[i]
        validity = None
        if has_val:
            if not val_bufs:
                raise DecodeError("fixed-size list validity buffer missing")
            vb = val_bufs.pop()
            validity = _fixed_from(vb, 1, cum[i], "fixed-size list validity").data
        block = Fsl(dim, block, validity)
    return block


def _unpack_struct(inner: Block, bits: List[int], n: int) -> Struct:
    if not isinstance(inner, Fixed):
        raise DecodeError("packed struct over non fixed-width data")
    widths = [b // 8 for b in bits]
    row = sum(widths)
    if inner.data.size < n * row:
        raise DecodeError(f"packed struct of {inner.data.size} bytes, {n} rows of {row} bytes need more")
    rows = inner.data[:n * row].reshape(n, row)
    kids, pos = [], 0
    for b, w in zip(bits, widths):
        kids.append(Fixed(b, np.ascontiguousarray(rows[:, pos:pos + w]).reshape(-1)))
        pos += w
    return Struct(kids, n)


def _constant(c, n: int) -> Fixed:
    v = np.frombuffer(c.value, dtype=np.uint8) if c.HasField("value") else np.empty(0, np.uint8)
    return Fixed(8 * v.size, np.tile(v, n)) if v.size else Fixed(0, np.empty(0, np.uint8))


# -- whole buffers (block decompression) ---------------------------------------------------------

def block_decode(enc, buf: np.ndarray, n: int) -> Block:
    k = _kind(enc)
    if k == "flat":
        bc = enc.flat.data if enc.flat.HasField("data") else None
        return _fixed_from(_buffer_compression(bc, buf), int(enc.flat.bits_per_value), n, "flat buffer")
    if k == "variable":
        return _binary_block(buf, n)
    if k == "inline_bitpacking":
        bits = int(enc.inline_bitpacking.uncompressed_bits_per_value)
        if bits not in _UINT:
            raise DecodeError(f"inline bit-packing of {bits}-bit words")
        bc = enc.inline_bitpacking.values if enc.inline_bitpacking.HasField("values") else None
        buf = _buffer_compression(bc, buf)
        return _unpack_inline(buf, np.zeros(1, np.int64), np.array([buf.size], np.int64), np.array([n], np.int64),
                              bits, "bit-packed buffer")
    if k == "out_of_line_bitpacking":
        o = enc.out_of_line_bitpacking
        return _out_of_line(buf, _flat_bits(o.values, "bit-packed values"), int(o.uncompressed_bits_per_value), n)
    if k == "rle":
        if buf.size < 8:
            raise DecodeError("RLE block shorter than its header")
        vsize = int(buf[:8].view("<u8")[0])
        if 8 + vsize > buf.size:
            raise DecodeError(f"RLE values size {vsize} exceeds the buffer")
        return _rle(buf[8:8 + vsize], buf[8 + vsize:], _flat_bits(enc.rle.values, "RLE values"),
                    _flat_bits(enc.rle.run_lengths, "RLE run lengths"), n)
    if k == "general":
        return block_decode(enc.general.values, general_decompress(enc.general.compression.scheme, buf), n)
    if k == "constant":
        return _constant(enc.constant, n)
    if k == "fixed_size_list":
        return _fsl_chunk(enc, [buf], n)
    if k == "byte_stream_split":
        return _bss(buf, _flat_bits(enc.byte_stream_split.values, "byte stream split values"), n)
    raise DecodeError(f"unsupported block encoding {k!r}")


def _binary_block(buf: np.ndarray, n: int) -> Var:
    if buf.size < 8:
        raise DecodeError("variable-width block shorter than its header")
    if buf[1] or buf[2] or buf[3]:  # older layout: u8 bits, then the count
        bits = int(buf[0])
        start_pos = 5 if bits == 32 else 9
        head = 9 if bits == 32 else 17
    else:
        bits = int(buf[:4].view("<u4")[0])
        start_pos = 4 if bits == 32 else 8
        head = 8 if bits == 32 else 16
    if bits not in (32, 64) or buf.size < head:
        raise DecodeError(f"variable-width block with {bits}-bit offsets")
    width = bits // 8
    start = int.from_bytes(buf[start_pos:start_pos + width].tobytes(), "little")
    if start > buf.size or start < head + width * (n + 1):
        raise DecodeError(f"variable-width block: bytes start {start} outside the buffer")
    offs = np.frombuffer(buf[head:head + width * (n + 1)].tobytes(), dtype=_UINT[bits]).astype(np.int64)
    data = buf[start:]
    offs = offs - offs[0] if offs.size else np.zeros(1, np.int64)
    if np.any(np.diff(offs) < 0) or (offs.size and offs[-1] > data.size):
        raise DecodeError("variable-width block offsets are inconsistent")
    return Var(offs, data[:offs[-1]])


def _out_of_line(buf: np.ndarray, width: int, bits: int, n: int) -> Fixed:
    if bits not in _UINT:
        raise DecodeError(f"bit-packing of {bits}-bit words")
    dt = _UINT[bits]
    words = _view_words(buf, bits, "bit-packed buffer")
    per = -(-fastlanes.GROUP * width // bits)
    whole, tail = divmod(n, fastlanes.GROUP)
    need_whole = whole * per
    tail_raw = tail > 0 and words.size == need_whole + tail
    groups = whole + (1 if tail and not tail_raw else 0)
    if words.size < groups * per + (tail if tail_raw else 0):
        raise DecodeError(f"bit-packed buffer of {buf.size} bytes is too short for {n} values of {width} bits")
    vals = fastlanes.unpack(words[:groups * per].reshape(groups, per), width, bits).reshape(-1)
    if tail_raw:
        vals = np.concatenate([vals, words[need_whole:need_whole + tail].astype(dt)])
    return Fixed(bits, vals[:n].view(np.uint8))


def levels(enc, buf: np.ndarray, n: int, what: str) -> np.ndarray:
    """Repetition or definition levels (uint16): compressed by `enc`, or raw u16 without one."""
    if enc is None:
        if buf.size < 2 * n:
            raise DecodeError(f"{what}: {buf.size} bytes cannot hold {n} 16-bit levels")
        return np.frombuffer(buf[:2 * n].tobytes(), dtype="<u2")
    b = block_decode(enc, buf, n)
    if isinstance(b, Fixed) and b.bits == 16:
        if b.n < n:
            raise DecodeError(f"{what}: {b.n} levels decoded, {n} expected")
        return b.ints()[:n]
    if isinstance(b, Fixed) and b.bits in _UINT:
        return b.ints()[:n].astype(np.uint16)
    raise DecodeError(f"{what}: levels must be 16-bit integers")


def levels_chunks(enc, data: np.ndarray, pos: np.ndarray, size: np.ndarray, counts: np.ndarray,
                  what: str) -> np.ndarray:
    """The repetition or definition levels of every chunk of a mini-block page (chunk c's levels:
    `counts[c]` of them in `data[pos[c] : pos[c] + size[c]]`), back to back: raw u16 and
    bit-packing are decoded for all chunks at once, other codecs chunk by chunk."""
    if counts.size == 0:
        return np.empty(0, np.uint16)
    k = None if enc is None else _kind(enc)
    if k is None:
        need = 2 * counts
        short = np.flatnonzero(size < need)
        if short.size:
            c = int(short[0])
            raise DecodeError(f"{what}: chunk {c} has {int(size[c])} bytes, {int(counts[c])} 16-bit levels need "
                              f"{int(need[c])}")
        return _ranges(data, pos, need).view("<u2")
    out: Optional[Fixed] = None
    if k == "out_of_line_bitpacking":
        o = enc.out_of_line_bitpacking
        out = _out_of_line_chunks(data, pos, size, counts, _flat_bits(o.values, "bit-packed values"),
                                  int(o.uncompressed_bits_per_value), what)
    elif k == "inline_bitpacking" and not (enc.inline_bitpacking.HasField("values")
                                           and enc.inline_bitpacking.values.scheme):
        bits = int(enc.inline_bitpacking.uncompressed_bits_per_value)
        if bits not in _UINT:
            raise DecodeError(f"inline bit-packing of {bits}-bit words")
        out = _unpack_inline(data, pos, size, counts, bits, what)
    if out is None:  # other codecs: chunk by chunk
        return np.concatenate([levels(enc, data[a:a + z], n, what)
                               for a, z, n in zip(pos.tolist(), size.tolist(), counts.tolist())])
    if out.bits not in _UINT:
        raise DecodeError(f"{what}: levels must be 16-bit integers")
    vals = out.ints()
    if vals.size != int(counts.sum()):
        raise DecodeError(f"{what}: {vals.size} levels decoded, {int(counts.sum())} expected")
    return vals if out.bits == 16 else vals.astype(np.uint16)


def _out_of_line_chunks(data: np.ndarray, pos: np.ndarray, size: np.ndarray, counts: np.ndarray, width: int,
                        bits: int, what: str) -> Optional[Fixed]:
    """Out-of-line bit-packed buffers, one per chunk, unpacked together (all groups have the same
    width); chunks whose last values are stored unpacked are decoded one by one."""
    if bits not in _UINT:
        raise DecodeError(f"bit-packing of {bits}-bit words")
    if width > bits:
        raise DecodeError(f"{what}: bit width {width} exceeds the {bits}-bit word")
    wb = bits // 8
    per = fastlanes.words_per_group(width, bits)
    nwords = size // wb
    whole, tail = np.divmod(counts, fastlanes.GROUP)
    tail_raw = (tail > 0) & (nwords == whole * per + tail)
    if tail_raw.any() or np.any(pos % wb):
        return concat_blocks([_out_of_line(data[a:a + z], width, bits, n)
                              for a, z, n in zip(pos.tolist(), size.tolist(), counts.tolist())])
    ngroups = whole + (tail > 0)
    short = np.flatnonzero(nwords < ngroups * per)
    if short.size:
        c = int(short[0])
        raise DecodeError(f"{what}: chunk {c}: bit-packed buffer of {int(size[c])} bytes is too short for "
                          f"{int(counts[c])} values of {width} bits")
    total_groups = int(ngroups.sum())
    if total_groups == 0:
        return Fixed(bits, np.empty(0, np.uint8))
    words = _view_words(data, bits, what)
    first = np.cumsum(ngroups) - ngroups
    gstart = np.repeat(pos // wb - per * first, ngroups) + per * np.arange(total_groups, dtype=np.int64)
    packed = words[gstart[:, None] + np.arange(per, dtype=np.int64)[None, :]] if per else \
        np.empty((total_groups, 0), _UINT[bits])
    out = fastlanes.unpack(packed, width, bits)
    return Fixed(bits, _keep_groups(out, counts, ngroups).view(np.uint8))


# -- per-value (full zip) ----------------------------------------------------------------------------

def per_value_fixed(enc, data: np.ndarray, n: int) -> Block:
    """`n` fixed-width values (bytes back to back, after unzipping)."""
    k = _kind(enc)
    if k == "flat":
        return _fixed_from(data, int(enc.flat.bits_per_value), n, "full-zip values")
    if k == "fixed_size_list":
        layers, bits = _fsl_layers(enc)
        if not any(v for _, v in layers):
            dims = int(np.prod([d for d, _ in layers]))
            block: Block = _fixed_from(data, bits, n * dims, "full-zip items")
            for d, _ in reversed(layers):
                block = Fsl(d, block)
            return block
        # validity zipped in front of each row's values: [validity bytes per layer][items]
        cum, row_bytes, parts = 1, 0, []
        for d, v in layers:
            cum *= d
            if v:
                parts.append(("v", cum, (cum + 7) // 8))
                row_bytes += (cum + 7) // 8
        item_bytes = cum * bits // 8
        row_bytes += item_bytes
        if data.size < n * row_bytes:
            raise DecodeError("full-zip fixed-size list rows are truncated")
        rows = data[:n * row_bytes].reshape(n, row_bytes)
        pos, vals = 0, []
        for _, nbits, nbytes in parts:
            vals.append(np.unpackbits(rows[:, pos:pos + nbytes], axis=1, bitorder="little")[:, :nbits]
                        .reshape(-1).astype(bool))
            pos += nbytes
        block = _fixed_from(np.ascontiguousarray(rows[:, pos:]).reshape(-1), bits, n * cum, "full-zip items")
        vi = len(vals) - 1
        for d, v in reversed(layers):
            validity = None
            if v:
                validity = vals[vi]
                vi -= 1
            block = Fsl(d, block, validity)
        return block
    if k == "constant":
        return _constant(enc.constant, n)
    raise DecodeError(f"unsupported full-zip fixed-width encoding {k!r}")


def per_value_variable(enc, block: Var) -> Block:
    """Finish variable-width values unzipped from a full-zip page."""
    k = _kind(enc)
    if k == "variable":
        return block
    if k == "fsst":
        return _fsst_expand(enc.fsst.symbol_table, block)
    if k == "variable_packed_struct":
        return _variable_packed_struct(enc.variable_packed_struct, block)
    if k == "general":
        scheme = enc.general.compression.scheme
        offs = block.offsets
        # every value is compressed on its own: one decompression call per value
        parts = [general_decompress(scheme, block.data[offs[i]:offs[i + 1]]) for i in range(block.n)]
        sizes = np.array([p.size for p in parts], dtype=np.int64)
        return Var(np.concatenate(([0], np.cumsum(sizes))).astype(np.int64),
                   np.concatenate(parts) if parts else np.empty(0, np.uint8))
    raise DecodeError(f"unsupported full-zip variable-width encoding {k!r}")


def _variable_packed_struct(vps, block: Var) -> Struct:
    """Rows of a packed struct with variable-width fields (2.2): each row holds its fields in
    order, a fixed-width field as its bytes, a variable-width one as a little-endian length of
    `bits_per_length` bits then its bytes. Rows are split field by field for all rows at once (a
    cursor per row); each field's values are then finished by its own encoding."""
    n = block.n
    data = block.data
    # rows without bytes are null structs (only valid rows carry their fields): their fields get
    # placeholder values (zeros, empty)
    live = np.flatnonzero(np.diff(block.offsets) > 0)
    all_live = live.size == n
    cur = block.offsets[:-1][live]
    end = block.offsets[1:][live]
    m = live.size
    kids: List[Block] = []
    for i, f in enumerate(vps.fields):  # per field of the struct
        layout = f.WhichOneof("layout")
        if layout == "bits_per_value":
            bits = int(f.bits_per_value)
            if bits % 8:
                raise DecodeError(f"packed struct field {i}: {bits}-bit values are not byte aligned")
            w = bits // 8
            if m and int((cur + w - end).max()) > 0:
                raise DecodeError(f"packed struct field {i} runs past the end of its row")
            raw = data[cur[:, None] + np.arange(w, dtype=np.int64)[None, :]]
            if not all_live:
                full = np.zeros((n, w), np.uint8)
                full[live] = raw
                raw = full
            cur = cur + w
            kids.append(per_value_fixed(f.value, raw.reshape(-1), n))
        elif layout == "bits_per_length":
            bits = int(f.bits_per_length)
            if bits not in (8, 16, 32, 64):
                raise DecodeError(f"packed struct field {i}: {bits}-bit lengths")
            w = bits // 8
            if m and int((cur + w - end).max()) > 0:
                raise DecodeError(f"packed struct field {i}: its length runs past the end of its row")
            lens = np.zeros(m, np.int64)
            for b in range(w):  # per byte of the length
                lens |= data[cur + b].astype(np.int64) << (8 * b)
            cur = cur + w
            if m and int((cur + lens - end).max()) > 0:
                raise DecodeError(f"packed struct field {i}: a value runs past the end of its row")
            offs = np.zeros(m + 1, np.int64)
            np.cumsum(lens, out=offs[1:])
            total = int(offs[-1])
            src = np.repeat(cur - offs[:-1], lens) + np.arange(total, dtype=np.int64) if total else \
                np.empty(0, np.int64)
            cur = cur + lens
            child = per_value_variable(f.value, Var(offs, data[src]))
            if not all_live:
                if not isinstance(child, Var):
                    raise DecodeError(f"packed struct field {i} is not variable-width after decoding")
                sizes = np.zeros(n, np.int64)
                sizes[live] = np.diff(child.offsets)
                full_offs = np.zeros(n + 1, np.int64)
                np.cumsum(sizes, out=full_offs[1:])
                child = Var(full_offs, child.data)
            kids.append(child)
        else:
            raise DecodeError(f"packed struct field {i} has neither a value width nor a length width")
    if m and np.any(cur != end):
        raise DecodeError("packed struct rows hold bytes after their last field")
    return Struct(kids, n)


# -- description (for `inspect`) -----------------------------------------------------------------------

def describe(enc) -> str:
    """A short human description of a compressive encoding tree, e.g. `bitpack(5)`."""
    if enc is None:
        return "-"
    k = enc.WhichOneof("compression")
    if k is None:
        return "?"
    if k == "flat":
        s = f"flat({enc.flat.bits_per_value})"
        if enc.flat.HasField("data") and enc.flat.data.scheme:
            s = f"{_scheme(enc.flat.data.scheme)}({s})"
        return s
    if k == "variable":
        bits = enc.variable.offsets.flat.bits_per_value if enc.variable.HasField("offsets") else 32
        return f"variable({bits})"
    if k == "inline_bitpacking":
        return "bitpack(inline)"
    if k == "out_of_line_bitpacking":
        o = enc.out_of_line_bitpacking
        w = o.values.flat.bits_per_value if o.values.WhichOneof("compression") == "flat" else "?"
        return f"bitpack({w})"
    if k == "fsst":
        return f"fsst + {describe(enc.fsst.values)}"
    if k == "rle":
        return f"rle({describe(enc.rle.values)}, lengths {describe(enc.rle.run_lengths)})"
    if k == "byte_stream_split":
        return f"byte-stream-split({describe(enc.byte_stream_split.values)})"
    if k == "general":
        return f"{_scheme(enc.general.compression.scheme)}({describe(enc.general.values)})"
    if k == "fixed_size_list":
        f = enc.fixed_size_list
        return f"fsl({f.items_per_value}{', validity' if f.has_validity else ''}) + {describe(f.values)}"
    if k == "packed_struct":
        return f"packed-struct({describe(enc.packed_struct.values)})"
    if k == "variable_packed_struct":
        return "variable-packed-struct"
    if k == "constant":
        return "constant"
    if k == "dictionary":
        return f"dictionary({describe(enc.dictionary.indices)})"
    return k


def _scheme(s: int) -> str:
    return {LZ4: "lz4", ZSTD: "zstd"}.get(s, f"scheme{s}")
