"""The pure-Python reader at file versions 2.1 / 2.2 against pylance (the oracle): every layout
and codec pylance writes for data of known shapes, nesting (null structs at any depth, lists of
structs, maps), small pages, projections, streaming, and malformed files."""
from __future__ import annotations

import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from conftest import REPO

lance = pytest.importorskip("lance")
from lance.file import LanceFileReader, LanceFileWriter  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "fixtures"))
import v21_fixtures  # noqa: E402

from lance_spark import reader  # noqa: E402
from lance_spark.reader import LanceFormatError  # noqa: E402
from lance_spark.reader.format import fastlanes, fsst  # noqa: E402
from lance_spark.reader.format.file_v21 import FileV21Reader, read_file_table  # noqa: E402
from test_reader import assert_same_table  # noqa: E402

VERSIONS = ("2.1", "2.2")
CASES = v21_fixtures.cases()


def maps_and_null_structs(n: int = 3000) -> pa.Table:
    """Maps (2.2), null structs at every depth, empty vs null lists, vectors with null rows."""
    rng = np.random.default_rng(21)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "m": pa.array([None if i % 7 == 0 else [(f"k{j}", None if (i + j) % 5 == 0 else i * j) for j in range(i % 4)]
                       for i in range(n)], pa.map_(pa.string(), pa.int64())),
        "m_st": pa.array([[(f"k{i % 3}", {"a": i, "b": None if i % 2 else "x"})] if i % 3 else []
                          for i in range(n)], pa.map_(pa.string(), pa.struct([("a", pa.int32()), ("b", pa.string())]))),
        "deep": pa.array([None if i % 11 == 0 else {"s": None if i % 5 == 0 else {"t": None if i % 3 == 0 else
                                                                                  {"v": i if i % 2 else None}}}
                          for i in range(n)],
                         pa.struct([("s", pa.struct([("t", pa.struct([("v", pa.int64())]))]))])),
        "lst_null_st": pa.array([None if i % 13 == 0 else [None if (i + j) % 4 == 0 else {"x": [j] * (j % 3) if j % 2 else None}
                                                           for j in range(i % 5)] for i in range(n)],
                                pa.list_(pa.struct([("x", pa.list_(pa.int16()))]))),
        "empty_vs_null": pa.array([[] if i % 3 == 0 else None if i % 3 == 1 else [i] for i in range(n)],
                                  pa.list_(pa.int64())),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8).astype(np.float32)), 8,
                                                 mask=pa.array(rng.random(n) < .25)),
        "ll_large": pa.array([[[i] * (k % 3) for k in range(i % 4)] if i % 6 else None for i in range(n)],
                             pa.large_list(pa.list_(pa.int32()))),
    })


def _write_file(path: Path, table: pa.Table, version: str, page_bytes) -> None:
    kwargs = {"version": version}
    if page_bytes:
        kwargs["max_page_bytes"] = page_bytes
    with LanceFileWriter(str(path), table.schema, **kwargs) as w:
        w.write_batch(table)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_files_match_pylance(tmp_path, name, version):
    """Each fixture case (small pages included) written by pylance's file writer."""
    table, page_bytes = CASES[name]
    path = tmp_path / f"{name}.lance"
    _write_file(path, table, version, page_bytes)
    assert_same_table(read_file_table(str(path)), LanceFileReader(str(path)).read_all().to_table())


@pytest.mark.parametrize("version", ["2.2"])
def test_maps_and_null_structs_small_pages(tmp_path, version):
    path = tmp_path / "m.lance"
    t = maps_and_null_structs()
    _write_file(path, t, version, 2048)
    assert_same_table(read_file_table(str(path)), LanceFileReader(str(path)).read_all().to_table())


@pytest.fixture(scope="module")
def shaped_datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("v21")
    out = {}
    for version in VERSIONS:
        for name in ("shapes", "wide", "nested", "compressed", "bit_widths", "rich_one_page", "empty", "tiny"):
            p = root / f"{name}-{version}"
            lance.write_dataset(CASES[name][0], str(p), data_storage_version=version, max_rows_per_file=7000)
            out[(name, version)] = p
        t = maps_and_null_structs() if version == "2.2" else maps_and_null_structs().drop_columns(["m", "m_st"])
        p = root / f"maps-{version}"
        lance.write_dataset(t, str(p), data_storage_version=version, max_rows_per_file=1000)
        out[("maps", version)] = p
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["shapes", "wide", "nested", "compressed", "bit_widths", "rich_one_page",
                                  "empty", "tiny", "maps"])
def test_datasets_match_pylance(shaped_datasets, name, version):
    path = str(shaped_datasets[(name, version)])
    ds = reader.dataset(path)
    oracle = lance.dataset(path)
    assert ds.data_storage_version == version
    assert_same_table(ds.to_table(), oracle.to_table())
    cols = ds.schema.names[1::2][::-1]
    assert_same_table(ds.to_table(columns=cols), oracle.to_table(columns=cols))
    streamed = list(ds.to_batches(batch_rows=999))
    if streamed:
        assert_same_table(pa.Table.from_batches(streamed), oracle.to_table())


def _layouts(path: Path) -> set:
    """Every 'layout: codec' the pages of a dataset use."""
    ds = reader.dataset(path)
    seen = set()
    for frag in ds.fragments():
        for df in frag.files:
            r = FileV21Reader(df.full_path)
            try:
                for col in range(r.num_columns):
                    for pno in range(len(r.column(col).pages)):
                        d = r.describe_page(col, pno)
                        seen.add(f"{d['layout']}: {d['codec']}")
            finally:
                r.close()
    return seen


@pytest.mark.parametrize("version", VERSIONS)
def test_every_layout_and_codec_is_exercised(shaped_datasets, version):
    """The data shapes above make pylance use every layout and codec the reader decodes."""
    seen = " | ".join(sorted(set().union(*(_layouts(shaped_datasets[(n, version)])
                                         for n in ("shapes", "wide", "nested", "compressed", "maps")))))
    for needle in ("mini-block: bitpack(inline)", "dictionary(", "rle(", "fsst", "full-zip", "constant: inline value"
                   if version == "2.2" else "constant:", "all null", "zstd(", "lz4(", "byte-stream-split",
                   "fsl(", "variable(64)"):
        assert needle in seen, (needle, seen)


def test_dataset_file_versions_are_recorded(datasets_dir):
    for name, want in (("rich_2_1", "2.1"), ("rich_2_2", "2.2")):
        ds = reader.dataset(datasets_dir / name)
        assert ds.data_storage_version == want
        assert {df.file_version for f in ds.fragments() for df in f.files} == {want}


def test_nested_projection(datasets_dir):
    path = str(datasets_dir / "rich_2_2")
    ds = reader.dataset(path)
    nested = [f.name for f in ds.schema if pa.types.is_nested(f.type)]
    assert nested
    assert_same_table(ds.to_table(columns=nested), lance.dataset(path).to_table(columns=nested))


def packed_structs(n: int, variable: bool) -> pa.Table:
    """Structs stored as one column (`lance-encoding:packed`): fixed-width fields only, or (2.2)
    with variable-width fields (strings FSST-compressed, binary), null structs, lists of them."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    if variable:
        st = pa.struct([pa.field("a", pa.int32()), pa.field("s", pa.string()), pa.field("bin", pa.binary()),
                        pa.field("b", pa.int16())])
        rows = [None if i % 11 == 3 else {"a": i, "s": " ".join(words[(i + j) % 6] for j in range(i % 9)),
                                          "bin": bytes([i % 256]) * (i % 3), "b": i % 300} for i in range(n)]
    else:
        st = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.float64()), pa.field("c", pa.uint8())])
        rows = [None if i % 11 == 3 else {"a": i, "b": i * 0.5, "c": i % 256} for i in range(n)]
    meta = {"lance-encoding:packed": "true"}
    item = pa.field("item", st, metadata=meta)
    lists = pa.array([rows[i:i + i % 4] if i % 7 else None for i in range(n)], pa.list_(item))
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("p", st, metadata=meta), pa.field("lp", lists.type)])
    return pa.table({"id": np.arange(n, dtype=np.int64), "p": pa.array(rows, st), "lp": lists}, schema=schema)


@pytest.mark.parametrize("version,variable", [("2.1", False), ("2.2", False), ("2.2", True)])
def test_packed_structs(tmp_path, version, variable):
    """Packed structs are one column each (not one per field); 2.2 packs variable-width fields too
    (a full-zip `variable_packed_struct`)."""
    path = str(tmp_path / "packed")
    lance.write_dataset(packed_structs(5000, variable), path, data_storage_version=version,
                        max_rows_per_group=2000)
    ds = reader.dataset(path)
    assert_same_table(ds.to_table(), lance.dataset(path).to_table())
    assert_same_table(ds.to_table(columns=["lp"]), lance.dataset(path).to_table(columns=["lp"]))
    frag = ds.fragments()[0].files[0]
    r = FileV21Reader(frag.full_path)
    try:
        codec = r.describe_page(1, 0)["codec"]
    finally:
        r.close()
    assert codec.startswith("variable-packed-struct" if variable else "packed-struct"), codec


def test_variable_packed_struct_rows_that_overrun_are_rejected():
    from lance_spark.reader.format import encodings_v21 as e
    from lance_spark._proto import encodings_v2_1_pb2 as pb

    vps = pb.VariablePackedStruct()
    f = vps.fields.add()
    f.value.flat.bits_per_value = 32
    f.bits_per_value = 32
    g = vps.fields.add()
    g.value.variable.SetInParent()
    g.bits_per_length = 32
    row = np.frombuffer(np.array([7], "<i4").tobytes() + np.array([9], "<u4").tobytes() + b"abc", np.uint8)
    block = e.Var(np.array([0, row.size], np.int64), row)
    with pytest.raises(e.DecodeError, match="runs past the end of its row"):
        e._variable_packed_struct(vps, block)
    ok = np.frombuffer(np.array([7], "<i4").tobytes() + np.array([3], "<u4").tobytes() + b"abc", np.uint8)
    st = e._variable_packed_struct(vps, e.Var(np.array([0, 0, ok.size], np.int64), ok))
    assert st.n == 2 and st.children[0].ints().tolist() == [0, 7]
    assert st.children[1].offsets.tolist() == [0, 0, 3] and st.children[1].data.tobytes() == b"abc"


# -- vectorized kernels ---------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_fastlanes_roundtrip_against_a_scalar_packer(bits):
    """Unpacking inverts a straightforward (slow) FastLanes packer written from the layout."""
    rng = np.random.default_rng(bits)
    lanes = 1024 // bits
    for width in sorted({0, 1, 3, bits // 2, bits - 1, bits}):
        hi = (1 << width) - 1 if width else 0
        vals = rng.integers(0, hi, 1024, dtype=np.uint64, endpoint=True).astype(f"uint{bits}") if width else \
            np.zeros(1024, f"uint{bits}")
        packed = np.zeros(width * lanes, dtype=np.uint64)
        for lane in range(lanes):
            for row in range(bits):
                v = int(vals[int(fastlanes.ORDER[row // 8]) * 16 + (row % 8) * 128 + lane])
                for b in range(width):
                    bit = row * width + b
                    if v >> b & 1:
                        packed[(bit // bits) * lanes + lane] |= np.uint64(1 << (bit % bits))
        got = fastlanes.unpack(packed.astype(f"uint{bits}").reshape(1, -1), width, bits)[0]
        assert np.array_equal(got, vals), width


def test_fsst_expand_escapes_and_runs_of_ff():
    header = (fsst.MAGIC << 32) | (1 << 24) | 2
    table = header.to_bytes(8, "little") + b"abc\0\0\0\0\0" + b"xy\0\0\0\0\0\0" + bytes([3, 2])
    data = np.frombuffer(bytes([0, 255, 255, 1, 255, 7, 255, 255, 255, 0]), np.uint8)
    offs = np.array([0, 3, 6, 10], np.int64)
    out, o = fsst.expand(table, data, offs)
    # strings: [abc, esc ff] [xy, esc 07] [esc ff, esc 00]
    assert out.tobytes() == b"abc\xff" + b"xy\x07" + b"\xff\x00"
    assert o.tolist() == [0, 4, 7, 9]


def _scalar_fsst(symbols, lengths, data: bytes) -> bytes:
    out, i = bytearray(), 0
    while i < len(data):
        c = data[i]
        if c == 255:
            out.append(data[i + 1])
            i += 2
        else:
            out += bytes(symbols[c][:lengths[c]])
            i += 1
    return bytes(out)


@pytest.mark.parametrize("seed", range(6))
def test_fsst_expand_matches_a_scalar_expander(seed):
    """Random symbol tables and code streams (escapes, runs of 0xFF, empty strings) expand as a
    byte-by-byte expander does."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 255))
    lengths = rng.integers(1, 9, n).astype(np.uint8)
    symbols = rng.integers(0, 256, (n, 8)).astype(np.uint8)
    header = (fsst.MAGIC << 32) | (1 << 24) | n
    table = header.to_bytes(8, "little") + symbols.tobytes() + lengths.tobytes()
    strings = []
    for _ in range(int(rng.integers(1, 300))):
        parts = []
        for _ in range(int(rng.integers(0, 12))):
            if rng.random() < 0.3:
                parts += [255, int(rng.choice([255, int(rng.integers(0, 256))]))]
            else:
                parts.append(int(rng.integers(0, n)))
        strings.append(bytes(parts))
    data = np.frombuffer(b"".join(strings) or b"", np.uint8)
    offs = np.concatenate(([0], np.cumsum([len(x) for x in strings]))).astype(np.int64)
    if data.size == 0:
        return
    out, o = fsst.expand(table, data, offs)
    want = [_scalar_fsst(symbols, lengths, x) for x in strings]
    assert out.tobytes() == b"".join(want)
    assert np.diff(o).tolist() == [len(x) for x in want]


def test_fsst_rejects_codes_outside_the_table_and_dangling_escapes():
    header = (fsst.MAGIC << 32) | (1 << 24) | 1
    table = header.to_bytes(8, "little") + b"a" + bytes(7) + bytes([1])
    with pytest.raises(fsst.FsstError, match="not in the symbol table"):
        fsst.expand(table, np.array([0, 3], np.uint8), np.array([0, 2], np.int64))
    with pytest.raises(fsst.FsstError, match="escape"):
        fsst.expand(table, np.array([0, 255], np.uint8), np.array([0, 2], np.int64))
    with pytest.raises(fsst.FsstError, match="ends with an escape"):
        fsst.expand(table, np.array([255, 0, 0], np.uint8), np.array([0, 1, 3], np.int64))


def _pack_group(vals: np.ndarray, width: int, bits: int) -> np.ndarray:
    """The inverse of fastlanes.unpack for one group (slow, from the layout)."""
    lanes = 1024 // bits
    packed = np.zeros(width * lanes, dtype=object)
    for lane in range(lanes):
        for row in range(bits):
            v = int(vals[int(fastlanes.ORDER[row // 8]) * 16 + (row % 8) * 128 + lane])
            for b in range(width):
                bit = row * width + b
                if v >> b & 1:
                    packed[(bit // bits) * lanes + lane] |= 1 << (bit % bits)
    return packed.astype(f"uint{bits}")


def test_inline_bitpacking_across_chunks_of_several_groups():
    """Chunks of 1..3 groups of different widths (and short last groups) unpack together as each
    chunk alone."""
    from lance_spark.reader.format import encodings_v21 as e

    rng = np.random.default_rng(7)
    bits = 16
    counts, blobs, want = [2048, 1024, 3000, 5], [], []
    for n in counts:
        buf = []
        vals = np.zeros(0, np.uint16)
        for g in range((n + 1023) // 1024):
            width = int(rng.integers(0, 17))
            v = rng.integers(0, 1 << width, 1024).astype(np.uint16) if width else np.zeros(1024, np.uint16)
            buf.append(np.array([width], np.uint16))
            buf.append(_pack_group(v, width, bits))
            vals = np.concatenate([vals, v])
        want.append(vals[:n])
        raw = np.concatenate(buf).view(np.uint8)
        blobs.append(np.concatenate([raw, np.zeros(-raw.size % 8, np.uint8)]))
    data = np.concatenate(blobs)
    size = np.array([b.size for b in blobs], np.int64)
    pos = np.cumsum(size) - size
    got = e._unpack_inline(data, pos, size, np.array(counts, np.int64), bits, "test")
    assert np.array_equal(got.ints(), np.concatenate(want))
    with pytest.raises(e.DecodeError, match="runs past|ends before"):
        e._unpack_inline(data, pos, size - 8, np.array(counts, np.int64), bits, "test")


def test_out_of_line_levels_across_chunks():
    from lance_spark.reader.format import encodings_v21 as e

    rng = np.random.default_rng(8)
    counts = [1024, 2048, 700]
    blobs, want = [], []
    for n in counts:
        vals = rng.integers(0, 4, ((n + 1023) // 1024) * 1024).astype(np.uint16)
        raw = np.concatenate([_pack_group(vals[g * 1024:(g + 1) * 1024], 2, 16)
                              for g in range(vals.size // 1024)]).view(np.uint8)
        blobs.append(raw)
        want.append(vals[:n])
    data = np.concatenate(blobs)
    size = np.array([b.size for b in blobs], np.int64)
    pos = np.cumsum(size) - size
    got = e._out_of_line_chunks(data, pos, size, np.array(counts, np.int64), 2, 16, "levels")
    assert np.array_equal(got.ints(), np.concatenate(want))


def test_binary_chunks_rebase_offsets_and_reject_bad_ones():
    from lance_spark.reader.format import encodings_v21 as e

    chunks, want = [], []
    for strs in (["ab", "", "cde"], ["f"], ["", ""]):
        head = 4 * (len(strs) + 1)
        offs = np.concatenate(([0], np.cumsum([len(x) for x in strs]))) + head
        raw = offs.astype("<u4").tobytes() + "".join(strs).encode()
        raw += bytes(-len(raw) % 8)
        chunks.append([np.frombuffer(raw, np.uint8)])
        want += strs
    ch = e.Chunks.from_lists(chunks, np.array([3, 1, 2], np.int64))
    v = e._binary_chunks(ch, 32)
    got = [v.data[a:b].tobytes().decode() for a, b in zip(v.offsets[:-1], v.offsets[1:])]
    assert got == want
    bad = chunks[0][0].copy()
    bad[4:8] = np.frombuffer(np.array([1000], "<u4").tobytes(), np.uint8)
    with pytest.raises(e.DecodeError, match="offsets"):
        e._binary_chunks(e.Chunks.from_lists([[bad]], np.array([3], np.int64)), 32)


# -- malformed files ------------------------------------------------------------------------------

def _copy(shaped_datasets, tmp_path, name="shapes", version="2.2") -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(shaped_datasets[(name, version)], dst)
    return dst


def _file_and_page(root: Path, column: int):
    ds = reader.dataset(root)
    df = ds.fragments()[0].files[0]
    r = FileV21Reader(df.full_path)
    try:
        page = r.column(column).pages[0]
        return Path(df.full_path), page, r.describe_page(column, 0)
    finally:
        r.close()


def test_truncated_2_2_file(shaped_datasets, tmp_path):
    root = _copy(shaped_datasets, tmp_path)
    f, _, _ = _file_and_page(root, 0)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
    with pytest.raises(LanceFormatError, match=f.name):
        reader.dataset(root).to_table()


def test_chunk_words_past_the_buffer(shaped_datasets, tmp_path):
    root = _copy(shaped_datasets, tmp_path)
    f, page, d = _file_and_page(root, 0)   # "seq": mini-block, bit-packed
    assert d["layout"] == "mini-block"
    data = bytearray(f.read_bytes())
    pos = page.buffer_offsets[0]
    data[pos:pos + 4] = struct.pack("<I", 0xFFFFFFF0)
    f.write_bytes(bytes(data))
    with pytest.raises(LanceFormatError, match=rf"{f.name}.*'seq'.*page 0.*past the data buffer"):
        reader.dataset(root).to_table(columns=["seq"])


def test_unknown_page_encoding(shaped_datasets, tmp_path):
    root = _copy(shaped_datasets, tmp_path)
    f, page, _ = _file_and_page(root, 1)   # "small"
    data = bytearray(f.read_bytes())
    raw = page.encoding.direct.encoding
    at = data.find(raw)
    assert at > 0
    # the Any's value: a PageLayout whose first byte (field tag) becomes an unknown field 15
    inner_at = raw.find(b"\x0a", raw.find(b"PageLayout") + len(b"PageLayout"))
    data[at + inner_at + 2] = (15 << 3) | 2
    f.write_bytes(bytes(data))
    with pytest.raises(LanceFormatError, match=rf"{f.name}.*'small'.*(unknown|corrupt page encoding)"):
        reader.dataset(root).to_table(columns=["small"])


def test_bad_definition_levels_name_the_column(shaped_datasets, tmp_path):
    """A flipped byte inside a chunk gives an error naming file and column, or equal values, never a crash."""
    root = _copy(shaped_datasets, tmp_path, "nested", "2.1")
    ds = reader.dataset(root)
    want = lance.dataset(str(root)).to_table()
    f = Path(ds.fragments()[0].files[0].full_path)
    clean = f.read_bytes()
    rng = np.random.default_rng(5)
    for _ in range(40):
        data = bytearray(clean)
        i = int(rng.integers(0, len(data) - 40))
        data[i] ^= 0xFF
        f.write_bytes(bytes(data))
        try:
            got = reader.dataset(root).to_table()
        except LanceFormatError as e:
            assert f.name in str(e)
            continue
        assert got.num_rows == want.num_rows
    f.write_bytes(clean)
