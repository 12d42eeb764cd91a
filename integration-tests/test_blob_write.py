"""Spark writes BINARY columns as Lance blob columns (`option("blobColumns", ...)`, or the table
property of the same name): pylance sees a blob column, `take_blobs` returns the source bytes,
`to_table` the same rows; Spark and the pure-Python reader read them back equal. Values from 0 B
to 16 MiB (100 MiB under LANCE_LONG_TESTS=1), nulls, rows deleted after the write, appends by
pylance to a Spark-written table and by Spark to a pylance-written one; bad `blobColumns` fail
before any file is written. At file version 2.2 (blob v2) the same, and the descriptions and blob
files equal the ones pylance writes for the same values."""
from __future__ import annotations

import hashlib
import os

import lance
import numpy as np
import pyarrow as pa
import pytest

from conftest import long_only
from lance_spark import reader
from lance_spark.reader.format.file_v2 import FileV2Reader
from lance_spark.reader.format.file_v21 import FileV21Reader

MIB = 1 << 20
BLOB_KEY = b"lance-encoding:blob"


def _values(sizes: list[int], seed: int) -> list[bytes | None]:
    rng = np.random.default_rng(seed)
    return [None if i % 7 == 3 else rng.integers(0, 256, s, dtype=np.uint8).tobytes() for i, s in enumerate(sizes)]


def _digest(d: dict[int, bytes | None]) -> dict[int, tuple[int, str] | None]:
    return {k: None if v is None else (len(v), hashlib.sha256(v).hexdigest()) for k, v in d.items()}


def _spark_write(spark, path: str, vals: list[bytes | None], version: str, mode: str = "overwrite",
                 start: int = 0, per_file: int = 1_000_000, **opts) -> None:
    rows = [(start + i, None if v is None else bytearray(v)) for i, v in enumerate(vals)]
    df = spark.createDataFrame(rows, "id BIGINT, img BINARY").repartition(1)
    w = df.write.format("lance").mode(mode).option("fileVersion", version).option("maxRowsPerFile", per_file)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save(path)


def _pylance_values(path: str) -> dict[int, bytes | None]:
    """{id: bytes} of the live rows from `take_blobs` (by row id)."""
    ds = lance.dataset(path)
    live = ds.to_table(columns=["id"], with_row_id=True)
    files = ds.take_blobs("img", ids=live.column("_rowid").to_pylist())
    return {i: (None if f is None else f.read()) for i, f in zip(live.column("id").to_pylist(), files)}


def _spark_digests(spark, path: str, value: str = "img") -> dict[int, tuple[int, str] | None]:
    """{id: (length, sha256)} of `value` computed by Spark (no value is collected to the driver)."""
    rows = spark.read.format("lance").load(path).selectExpr(
        "id", "img IS NULL AS n", f"length({value}) AS len", f"sha2({value}, 256) AS h").collect()
    return {r["id"]: None if r["n"] else (r["len"], r["h"]) for r in rows}


def _reader_values(path: str) -> dict[int, bytes | None]:
    t = reader.dataset(path).to_table(columns=["id", "img"])
    return dict(zip(t.column("id").to_pylist(), t.column("img").to_pylist()))


def _to_table_descriptions(path: str) -> dict[int, tuple[int, int] | None]:
    """pylance's `to_table` gives a blob column's descriptions: {id: (position, size)}."""
    t = lance.dataset(path).to_table(columns=["id", "img"])
    return {i: None if d is None else (d["position"], d["size"])
            for i, d in zip(t.column("id").to_pylist(), t.column("img").to_pylist())}


def _check_all(spark, path: str, expected: dict[int, bytes | None]) -> None:
    want = _digest(expected)
    ds = lance.dataset(path)
    f = ds.schema.field("img")
    assert f.type == pa.large_binary() and (f.metadata or {}).get(BLOB_KEY) == b"true", f
    assert _digest(_pylance_values(path)) == want
    # sizes as written; a null is None at 2.1 and, as pylance shows its own 2.0 nulls, (1, 0) at 2.0
    null = (1, 0) if ds.data_storage_version == "2.0" else None
    got = _to_table_descriptions(path)
    assert {k: None if d is None else d[1] for k, d in got.items()} == \
        {k: None if v is None else len(v) for k, v in expected.items() if v is not None or null is None} | \
        {k: 0 for k, v in expected.items() if v is None and null is not None}
    assert all(got[k] == null for k, v in expected.items() if v is None)
    assert _spark_digests(spark, path) == want
    assert _digest(_reader_values(path)) == want


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_spark_writes_blob_columns_pylance_reads(spark, tmp_path, version):
    rng = np.random.default_rng(5)
    sizes = [0, 1, 63, 64, 65, 4096, MIB, 16 * MIB, 16 * MIB - 1, 3 * MIB, 16 * MIB] + \
        [int(s) for s in rng.integers(0, 200_000, 40)]
    vals = _values(sizes, 7)
    path = str(tmp_path / "w.lance")
    _spark_write(spark, path, vals, version, per_file=30, blobColumns="img")
    ds = lance.dataset(path)
    assert ds.data_storage_version == version and len(ds.get_fragments()) == 2
    # blob bytes are out of line: the data files hold them once (no page copy of the values)
    total = sum(len(v) for v in vals if v is not None)
    on_disk = sum(os.path.getsize(os.path.join(path, "data", n)) for n in os.listdir(os.path.join(path, "data")))
    assert total <= on_disk < total + 2 * MIB
    spark.sql(f"DELETE FROM lance.`{path}` WHERE id % 11 = 10")
    expected = {i: v for i, v in enumerate(vals) if i % 11 != 10}
    assert any(v is None for v in expected.values()) and any(v == b"" for v in expected.values())
    _check_all(spark, path, expected)


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_many_pages_all_null_and_all_empty_pages(spark, tmp_path, version):
    """Pages of 4 rows: a page of nulls only, a page of empty values only, mixed pages."""
    rng = np.random.default_rng(8)
    vals = [rng.integers(0, 256, int(s), dtype=np.uint8).tobytes() for s in rng.integers(1, 3000, 30)]
    vals[4:8] = [None] * 4
    vals[8:12] = [b""] * 4
    vals[13] = None
    path = str(tmp_path / "pages.lance")
    _spark_write(spark, path, vals, version, blobColumns="img", maxRowsPerPage=4)
    (name,) = [n for n in os.listdir(os.path.join(path, "data")) if n.endswith(".lance")]
    opener = FileV2Reader if version == "2.0" else FileV21Reader
    r = opener(os.path.join(path, "data", name))
    try:
        assert len(r.column(1).pages) == 8   # the blob column's pages: 30 rows, 4 a page
    finally:
        r.close()
    _check_all(spark, path, dict(enumerate(vals)))


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_appends_both_ways(spark, tmp_path, version):
    path = str(tmp_path / "a.lance")
    a = _values([10, 0, 5000, 70_000, 3], 1)
    _spark_write(spark, path, a, version, blobColumns="img")
    # pylance appends to the Spark-written blob table
    b = _values([100, 2 * MIB, 0, 9, 9], 2)
    schema = lance.dataset(path).schema
    t = pa.Table.from_arrays([pa.array(range(100, 105), pa.int64()), pa.array(b, pa.large_binary())], schema=schema)
    lance.write_dataset(t, path, mode="append")
    # Spark appends to it again (the column is a blob column already: no option needed, the option accepted)
    c = _values([7, 300_000, 1], 3)
    _spark_write(spark, path, c, version, mode="append", start=200)
    _spark_write(spark, path, c, version, mode="append", start=300, blobColumns="img")
    expected = {**dict(enumerate(a)), **{100 + i: v for i, v in enumerate(b)},
                **{200 + i: v for i, v in enumerate(c)}, **{300 + i: v for i, v in enumerate(c)}}
    _check_all(spark, path, expected)


def test_spark_appends_to_pylance_blob_table(spark, tmp_path):
    path = str(tmp_path / "p.lance")
    a = _values([0, 1, 2 * MIB, 6, 7], 4)
    field = pa.field("img", pa.large_binary(), metadata={BLOB_KEY: b"true"})
    t = pa.Table.from_arrays([pa.array(range(5), pa.int64()), pa.array(a, pa.large_binary())],
                             schema=pa.schema([pa.field("id", pa.int64()), field]))
    lance.write_dataset(t, path, data_storage_version="2.1")
    b = _values([MIB + 1, 0, 12], 5)
    _spark_write(spark, path, b, "2.1", mode="append", start=10)
    _check_all(spark, path, {**dict(enumerate(a)), **{10 + i: v for i, v in enumerate(b)}})


def test_table_property(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    spark.sql(f"CREATE TABLE lance.`{path}` (id BIGINT, img BINARY) "
              "TBLPROPERTIES ('blobColumns' = 'img', 'fileVersion' = '2.1')")
    vals = _values([0, 4, 1000, MIB], 6)
    _spark_write(spark, path, vals, "2.1", mode="append")
    _check_all(spark, path, dict(enumerate(vals)))


@pytest.mark.parametrize("option,problem", [
    ("nope", "'nope', which is not a column"),
    ("id", "column 'id', which is bigint"),
    ("img,nope", "'nope', which is not a column"),
])
def test_bad_blob_columns_fail_before_writing(spark, tmp_path, option, problem):
    path = str(tmp_path / "bad.lance")
    with pytest.raises(Exception) as e:
        _spark_write(spark, path, [b"x"], "2.1", blobColumns=option)
    assert "blobColumns" in str(e.value) and problem in str(e.value)
    assert not os.path.exists(path)


def test_bad_blob_columns_on_append(spark, tmp_path):
    path = str(tmp_path / "plain.lance")
    _spark_write(spark, path, [b"x"], "2.1")
    with pytest.raises(Exception) as e:
        _spark_write(spark, path, [b"y"], "2.1", mode="append", blobColumns="img")
    assert "blobColumns" in str(e.value) and "'img'" in str(e.value) and "plain binary" in str(e.value)
    assert len(lance.dataset(path).versions()) == 1


@long_only
def test_100_mib_values(spark, tmp_path):
    vals = _values([100 * MIB, 0, 100 * MIB - 3], 9)
    path = str(tmp_path / "big.lance")
    _spark_write(spark, path, vals, "2.1", blobColumns="img")
    _check_all(spark, path, dict(enumerate(vals)))


# -- file version 2.2 (blob v2) ------------------------------------------------------------------

KIB = 1 << 10
BLOB_V2 = "lance.blob.v2"


def _kind(size: int) -> int:
    """The kind pylance 14 gives a value of `size` bytes (docs/blobs.md): inline, packed, dedicated."""
    return 0 if size <= 64 * KIB else 1 if size <= 4 * MIB else 2


def _reader_values_v2(path: str) -> dict[int, bytes | None]:
    t = reader.dataset(path).to_table(columns=["id", "img"])
    return {i: None if v is None else v["data"] for i, v in zip(t.column("id").to_pylist(), t.column("img").to_pylist())}


def _descriptions_v2(path: str) -> dict[int, tuple[int, int, int, int, str] | None]:
    """pylance's `to_table` of a blob v2 column: {id: (kind, position, size, blob_id, blob_uri)}."""
    t = lance.dataset(path).to_table(columns=["id", "img"])
    return {i: None if d is None else (d["kind"], d["position"], d["size"], d["blob_id"], d["blob_uri"])
            for i, d in zip(t.column("id").to_pylist(), t.column("img").to_pylist())}


def _blob_files(path: str) -> list[tuple[str, int]]:
    """(blob file name, size) under each data file's directory, sorted by data file then name."""
    data = os.path.join(path, "data")
    return [(n, os.path.getsize(os.path.join(data, d, n)))
            for d in sorted(x for x in os.listdir(data) if os.path.isdir(os.path.join(data, x)))
            for n in sorted(os.listdir(os.path.join(data, d)))]


def _check_all_v2(spark, path: str, expected: dict[int, bytes | None]) -> None:
    want = _digest(expected)
    ds = lance.dataset(path)
    assert ds.data_storage_version == "2.2"
    f = ds.schema.field("img")
    assert isinstance(f.type, pa.ExtensionType) and f.type.extension_name == BLOB_V2, f
    assert _digest(_pylance_values(path)) == want
    got = _descriptions_v2(path)
    assert set(got) == set(expected)
    for k, v in expected.items():
        if v is None:
            assert got[k] is None, (k, got[k])
        else:
            assert got[k][0] == _kind(len(v)) and got[k][2] == len(v) and got[k][4] == "", (k, got[k])
    assert spark.read.format("lance").load(path).schema["img"].dataType.simpleString() in (
        "struct<data:binary,uri:string>", "struct<data:binary,uri:string,position:decimal(20,0),size:decimal(20,0)>")
    assert _spark_digests(spark, path, "img.data") == want
    assert _digest(_reader_values_v2(path)) == want


def test_v22_spark_writes_blob_columns_pylance_reads(spark, tmp_path):
    rng = np.random.default_rng(22)
    sizes = [0, 1, 63, 64 * KIB, 64 * KIB + 1, 100_000, MIB, 4 * MIB, 4 * MIB + 1, 5 * MIB, 16 * MIB - 1, 0,
             16 * MIB, 3 * MIB] + [int(s) for s in rng.integers(0, 300_000, 40)] + \
        [int(s) for s in rng.integers(4 * MIB - 3, 4 * MIB + 3, 4)]
    vals = _values(sizes, 23)
    path = str(tmp_path / "w22.lance")
    _spark_write(spark, path, vals, "2.2", per_file=30, blobColumns="img")
    ds = lance.dataset(path)
    assert len(ds.get_fragments()) == 2
    # the bytes are stored once: in the data files (inline) or in blob files (packed, dedicated)
    total = sum(len(v) for v in vals if v is not None)
    on_disk = sum(os.path.getsize(os.path.join(r, n)) for r, _, ns in os.walk(os.path.join(path, "data")) for n in ns)
    assert total <= on_disk < total + 2 * MIB
    _check_all_v2(spark, path, dict(enumerate(vals)))
    spark.sql(f"DELETE FROM lance.`{path}` WHERE id % 11 = 10")
    expected = {i: v for i, v in enumerate(vals) if i % 11 != 10}
    assert any(v is None for v in expected.values()) and any(v == b"" for v in expected.values())
    _check_all_v2(spark, path, expected)


def test_v22_layout_equals_pylance(spark, tmp_path):
    """One file, one batch: the descriptions (kind, position, size, blob id, uri) and the blob files
    (names, sizes, bytes) are the ones pylance 14 writes for the same values."""
    rng = np.random.default_rng(3)
    sizes = [0, 5, 64 * KIB, 64 * KIB + 1, 100, 4 * MIB, 4 * MIB + 1, 11, 7, 5 * MIB, 0, 70 * KIB, 3 * MIB,
             9 * MIB, 1] + [int(s) for s in rng.integers(0, 2 * MIB, 12)]
    vals = _values(sizes, 4)
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    _spark_write(spark, ours, vals, "2.2", blobColumns="img")
    field = pa.field("img", pa.large_binary(), metadata={BLOB_KEY: b"true"})
    t = pa.Table.from_arrays([pa.array(range(len(vals)), pa.int64()), pa.array(vals, pa.large_binary())],
                             schema=pa.schema([pa.field("id", pa.int64()), field]))
    lance.write_dataset(t, theirs, data_storage_version="2.2")
    assert _descriptions_v2(ours) == _descriptions_v2(theirs)
    assert {d[0] for d in _descriptions_v2(ours).values() if d is not None} == {0, 1, 2}
    assert _blob_files(ours) == _blob_files(theirs) and len(_blob_files(ours)) == 4
    def contents(p):
        (d,) = [x for x in os.listdir(os.path.join(p, "data")) if os.path.isdir(os.path.join(p, "data", x))]
        return {n: hashlib.sha256(open(os.path.join(p, "data", d, n), "rb").read()).hexdigest()
                for n in os.listdir(os.path.join(p, "data", d))}
    assert contents(ours) == contents(theirs)


def test_v22_appends_both_ways_and_struct_values(spark, tmp_path):
    path = str(tmp_path / "a22.lance")
    a = _values([10, 0, 5000, 70_000, 3, 5 * MIB], 1)
    _spark_write(spark, path, a, "2.2", blobColumns="img")
    # pylance appends to the Spark-written blob table (its blob v2 column)
    b = _values([100, 2 * MIB, 0, 9, 6 * MIB], 2)
    lance.write_dataset(pa.table({"id": pa.array(range(100, 105), pa.int64()),
                                  "img": lance.blob_array([None if v is None else lance.blob.Blob.from_bytes(v)
                                                           for v in b])}),
                        path, mode="append")
    # Spark appends BINARY (with or without the option) and the struct
    c = _values([7, 300_000, 1, 4 * MIB + 5], 3)
    _spark_write(spark, path, c, "2.2", mode="append", start=200)
    _spark_write(spark, path, c, "2.2", mode="append", start=300, blobColumns="img")
    rows = [(400 + i, None if v is None else (bytearray(v), None)) for i, v in enumerate(c)]
    spark.createDataFrame(rows, "id BIGINT, img STRUCT<data: BINARY, uri: STRING>") \
        .write.format("lance").mode("append").save(path)
    expected = {**dict(enumerate(a)), **{100 + i: v for i, v in enumerate(b)},
                **{k + i: v for k in (200, 300, 400) for i, v in enumerate(c)}}
    _check_all_v2(spark, path, expected)
    # a non-null uri is refused, naming the column; nothing is committed
    versions = len(lance.dataset(path).versions())
    with pytest.raises(Exception) as e:
        spark.createDataFrame([(500, (bytearray(b"x"), "file:///tmp/x.bin"))],
                              "id BIGINT, img STRUCT<data: BINARY, uri: STRING>") \
            .write.format("lance").mode("append").save(path)
    assert "'img'" in str(e.value) and "uri" in str(e.value)
    assert len(lance.dataset(path).versions()) == versions


def test_v22_spark_appends_to_pylance_blob_table(spark, tmp_path):
    path = str(tmp_path / "p22.lance")
    a = _values([0, 1, 2 * MIB, 6, 7 * MIB], 4)
    field = pa.field("img", pa.large_binary(), metadata={BLOB_KEY: b"true"})
    t = pa.Table.from_arrays([pa.array(range(5), pa.int64()), pa.array(a, pa.large_binary())],
                             schema=pa.schema([pa.field("id", pa.int64()), field]))
    lance.write_dataset(t, path, data_storage_version="2.2")
    b = _values([MIB + 1, 0, 12, 5 * MIB], 5)
    _spark_write(spark, path, b, "2.2", mode="append", start=10)
    lance.dataset(path).delete("id = 2 OR id = 11")
    expected = {**dict(enumerate(a)), **{10 + i: v for i, v in enumerate(b)}}
    del expected[2], expected[11]
    _check_all_v2(spark, path, expected)


def test_v22_table_property_and_insert(spark, tmp_path):
    path = str(tmp_path / "t22.lance")
    spark.sql(f"CREATE TABLE lance.`{path}` (id BIGINT, img BINARY) TBLPROPERTIES ('blobColumns' = 'img')")
    assert lance.dataset(path).data_storage_version == "2.2"
    vals = _values([0, 4, 1000, MIB, 5 * MIB], 6)
    _spark_write(spark, path, vals, "2.2", mode="append")
    spark.sql(f"INSERT INTO lance.`{path}` VALUES (50, named_struct('data', X'0102FF', 'uri', CAST(NULL AS STRING))), "
              "(51, NULL)")
    _check_all_v2(spark, path, {**dict(enumerate(vals)), 50: b"\x01\x02\xff", 51: None})


@long_only
def test_v22_100_mib_values(spark, tmp_path):
    vals = _values([100 * MIB, 0, 100 * MIB - 3, 70_000], 9)
    path = str(tmp_path / "big22.lance")
    _spark_write(spark, path, vals, "2.2", blobColumns="img")
    _check_all_v2(spark, path, dict(enumerate(vals)))


def test_v22_merge_schema_adds_a_blob_column(spark, tmp_path):
    """An append with mergeSchema adds a new BINARY column as a 2.2 blob column when blobColumns
    names it; the rows written before have NULL there."""
    path = str(tmp_path / "m22.lance")
    a = _values([10, 70_000, 5 * MIB], 1)
    _spark_write(spark, path, a, "2.2", blobColumns="img")
    b = _values([3, 2 * MIB, 0, 6 * MIB], 2)
    rows = [(10 + i, None if v is None else bytearray(v), None if v is None else bytearray(v[::-1]))
            for i, v in enumerate(b)]
    spark.createDataFrame(rows, "id BIGINT, img BINARY, audio BINARY").write.format("lance").mode("append") \
        .option("mergeSchema", "true").option("blobColumns", "audio").save(path)
    _check_all_v2(spark, path, {**dict(enumerate(a)), **{10 + i: v for i, v in enumerate(b)}})
    f = lance.dataset(path).schema.field("audio")
    assert isinstance(f.type, pa.ExtensionType) and f.type.extension_name == BLOB_V2, f
    ds = lance.dataset(path)
    live = ds.to_table(columns=["id"], with_row_id=True)
    got = {i: None if x is None else x.read()
           for i, x in zip(live.column("id").to_pylist(), ds.take_blobs("audio", ids=live.column("_rowid").to_pylist()))}
    want = {**{i: None for i in range(3)}, **{10 + i: None if v is None else v[::-1] for i, v in enumerate(b)}}
    assert _digest(got) == _digest(want)
    sp = spark.read.format("lance").load(path).selectExpr("id", "audio IS NULL AS n", "length(audio.data) AS len",
                                                          "sha2(audio.data, 256) AS h").collect()
    assert {r["id"]: None if r["n"] else (r["len"], r["h"]) for r in sp} == _digest(want)


def test_v22_streaming_write(spark, tmp_path):
    """A streaming write (the lance sink) with blobColumns at 2.2: a new dataset with a blob v2 column."""
    src, ckpt, path = tmp_path / "src", tmp_path / "ckpt", str(tmp_path / "s22.lance")
    src.mkdir()
    vals = _values([0, 5, 70_000, 5 * MIB, 9], 8)
    pa_t = pa.table({"id": pa.array(range(len(vals)), pa.int64()), "img": pa.array(vals, pa.binary())})
    import pyarrow.parquet as pq
    pq.write_table(pa_t, str(src / "part-0.parquet"))
    stream = spark.readStream.schema("id BIGINT, img BINARY").parquet(str(src))
    q = (stream.writeStream.format("lance").option("checkpointLocation", str(ckpt)).option("blobColumns", "img")
         .trigger(availableNow=True).start(path))
    q.awaitTermination()
    _check_all_v2(spark, path, dict(enumerate(vals)))


def test_v22_spark_writes_into_pylance_blob_type(spark, tmp_path):
    """A column of pylance's blob type (`lance.blob_array`: data, uri, position, size): Spark appends
    BINARY values to it and UPDATE rewrites rows holding blobs (the struct read back is written
    again); position and size are derived, never stored."""
    path = str(tmp_path / "bt22.lance")
    a = _values([3, 0, 100_000, 5 * MIB, 8], 11)
    col = lance.blob_array([None if v is None else lance.blob.Blob.from_bytes(v) for v in a])
    lance.write_dataset(pa.table({"id": pa.array(range(len(a)), pa.int64()), "img": col}), path,
                        data_storage_version="2.2")
    b = _values([MIB, 7, 6 * MIB], 12)
    _spark_write(spark, path, b, "2.2", mode="append", start=10)
    spark.sql(f"UPDATE lance.`{path}` SET id = id + 100 WHERE id IN (2, 3, 11)")
    expected = {**dict(enumerate(a)), **{10 + i: v for i, v in enumerate(b)}}
    for k in (2, 3, 11):
        expected[k + 100] = expected.pop(k)
    _check_all_v2(spark, path, expected)
