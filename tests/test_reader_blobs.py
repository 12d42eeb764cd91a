"""Blob columns in the pure-Python reader, against pylance (the oracle).

- file version 2.1: a `large_binary` field with `lance-encoding:blob` uses the blob page layout
  (values stored out of line); the reader returns the values (as the Spark connector: BINARY),
  compared with pylance's `take_blobs`;
- file version 2.2: a `lance.blob.v2` column reads as struct<data, uri> (as the Spark connector);
  `data` holds the values stored in the data file, `uri` the uri of external values.

The data is the Spark interop test's (`integration-tests/test_read_interop.py::packed_and_blob`).
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

lance = pytest.importorskip("lance")

from lance_spark import reader  # noqa: E402
from lance_spark.reader import LanceFormatError  # noqa: E402
from lance_spark.reader.format.file_v21 import FileV21Reader  # noqa: E402
from test_cli import run  # noqa: E402
from test_read_interop import packed_and_blob  # noqa: E402  (integration-tests/, on sys.path)
from test_reader import assert_same_table  # noqa: E402

VERSIONS = ("2.1", "2.2")
ROWS = 2500


def _blob_type(version: str) -> pa.DataType:
    if version == "2.1":
        return pa.large_binary()
    return pa.struct([("data", pa.large_binary()), ("uri", pa.string())])


def _oracle_blobs(ds, ids=None) -> list:
    """Blob values by pylance's take_blobs (None for null rows)."""
    n = ds.count_rows()
    files = ds.take_blobs("blob", indices=list(range(n)) if ids is None else ids)
    return [None if f is None else f.read() for f in files]


def _our_blobs(col: pa.ChunkedArray, version: str) -> list:
    vals = col.to_pylist()
    if version == "2.2":
        for v in vals:
            assert v is None or v["uri"] is None, v  # every value of this data is stored in the file
        vals = [None if v is None else v["data"] for v in vals]
    return vals


@pytest.fixture(scope="module")
def blob_datasets(tmp_path_factory):
    out = {}
    for version in VERSIONS:
        path = tmp_path_factory.mktemp(f"blobs_{version}") / "packed.lance"
        lance.write_dataset(packed_and_blob(ROWS, version), str(path), data_storage_version=version,
                            max_rows_per_file=1000)
        ds = lance.dataset(str(path))
        others = [c for c in ds.schema.names if c != "blob"]
        out[version] = (path, _oracle_blobs(ds), ds.to_table(columns=others))
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_blob_columns_match_pylance(blob_datasets, version):
    path, blobs, others = blob_datasets[version]
    ds = reader.dataset(path)
    assert len(ds.fragments()) == 3
    t = ds.to_table()
    assert t.num_rows == ROWS
    assert t.schema.field("blob").type == _blob_type(version)
    got = _our_blobs(t.column("blob"), version)
    assert sum(v is None for v in got) == sum(v is None for v in blobs) > 0
    assert any(v is not None and len(v) > 1000 for v in got)
    assert got == blobs
    assert_same_table(t.select(others.column_names), others)


@pytest.mark.parametrize("version", VERSIONS)
def test_blob_columns_in_batches_and_projections(blob_datasets, version):
    path, blobs, others = blob_datasets[version]
    ds = reader.dataset(path)
    batches = list(ds.to_batches(batch_rows=300))  # not a divisor of the 1000-row files
    assert all(b.num_rows <= 300 for b in batches)
    t = pa.Table.from_batches(batches)
    assert _our_blobs(t.column("blob"), version) == blobs
    assert_same_table(t.select(others.column_names), others)
    only = ds.to_table(columns=["blob"])
    assert only.column_names == ["blob"] and only.schema.field("blob").type == _blob_type(version)
    assert _our_blobs(only.column("blob"), version) == blobs
    only_b = pa.Table.from_batches(list(ds.to_batches(columns=["blob"], batch_rows=777)))
    assert _our_blobs(only_b.column("blob"), version) == blobs
    mixed = ds.to_table(columns=["blob", "id"])
    assert mixed.column("id").to_pylist() == list(range(ROWS))


@pytest.mark.parametrize("version", VERSIONS)
def test_blob_columns_with_deletions(tmp_path, version):
    path = tmp_path / "d.lance"
    lance.write_dataset(packed_and_blob(1200, version), str(path), data_storage_version=version,
                        max_rows_per_file=500)
    oracle = lance.dataset(str(path))
    oracle.delete("id % 3 = 1")
    oracle = lance.dataset(str(path))
    ids = oracle.to_table(columns=["id"]).column("id").to_pylist()
    # take_blobs takes row offsets of the live rows (by position in the scan)
    want = _oracle_blobs(oracle, list(range(len(ids))))
    t = reader.dataset(path).to_table(columns=["id", "blob"])
    assert t.column("id").to_pylist() == ids
    assert _our_blobs(t.column("blob"), version) == want


def test_2_1_empty_null_and_all_null_blobs(tmp_path):
    """Empty values (position 0, size 0), nulls (levels smuggled in the position), a page of
    nulls only, and a non-nullable blob column."""
    n = 3000
    vals = [None if i < 1100 else b"" if i % 4 == 0 else None if i % 4 == 1 else bytes([i % 251]) * (i % 97)
            for i in range(n)]
    schema = pa.schema([pa.field("id", pa.int64()),
                        pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"}),
                        pa.field("req", pa.large_binary(), nullable=False,
                                 metadata={"lance-encoding:blob": "true"})])
    t = pa.Table.from_arrays([pa.array(range(n), pa.int64()), pa.array(vals, pa.large_binary()),
                              pa.array([b"r%d" % i if i % 5 else b"" for i in range(n)], pa.large_binary())],
                             schema=schema)
    path = tmp_path / "e.lance"
    lance.write_dataset(t, str(path), data_storage_version="2.1", max_rows_per_file=1000)
    got = reader.dataset(path).to_table()
    assert got.column("blob").to_pylist() == vals
    assert got.column("req").to_pylist() == t.column("req").to_pylist()
    assert got.column("req").null_count == 0
    assert got.column("blob").to_pylist() == _oracle_blobs(lance.dataset(str(path)))


_BLOB_V2 = pa.struct([("data", pa.large_binary()), ("uri", pa.string())])


def _blob_v2_table(vals) -> pa.Table:
    """A 2.2 blob column written from struct<data, uri> (a uri makes an external value)."""
    rows = [None if v is None else {"data": None, "uri": v} if isinstance(v, str) else {"data": v, "uri": None}
            for v in vals]
    meta = {"ARROW:extension:name": "lance.blob.v2", "ARROW:extension:metadata": ""}
    return pa.Table.from_arrays([pa.array(range(len(vals)), pa.int64()), pa.array(rows, _BLOB_V2)],
                                schema=pa.schema([pa.field("id", pa.int64()), pa.field("blob", _BLOB_V2, metadata=meta)]))


def test_2_2_external_uris(tmp_path):
    """Values in the data file and external ones (local file: URIs, whole files) both read as
    `data` (the bytes take_blobs returns); `uri` names the external ones."""
    ext = []
    for k in range(2):
        f = tmp_path / f"ext{k}.bin"
        f.write_bytes(bytes([k + 1]) * (1000 + k))
        ext.append("file://" + str(f))
    vals = [b"abc", ext[0], None, b"", b"\x00" * 100, ext[1]] * 500
    path = tmp_path / "u.lance"
    lance.write_dataset(_blob_v2_table(vals), str(path), data_storage_version="2.2",
                        allow_external_blob_outside_bases=True, max_rows_per_file=1000)
    desc = lance.dataset(str(path)).to_table().column("blob").to_pylist()
    assert {d["kind"] for d in desc if d} == {0, 3}  # inline and external
    data = _oracle_blobs(lance.dataset(str(path)))
    want = [None if v is None else {"data": d, "uri": v if isinstance(v, str) else None} for v, d in zip(vals, data)]
    ds = reader.dataset(path)
    assert ds.to_table().column("blob").to_pylist() == want
    assert pa.Table.from_batches(list(ds.to_batches(columns=["blob"], batch_rows=333))).column(
        "blob").to_pylist() == want


def test_2_2_blobs_in_blob_files(tmp_path):
    """Values pylance put in the data file's packed and dedicated blob files read as take_blobs
    returns them."""
    big = [b"x" * 10, b"y" * 200_000, None, bytes(range(256)) * 40_000]  # 200 kB: packed; 10 MB: dedicated
    path = tmp_path / "big.lance"
    lance.write_dataset(_blob_v2_table(big), str(path), data_storage_version="2.2")
    kinds = [d and d["kind"] for d in lance.dataset(str(path)).to_table().column("blob").to_pylist()]
    assert kinds[1] in (1, 2) and kinds[3] in (1, 2), kinds
    got = [None if v is None else v["data"] for v in reader.dataset(path).to_table().column("blob").to_pylist()]
    assert got == _oracle_blobs(lance.dataset(str(path))) == big


def test_2_2_missing_blob_file_is_an_error(tmp_path):
    """A blob file gone: an error naming the data file and column, never other bytes."""
    path = tmp_path / "gone.lance"
    lance.write_dataset(_blob_v2_table([b"a", b"y" * 200_000]), str(path), data_storage_version="2.2")
    for f in path.rglob("*.blob"):
        f.unlink()
    with pytest.raises(LanceFormatError) as e:
        reader.dataset(path).to_table()
    msg = str(e.value)
    assert ".lance" in msg and "'blob'" in msg and ".blob" in msg
    assert reader.dataset(path).to_table(columns=["id"]).column("id").to_pylist() == [0, 1]


def test_2_2_blob_field_with_position_and_size(tmp_path):
    """pylance's `blob_field` declares struct<data, uri, position, size>: data as take_blobs,
    position/size where the bytes are and how many."""
    vals = [b"abc", None, b"de"]
    t = pa.Table.from_arrays([pa.array(range(3), pa.int64()), lance.blob_array(vals)],
                             schema=pa.schema([pa.field("id", pa.int64()), lance.blob_field("blob")]))
    path = tmp_path / "bf.lance"
    lance.write_dataset(t, str(path), data_storage_version="2.2")
    got = reader.dataset(path).to_table().column("blob").to_pylist()
    assert [None if g is None else g["data"] for g in got] == vals
    assert [None if g is None else g["size"] for g in got] == [3, None, 2]


def _blobs_past_the_end(monkeypatch) -> None:
    """Blob reads see a file of 4 KiB: every description points past its end (the page
    buffers are read in full as before)."""
    orig = FileV21Reader.read_at

    def read_at(self, pos, size):
        saved = self.size
        self.size = min(self.size, 4096)
        try:
            return orig(self, pos, size)
        finally:
            self.size = saved

    monkeypatch.setattr(FileV21Reader, "read_at", read_at)


def test_2_1_blob_outside_the_file_names_file_and_column(blob_datasets, monkeypatch):
    path, _, _ = blob_datasets["2.1"]
    _blobs_past_the_end(monkeypatch)
    with pytest.raises(LanceFormatError) as e:
        reader.dataset(path).to_table(columns=["blob"])
    msg = str(e.value)
    assert ".lance" in msg and "'blob'" in msg and "outside the file" in msg


@pytest.mark.parametrize("version", VERSIONS)
def test_cli_inspect_verify_and_cat_blob_datasets(blob_datasets, capsys, version):
    path, blobs, _ = blob_datasets[version]
    rc, out, _ = run(capsys, "verify", path)
    assert rc == 0, out
    assert out.startswith("OK:") and "3 data file(s)" in out
    rc, out, _ = run(capsys, "inspect", path)
    assert rc == 0, out
    lines = [ln for ln in out.splitlines() if ln.startswith("  blob:")]
    assert lines, out
    if version == "2.1":
        assert any("blob (descriptions" in ln or ln.startswith("  blob: blob") for ln in lines), lines
    else:
        assert any("lance.blob.v2" in ln for ln in lines), lines
    rc, out, _ = run(capsys, "inspect", path, "--json")
    info = json.loads(out)
    assert any(c["column"] == "blob" for c in info["columns"])
    assert {s["name"]: s["type"] for s in info["schema"]}["blob"] == str(_blob_type(version))
    rc, out, _ = run(capsys, "cat", path, "--limit", 3, "--columns", "id,blob")
    assert rc == 0
    rows = out.splitlines()[1:]
    assert len(rows) == 3 and rows[0].split("\t")[1] == "null"
    cell = rows[1].split("\t")[1]
    assert (blobs[1].hex() in cell) if version == "2.2" else cell == blobs[1].hex()


def test_cli_verify_reports_a_blob_outside_the_file(blob_datasets, capsys, monkeypatch):
    path, _, _ = blob_datasets["2.1"]
    _blobs_past_the_end(monkeypatch)
    rc, out, _ = run(capsys, "verify", path)
    assert rc == 1
    assert "PROBLEM" in out and "'blob'" in out and "outside the file" in out


def test_2_0_blob_columns(tmp_path):
    """File version 2.0: a `lance-encoding:blob` column (pages of (position, size) descriptions,
    the values elsewhere in the file) reads as take_blobs returns, nulls and empty values kept,
    deleted rows gone."""
    rng = np.random.default_rng(20)
    vals = [None if i % 7 == 3 else rng.integers(0, 256, int(s), dtype=np.uint8).tobytes()
            for i, s in enumerate(np.concatenate([[0, 1, 300_000], rng.integers(0, 5000, 197)]))]
    t = pa.Table.from_arrays([pa.array(range(len(vals)), pa.int64()), pa.array(vals, pa.large_binary())],
                             schema=pa.schema([pa.field("id", pa.int64()),
                                               pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})]))
    path = tmp_path / "v20.lance"
    lance.write_dataset(t, str(path), data_storage_version="2.0", max_rows_per_file=120)
    lance.dataset(str(path)).delete("id % 10 = 9")
    ds = lance.dataset(str(path))
    ids = ds.to_table(columns=["id"]).column("id").to_pylist()
    got = reader.dataset(path).to_table()
    assert got.column("id").to_pylist() == ids
    assert got.column("blob").to_pylist() == [vals[i] for i in ids]
    rowids = ds.to_table(columns=[], with_row_id=True).column("_rowid").to_pylist()
    assert [None if f is None else f.read() for f in ds.take_blobs("blob", ids=rowids)] == [vals[i] for i in ids]
