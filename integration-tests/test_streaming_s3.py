"""Structured Streaming on S3A (issue 41), against the S3-compatible server on localhost:
the exactly-once sink with its checkpoint on S3A, the source reading what Spark and pylance
append to a table in the bucket, and (make test-long) drivers killed while they commit."""
from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest

import s3_server
import stream_drivers
from conftest import long_only, new_session

BATCH_ID_KEY = "lance-spark.streaming.batchId"


@pytest.fixture(scope="module")
def s3():
    server = s3_server.start()
    yield server
    server.stop()


def _conf(s3) -> dict[str, str]:
    return {**s3_server.s3a_jars_conf(), **s3.spark_conf()}


@pytest.fixture(scope="module")
def spark(s3):
    session = new_session(_conf(s3), app="lance-spark-streaming-s3")
    yield session
    session.stop()


def _ds(s3, key: str) -> lance.LanceDataset:
    return lance.dataset(f"s3://{s3.bucket}/{key}", storage_options=s3.storage_options())


def _ids(s3, key: str) -> list[int]:
    return _ds(s3, key).to_table(columns=["id"])["id"].to_pylist()


def _batch_ids(s3, key: str) -> list[int]:
    ds = _ds(s3, key)
    out = []
    for v in ds.versions():
        t = ds.read_transaction(v["version"])
        props = dict(t.transaction_properties or {}) if t is not None else {}
        if BATCH_ID_KEY in props:
            out.append(int(props[BATCH_ID_KEY]))
    return out


def _sink(spark, src, url: str, ckpt: str) -> None:
    q = (spark.readStream.schema(stream_drivers.SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.format("lance").option("checkpointLocation", ckpt).trigger(availableNow=True).start(url))
    q.awaitTermination()
    assert q.exception() is None


def _source(spark, url: str, out, ckpt) -> None:
    q = (spark.readStream.format("lance").load(url).writeStream.format("parquet")
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start(str(out)))
    q.awaitTermination()
    assert q.exception() is None


@long_only   # make test: the sink and source on local disk (test_streaming.py), S3 commits in test_object_store.py
def test_sink_and_source_on_s3a(spark, s3, tmp_path):
    src = tmp_path / "in"
    for k in range(4):
        stream_drivers.write_json(src, f"f{k}", range(k * 25, (k + 1) * 25))
    key, ckpt = "stream/events.lance", s3.url("stream/ckpt")
    url = s3.url(key)
    _sink(spark, src, url, ckpt)                 # checkpoint and table both in the bucket
    assert sorted(_ids(s3, key)) == list(range(100))
    assert _batch_ids(s3, key) == [0, 1, 2, 3]   # one commit per micro-batch, its batch id recorded
    _sink(spark, src, url, ckpt)                 # restarted with nothing new: nothing committed
    assert len(_ds(s3, key).versions()) == 4
    stream_drivers.write_json(src, "f4", range(100, 130))
    _sink(spark, src, url, ckpt)
    assert sorted(_ids(s3, key)) == list(range(130)) and _batch_ids(s3, key) == [0, 1, 2, 3, 4]

    # the table in the bucket as a source: its rows, then what pylance and Spark append, once each
    out, sckpt = tmp_path / "copy", tmp_path / "ckpt_src"
    _source(spark, url, out, sckpt)
    assert sorted(r.id for r in spark.read.parquet(str(out)).select("id").collect()) == list(range(130))
    lance.write_dataset(pa.table({"id": pa.array(range(130, 150), pa.int64()),
                                  "grp": [f"g{i % 3}" for i in range(130, 150)],
                                  "v": [i * 0.5 for i in range(130, 150)]}),
                        f"s3://{s3.bucket}/{key}", mode="append", storage_options=s3.storage_options())
    (spark.range(150, 160).selectExpr("id", "concat('g', cast(id % 3 AS STRING)) AS grp", "CAST(id * 0.5 AS DOUBLE) AS v")
     .write.format("lance").mode("append").save(url))
    _source(spark, url, out, sckpt)
    ids = [r.id for r in spark.read.parquet(str(out)).select("id").collect()]
    assert len(ids) == len(set(ids)) and sorted(ids) == list(range(160))


@long_only   # make test kills drivers writing to local disk (test_streaming.py)
def test_sink_exactly_once_across_killed_drivers_on_s3a(s3, tmp_path):
    src = tmp_path / "in"
    n_files, per_file = 24, 25
    for k in range(n_files):
        stream_drivers.write_json(src, f"f{k:03d}", range(k * per_file, (k + 1) * per_file))
    key = "killed/out.lance"

    def versions() -> int:
        try:
            return len(_ds(s3, key).versions())
        except Exception:  # noqa: BLE001 - no table yet
            return 0

    stream_drivers.kill_and_restart(tmp_path, str(src), s3.url(key), s3.url("killed/ckpt"), versions,
                                    rounds=int(os.environ.get("LANCE_STREAM_KILLS", "5")), seed=43, conf=_conf(s3))
    ids = _ids(s3, key)
    assert len(ids) == len(set(ids)), "a row was committed twice"
    assert sorted(ids) == list(range(n_files * per_file))
    batches = _batch_ids(s3, key)
    assert batches == sorted(set(batches)), f"a batch id was committed twice: {batches}"
