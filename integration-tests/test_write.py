"""Spark writes Lance datasets: pylance (the oracle) reads exactly what Spark
wrote, for every type; save modes; options; pylance can append and delete on
the result; the pure-Python reader agrees; failed jobs leave no version."""
from __future__ import annotations

import datetime as dt
import decimal
import threading
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from compare import assert_same, assert_same_table, oracle_rows, spark_rows
from conftest import long_only
from lance_spark import reader

SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("b", T.BooleanType()),
    T.StructField("i8", T.ByteType()),
    T.StructField("i16", T.ShortType()),
    T.StructField("i32", T.IntegerType()),
    T.StructField("i64", T.LongType()),
    T.StructField("f32", T.FloatType()),
    T.StructField("f64", T.DoubleType()),
    T.StructField("dec", T.DecimalType(18, 3)),
    T.StructField("dec38", T.DecimalType(38, 10)),
    T.StructField("s", T.StringType()),
    T.StructField("bin", T.BinaryType()),
    T.StructField("d", T.DateType()),
    T.StructField("ts", T.TimestampType()),
    T.StructField("ts_ntz", T.TimestampNTZType()),
    T.StructField("arr", T.ArrayType(T.IntegerType())),
    T.StructField("arr_s", T.ArrayType(T.StringType())),
    T.StructField("emb", T.ArrayType(T.FloatType())),
    T.StructField("m", T.MapType(T.StringType(), T.LongType())),
    T.StructField("st", T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.StringType()),
                                      T.StructField("tags", T.ArrayType(T.StringType()))]), False),
    T.StructField("arr_st", T.ArrayType(T.StructType([T.StructField("k", T.StringType()),
                                                      T.StructField("v", T.DoubleType())]))),
])


def _row(i: int) -> tuple:
    def maybe(v, k=7):
        return None if i % k == 3 else v
    return (
        i, maybe(i % 2 == 0), maybe((i % 256) - 128), maybe(i * 3 - 30000), maybe(i * 7919), maybe(i * 10**12 - 5),
        maybe(float(i) / 3), maybe(float("nan") if i % 50 == 0 else (-0.0 if i % 51 == 0 else i * 1.5)),
        maybe(decimal.Decimal(i * 1001).scaleb(-3)), maybe(decimal.Decimal(i).scaleb(-10)),
        maybe("" if i % 13 == 0 else f"str-{i}-" + "é" * (i % 5)), maybe(bytes([i % 256]) * (i % 4)),
        maybe(dt.date(1970, 1, 1) + dt.timedelta(days=i - 500)),
        maybe(dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i * 37, microseconds=i)),
        maybe(dt.datetime(1999, 12, 31) + dt.timedelta(minutes=i)),
        maybe([] if i % 11 == 0 else [i, None, i + 1][: 1 + i % 3]),
        maybe([f"a{i}", None] if i % 2 else []),
        maybe([float(i), float(i + 1), float(i + 2), float(i + 3)]),
        maybe({"k": i, "z": None} if i % 3 else {}),
        (i, maybe(f"b{i}"), maybe([str(i)])),
        maybe([(f"k{i}", i / 2), (None, None)] if i % 4 else []),
    )


@pytest.fixture(scope="module")
def df(spark):
    return spark.createDataFrame([_row(i) for i in range(3000)], SCHEMA).repartition(3)


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_every_type_round_trips_through_pylance(spark, df, tmp_path, version):
    path = str(tmp_path / "all.lance")
    (df.write.format("lance").option("maxRowsPerFile", 700).option("vectorColumns", "emb:4")
     .option("fileVersion", version).save(path))

    ds = lance.dataset(path)
    assert ds.count_rows() == 3000
    assert ds.data_storage_version == version
    assert {(f.file_major_version, f.file_minor_version) for frag in ds.get_fragments()
            for f in frag.metadata.files} == {(2, int(version[-1]))}
    assert len(ds.get_fragments()) >= 3 * 2          # several fragments per task
    assert pa.types.is_fixed_size_list(ds.schema.field("emb").type)
    assert ds.schema.field("emb").type.list_size == 4
    ds.validate()

    expected = spark_rows(df)
    back = spark.read.format("lance").load(path)
    # Spark -> Spark: the vector column reads back as an array
    assert_same(spark_rows(back.drop("m")), [{k: v for k, v in r.items() if k != "m"} for r in expected],
                "Spark -> Spark")
    # Spark -> pylance
    assert_same(oracle_rows(ds.to_table().drop(["m"])),
                [{k: v for k, v in r.items() if k != "m"} for r in expected], "Spark -> pylance")
    # maps: Lance maps from 2.2, lists of key/value structs before
    m_type = ds.schema.field("m").type
    assert pa.types.is_map(m_type) if version == "2.2" else pa.types.is_list(m_type)
    m = {r["id"]: r["m"] for r in ds.to_table(columns=["id", "m"]).to_pylist()}
    for r in expected:
        want = None if r["m"] is None else sorted((k, v) for k, v in r["m"])
        got = m[r["id"]]
        if got is not None:
            got = sorted(tuple(e) if version == "2.2" else (e["key"], e["value"]) for e in got)
        assert got == want, r["id"]
    if version == "2.2":   # and Spark reads them back as MAP
        assert isinstance(back.schema["m"].dataType, T.MapType)
        got = {r["id"]: r["m"] for r in spark_rows(back.select("id", "m"))}
        for r in expected:
            assert (None if got[r["id"]] is None else sorted(got[r["id"]])) == \
                (None if r["m"] is None else sorted(r["m"])), r["id"]
    # Spark -> pure-Python reader
    if version == "2.0":
        assert_same(oracle_rows(reader.dataset(path).to_table().drop(["m"])),
                    [{k: v for k, v in r.items() if k != "m"} for r in expected], "Spark -> pure-Python reader")


def test_save_modes(spark, tmp_path):
    path = str(tmp_path / "modes.lance")
    one = spark.range(0, 10).withColumn("x", F.col("id") * 2)
    one.write.format("lance").save(path)                                   # create when absent
    assert lance.dataset(path).version == 1
    with pytest.raises(Exception, match="already exists"):
        one.write.format("lance").save(path)                               # error-if-exists (default)
    one.write.format("lance").mode("ignore").save(path)
    assert lance.dataset(path).version == 1
    one.write.format("lance").mode("append").save(path)
    assert lance.dataset(path).count_rows() == 20 and lance.dataset(path).version == 2
    spark.range(100, 105).withColumn("y", F.lit("new")).write.format("lance").mode("overwrite").save(path)
    ds = lance.dataset(path)
    assert ds.version == 3 and ds.schema.names == ["id", "y"] and ds.count_rows() == 5
    assert lance.dataset(path, version=2).count_rows() == 20               # history kept
    ops = [v.get("operation") for v in reader.dataset(path).versions()]
    assert ops == ["Overwrite", "Append", "Overwrite"], ops


def test_append_mismatched_columns_is_refused(spark, tmp_path):
    path = str(tmp_path / "mismatch.lance")
    spark.range(5).write.format("lance").save(path)
    with pytest.raises(Exception, match="columns differ"):
        spark.range(5).withColumn("extra", F.lit(1)).write.format("lance").mode("append").save(path)
    assert lance.dataset(path).version == 1


@pytest.mark.parametrize("where", ["top", "nested"])
def test_append_of_null_into_non_nullable_column_is_refused(spark, tmp_path, where):
    """Regression: the append's schema check dropped nullability, so a NULL in a
    column pylance declared non-nullable was committed and the version became
    unreadable to pylance ("unmasked nulls")."""
    path = str(tmp_path / "notnull.lance")
    inner = pa.struct([pa.field("x", pa.int64(), nullable=False)])
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", inner, nullable=False)])
    lance.write_dataset(pa.table({"id": [1, 2], "p": [{"x": 1}, {"x": 2}]}, schema=schema), path,
                        data_storage_version="2.0")
    before = set(Path(path, "data").iterdir())
    sschema = T.StructType([T.StructField("id", T.LongType()),
                            T.StructField("p", T.StructType([T.StructField("x", T.LongType())]))])
    rows = [(3, (3,)), (None, (4,))] if where == "top" else [(3, (3,)), (4, (None,))]
    column = "'id'" if where == "top" else "'p.x'"
    with pytest.raises(Exception, match=f"column {column} is declared non-nullable") as e:
        spark.createDataFrame(rows, sschema).write.format("lance").mode("append").save(path)
    assert "notnull.lance" in str(e.value)                            # the dataset is named too
    ds = lance.dataset(path)
    assert ds.version == 1 and ds.to_table().to_pylist() == [{"id": 1, "p": {"x": 1}}, {"id": 2, "p": {"x": 2}}]
    assert set(Path(path, "data").iterdir()) == before           # the failed job's files are removed
    # rows without NULLs still append, and pylance reads them
    spark.createDataFrame([(3, (3,))], sschema).write.format("lance").mode("append").save(path)
    assert lance.dataset(path).to_table()["id"].to_pylist() == [1, 2, 3]


def test_null_struct_is_refused_at_2_0_naming_the_column(spark, tmp_path):
    path = str(tmp_path / "nullstruct.lance")
    schema = T.StructType([T.StructField("id", T.LongType()),
                           T.StructField("p", T.StructType([T.StructField("x", T.LongType())]))])
    data = spark.createDataFrame([(1, (1,)), (2, None)], schema)
    with pytest.raises(Exception, match="column 'p'.*null struct"):
        data.write.format("lance").option("fileVersion", "2.0").save(path)
    assert not Path(path, "_versions").exists()
    # 2.1 and later store them
    data.write.format("lance").option("fileVersion", "2.1").save(path)
    assert lance.dataset(path).to_table().to_pylist() == [{"id": 1, "p": {"x": 1}}, {"id": 2, "p": None}]


def test_pylance_appends_and_deletes_on_spark_written_data(spark, tmp_path):
    path = str(tmp_path / "mixed.lance")
    spark.range(0, 1000).withColumn("name", F.concat(F.lit("n"), F.col("id").cast("string"))) \
        .write.format("lance").option("maxRowsPerFile", 300).save(path)
    ds = lance.write_dataset(pa.table({"id": pa.array(range(1000, 1100), pa.int64()),
                                       "name": pa.array([f"p{i}" for i in range(100)])}),
                             path, mode="append")
    ds.delete("id % 10 = 0")
    expected = lance.dataset(path).to_table()
    got = spark.read.format("lance").load(path)
    assert_same_table(got, expected, "pylance edits of a Spark dataset")
    # and Spark appends after pylance
    spark.range(2000, 2010).withColumn("name", F.lit("s")).write.format("lance").mode("append").save(path)
    assert lance.dataset(path).count_rows() == expected.num_rows + 10
    # pylance reads the transaction of every version, ours written after its own
    # (whose manifests point at an inline transaction that ours must not inherit)
    ds = lance.dataset(path)
    ops = [type(ds.read_transaction(v).operation).__name__ for v in range(1, ds.version + 1)]
    assert ops == ["Overwrite", "Append", "Delete", "Append"]


def test_failed_task_leaves_previous_version(spark, tmp_path):
    path = str(tmp_path / "fail.lance")
    spark.range(100).write.format("lance").save(path)
    before = set(Path(path, "data").iterdir())

    @F.udf("long")
    def boom(x):
        if x == 4321:
            raise ValueError("injected failure")
        return x

    with pytest.raises(Exception, match="injected failure"):
        spark.range(0, 8000, numPartitions=4).select(boom("id").alias("id")) \
            .write.format("lance").mode("append").save(path)
    assert lance.dataset(path).version == 1 and lance.dataset(path).count_rows() == 100
    # written files are removed (a task killed while closing a file may leave one, unreferenced)
    referenced = {f.path for fr in lance.dataset(path).get_fragments() for f in fr.data_files()}
    stray = set(Path(path, "data").iterdir()) - before
    assert len(stray) <= 1 and not {p.name for p in stray} & referenced


def test_cancelled_job_leaves_previous_version(spark, tmp_path):
    path = str(tmp_path / "cancel.lance")
    spark.range(10).write.format("lance").save(path)

    @F.udf("long")
    def slow(x):
        import time
        time.sleep(0.01)
        return x

    sc = spark.sparkContext
    errors = []

    def run():
        sc.setJobGroup("lance-cancel-test", "cancel me", interruptOnCancel=True)
        try:
            spark.range(0, 20000, numPartitions=4).select(slow("id").alias("id")) \
                .write.format("lance").mode("append").save(path)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    import time
    time.sleep(4)
    sc.cancelJobGroup("lance-cancel-test")
    t.join(60)
    assert errors, "the job should have been cancelled"
    assert lance.dataset(path).version == 1 and lance.dataset(path).count_rows() == 10


def test_concurrent_appends_from_threads_all_land(spark, tmp_path):
    path = str(tmp_path / "concurrent.lance")
    spark.range(0).write.format("lance").save(path)
    errors: list = []

    def append(k: int):
        try:
            spark.range(k * 1000, k * 1000 + 100).write.format("lance").mode("append").save(path)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=append, args=(k,)) for k in range(4)]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    assert not errors, errors
    ds = lance.dataset(path)
    assert ds.version == 5 and ds.count_rows() == 400
    ids = set(ds.to_table(columns=["id"])["id"].to_pylist())
    assert ids == {k * 1000 + j for k in range(4) for j in range(100)}
    for v in range(1, 6):                                                 # every version readable
        lance.dataset(path, version=v).to_table()


_APPENDER = r"""
import sys, lance_spark
from pyspark.sql import SparkSession
path, start, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spark = lance_spark.configure(SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")).getOrCreate()
for r in range(rounds):
    spark.range(start + r * 100, start + r * 100 + 100).write.format("lance").mode("append").save(path)
    print("ok", r, flush=True)
spark.stop()
"""


@long_only   # make test: appends from threads (test_object_store.py, test_external_manifest_store.py)
def test_concurrent_appends_from_separate_sessions_all_land(spark, tmp_path):
    import subprocess
    import sys as _sys

    path = str(tmp_path / "multi.lance")
    spark.range(0).write.format("lance").save(path)
    script = tmp_path / "appender.py"
    script.write_text(_APPENDER)
    procs = [subprocess.Popen([_sys.executable, str(script), path, str(k * 10_000), "3"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in (1, 2)]
    for k in range(3):                      # this session appends at the same time
        spark.range(k * 100, k * 100 + 100).write.format("lance").mode("append").save(path)
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        assert out.count("ok") == 3
    ds = lance.dataset(path)
    assert ds.version == 1 + 9 and ds.count_rows() == 900
    want = set(range(300)) | {s + r * 100 + j for s in (10_000, 20_000) for r in range(3) for j in range(100)}
    assert set(ds.to_table(columns=["id"])["id"].to_pylist()) == want


def test_inspect_shows_page_statistics_of_spark_written_files(spark, tmp_path):
    import json
    import subprocess
    import sys as _sys

    path = str(tmp_path / "stats.lance")
    (spark.range(0, 5000, numPartitions=1)
     .withColumn("x", F.when(F.col("id") % 10 == 0, None).otherwise(F.col("id") * 2.5))
     .withColumn("s", F.concat(F.lit("k"), F.lpad(F.col("id").cast("string"), 5, "0")))
     .write.format("lance").option("maxRowsPerPage", 1000).save(path))
    out = subprocess.run([_sys.executable, "-m", "lance_spark", "inspect", path, "--json"],
                         capture_output=True, text=True, check=True).stdout
    stats = {e["column"]: e for e in json.loads(out)["page_statistics"]}
    assert stats["id"]["pages"] == 5 and stats["id"]["min"] == "0" and stats["id"]["max"] == "4999"
    assert stats["x"]["null_count"] == 500 and stats["x"]["min"] == "2.5" and stats["x"]["max"] == "12497.5"
    assert stats["s"]["min"] == "k00000" and stats["s"]["max"] == "k04999"
    # files written by pylance carry none
    other = str(tmp_path / "pylance.lance")
    lance.write_dataset(pa.table({"id": [1, 2]}), other, data_storage_version="2.0")
    out = subprocess.run([_sys.executable, "-m", "lance_spark", "inspect", other], capture_output=True,
                         text=True, check=True).stdout
    assert "page statistics: none" in out


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_numeric_arrays_from_spark_operators_round_trip(spark, tmp_path, version):
    """Arrays computed by Spark's operators (its unsafe layout, copied into Arrow in one piece when
    they hold no NULL): every element type of each width, lengths 0-200 (across 64-item null
    words), NULL items, NULL arrays and vectors, against values computed here in numpy."""
    import numpy as np

    n = 2500
    kinds = {"i8": "TINYINT", "i16": "SMALLINT", "i32": "INT", "i64": "BIGINT", "f32": "FLOAT", "f64": "DOUBLE"}
    # item k of row i: (i * 31 + k * 7) % 100 - 50, NULL where (i + k) % 37 == 0 on rows i % 5 == 1,
    # the whole array NULL where i % 9 == 4; length (i * 13) % 201
    def item(c: str) -> str:
        return (f"transform(array_repeat(0, CAST((id * 13) % 201 AS INT)), (_, k) -> IF(id % 5 = 1 AND (id + k) % 37 = 0, NULL, "
                f"CAST(((id * 31 + k * 7) % 100 - 50) AS {kinds[c]})))")
    cols = [f"IF(id % 9 = 4, NULL, {item(c)}) AS {c}" for c in kinds]
    vec = ("IF(id % 11 = 2, NULL, transform(sequence(0, 47), k -> IF(id % 5 = 1 AND k = 3, NULL, "
           "CAST((id * 31 + k * 7) % 1000 AS FLOAT) / 8))) AS emb")
    df = spark.range(0, n, 1, 2).selectExpr("id", *cols, vec)
    path = str(tmp_path / "arrays.lance")
    (df.write.format("lance").option("vectorColumns", "emb:48").option("fileVersion", version)
     .option("maxRowsPerFile", 1000).save(path))

    got = lance.dataset(path).to_table().to_pydict()
    assert got["id"] == list(range(n))
    for c in kinds:
        for i in range(n):
            if i % 9 == 4:
                want = None
            else:
                ks = np.arange((i * 13) % 201)
                vals = ((i * 31 + ks * 7) % 100 - 50).tolist()
                want = [None if i % 5 == 1 and (i + k) % 37 == 0 else v for k, v in zip(ks.tolist(), vals)]
            assert got[c][i] == want, (c, i)
    for i in range(n):
        if i % 11 == 2:
            assert got["emb"][i] is None, i
        else:
            ks = np.arange(48)
            vals = (((i * 31 + ks * 7) % 1000).astype(np.float32) / np.float32(8)).tolist()
            want = [None if i % 5 == 1 and k == 3 else v for k, v in enumerate(vals)]
            assert got["emb"][i] == want, i
