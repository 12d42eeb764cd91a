"""Datasets on an S3-compatible object store (moto's S3 on localhost, started
by the fixture) through S3A: reads, writes and SQL DML, pylance reading what
Spark wrote, and commits that stay safe under concurrent writers.

Regression: S3A's create(overwrite=false) checks for the manifest, then writes
it, so two writers could both "create" version N and one commit was silently
lost. Commits now use S3's conditional create (If-None-Match: *), and a store
without an atomic create-if-absent is refused."""
from __future__ import annotations

import os
import threading

import lance
import pyarrow as pa
import pytest

import concurrent_writers
import s3_server
from compare import assert_same, assert_same_table, oracle_rows
from conftest import LONG, long_only, new_session
from scan_metrics import scan_metrics

UNSAFE_BUCKET = "unsafe"


@pytest.fixture(scope="module")
def s3():
    server = s3_server.start(count_paths=True)   # the server counts requests by path, too
    server.client().create_bucket(Bucket=UNSAFE_BUCKET)
    yield server
    server.stop()


def _conf(s3) -> dict[str, str]:
    return {**s3_server.s3a_jars_conf(), **s3.spark_conf(),
            # a bucket whose store (as configured) has no atomic create-if-absent
            f"spark.hadoop.fs.s3a.bucket.{UNSAFE_BUCKET}.create.conditional.enabled": "false"}


@pytest.fixture(scope="module")
def spark(s3):
    session = new_session(_conf(s3), app="lance-spark-s3")
    yield session
    session.stop()


def _pylance(s3, key: str, version: int | None = None) -> lance.LanceDataset:
    return lance.dataset(f"s3://{s3.bucket}/{key}", version=version, storage_options=s3.storage_options())


def test_write_read_and_dml_on_s3a(spark, s3):
    from pyspark.sql import functions as F

    url = s3.url("rw.lance")
    df = (spark.range(0, 3000, numPartitions=3)
          .withColumn("name", F.concat(F.lit("n"), F.col("id").cast("string")))
          .withColumn("score", (F.col("id") % 17).cast("double")))
    df.write.format("lance").option("maxRowsPerFile", 800).save(url)
    spark.range(3000, 3500).withColumn("name", F.lit("late")).withColumn("score", F.lit(1.0)) \
        .write.format("lance").mode("append").save(url)
    spark.sql(f"DELETE FROM lance.`{url}` WHERE id % 10 = 0")
    spark.sql(f"UPDATE lance.`{url}` SET score = -1 WHERE id < 100")
    spark.createDataFrame([(5, "merged", 9.0), (9000, "new", 2.0)], "id long, name string, score double") \
        .createOrReplaceTempView("src")
    spark.sql(f"""MERGE INTO lance.`{url}` t USING src s ON t.id = s.id
                  WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *""")

    # first principles: what the statements leave
    want = {i: (f"n{i}" if i < 3000 else "late", -1.0 if i < 100 else (float(i % 17) if i < 3000 else 1.0))
            for i in range(3500) if i % 10 != 0}
    want[5] = ("merged", 9.0)
    want[9000] = ("new", 2.0)
    got = spark.read.format("lance").load(url)
    assert {r["id"]: (r["name"], r["score"]) for r in got.collect()} == want
    # pylance reads the same bucket and agrees, at the latest and at every version
    ds = _pylance(s3, "rw.lance")
    assert ds.version == 5
    assert_same_table(got, ds.to_table(), "Spark on S3 -> pylance on S3")
    ops = [type(ds.read_transaction(v).operation).__name__ for v in range(1, 6)]
    assert ops == ["Overwrite", "Append", "Delete", "Update", "Update"], ops
    # a filtered scan prunes by statistics on S3 as on a local disk
    assert spark.read.format("lance").load(url).where("id >= 3200").count() == 300 - 30 + 1   # and the merged 9000


def test_spark_reads_what_pylance_wrote_on_s3(spark, s3):
    from datagen import rich_table

    table = rich_table(2000, seed=7)
    lance.write_dataset(table, f"s3://{s3.bucket}/py.lance", storage_options=s3.storage_options(),
                        data_storage_version="2.0", max_rows_per_file=700)
    got = spark.read.format("lance").load(s3.url("py.lance"))
    assert_same_table(got, _pylance(s3, "py.lance").to_table(), "pylance on S3 -> Spark")


def _ids(s3, key: str, version: int | None = None) -> list[int]:
    return _pylance(s3, key, version).to_table(columns=["id"])["id"].to_pylist()


APPENDS = 5 if LONG else 2


def test_concurrent_appends_from_threads_all_land(spark, s3):
    """The issue's reproduction: 8 threads of one driver append twice each (5 times in make test-long)."""
    url = s3.url("threads.lance")
    spark.range(0).write.format("lance").save(url)
    errors: list = []

    def append(k: int) -> None:
        try:
            for r in range(APPENDS):
                start = k * 1000 + r * 100
                spark.range(start, start + 10, numPartitions=1).write.format("lance").mode("append").save(url)
        except Exception as e:  # noqa: BLE001
            errors.append(str(e).splitlines()[1][:2000])

    threads = [threading.Thread(target=append, args=(k,)) for k in range(8)]
    [t.start() for t in threads]
    [t.join(600) for t in threads]
    assert not errors, errors
    ds = _pylance(s3, "threads.lance")
    assert ds.version == 1 + 8 * APPENDS
    ids = _ids(s3, "threads.lance")
    want = [k * 1000 + r * 100 + j for k in range(8) for r in range(APPENDS) for j in range(10)]
    assert sorted(ids) == sorted(want)                       # every row exactly once
    for v in range(1, ds.version + 1):                        # every version readable
        _pylance(s3, "threads.lance", v).to_table()


@long_only   # make test keeps the thread-based variant
def test_concurrent_appends_and_deletes_from_processes(spark, s3, tmp_path):
    """3 processes x 5 appends and a process running 5 deletes, at once."""
    url = s3.url("procs.lance")
    spark.range(0, 1000, numPartitions=2).write.format("lance").save(url)
    concurrent_writers.appends_and_deletes(tmp_path, _conf(s3), url, lambda v: _pylance(s3, "procs.lance", v))


def test_writer_killed_before_its_manifest_leaves_nothing_half_done(spark, s3, tmp_path):
    """Interrupted commit (conditional create): a driver killed after writing its
    data and transaction files, before its manifest, commits nothing; readers
    and the next writer ignore its files."""
    url = s3.url("killed.lance")
    spark.range(0, 1000, numPartitions=2).write.format("lance").save(url)
    concurrent_writers.append_killed_at(tmp_path, _conf(s3), url, "before-manifest")
    assert len(s3.keys("killed.lance/_transactions/")) == 2          # its transaction file was written
    assert _pylance(s3, "killed.lance").version == 1                  # ... and nothing committed
    assert spark.read.format("lance").load(url).count() == 1000
    spark.range(5000, 5010).write.format("lance").mode("append").save(url)
    assert sorted(_ids(s3, "killed.lance")) == list(range(1000)) + list(range(5000, 5010))
    assert _pylance(s3, "killed.lance").version == 2


def test_store_without_atomic_create_is_refused(spark, s3):
    """Conditional writes off and nothing else configured: writing is refused
    before any file is written, naming the setting; reading still works."""
    url = f"s3a://{UNSAFE_BUCKET}/t.lance"
    with pytest.raises(Exception, match="fs.s3a.create.conditional.enabled") as e:
        spark.range(10).write.format("lance").save(url)
    assert "no atomic create-if-absent" in str(e.value) and UNSAFE_BUCKET in str(e.value)
    assert s3.client().list_objects_v2(Bucket=UNSAFE_BUCKET).get("KeyCount", 0) == 0
    # a dataset written there by another tool stays readable, and appends are refused
    lance.write_dataset(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), f"s3://{UNSAFE_BUCKET}/py.lance",
                        storage_options=s3.storage_options(), data_storage_version="2.0")
    assert sorted(r["id"] for r in spark.read.format("lance").load(f"s3a://{UNSAFE_BUCKET}/py.lance").collect()) \
        == [1, 2, 3]
    with pytest.raises(Exception, match="no atomic create-if-absent"):
        spark.range(5).write.format("lance").mode("append").save(f"s3a://{UNSAFE_BUCKET}/py.lance")
    with pytest.raises(Exception, match="no atomic create-if-absent"):
        spark.sql(f"DELETE FROM lance.`s3a://{UNSAFE_BUCKET}/py.lance` WHERE id = 1")
    assert lance.dataset(f"s3://{UNSAFE_BUCKET}/py.lance", storage_options=s3.storage_options()).version == 1


def test_object_stores_merge_reads_across_wider_gaps(spark, s3):
    """On S3 a request costs far more than the bytes of a gap: by default the
    reads of a batch are merged across gaps of up to 1 MiB (4 KiB on a local
    disk), so a scan of two of four columns makes fewer requests. The scan
    metrics report them (the Spark UI shows the same)."""
    from pyspark.sql import functions as F

    from scan_metrics import scan_metrics

    url = s3.url("gaps.lance")
    (spark.range(0, 100_000, numPartitions=1)
     .selectExpr("id", "id * 3 AS v", "CAST(id AS DOUBLE) / 7 AS d", "concat('row-', id) AS s")
     .write.format("lance").option("maxRowsPerPage", 1000).option("fileVersion", "2.0").save(url))
    def read(gap: str | None) -> dict:
        spark.conf.set("spark.sql.adaptive.enabled", "false")   # the scan node's metrics in the executed plan
        if gap is not None:
            spark.conf.set("lance.read.coalesce-gap", gap)
        try:
            return scan_metrics(spark.read.format("lance").load(url).agg(F.sum("id"), F.max("s")))
        finally:
            spark.conf.unset("lance.read.coalesce-gap")
            spark.conf.unset("spark.sql.adaptive.enabled")

    wide, narrow = read(None), read("4k")
    assert wide["rows"] == narrow["rows"]
    assert wide["rows"][0][0] == sum(range(100_000)) and wide["rows"][0][1] == "row-99999"
    assert wide["readRequests"] * 2 <= narrow["readRequests"], (wide, narrow)


def test_files_are_opened_without_a_metadata_request_and_truncation_is_named(spark, s3):
    """On S3 a data file is opened with the length its manifest records (no
    status request of our own per file); a file shorter than that is an error
    naming it."""
    url = s3.url("opened.lance")
    spark.range(0, 20_000, numPartitions=4).selectExpr("id", "id * 2 AS v").write.format("lance").save(url)
    def scan():
        assert spark.read.format("lance").load(url).where("v % 3 = 0").count() == len(range(0, 40_000, 6))

    data = s3.requests_under("opened.lance/data/", scan)
    whole = s3.requests_under("opened.lance/", scan)
    files = [k for k in s3.keys("opened.lance/data/") if k.endswith(".lance")]
    assert len(files) == 4
    # S3A makes one HEAD per opened data file (there were 3 per data file before: the status
    # asked before every open)
    assert data.get("HEAD", 0) <= len(files), data
    # the rest: finding the latest version (the hint and probes of the versions after it, for
    # each time Spark opens the table while planning) and reading its manifest, as many at any
    # length of history (test_long_history.py); measured 11
    assert whole.get("HEAD", 0) - data.get("HEAD", 0) <= 14, whole
    # a copy whose file is cut short before anything read it (S3A may cache what it read of an object)
    spark.read.format("lance").load(url).write.format("lance").save(s3.url("cut.lance"))
    victim = [k for k in s3.keys("cut.lance/data/") if k.endswith(".lance")][0]
    body = s3.client().get_object(Bucket=s3.bucket, Key=victim)["Body"].read()
    s3.client().put_object(Bucket=s3.bucket, Key=victim, Body=body[:64])
    with pytest.raises(Exception) as e:
        spark.read.format("lance").load(s3.url("cut.lance")).collect()
    assert victim.split("/")[-1] in str(e.value) and "as the manifest records it" in str(e.value), str(e.value)[:3000]



def test_a_files_metadata_is_read_once_for_the_queries_after(spark, s3):
    """A data file's footer and column metadata are read by the first query that opens it (while
    planning: the scan sizes its partitions by its columns' share of the file's bytes, from the
    column metadata); the queries after it read only the pages they need. (The scan's own read
    requests, and the server's GETs of the data files: S3A's input streams may serve repeated reads
    of one stream from their own cache without a request.)"""
    url = s3.url("meta.lance")
    spark.range(0, 400_000, numPartitions=2).selectExpr("id", "id * 2 AS v", "CAST(id AS STRING) AS s") \
        .write.format("lance").save(url)
    def lookup(k: int) -> dict:
        m = scan_metrics(spark.read.format("lance").load(url).where(f"id = {k}").select("s"))
        assert [tuple(r) for r in m["rows"]] == [(str(k),)]
        return m

    got: dict = {}
    first_gets = s3.requests_under("meta.lance/data/", lambda: got.__setitem__("first", lookup(123_456)))
    second_gets = s3.requests_under("meta.lance/data/", lambda: got.__setitem__("second", lookup(123_457)))
    first, second = got["first"], got["second"]
    # the same pages are read each time (the chunks of id and of s around the neighbouring rows), by
    # the scan; the file's metadata (the footer, the global buffer table, the file descriptor, the
    # column metadata table, each column's metadata) only by the first query
    assert 1 <= second["readRequests"] <= first["readRequests"], (first, second)
    assert second["lanceBytesRead"] <= first["lanceBytesRead"], (first, second)
    # (measured: the first query 2 GETs and 2 HEADs of the data file, the second none, its pages
    # served by the input stream the first query left open)
    assert first_gets.get("GET", 0) >= 1 and sum(second_gets.values()) < sum(first_gets.values()), \
        (first_gets, second_gets)

# A slice of the randomized differential tests (random schemas and data, seeded), both ways,
# with the dataset in the bucket: written by Spark through S3A and read by pylance from S3, and
# written by pylance to S3 and read by Spark through S3A.
S3_DIFF_SEEDS = list(range(int(os.environ.get("LANCE_S3_DIFF_CASES", "8"))))


@pytest.mark.parametrize("seed", S3_DIFF_SEEDS)
def test_random_tables_both_ways_on_s3(spark, s3, tmp_path, seed):
    import pyarrow.parquet as pq

    from random_tables import describe, random_table, write_with_pylance

    version = ["2.1", "2.2"][seed % 2]
    table = random_table(seed, spark_types=True, maps=version == "2.2", max_rows=1500, max_bytes=1 << 20)
    what = f"seed {seed} at {version}: {describe(table)}"
    staged = tmp_path / "in.parquet"
    pq.write_table(table, staged)
    key = f"diff/spark-{seed}.lance"
    vectors = ",".join(f"{f.name}:{f.type.list_size}" for f in table.schema if pa.types.is_fixed_size_list(f.type))
    writer = spark.read.parquet(str(staged)).write.format("lance").option("fileVersion", version) \
        .option("maxRowsPerFile", 500)
    if vectors:
        writer = writer.option("vectorColumns", vectors)
    writer.save(s3.url(key))
    ds = _pylance(s3, key)
    assert ds.data_storage_version == version, what
    assert_same(oracle_rows(ds.to_table()), oracle_rows(table), f"pylance on S3 reads Spark's {what}")

    key = f"diff/pylance-{seed}.lance"
    write_with_pylance(random_table(seed, maps=version == "2.2", max_rows=1500, max_bytes=1 << 20),
                       f"s3://{s3.bucket}/{key}", version, seed, storage_options=s3.storage_options())
    assert_same_table(spark.read.format("lance").load(s3.url(key)), _pylance(s3, key).to_table(),
                f"Spark on S3 reads pylance's {what}")
