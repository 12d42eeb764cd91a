"""Commits through the external manifest store (DynamoDB, served by moto on
localhost) on an S3 bucket whose conditional writes are switched off: the
table format's protocol for object stores without an atomic create-if-absent.

Spark and pylance (through its `s3+ddb://` URIs) share the store's records,
so they commit safely against each other; concurrent writers in separate
processes lose nothing; a writer killed at any point of the protocol leaves a
state the next reader or writer completes (once its record is in the store)
or ignores (before)."""
from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest

import concurrent_writers
import s3_server
from compare import assert_same_table
from conftest import new_session, long_only

TABLE = "lance_commits"


@pytest.fixture(scope="module")
def s3():
    server = s3_server.start()
    server.create_commit_table(TABLE)
    yield server
    server.stop()


def _conf(s3) -> dict[str, str]:
    return {**s3_server.s3a_jars_conf(dynamodb=True), **s3.spark_conf(conditional=False),
            "spark.hadoop.lance.commit.external-store": "dynamodb",
            "spark.hadoop.lance.commit.dynamodb.table": TABLE,
            "spark.hadoop.lance.commit.dynamodb.endpoint": s3.endpoint}


@pytest.fixture(scope="module")
def spark(s3):
    session = new_session(_conf(s3), app="lance-spark-external-store")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def ddb_env(s3):
    """pylance finds the DynamoDB endpoint in DYNAMODB_ENDPOINT."""
    old = os.environ.get("DYNAMODB_ENDPOINT")
    os.environ["DYNAMODB_ENDPOINT"] = s3.endpoint
    yield
    if old is None:
        os.environ.pop("DYNAMODB_ENDPOINT", None)
    else:
        os.environ["DYNAMODB_ENDPOINT"] = old


def _ddb_uri(s3, key: str) -> str:
    return f"s3+ddb://{s3.bucket}/{key}?ddbTableName={TABLE}"


def _pylance(s3, key: str, version: int | None = None) -> lance.LanceDataset:
    return lance.dataset(_ddb_uri(s3, key), version=version, storage_options=s3.storage_options())


def _records(s3, key: str) -> dict[int, dict]:
    items = s3.dynamodb().query(TableName=TABLE, KeyConditionExpression="base_uri = :b",
                                ExpressionAttributeValues={":b": {"S": key}}, ConsistentRead=True)["Items"]
    return {int(i["version"]["N"]): i for i in items}


def _staged(s3, key: str) -> list[str]:
    return [k for k in s3.keys(f"{key}/_versions/") if ".manifest-" in k]


def test_spark_and_pylance_commit_through_one_store(spark, s3, ddb_env):
    from pyspark.sql import functions as F

    key = "shared.lance"
    url = s3.url(key)
    spark.range(0, 1000, numPartitions=2).withColumn("tag", F.lit("spark")).write.format("lance").save(url)
    spark.range(1000, 1100).withColumn("tag", F.lit("spark")).write.format("lance").mode("append").save(url)
    # the records are the reference's: keyed by the dataset's path in the bucket, naming final manifests
    records = _records(s3, key)
    assert sorted(records) == [1, 2]
    manifests = sorted(k for k in s3.keys(f"{key}/_versions/") if k.endswith(".manifest"))
    assert sorted(r["path"]["S"] for r in records.values()) == manifests
    assert all(int(r["size"]["N"]) > 0 for r in records.values())
    assert _staged(s3, key) == []
    # pylance, committing through the same table, sees Spark's versions and appends after them
    ds = _pylance(s3, key)
    assert ds.version == 2 and ds.count_rows() == 1100
    lance.write_dataset(pa.table({"id": pa.array(range(2000, 2050), pa.int64()), "tag": ["pylance"] * 50}),
                        _ddb_uri(s3, key), mode="append", storage_options=s3.storage_options())
    # Spark sees pylance's version 3 and commits version 4, then a delete as version 5
    spark.range(3000, 3010).withColumn("tag", F.lit("spark")).write.format("lance").mode("append").save(url)
    spark.sql(f"DELETE FROM lance.`{url}` WHERE id % 100 = 7")
    assert sorted(_records(s3, key)) == [1, 2, 3, 4, 5]
    want = {i for i in [*range(1100), *range(2000, 2050), *range(3000, 3010)] if i % 100 != 7}
    got = spark.read.format("lance").load(url)
    assert {r["id"] for r in got.collect()} == want
    ds = _pylance(s3, key)
    assert ds.version == 5
    assert_same_table(got, ds.to_table(), "Spark via DynamoDB -> pylance via DynamoDB")
    ops = [type(ds.read_transaction(v).operation).__name__ for v in range(1, 6)]
    assert ops == ["Overwrite", "Append", "Append", "Append", "Delete"], ops


def test_concurrent_threads_through_the_store(spark, s3, ddb_env):
    """3 threads x 3 appends and a thread running 3 deletes, at once, in one driver with no
    conditional writes: the store alone decides who commits each version (make test's slice
    of the process test below)."""
    import threading

    key = "threads.lance"
    url = s3.url(key)
    spark.range(0, 1000, numPartitions=2).write.format("lance").save(url)
    errors: list = []

    def run(role: str, k: int) -> None:
        try:
            for r in range(3):
                if role == "append":
                    start = 10_000 + k * 1000 + r * 100
                    spark.range(start, start + 10, numPartitions=1).write.format("lance").mode("append").save(url)
                else:
                    spark.sql(f"DELETE FROM lance.`{url}` WHERE id >= {r * 100} AND id < {r * 100 + 50}")
        except Exception as e:  # noqa: BLE001
            errors.append(f"{role} {k}: {str(e)[:2000]}")

    threads = [threading.Thread(target=run, args=a) for a in [("append", 0), ("append", 1), ("append", 2), ("delete", 0)]]
    [t.start() for t in threads]
    [t.join(600) for t in threads]
    assert not errors, errors
    assert sorted(_records(s3, key)) == list(range(1, 14))
    assert _staged(s3, key) == []
    ds = _pylance(s3, key)
    want = [i for i in range(1000) if not (i < 300 and i % 100 < 50)] + \
        [10_000 + k * 1000 + r * 100 + j for k in range(3) for r in range(3) for j in range(10)]
    assert sorted(ds.to_table(columns=["id"])["id"].to_pylist()) == sorted(want)
    ops = [type(ds.read_transaction(v).operation).__name__ for v in range(2, ds.version + 1)]
    assert sorted(ops) == ["Append"] * 9 + ["Delete"] * 3


@long_only   # make test runs the thread-based variant above
def test_concurrent_processes_through_the_store(spark, s3, ddb_env, tmp_path):
    """3 processes x 5 appends and a process running 5 deletes, at once, with no
    conditional writes: the store alone decides who commits each version."""
    key = "procs.lance"
    url = s3.url(key)
    spark.range(0, 1000, numPartitions=2).write.format("lance").save(url)
    concurrent_writers.appends_and_deletes(tmp_path, _conf(s3), url, lambda v: _pylance(s3, key, v))
    assert sorted(_records(s3, key)) == list(range(1, 22))
    assert _staged(s3, key) == []       # losers removed their staged manifests


KILL_POINTS = [
    ("before-manifest", False),    # data and transaction written, nothing staged
    ("staged-manifest", False),    # the staged manifest written, no record: not committed
    ("external-record", True),     # the record names the staged manifest: committed, not finished
    ("final-manifest", True),      # the final manifest written, the record still names the staged one
]
if os.environ.get("LANCE_LONG_TESTS") != "1":   # make test: the point just after the commit point
    KILL_POINTS = [p for p in KILL_POINTS if p[0] == "external-record"]


@pytest.mark.parametrize("point,committed", KILL_POINTS)
def test_writer_killed_during_commit(spark, s3, ddb_env, tmp_path, point, committed):
    key = f"killed-{point}.lance"
    url = s3.url(key)
    spark.range(0, 1000, numPartitions=2).write.format("lance").save(url)
    concurrent_writers.append_killed_at(tmp_path, _conf(s3), url, point)
    after_kill = _records(s3, key)
    assert sorted(after_kill) == ([1, 2] if committed else [1])
    if committed:
        assert ".manifest-" in after_kill[2]["path"]["S"]      # the kill left the record on the staged manifest
    # the next reader finishes a committed version and ignores the rest
    appended = concurrent_writers.appended_ids(0, 1)
    want = list(range(1000)) + (appended if committed else [])
    assert sorted(r["id"] for r in spark.read.format("lance").load(url).collect()) == want
    records = _records(s3, key)
    assert all(r["path"]["S"].endswith(".manifest") for r in records.values())
    assert len(_staged(s3, key)) == (1 if point == "staged-manifest" else 0)   # finished ones are removed
    assert sorted(_pylance(s3, key).to_table(columns=["id"])["id"].to_pylist()) == want
    # and the next writer commits after it
    spark.range(9000, 9010).write.format("lance").mode("append").save(url)
    final = _pylance(s3, key)
    assert final.version == (3 if committed else 2)
    assert sorted(final.to_table(columns=["id"])["id"].to_pylist()) == sorted(want + list(range(9000, 9010)))
    # what the killed writer left (data, its transaction, a staged manifest never recorded) is vacuum's
    spark.sql(f"CALL lance.system.vacuum(table => '`{url}`')").collect()
    assert _staged(s3, key) == []
    assert sorted(_pylance(s3, key).to_table(columns=["id"])["id"].to_pylist()) == \
        sorted(want + list(range(9000, 9010)))


def test_misconfigured_store_fails_clearly(spark, s3):
    """A store setting Spark cannot use is an error naming the setting, before
    anything is written (the session's SQL conf reaches the Hadoop conf)."""
    spark.conf.set("lance.commit.dynamodb.table", "no_such_table")
    try:
        with pytest.raises(Exception, match="lance.commit.dynamodb.table") as e:
            spark.range(10).write.format("lance").save(s3.url("bad.lance"))
        assert "no_such_table" in str(e.value) and "does not exist" in str(e.value)
        spark.conf.set("lance.commit.external-store", "etcd")
        with pytest.raises(Exception, match="unknown external manifest store 'etcd'"):
            spark.range(10).write.format("lance").save(s3.url("bad.lance"))
    finally:
        spark.conf.unset("lance.commit.dynamodb.table")
        spark.conf.unset("lance.commit.external-store")
    assert s3.keys("bad.lance/") == []
