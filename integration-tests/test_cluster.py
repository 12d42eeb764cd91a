"""The connector on a real Spark standalone cluster (spark_cluster.py: a
master and two workers, separate JVMs on localhost): drivers started by
`spark-submit --jars <bundle>` and by `lance_spark.configure` on a spark://
master; a worker killed in the middle of a write and of a MERGE.

Drivers run cluster_jobs/lance_job.py in their own process. Executors get
the connector only through the driver (--jars / spark.jars), never from the
driver's files; they share only the table directory with it. Tables are
checked with pylance (the oracle) against values computed here from first
principles; the event log tells which tasks ran where and which were retried.

The JVMs run with C1 only and the serial GC (spark_cluster.QUICK_JVM): short
jobs on a small shared machine then take half the time.
"""
from __future__ import annotations

import glob
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import lance
import pyarrow as pa
import pytest

import spark_cluster
from conftest import long_only
from spark_cluster import SparkCluster, Worker, get_json

JOB = Path(__file__).resolve().parent / "cluster_jobs" / "lance_job.py"
CATALOG = "io.lancespark.spark.catalog.LanceCatalog"
#: The job description lance_job.py gives the statement a kill test interrupts.
TARGET = "lance-cluster-target"
JOB_TIMEOUT = 600.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = spark_cluster.start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def whole_cluster(cluster: SparkCluster) -> SparkCluster:
    """The module's cluster with every worker alive (a kill test's victim is restarted)."""
    cluster.ensure_workers()
    return cluster


def jar() -> str:
    """The bundle as a user gets it: lance_spark.jar_path() ($LANCE_SPARK_JAR or the wheel's)."""
    import lance_spark

    return lance_spark.jar_path()


# --- drivers -----------------------------------------------------------------

@dataclass
class Driver:
    """A driver process running lance_job.py; its web UI answers the REST API while it runs."""
    process: subprocess.Popen
    ui_port: int
    out: Path
    log: Path
    events: Path

    def app_id(self) -> str | None:
        try:
            apps = get_json(f"http://127.0.0.1:{self.ui_port}/api/v1/applications")
        except OSError:
            return None
        return apps[0]["id"] if apps else None

    def api(self, app: str, path: str) -> Any:
        return get_json(f"http://127.0.0.1:{self.ui_port}/api/v1/applications/{app}/{path}")

    def finish(self, timeout: float = JOB_TIMEOUT) -> dict:
        """Waits for the driver; its result, or a failure carrying the log's tail."""
        try:
            rc = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"driver still running after {timeout:.0f}s; log ends:\n{spark_cluster.log_tail(self.log)}")
        if rc != 0:
            pytest.fail(f"driver exited with {rc}; log ends:\n{spark_cluster.log_tail(self.log, 6000)}")
        return json.loads(self.out.read_text())

    def stop(self) -> None:
        """Kills the driver and its children (spark-submit's Python, pyspark's JVM), if still there."""
        spark_cluster.kill_group(self.process)


def driver_conf(tmp: Path, ui_port: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Settings of every test driver: loopback addresses, small executors, a known
    UI port (for the REST API) and an uncompressed event log (read by the tests)."""
    (tmp / "events").mkdir(exist_ok=True)
    return {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": spark_cluster.EXECUTOR_MEMORY,
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": spark_cluster.QUICK_JVM,
        "spark.executor.extraJavaOptions": spark_cluster.QUICK_JVM,
        "spark.local.dir": str(tmp),
        "spark.ui.port": str(ui_port),
        "spark.ui.showConsoleProgress": "false",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": (tmp / "events").as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
        "spark.sql.shuffle.partitions": "8",
        # a lost executor's shuffle blocks: fail over at once, not after 3 retries 5 s apart
        "spark.shuffle.io.maxRetries": "1",
        "spark.shuffle.io.retryWait": "1s",
        **(extra or {}),
    }


def _start(cmd: list[str], tmp: Path, ui_port: int, out: Path) -> Driver:
    log = tmp / "driver.log"
    return Driver(spark_cluster.spawn(cmd, log, cwd=tmp), ui_port, out, log, tmp / "events")


def spark_submit(cluster: SparkCluster, tmp: Path, scenario: str, table: Path | str, *args: str,
                 conf: dict[str, str] | None = None) -> Driver:
    """`spark-submit --master spark://... --jars <bundle> lance_job.py ...`: the job
    needs nothing of lance_spark; the catalog is configured on the command line."""
    tmp.mkdir(parents=True, exist_ok=True)
    ui_port = spark_cluster.free_port()
    settings = driver_conf(tmp, ui_port, {"spark.sql.catalog.lance": CATALOG, **(conf or {})})
    out = tmp / "result.json"
    cmd = [str(spark_cluster.spark_home() / "bin" / "spark-submit"), "--master", cluster.master_url,
           "--deploy-mode", "client", "--jars", jar()]
    for k, v in settings.items():
        cmd += ["--conf", f"{k}={v}"]
    return _start(cmd + [str(JOB), scenario, str(table), str(out), *args], tmp, ui_port, out)


def configured_driver(cluster: SparkCluster, tmp: Path, scenario: str, table: Path, *args: str) -> Driver:
    """Plain `python lance_job.py --configure spark://...`: the session comes from
    lance_spark.configure(SparkSession.builder.master(...)), as in a notebook."""
    tmp.mkdir(parents=True, exist_ok=True)
    ui_port = spark_cluster.free_port()
    out = tmp / "result.json"
    cmd = [sys.executable, str(JOB), scenario, str(table), str(out), "--configure", cluster.master_url]
    for k, v in driver_conf(tmp, ui_port).items():
        cmd += ["--conf", f"{k}={v}"]
    return _start(cmd + list(args), tmp, ui_port, out)


def fetched_jars(cluster: SparkCluster, app: str) -> list[Path]:
    """The bundle as the executors of `app` fetched it from the driver into their work dirs."""
    return [p for w in cluster.workers for p in w.work_dir.glob(f"{app}/*/{Path(jar()).name}")]


# --- the event log -------------------------------------------------------------

@dataclass(frozen=True)
class TaskEnd:
    stage: int
    stage_attempt: int
    partition: int
    attempt: int
    executor: str
    reason: str   # "Success", "ExecutorLostFailure", "FetchFailed", ...


def event_log(events: Path) -> list[dict]:
    files = [f for f in glob.glob(str(events / "**" / "*app-*"), recursive=True)
             if Path(f).is_file() and not Path(f).name.startswith("appstatus")]
    assert len(files) == 1, f"expected one event log under {events}: {files}"
    return [json.loads(line) for line in Path(files[0]).read_text().splitlines() if line.strip()]


def task_ends(events: list[dict]) -> list[TaskEnd]:
    return [TaskEnd(e["Stage ID"], e["Stage Attempt ID"], e["Task Info"]["Partition ID"], e["Task Info"]["Attempt"],
                    e["Task Info"]["Executor ID"], e["Task End Reason"]["Reason"])
            for e in events if e["Event"] == "SparkListenerTaskEnd"]


def target_stages(events: list[dict]) -> set[int]:
    """Stages of the jobs lance_job.py marked as the statement under test."""
    return {s for e in events if e["Event"] == "SparkListenerJobStart"
            and ((e.get("Properties") or {}).get("spark.job.description") or "").startswith(TARGET)
            for s in e["Stage IDs"]}


def retries(ends: list[TaskEnd]) -> dict[str, Any]:
    """What Spark did about the kill: failed attempts by reason, tasks run again."""
    failed = Counter(t.reason for t in ends if t.reason != "Success")
    rerun = {(t.stage, t.partition) for t in ends if t.attempt > 0 or t.stage_attempt > 0}
    return {"failed": dict(failed), "rerun_tasks": len(rerun),
            "stage_attempts": sorted({(t.stage, t.stage_attempt) for t in ends if t.stage_attempt > 0})}


# --- killing a worker mid-job --------------------------------------------------

def worker_of(executor: dict, workers: list[Worker]) -> Worker | None:
    """The worker that launched an executor: its log URLs point at the worker's web UI."""
    url = executor.get("executorLogs", {}).get("stdout", "")
    return next((w for w in workers if f":{w.webui_port}/" in url), None)


@dataclass
class Kill:
    """What the driver showed at the moment of the kill."""
    stage: int
    executor: str
    worker: Worker
    done_in_stage: dict[str, int]
    running_in_stage: dict[str, int]


def kill_during(driver: Driver, cluster: SparkCluster, stage_is_ready: Callable[[list[int], int], bool],
                min_done: int, min_running: float = 0.0, timeout: float = 300.0) -> Kill:
    """Polls the driver until a stage of the target job (`stage_is_ready(job stages,
    stage)`) has `min_done` finished tasks and a task that has run `min_running`
    seconds on an executor that also finished one in it, then loses that
    executor's worker (SIGKILL to it and its executor, local disk wiped)."""
    deadline = time.monotonic() + timeout
    app = None
    while time.monotonic() < deadline:
        if driver.process.poll() is not None:
            pytest.fail(f"the job ended before the kill; log ends:\n{spark_cluster.log_tail(driver.log)}")
        try:
            app = app or driver.app_id()
            if app is None:
                raise OSError("no application yet")
            kill = _victim(driver, app, cluster, stage_is_ready, min_done, min_running)
        except (OSError, ValueError, KeyError):
            kill = None
        if kill is not None:
            assert kill.worker.executor_pids(), "the victim worker has no executor process in its group"
            kill.worker.lose()
            return kill
        time.sleep(0.1)
    pytest.fail(f"the target stage never ran on both workers; log ends:\n{spark_cluster.log_tail(driver.log)}")


def _running_for(task: dict) -> float:
    """Seconds since a task started (the REST API gives its launch time in GMT)."""
    launched = datetime.strptime(task["launchTime"].replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")
    return (datetime.now(timezone.utc) - launched).total_seconds()


def _victim(driver: Driver, app: str, cluster: SparkCluster, stage_is_ready: Callable[[list[int], int], bool],
            min_done: int, min_running: float) -> Kill | None:
    jobs = [j for j in driver.api(app, "jobs?status=running") if (j.get("description") or "").startswith(TARGET)]
    if not jobs:
        return None
    stage_ids = sorted(jobs[0]["stageIds"])
    for st in driver.api(app, "stages?status=active"):
        if st["stageId"] not in stage_ids or not stage_is_ready(stage_ids, st["stageId"]):
            continue
        tasks = driver.api(app, f"stages/{st['stageId']}/{st['attemptId']}/taskList?length=10000")
        done = Counter(t["executorId"] for t in tasks if t["status"] == "SUCCESS")
        running = Counter(t["executorId"] for t in tasks if t["status"] == "RUNNING")
        if sum(done.values()) < min_done or len(running) < 2:
            continue
        busy = {t["executorId"] for t in tasks if t["status"] == "RUNNING" and _running_for(t) >= min_running}
        executors = {e["id"]: e for e in driver.api(app, "executors")}
        for ex in sorted(busy, key=lambda e: -done[e]):
            worker = worker_of(executors.get(ex, {}), cluster.workers)
            if done[ex] >= 1 and worker is not None:
                return Kill(st["stageId"], ex, worker, dict(done), dict(running))
    return None


def report(kill: Kill, ends: list[TaskEnd], table: Path) -> None:
    """What happened, for the log (pytest -s)."""
    print(f"\nlost worker {kill.worker.index} (executor {kill.executor}) in stage {kill.stage} with tasks "
          f"done={kill.done_in_stage} running={kill.running_in_stage}: {retries(ends)}; "
          f"data files left unreferenced: {len(unreferenced_data_files(table))}")


# --- expected tables, from first principles -----------------------------------

def event_row(i: int) -> dict:
    """lance_job.events' row for id i."""
    return {"id": i, "user": f"user-{i % 100}", "score": (i % 97) * 0.5,
            "embedding": [float(i % 7), float(i % 11), float(i % 13), 1.0]}


def pipeline_expected(n: int) -> dict[int, dict]:
    rows = {i: event_row(i) for i in range(n + 1000)}            # write + append
    for i in range(n + 500, n + 1500):                             # MERGE
        if i in rows:
            if i % 10 == 0:
                del rows[i]
            else:
                rows[i] = {**rows[i], "user": "merged", "score": -1.0}
        else:
            rows[i] = {"id": i, "user": "merged", "score": -1.0, "embedding": [0.0] * 4}
    return {i: r for i, r in rows.items() if not (i % 7 == 3 and i < n // 2)}   # DELETE


def payloads_by_id(path: Path) -> dict[int, str]:
    """pylance's view of an (id, payload) table; fails on a duplicated id."""
    table = lance.dataset(str(path)).to_table(columns=["id", "payload"])
    ids = table["id"].to_pylist()
    dup = [i for i, c in Counter(ids).items() if c > 1]
    assert not dup, f"{len(dup)} ids occur more than once, e.g. {dup[:10]}"
    return dict(zip(ids, table["payload"].to_pylist()))


def unreferenced_data_files(path: Path) -> list[str]:
    """Data files no version references: what a killed task attempt left (vacuum's to remove)."""
    ds = lance.dataset(str(path))
    referenced = {str(f.path)
                  for v in ds.versions() for frag in lance.dataset(str(path), version=v["version"]).get_fragments()
                  for f in frag.data_files()}
    return sorted(p.name for p in (path / "data").iterdir() if p.name not in referenced)


def operations(path: Path) -> list[str]:
    ds = lance.dataset(str(path))
    return [type(ds.read_transaction(v).operation).__name__ for v in range(1, ds.version + 1)]


# --- tests ----------------------------------------------------------------------

@long_only   # make test: spark-submit --jars in test_worker_killed_mid_write, S3 in test_object_store.py
def test_spark_submit_pipeline(whole_cluster, tmp_path):
    """spark-submit --jars: the demo's steps, MERGE, DELETE, a filtered scan and a
    CTAS into the catalog's warehouse, all run by executors on both workers."""
    n = 20_000
    table, warehouse = tmp_path / "events.lance", tmp_path / "warehouse"
    driver = spark_submit(whole_cluster, tmp_path / "driver", "pipeline", table, "--rows", str(n),
                          conf={"spark.sql.catalog.lance.warehouse": str(warehouse)})
    result = driver.finish()
    assert result["master"] == whole_cluster.master_url and result["executors"] == 2

    want = pipeline_expected(n)
    ds = lance.dataset(str(table))
    got = {r["id"]: r for r in ds.to_table().to_pylist()}
    assert ds.count_rows() == len(got) == len(want)
    assert got == want
    emb = ds.schema.field("embedding").type   # written as a vector column (vectorColumns)
    assert pa.types.is_fixed_size_list(emb) and emb.list_size == 4 and emb.value_type == pa.float32()
    assert operations(table) == ["Overwrite", "Append", "Update", "Delete"]
    # what Spark itself saw
    assert result["count"] == len(want) and result["v1_count"] == n
    lo = n // 4
    assert result["filtered_ids"] == sorted(i for i, r in want.items() if r["score"] >= 40 and lo <= i <= lo + 1000)
    users = lance.dataset(str(warehouse / "db" / "users.lance")).to_table().to_pylist()
    by_user: dict[str, list[float]] = {}
    for r in want.values():
        by_user.setdefault(r["user"], []).append(r["score"])
    assert {u["user"]: u["n"] for u in users} == {u: len(s) for u, s in by_user.items()}
    assert {u["user"]: u["total"] for u in users} == pytest.approx({u: sum(s) for u, s in by_user.items()})
    assert result["users"] == len(by_user)

    # the work was spread over both workers' executors, which got the jar from the driver
    ends = task_ends(event_log(driver.events))
    assert {t.executor for t in ends} == {"0", "1"}
    assert all(t.reason == "Success" for t in ends)
    assert len(fetched_jars(whole_cluster, result["app_id"])) == 2


@long_only   # make test: spark-submit --jars in test_worker_killed_mid_write, S3 in test_object_store.py
def test_spark_submit_pipeline_on_s3(whole_cluster, tmp_path):
    """The same pipeline with the table and the warehouse in an S3 bucket (moto on
    localhost, through S3A): executors on both workers read and write the bucket,
    S3A coming with --packages from the driver; pylance reads the result there."""
    import s3_server

    n = 5_000
    server = s3_server.start()
    try:
        conf = {**s3_server.s3a_jars_conf(), **server.spark_conf(),
                "spark.sql.catalog.lance.warehouse": server.url("warehouse")}
        driver = spark_submit(whole_cluster, tmp_path / "driver", "pipeline", server.url("events.lance"),
                              "--rows", str(n), conf=conf)
        result = driver.finish()
        want = pipeline_expected(n)
        opts = server.storage_options()
        ds = lance.dataset(f"s3://{server.bucket}/events.lance", storage_options=opts)
        assert {r["id"]: r for r in ds.to_table().to_pylist()} == want
        assert [type(ds.read_transaction(v).operation).__name__ for v in range(1, ds.version + 1)] == \
            ["Overwrite", "Append", "Update", "Delete"]
        assert result["count"] == len(want) and result["v1_count"] == n
        users = lance.dataset(f"s3://{server.bucket}/warehouse/db/users.lance", storage_options=opts)
        assert users.count_rows() == result["users"] == len({r["user"] for r in want.values()})
        ends = task_ends(event_log(driver.events))
        assert {t.executor for t in ends} == {"0", "1"} and all(t.reason == "Success" for t in ends)
    finally:
        server.stop()


def test_configure_on_a_spark_master(whole_cluster, tmp_path):
    """lance_spark.configure(SparkSession.builder.master('spark://...')) from a plain
    Python driver: the jar in spark.jars reaches the executors; write, INSERT, UPDATE."""
    n = 5_000
    table = tmp_path / "t.lance"
    driver = configured_driver(whole_cluster, tmp_path / "driver", "roundtrip", table, "--rows", str(n))
    result = driver.finish()
    assert result["master"] == whole_cluster.master_url and result["executors"] == 2

    def payload(i: int) -> str:
        return f"u{i}" if i % 5 == 0 else (f"p{i}" if i < n else f"i{i}")

    want = {i: payload(i) for i in range(n + 1000)}
    assert payloads_by_id(table) == want
    assert result["count"] == len(want) and result["tail_ids"] == list(range(n + 990, n + 1000))
    assert operations(table) == ["Overwrite", "Append", "Update"]
    ends = task_ends(event_log(driver.events))
    assert {t.executor for t in ends} == {"0", "1"}
    assert len(fetched_jars(whole_cluster, result["app_id"])) == 2


def test_worker_killed_mid_write(whole_cluster, tmp_path):
    """12 slow write tasks, each writing 10 files of 100 rows a little at a time;
    once both executors have written some, the worker of one that is writing is
    lost with its executor: Spark runs the lost task again on the other, the
    files the dead attempt wrote are not committed, and the table has every
    row exactly once."""
    rows, parts = 12_000, 12
    table = tmp_path / "t.lance"
    driver = spark_submit(whole_cluster, tmp_path / "driver", "slow_write", table,
                          "--rows", str(rows), "--parts", str(parts), "--sleep", "0.3", "--files-of", "100")
    try:
        # a task that has written some of its files: killed part way through
        kill = kill_during(driver, whole_cluster, lambda stages, s: True, min_done=4, min_running=0.15)
        result = driver.finish()
    finally:
        driver.stop()
    assert not kill.worker.alive and not spark_cluster.group_pids(kill.worker.pid)

    assert payloads_by_id(table) == {i: f"p{i}" for i in range(rows)}
    assert result["count"] == rows
    assert operations(table) == ["Overwrite"]   # one commit, after the retries

    events = event_log(driver.events)
    ends = [t for t in task_ends(events) if t.stage in target_stages(events)]
    lost = [t for t in ends if t.executor == kill.executor and t.reason != "Success"]
    assert lost, f"no task of executor {kill.executor} failed: the kill came too late ({retries(ends)})"
    won = Counter(t.partition for t in ends if t.reason == "Success")
    assert won == {p: 1 for p in range(parts)}
    assert {t.executor for t in ends if t.reason == "Success" and t.attempt > 0} <= {"0", "1"} - {kill.executor}
    report(kill, ends, table)


@long_only   # make test: a streaming driver killed (test_streaming.py), a worker killed mid-write
def test_worker_killed_mid_stream(whole_cluster, tmp_path):
    """A streaming query (issue 41) of 16 slow files, 8 a micro-batch, into a Lance table on
    the cluster; a worker is lost while a batch's tasks write: Spark runs them again on
    the other executor, and the sink commits each batch once with every row once."""
    rows, parts = 16_000, 16
    table = tmp_path / "t.lance"
    driver = spark_submit(whole_cluster, tmp_path / "driver", "slow_stream", table,
                          "--rows", str(rows), "--parts", str(parts), "--sleep", "1.0")
    try:
        kill = kill_during(driver, whole_cluster, lambda stages, s: True, min_done=1, min_running=0.3)
        result = driver.finish()
    finally:
        driver.stop()
    assert not kill.worker.alive
    assert payloads_by_id(table) == {i: f"s{i}" for i in range(rows)}
    assert result["count"] == rows and result["batches"] == parts // 8
    ds = lance.dataset(str(table))
    batch_ids = [(ds.read_transaction(v).transaction_properties or {}).get("lance-spark.streaming.batchId")
                 for v in range(1, ds.version + 1)]
    assert batch_ids == [str(b) for b in range(parts // 8)]       # one commit per batch, none twice
    events = event_log(driver.events)
    ends = [t for t in task_ends(events) if t.stage in target_stages(events)]
    lost = [t for t in ends if t.executor == kill.executor and t.reason != "Success"]
    assert lost, f"no task of executor {kill.executor} failed: the kill came too late ({retries(ends)})"
    report(kill, ends, table)


@long_only   # make test kills a worker mid-write (above)
def test_worker_killed_mid_merge(whole_cluster, tmp_path):
    """A MERGE killed in its write stage (the one writing deletion files and new
    fragments, here in files of 10 rows so that it lasts): the lost executor's
    tasks and shuffle output are redone on the other worker, and the table is
    exactly the MERGE's result."""
    target, start, rows = 20_000, 10_000, 20_000
    table = tmp_path / "t.lance"
    driver = spark_submit(whole_cluster, tmp_path / "driver", "merge", table,
                          "--target", str(target), "--start", str(start), "--rows", str(rows),
                          "--parts", "16", "--files-of", "10",
                          conf={"spark.sql.shuffle.partitions": "16", "spark.sql.adaptive.enabled": "false",
                                "spark.sql.autoBroadcastJoinThreshold": "-1"})
    try:
        # the last stage of the MERGE's job is its write
        kill = kill_during(driver, whole_cluster, lambda stages, s: s == max(stages), min_done=1)
        result = driver.finish()
    finally:
        driver.stop()

    want = {i: f"p{i}" for i in range(target)}
    for i in range(start, start + rows):
        if i in want and i % 3 == 0:
            del want[i]
        else:
            want[i] = f"m{i}"
    assert payloads_by_id(table) == want
    assert result["count"] == len(want)
    assert operations(table) == ["Overwrite", "Update"]

    events = event_log(driver.events)
    ends = [t for t in task_ends(events) if t.stage in target_stages(events)]
    lost = [t for t in ends if t.executor == kill.executor and t.reason != "Success"]
    assert lost, f"no task of executor {kill.executor} failed: the kill came too late ({retries(ends)})"
    # the write stage itself ran tasks again (the lost one, and those whose shuffle input was lost)
    assert any(t.stage == kill.stage and t.reason == "Success" and (t.attempt or t.stage_attempt) for t in ends)
    report(kill, ends, table)
