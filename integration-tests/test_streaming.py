"""Structured Streaming with Lance: the exactly-once sink (append and complete
modes, paths and catalog tables, replays and killed drivers) and the streaming
source; pylance checks every table the sink writes and appends rows the source
must deliver."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import stream_drivers

QUERY_ID_KEY = "lance-spark.streaming.queryId"
BATCH_ID_KEY = "lance-spark.streaming.batchId"
SCHEMA = stream_drivers.SCHEMA


_write_json = stream_drivers.write_json


def _ids(path: Path) -> list[int]:
    return lance.dataset(str(path)).to_table(columns=["id"]).column("id").to_pylist()


def _stream_props(path: Path) -> list[dict[str, str]]:
    """The transaction properties of every version of the dataset (pylance)."""
    ds = lance.dataset(str(path))
    out = []
    for v in ds.versions():
        t = ds.read_transaction(v["version"])
        out.append(dict(t.transaction_properties or {}) if t is not None else {})
    return out


def _run_available_now(spark, src: Path, out: Path, ckpt: Path, mode: str = "append", **opts) -> None:
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
    w = stream.writeStream.format("lance").outputMode(mode).option("checkpointLocation", str(ckpt))
    for k, v in opts.items():
        w = w.option(k, v)
    q = w.trigger(availableNow=True).start(str(out))
    q.awaitTermination()
    assert q.exception() is None


def test_sink_append_one_commit_per_batch(spark, tmp_path):
    src, out, ckpt = tmp_path / "in", tmp_path / "out.lance", tmp_path / "ckpt"
    _write_json(src, "a", range(0, 100))
    _write_json(src, "b", range(100, 150))
    _run_available_now(spark, src, out, ckpt)           # creates the dataset
    assert sorted(_ids(out)) == list(range(150))
    _write_json(src, "c", range(150, 400))
    _run_available_now(spark, src, out, ckpt)           # resumes from the checkpoint
    assert sorted(_ids(out)) == list(range(400))
    props = _stream_props(out)
    assert len(props) == 3                              # three files, three batches, three commits
    assert [p[BATCH_ID_KEY] for p in props] == ["0", "1", "2"]
    assert len({p[QUERY_ID_KEY] for p in props}) == 1   # the query id survives the restart
    table = lance.dataset(str(out)).to_table().sort_by("id")
    assert table.column("grp").to_pylist()[:4] == ["g0", "g1", "g2", "g0"]
    assert table.column("v").to_pylist()[7] == 3.5


def test_sink_reorders_columns_to_the_dataset(spark, tmp_path):
    out = tmp_path / "t.lance"
    lance.write_dataset(pa.table({"v": pa.array([0.0]), "id": pa.array([-1], pa.int64()),
                                  "grp": pa.array(["x"])}), str(out))
    src = tmp_path / "in"
    _write_json(src, "a", range(0, 10))
    _run_available_now(spark, src, out, tmp_path / "ckpt")
    t = lance.dataset(str(out)).to_table().sort_by("id")
    assert t.column_names == ["v", "id", "grp"]
    assert t.column("id").to_pylist() == list(range(-1, 10))
    assert t.column("v").to_pylist()[1:] == [i * 0.5 for i in range(10)]


def test_sink_replayed_batch_is_skipped(spark, tmp_path):
    """A driver that dies after the commit and before the checkpoint's commit
    log entry replays the batch with the same id: it must not be added twice."""
    src, out, ckpt = tmp_path / "in", tmp_path / "out.lance", tmp_path / "ckpt"
    _write_json(src, "a", range(0, 30))
    _write_json(src, "b", range(30, 70))
    _run_available_now(spark, src, out, ckpt)
    versions = len(lance.dataset(str(out)).versions())
    # as if the driver died before recording batch 1 as done
    (ckpt / "commits" / "1").unlink()
    for crc in (ckpt / "commits").glob(".1.crc"):
        crc.unlink()
    _run_available_now(spark, src, out, ckpt)
    assert sorted(_ids(out)) == list(range(70))
    assert len(lance.dataset(str(out)).versions()) == versions
    leftovers = set(os.listdir(out / "data"))
    named = {f.path for frag in lance.dataset(str(out)).get_fragments() for f in frag.data_files()}
    assert leftovers == named, "the replayed batch's data files are removed"


def test_sink_complete_mode_overwrites_per_batch(spark, tmp_path):
    src, out, ckpt = tmp_path / "in", tmp_path / "agg.lance", tmp_path / "ckpt"
    _write_json(src, "a", range(0, 9))
    stream = spark.readStream.schema(SCHEMA).json(str(src))
    agg = stream.groupBy("grp").count()

    def run():
        q = (agg.writeStream.format("lance").outputMode("complete").option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start(str(out)))
        q.awaitTermination()

    run()
    assert sorted(lance.dataset(str(out)).to_table().to_pylist(), key=lambda r: r["grp"]) == [
        {"grp": "g0", "count": 3}, {"grp": "g1", "count": 3}, {"grp": "g2", "count": 3}]
    _write_json(src, "b", range(9, 13))
    run()
    assert sorted(lance.dataset(str(out)).to_table().to_pylist(), key=lambda r: r["grp"]) == [
        {"grp": "g0", "count": 5}, {"grp": "g1", "count": 4}, {"grp": "g2", "count": 4}]
    ds = lance.dataset(str(out))
    assert ds.read_transaction(ds.version).transaction_properties[BATCH_ID_KEY] == "1"


def test_sink_update_mode_is_refused(spark, tmp_path):
    src = tmp_path / "in"
    _write_json(src, "a", range(0, 3))
    agg = spark.readStream.schema(SCHEMA).json(str(src)).groupBy("grp").count()
    with pytest.raises(Exception, match="(?i)update"):
        q = (agg.writeStream.format("lance").outputMode("update")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
             .start(str(tmp_path / "out.lance")))
        q.awaitTermination()
    assert not (tmp_path / "out.lance" / "_versions").exists()


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory):
    """One warehouse for the module: a session's catalog keeps the first one it was opened with."""
    wh = tmp_path_factory.mktemp("warehouse")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    return wh


def test_sink_to_catalog_table(spark, warehouse, tmp_path):
    wh = warehouse
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lance.sdb")
    spark.sql("CREATE TABLE lance.sdb.events (id BIGINT, grp STRING, v DOUBLE) USING lance")
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    _write_json(src, "a", range(0, 40))
    _write_json(src, "b", range(40, 50))
    q = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
         .writeStream.option("checkpointLocation", str(ckpt)).trigger(availableNow=True)
         .toTable("lance.sdb.events"))
    q.awaitTermination()
    path = wh / "sdb" / "events.lance"
    assert sorted(_ids(path)) == list(range(50))
    assert spark.sql("SELECT count(*) FROM lance.sdb.events").collect()[0][0] == 50
    assert [p.get(BATCH_ID_KEY) for p in _stream_props(path)] == [None, "0", "1"]
    # the catalog table as a source too (startingVersion 3: what batch 1's commit appended)
    out = tmp_path / "copy_parquet"
    q = (spark.readStream.option("startingVersion", 3).table("lance.sdb.events").writeStream.format("parquet")
         .option("checkpointLocation", str(tmp_path / "ckpt2")).trigger(availableNow=True).start(str(out)))
    q.awaitTermination()
    assert sorted(r.id for r in spark.read.parquet(str(out)).collect()) == list(range(40, 50))
    spark.sql("DROP TABLE lance.sdb.events")


def _committed_versions(out: Path) -> int:
    """Manifests committed so far, counted from the directory listing: `_versions` exists
    before its first manifest is renamed into place, so opening the dataset could race."""
    d = out / "_versions"
    return len([m for m in os.listdir(d) if m.endswith(".manifest")]) if d.exists() else 0


def test_sink_exactly_once_across_killed_drivers(tmp_path):
    """The driver (Python and its JVM) is killed with SIGKILL at seeded random
    points while batches commit; restarted from the checkpoint each time, and
    finally run to the end: every input row is in the table exactly once."""
    src, out, ckpt = tmp_path / "in", tmp_path / "out.lance", tmp_path / "ckpt"
    long = os.environ.get("LANCE_LONG_TESTS") == "1"
    # make test-long kills more often, in a longer stream (make test: one kill, 16 one-file batches)
    n_files, per_file = (40, 25) if long else (16, 25)
    for k in range(n_files):
        _write_json(src, f"f{k:03d}", range(k * per_file, (k + 1) * per_file))
    rounds = 8 if long else 1
    stream_drivers.kill_and_restart(tmp_path, str(src), str(out), str(ckpt),
                                    lambda: _committed_versions(out),
                                    rounds, seed=41)
    ids = _ids(out)
    assert len(ids) == len(set(ids)), "a row was committed twice"
    assert sorted(ids) == list(range(n_files * per_file))
    props = _stream_props(out)
    batches = [int(p[BATCH_ID_KEY]) for p in props if BATCH_ID_KEY in p]
    assert batches == sorted(set(batches)), f"a batch id was committed twice: {batches}"


# --- the source: spark.readStream.format("lance") ---------------------------

def _pylance_append(path: Path, ids: range, **kw) -> None:
    t = pa.table({"id": pa.array(list(ids), pa.int64()), "grp": pa.array([f"g{i % 3}" for i in ids]),
                  "v": pa.array([i * 0.5 for i in ids])})
    mode = "append" if (path / "_versions").exists() else "create"
    lance.write_dataset(t, str(path), mode=mode, **kw)


def _spark_append(spark, path: Path, ids: range) -> None:
    (spark.range(ids.start, ids.stop).selectExpr("id", "concat('g', cast(id % 3 AS STRING)) AS grp", "CAST(id * 0.5 AS DOUBLE) AS v")
     .write.format("lance").mode("append").save(str(path)))


def _stream_to_lance(spark, src: Path, out: Path, ckpt: Path, **opts) -> int:
    """Runs the stream src -> out with Trigger.AvailableNow; returns the number of micro-batches."""
    r = spark.readStream.format("lance")
    for k, v in opts.items():
        r = r.option(k, v)
    q = (r.load(str(src)).writeStream.format("lance").option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start(str(out)))
    q.awaitTermination()
    return len([p for p in q.recentProgress if p["numInputRows"] > 0])


def test_source_delivers_spark_and_pylance_appends_once(spark, tmp_path):
    src, out, ckpt = tmp_path / "src.lance", tmp_path / "out_parquet", tmp_path / "ckpt"
    _pylance_append(src, range(0, 100), max_rows_per_file=40)        # the snapshot: 3 fragments
    q = (spark.readStream.format("lance").load(str(src)).writeStream.format("parquet")
         .option("checkpointLocation", str(ckpt)).trigger(processingTime="200 milliseconds").start(str(out)))
    try:
        expected = 100
        for k in range(6):
            lo = 100 + k * 50
            if k % 2 == 0:
                _spark_append(spark, src, range(lo, lo + 50))
            else:
                _pylance_append(src, range(lo, lo + 50))
            expected += 50
        deadline = time.time() + 120
        while time.time() < deadline:
            if (out / "_spark_metadata").exists() and spark.read.parquet(str(out)).count() >= expected:
                break
            time.sleep(0.3)
        time.sleep(1.0)  # a duplicate would show up in a later batch
    finally:
        q.stop()
    ids = [r.id for r in spark.read.parquet(str(out)).select("id").collect()]
    assert len(ids) == len(set(ids)), "a row was delivered twice"
    assert sorted(ids) == list(range(400))
    # restarted from the checkpoint: only what was appended since
    _pylance_append(src, range(400, 420))
    _spark_append(spark, src, range(420, 430))
    q = (spark.readStream.format("lance").load(str(src)).writeStream.format("parquet")
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start(str(out)))
    q.awaitTermination()
    ids = [r.id for r in spark.read.parquet(str(out)).select("id").collect()]
    assert sorted(ids) == list(range(430))
    got = spark.read.parquet(str(out)).where("id = 7").collect()[0]
    assert (got.grp, got.v) == ("g1", 3.5)


def test_source_starting_version_and_trigger_limits(spark, tmp_path):
    src = tmp_path / "src.lance"
    _pylance_append(src, range(0, 10))                                  # v1
    _pylance_append(src, range(10, 30), max_rows_per_file=4)           # v2: 5 fragments of 4
    _pylance_append(src, range(30, 33))                                # v3
    out = tmp_path / "a.lance"
    batches = _stream_to_lance(spark, src, out, tmp_path / "ck_a", startingVersion=2, maxRowsPerTrigger=8)
    assert sorted(_ids(out)) == list(range(10, 33))
    assert batches == 3                  # v2's 5 fragments of 4 rows, then v3's 3 rows: 8 + 8 + (4 + 3)
    assert len(lance.dataset(str(out)).versions()) == 3
    out = tmp_path / "b.lance"
    batches = _stream_to_lance(spark, src, out, tmp_path / "ck_b", maxFilesPerTrigger=2)
    assert sorted(_ids(out)) == list(range(33))
    assert batches == 4                  # snapshot of v3: 7 fragments, 2 a batch
    out = tmp_path / "c.lance"
    _stream_to_lance(spark, src, out, tmp_path / "ck_c", startingVersion="latest")
    assert lance.dataset(str(out)).count_rows() == 0     # nothing new after the start (the first batch is empty)
    _pylance_append(src, range(33, 40))
    _stream_to_lance(spark, src, out, tmp_path / "ck_c", startingVersion="latest")
    assert sorted(_ids(out)) == list(range(33, 40))
    ts = lance.dataset(str(src), version=3).versions()[2]["timestamp"]
    out = tmp_path / "d.lance"
    _stream_to_lance(spark, src, out, tmp_path / "ck_d", startingTimestamp=ts.strftime("%Y-%m-%dT%H:%M:%S.%f"))
    assert sorted(_ids(out)) == list(range(30, 40))


def test_source_change_commits_fail_or_are_skipped(spark, tmp_path):
    src = tmp_path / "src.lance"
    _pylance_append(src, range(0, 10))                       # v1
    _pylance_append(src, range(10, 20))                      # v2
    lance.dataset(str(src)).delete("id < 5")                 # v3: a change commit
    _pylance_append(src, range(20, 25))                      # v4
    lance.dataset(str(src)).optimize.compact_files()         # v5: a compaction, no row changed
    _pylance_append(src, range(25, 30))                      # v6
    with pytest.raises(Exception, match=r"(?s)version 3.*skipChangeCommits"):
        _stream_to_lance(spark, src, tmp_path / "x.lance", tmp_path / "ck_x", startingVersion=1)
    out = tmp_path / "y.lance"
    _stream_to_lance(spark, src, out, tmp_path / "ck_y", startingVersion=1, skipChangeCommits="true")
    assert sorted(_ids(out)) == list(range(30))              # the appends as appended; the delete skipped
    with pytest.raises(Exception, match="startingVersion"):
        _stream_to_lance(spark, src, tmp_path / "z.lance", tmp_path / "ck_z", startingVersion="soon")


def test_foreach_batch_merge_upserts(spark, warehouse, tmp_path):
    """Upserts as docs/streaming.md describes them: foreachBatch + MERGE INTO."""
    wh = warehouse
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lance.up")
    spark.sql("CREATE TABLE lance.up.latest (id BIGINT, grp STRING, v DOUBLE) USING lance")
    src = tmp_path / "in"
    _write_json(src, "a", range(0, 10))
    with (src / "b.json").open("w") as f:        # updates of ids 0..4 (v = 100 + id) and a new id 10
        for i in list(range(5)) + [10]:
            f.write(json.dumps({"id": i, "grp": "upd", "v": 100.0 + i}) + "\n")

    def upsert(batch, batch_id):
        batch.createOrReplaceTempView("updates")
        batch.sparkSession.sql("""
            MERGE INTO lance.up.latest t USING updates u ON t.id = u.id
            WHEN MATCHED THEN UPDATE SET grp = u.grp, v = u.v
            WHEN NOT MATCHED THEN INSERT *""")

    q = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src)).writeStream
         .foreachBatch(upsert).option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination()
    rows = sorted(lance.dataset(str(wh / "up" / "latest.lance")).to_table().to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(11))
    assert [r["v"] for r in rows] == [100.0 + i for i in range(5)] + [i * 0.5 for i in range(5, 10)] + [110.0]
    spark.sql("DROP TABLE lance.up.latest")
