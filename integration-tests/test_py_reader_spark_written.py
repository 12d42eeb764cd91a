"""The pure-Python reader on what Spark writes at file versions 2.1 and 2.2:
every type of the write suite (test_write) plus null structs at several depths
and maps, then random tables (random_tables, the shared generator and seeds)
staged through Parquet and written by Spark as test_write_differential does.
The reader (`lance_spark.reader`) must return exactly what pylance's
`to_table()` returns (the oracle), for full reads, projections and streaming.

`LANCE_SPARK_WRITTEN_CASES` sets the random seeds per version (default 30); a
failing seed reproduces alone: `LANCE_DIFF_SEED=<seed> pytest -k spark_written`.
"""
from __future__ import annotations

import os
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from lance_spark import reader
from compare import table_difference  # noqa: E402
from random_tables import describe, diff_seeds, random_table
from test_write import SCHEMA, _row

CASES = int(os.environ.get("LANCE_SPARK_WRITTEN_CASES", "30"))
SEEDS = diff_seeds(CASES)
VERSIONS = ("2.1", "2.2")


def _agree(path: str, what: str, columns: list[str]) -> None:
    """The Python reader equals pylance on `path`: whole table, a projection, and streamed."""
    oracle = lance.dataset(path)
    ours = reader.dataset(path)
    diff = table_difference(ours.to_table(), oracle.to_table())
    assert not diff, f"Python reader vs pylance, {what}: {diff}"
    diff = table_difference(ours.to_table(columns=columns), oracle.to_table(columns=columns))
    assert not diff, f"projection {columns}, {what}: {diff}"
    batches = list(ours.to_batches(columns=columns, batch_rows=337))
    want = oracle.to_table(columns=columns)
    streamed = pa.Table.from_batches(batches, schema=want.schema) if batches else want.slice(0, 0)
    diff = table_difference(streamed, want)
    assert not diff, f"to_batches {columns}, {what}: {diff}"


# -- every type, null structs, maps ---------------------------------------------------------------

@pytest.fixture(scope="module")
def every_type(spark):
    """test_write's rows (every Spark type the connector writes) plus nullable structs (null at
    the top and one level down, with a list inside), a map of structs and a null-able list of
    null-able structs."""
    id_ = F.col("id")
    inner = F.when(id_ % 4 == 0, F.lit(None)).otherwise(
        F.struct((id_ % 3).cast("string").alias("v"),
                 F.when(id_ % 5 == 0, F.lit(None)).otherwise(F.array(id_, id_ + 1)).alias("xs")))
    nst = F.when(id_ % 6 == 1, F.lit(None)).otherwise(F.struct(id_.alias("x"), inner.alias("in")))
    mst = F.when(id_ % 8 == 2, F.lit(None)).otherwise(
        F.create_map(F.concat(F.lit("k"), (id_ % 4).cast("string")),
                     F.when(id_ % 3 == 0, F.lit(None)).otherwise(F.struct(id_.alias("a"),
                                                                          (id_ * 0.5).alias("b")))))
    lst = F.when(id_ % 9 == 4, F.lit(None)).otherwise(
        F.array(F.when(id_ % 2 == 0, F.lit(None)).otherwise(F.struct(id_.cast("int").alias("q"))),
                F.struct((id_ + 1).cast("int").alias("q"))))
    return (spark.createDataFrame([_row(i) for i in range(3000)], SCHEMA).repartition(3)
            .withColumn("nst", nst).withColumn("mst", mst).withColumn("lst", lst))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_type_written_by_spark(every_type, tmp_path, version):
    path = str(tmp_path / "all.lance")
    (every_type.write.format("lance").option("maxRowsPerFile", 700).option("vectorColumns", "emb:4")
     .option("fileVersion", version).save(path))
    ds = lance.dataset(path)
    assert ds.data_storage_version == version
    assert len(ds.get_fragments()) >= 3
    # maps are Lance maps from 2.2 (lists of key/value structs before)
    assert pa.types.is_map(ds.schema.field("m").type) == (version == "2.2")
    _agree(path, f"every type at {version}", ["nst", "m", "arr_st", "id"])
    # nested projections
    ours = reader.dataset(path).to_table(columns=["st", "mst", "lst"])
    diff = table_difference(ours, ds.to_table(columns=["st", "mst", "lst"]))
    assert not diff, diff


def test_spark_written_null_structs_are_null(every_type, tmp_path):
    """A null struct reads as null (not as a struct of nulls), at the top and one level down."""
    path = str(tmp_path / "nst.lance")
    every_type.select("id", "nst").write.format("lance").option("fileVersion", "2.2").save(path)
    t = reader.dataset(path).to_table()
    rows = {r["id"]: r["nst"] for r in t.to_pylist()}
    assert rows[1] is None and rows[7] is None
    assert rows[4] is not None and rows[4]["in"] is None
    assert rows[5] == {"x": 5, "in": {"v": "2", "xs": None}}


# -- random tables (the shared generator) ---------------------------------------------------------

def _vectors(table: pa.Table) -> str:
    """vectorColumns for the top-level fixed-size lists (so they stay vectors)."""
    return ",".join(f"{f.name}:{f.type.list_size}" for f in table.schema if pa.types.is_fixed_size_list(f.type))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_tables_written_by_spark(spark, tmp_path, version, seed):
    table = random_table(seed, spark_types=True, maps=version == "2.2", max_rows=3000)
    staged = tmp_path / "in.parquet"
    pq.write_table(table, staged)
    path = str(tmp_path / "out.lance")
    writer = (spark.read.parquet(str(staged)).write.format("lance").option("fileVersion", version)
              .option("maxRowsPerFile", 1000))
    if _vectors(table):
        writer = writer.option("vectorColumns", _vectors(table))
    writer.save(path)
    what = f"seed {seed} at {version}: {describe(table)}"
    assert lance.dataset(path).data_storage_version == version, what
    _agree(path, what, table.column_names[::-1][:3])



@pytest.mark.parametrize("version", VERSIONS)
def test_compressed_dictionaries_written_by_spark(spark, tmp_path, version):
    """Pages the writer stores as dictionaries with their items zstd-compressed: words of a
    20,000-word vocabulary (a string dictionary taken although a page's first 4,096 values are
    nearly all distinct) and Zipf-like ids (a sorted fixed-width dictionary), with nulls."""
    path = str(tmp_path / "dict.lance")
    (spark.range(0, 150_000, numPartitions=1)
     .selectExpr("id", "pmod(hash(id), 20000) AS k",
                 "CAST(pow(1 + pmod(hash(id, 2), 3000), 2) / 100 AS BIGINT) AS uid")
     .selectExpr("id", "IF(id % 11 = 0, NULL, substr(sha2(CAST(k AS STRING), 256), 1, 4 + k % 9)) AS word", "uid")
     .write.format("lance").option("fileVersion", version).save(path))
    _agree(path, f"compressed dictionaries at {version}", ["word", "uid"])
    from lance_spark.reader.format.file_v21 import FileV21Reader
    files = sorted(Path(path, "data").glob("*.lance"))
    for f in files:
        r = FileV21Reader(str(f))
        try:   # columns: id, word, uid; the full first page of each (the last, of 18,928 rows, holds
            # each word about once: FSST is the smaller there)
            codecs = [r.describe_page(c, 0)["codec"] for c in (1, 2)]
        finally:
            r.close()
        assert all("dictionary" in c and "zstd" in c for c in codecs), codecs
    assert lance.dataset(path).to_table().num_rows == 150_000
