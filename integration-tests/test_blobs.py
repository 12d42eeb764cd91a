"""Blob columns written by pylance, read through Spark: blob v1 (`lance-encoding:blob`) at file
versions 2.0 and 2.1, blob v2 (`lance.blob.v2`) at 2.2 with values inline, in packed and
dedicated blob files and in external files. Every value equals what pylance's `take_blobs`
returns; deleted rows are gone, nulls are null. A scan of a 2.2 blob column's `position`/`size`
reads no blob bytes (the scan's lanceBytesRead metric). `LanceTable.open_blob` gives one value
as a file-like object."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import pyarrow as pa
import pytest

import lance
from lance.blob import Blob
from lance_spark import LanceTable
from scan_metrics import scan_metrics

MIB = 1 << 20


def _write(path: str, version: str, sizes: list[int], ext_dir: str, seed: int = 3) -> dict[int, bytes | None]:
    """pylance writes ids 0.. with blob values of `sizes` (every 7th null; at 2.2 two external
    values), deletes ids 10, 21, 32, ...; returns {id: take_blobs bytes} of the live rows."""
    rng = np.random.default_rng(seed)
    vals = [None if i % 7 == 3 else rng.integers(0, 256, s, dtype=np.uint8).tobytes() for i, s in enumerate(sizes)]
    n = len(vals)
    if version == "2.2":
        ext = os.path.join(ext_dir, "external.bin")
        with open(ext, "wb") as f:
            f.write(rng.integers(0, 256, 300_000, dtype=np.uint8).tobytes())
        items = [v if v is None else Blob.from_bytes(v) for v in vals]
        items[1] = Blob.from_uri("file://" + ext)
        items[2] = Blob.from_uri("file://" + ext, 1000, 12345)
        col = lance.blob_array(items)
        field = pa.field("img", col.type)
        kw = {"allow_external_blob_outside_bases": True}
    else:
        col = pa.array(vals, pa.large_binary())
        field = pa.field("img", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
        kw = {}
    t = pa.Table.from_arrays([pa.array(range(n), pa.int64()), col], schema=pa.schema([pa.field("id", pa.int64()), field]))
    ds = lance.write_dataset(t, path, data_storage_version=version, max_rows_per_file=max(1, n // 2), **kw)
    ds.delete("id % 11 = 10")
    ds = lance.dataset(path)
    live = ds.to_table(columns=["id"], with_row_id=True)
    files = ds.take_blobs("img", ids=live.column("_rowid").to_pylist())
    return {i: (None if f is None else f.read()) for i, f in zip(live.column("id").to_pylist(), files)}


def _read(spark, path: str, version: str) -> dict[int, bytes | None]:
    col = "img.data" if version == "2.2" else "img"
    rows = spark.read.format("lance").load(path).selectExpr("id", f"{col} AS v").collect()  # blob batches: 16 rows
    return {r["id"]: (None if r["v"] is None else bytes(r["v"])) for r in rows}


def _digest(d: dict[int, bytes | None]) -> dict[int, tuple[int, str] | None]:
    return {k: None if v is None else (len(v), hashlib.sha256(v).hexdigest()) for k, v in d.items()}


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_blob_values_equal_take_blobs(spark, tmp_path, version):
    rng = np.random.default_rng(11)
    sizes = [0, 1, 63, 64, 65, 4096, MIB, 16 * MIB, 16 * MIB - 1, 3 * MIB] + \
        [int(s) for s in rng.integers(0, 300_000, 30)]
    path = str(tmp_path / "blobs.lance")
    expected = _write(path, version, sizes, str(tmp_path))
    assert any(v is None for v in expected.values()) and any(v == b"" for v in expected.values())
    assert 10 not in expected and max(len(v) for v in expected.values() if v is not None) == 16 * MIB
    got = _read(spark, path, version)
    assert _digest(got) == _digest(expected)
    if version == "2.2":   # values came from packed and dedicated blob files
        names = [n for _, _, fs in os.walk(os.path.join(path, "data")) for n in fs if n.endswith(".blob")]
        assert len(names) >= 2, names


def test_positions_and_sizes_read_no_blob_bytes(spark, tmp_path):
    """200 rows x 1 MiB (dedicated blob files): a scan of img.position and img.size reads only
    descriptions; a scan of img.data reads every value."""
    path = str(tmp_path / "lazy.lance")
    expected = _write(path, "2.2", [MIB] * 200, str(tmp_path))
    df = spark.read.format("lance").load(path)
    lazy = scan_metrics(df.selectExpr("id", "img.position", "img.size"))
    sizes = {r["id"]: r["size"] for r in lazy["rows"]}
    assert sizes == {k: None if v is None else len(v) for k, v in expected.items()}
    assert lazy["lanceBytesRead"] < 256 * 1024, lazy
    full = scan_metrics(df.selectExpr("id", "length(img.data) AS n"))
    blob_bytes = sum(len(v) for v in expected.values() if v is not None)
    assert full["lanceBytesRead"] >= blob_bytes, (full["lanceBytesRead"], blob_bytes)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_open_blob(spark, tmp_path, version):
    path = str(tmp_path / "open.lance")
    expected = _write(path, version, [5000, 0, 70_000, 2 * MIB, 9, 100, 3, 40], str(tmp_path))
    ids = spark.read.format("lance").load(path).selectExpr("id", "_rowid").collect()
    table = LanceTable.forPath(spark, path)
    for r in ids:
        f = table.open_blob("img", r["_rowid"])
        if expected[r["id"]] is None:
            assert f is None
        else:
            head = f.read(10)
            f.seek(0)
            assert head + f.read()[10:] == expected[r["id"]] and head == expected[r["id"]][:10]
    with pytest.raises(KeyError):
        table.open_blob("img", 10**12)
    with pytest.raises(TypeError):
        table.open_blob("id", ids[0]["_rowid"])


@pytest.mark.skipif(os.environ.get("LANCE_LONG_TESTS") != "1", reason="make test-long (LANCE_LONG_TESTS=1)")
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_blob_100mib_values(spark, tmp_path, version):
    path = str(tmp_path / "big.lance")
    expected = _write(path, version, [100 * MIB, 0, 1, 100 * MIB - 7], str(tmp_path))
    got = _read(spark, path, version)
    assert _digest(got) == _digest(expected)
