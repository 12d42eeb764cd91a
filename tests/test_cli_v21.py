"""The lance-spark CLI on file versions 2.1 / 2.2: inspect names layouts and codecs, verify
decodes every page and names the file, column and page of each corruption."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

lance = pytest.importorskip("lance")

from lance_spark import reader  # noqa: E402
from lance_spark.reader.format.file_v21 import FileV21Reader  # noqa: E402
from test_cli import run  # noqa: E402
from test_reader import _first_data_file, _latest_manifest, _rewrite_manifest  # noqa: E402


def test_inspect_names_layouts_and_codecs(datasets_dir, capsys):
    path = datasets_dir / "rich_2_2"
    rc, out, _ = run(capsys, "inspect", path)
    assert rc == 0, out
    assert "file version 2.2" in out
    assert "columns (2.1+ data files" in out
    assert "mini-block: bitpack(" in out
    rc, out, _ = run(capsys, "inspect", path, "--json")
    info = json.loads(out)
    cols = {c["column"] for c in info["columns"]}
    assert "id" in cols
    assert all(c["layout"] in ("mini-block", "full-zip", "constant", "blob") for c in info["columns"])


def test_inspect_shows_dictionary_and_fsst(tmp_path, capsys):
    import pyarrow as pa
    n = 20_000
    t = pa.table({"low": pa.array([f"w{i % 5}" for i in range(n)]),
                  "url": pa.array([f"https://example.com/items/{i * 7919 % 100003}/view?ref={i % 97}" for i in range(n)]),
                  "runs": pa.array([i // 100 for i in range(n)], pa.int32())})
    lance.write_dataset(t, str(tmp_path / "d"), data_storage_version="2.2")
    rc, out, _ = run(capsys, "inspect", tmp_path / "d")
    assert rc == 0
    line = {ln.split(":")[0].strip(): ln for ln in out.splitlines() if ln.startswith("  ") and ": " in ln}
    assert "dictionary(" in line["low"] and "bitpack(" in line["low"]
    assert "fsst" in line["url"]
    assert "rle(" in line["runs"] or "bitpack(" in line["runs"]


@pytest.mark.parametrize("name", ["rich_2_1", "rich_2_2", "bitmap_2_2"])
def test_verify_good(datasets_dir, capsys, name):
    rc, out, _ = run(capsys, "verify", datasets_dir / name)
    assert rc == 0, out
    assert out.startswith("OK:")


def test_cat_and_history(datasets_dir, capsys):
    path = datasets_dir / "rich_2_1"
    rc, out, _ = run(capsys, "cat", path, "--limit", 3)
    assert rc == 0 and len(out.splitlines()) == 4
    rc, out, _ = run(capsys, "history", path)
    assert rc == 0 and len(out.splitlines()) == len(lance.dataset(str(path)).versions())


# -- corruptions: each returns what the report must name ------------------------------------------

def _first_page(root: Path, column: int):
    f = _first_data_file(root)
    r = FileV21Reader(str(f))
    try:
        return f, r.column(column).pages[0], r.describe_page(column, 0)
    finally:
        r.close()


def _truncate(root):
    f = _first_data_file(root)
    f.write_bytes(f.read_bytes()[:-100])
    return [f.name]


def _chunk_words_past_buffer(root):
    f, page, d = _first_page(root, 0)
    assert d["layout"] == "mini-block"
    data = bytearray(f.read_bytes())
    pos = page.buffer_offsets[0]
    word = 4 if d["chunk_words"] == 32 else 2
    data[pos:pos + word] = b"\xf0" + b"\xff" * (word - 1)
    f.write_bytes(bytes(data))
    return [f.name, "column 0 page 0", "past the data buffer"]


def _page_buffer_outside_file(root):
    f, page, _ = _first_page(root, 0)
    data = bytearray(f.read_bytes())
    # the page's first buffer size, as a varint in the column metadata, made huge
    raw = page.SerializeToString()
    at = data.find(raw)
    assert at > 0
    page.buffer_sizes[0] = page.buffer_sizes[0] + (1 << 40)
    new = page.SerializeToString()
    if len(new) != len(raw):  # keep the metadata length: only corrupt in place when sizes match
        page.buffer_sizes[0] = page.buffer_sizes[0] - (1 << 40) + 7
        new = page.SerializeToString()
    if len(new) == len(raw):
        data[at:at + len(raw)] = new
    else:
        data[-41] ^= 0xFF
    f.write_bytes(bytes(data))
    return [f.name]


def _missing_deletion_file(root):
    ds = reader.dataset(root)
    frag = next(f for f in ds.fragments() if f.deletion_file is not None)
    Path(frag.deletion_file.path).unlink()
    return [Path(frag.deletion_file.path).name, "missing"]


def _deletion_beyond_rows(root):
    def edit(x):
        x.fragments[0].physical_rows = 10
    _rewrite_manifest(_latest_manifest(root), edit)
    return ["physical"]


@pytest.mark.parametrize("damage", [_truncate, _chunk_words_past_buffer, _page_buffer_outside_file,
                                    _missing_deletion_file, _deletion_beyond_rows])
@pytest.mark.parametrize("name", ["rich_2_1", "rich_2_2"])
def test_verify_bad(copy_dataset, capsys, damage, name):
    root = copy_dataset(name)
    needles = damage(root)
    rc, out, _ = run(capsys, "verify", root)
    assert rc == 1, out
    assert "FAILED" in out
    for needle in needles:
        assert needle in out, (needle, out)


@pytest.mark.parametrize("name", ["rich_2_1", "rich_2_2"])
def test_verify_decodes_every_page_and_reports_each(datasets_dir, name):
    """verify's progress bar advances page by page: every page of every column (nested fields
    included) is decoded once, and the bar's total is the number of pages."""
    from lance_spark.cli import _check_data_file, _pages_in

    ds = reader.dataset(datasets_dir / name)
    for frag in ds.fragments():
        for df in frag.files:
            seen = []
            assert _check_data_file(ds, frag, df, lambda c, p: seen.append((c, p))) is None
            assert len(seen) == len(set(seen)) == _pages_in(df)


def test_packed_struct_columns_are_named_by_inspect(tmp_path, capsys):
    import pyarrow as pa
    st = pa.struct([("a", pa.int32()), ("s", pa.string())])
    t = pa.Table.from_arrays([pa.array(range(3000), pa.int64()),
                              pa.array([{"a": i, "s": "x" * (i % 5)} for i in range(3000)], st)],
                             schema=pa.schema([pa.field("id", pa.int64()),
                                               pa.field("p", st, metadata={"lance-encoding:packed": "true"})]))
    lance.write_dataset(t, str(tmp_path / "d"), data_storage_version="2.2")
    rc, out, _ = run(capsys, "inspect", tmp_path / "d")
    assert rc == 0 and "variable-packed-struct" in out
    rc, out, _ = run(capsys, "verify", tmp_path / "d")
    assert rc == 0, out
