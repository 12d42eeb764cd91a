"""Shared fixtures for interop tests: one local Spark session per module, with
the connector's bundle jar added by lance_spark.configure."""
from __future__ import annotations

import os
import sys
import time
import zlib
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# `make test-long` (LANCE_LONG_TESTS=1) runs what `make test` leaves out to stay inside CI's budget
LONG = os.environ.get("LANCE_LONG_TESTS") == "1"
long_only = pytest.mark.skipif(not LONG, reason="make test-long (LANCE_LONG_TESTS=1)")


def sliced(everything, make_test):
    """`everything` under make test-long (LANCE_LONG_TESTS=1), else make test's slice of it."""
    return list(everything) if LONG else list(make_test)


# Modules of many small independent cases of which make test runs one in n (in the module's
# order: each kind of statement keeps about that share of its cases); make test-long runs all.
EVERY_NTH = {"test_dml_conformance.py": 4}

# Modules whose parametrized tests make test runs one case in n of (those whose node id's CRC-32
# is a multiple of n, and at least the first case of each test function: the kept cases spread
# over every parameter instead of following one); their other tests run whole; make test-long
# runs every case. (Applied after a module's own make-test lists, `sliced`.) Not here: the
# randomized differential modules (their number of seeds is LANCE_DIFF_CASES, and their
# regression seeds always run) and modules whose few make-test cases are each chosen for an
# assertion of their own (test_runtime_filters.py).
CASES_ONE_IN = {
    **{f"test_{m}.py": 3 for m in (
        "py_reader_spark_written", "aggregate_pushdown", "scan_features", "scattered_reads",
        "knn_join", "pushdown", "read_interop", "scan_io", "write", "vector_index", "subquery_scans",
        "old_releases", "add_columns", "write_versions", "bad_input", "blobs", "vector_search",
        "planning_statistics", "blob_write", "tpch", "index_build", "scalar_indices", "compaction", "dml")},
    **{f"test_{m}.py": 2 for m in ("schema_evolution", "update_columns", "label_list")},
}


def _kept_in_make_test(items: list) -> tuple[list, list]:
    """make test's slice of the collected items (EVERY_NTH, CASES_ONE_IN), in their order:
    (kept, left out)."""
    keep: dict[int, bool] = {}
    seen: dict[str, int] = {}
    first_case: dict[str, int] = {}
    any_kept: dict[str, bool] = {}
    for i, item in enumerate(items):
        name = Path(str(item.fspath)).name
        if name in EVERY_NTH:
            seen[name] = seen.get(name, -1) + 1
            keep[i] = seen[name] % EVERY_NTH[name] == 0
        elif name in CASES_ONE_IN and getattr(item, "callspec", None) is not None:
            function = item.nodeid.split("[", 1)[0]
            first_case.setdefault(function, i)
            keep[i] = zlib.crc32(item.nodeid.split("::", 1)[1].encode()) % CASES_ONE_IN[name] == 0
            any_kept[function] = any_kept.get(function, False) or keep[i]
        else:
            keep[i] = True
    for function, kept_one in any_kept.items():
        if not kept_one:   # no case of it fell in the slice: its first runs
            keep[first_case[function]] = True
    return [it for i, it in enumerate(items) if keep[i]], [it for i, it in enumerate(items) if not keep[i]]


sys.path.insert(0, str(HERE))
# Spark's scratch directories (each context's spark-*/userFiles and pyspark copies, block manager
# and shuffle files) go under the build directory, not /tmp: a JVM that is killed instead of stopped
# leaves them behind. `make test-integration` empties it before a run.
os.environ.setdefault("SPARK_LOCAL_DIRS", str(HERE.parent / "target" / "spark-local"))
Path(os.environ["SPARK_LOCAL_DIRS"]).mkdir(parents=True, exist_ok=True)
# Python UDF workers run this interpreter (the venv with pyarrow), and times are UTC.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ["TZ"] = "UTC"
time.tzset()


def new_session(conf: dict[str, str] | None = None, app: str = "lance-spark-interop"):
    """A local Spark session with the connector (lance_spark.testing); `conf` adds settings."""
    from lance_spark.testing import local_session

    return local_session(conf, app=app)


@pytest.fixture(scope="module")
def spark():
    session = new_session()
    yield session
    session.stop()


# The longest modules first (their share of a make test run on two workers, longest first), so that
# pytest-xdist, which hands out modules in this order (make test passes --no-loadscope-reorder),
# does not end with one long module on one worker while the other has nothing left. The rest keep
# their order.
LONGEST_FIRST = (
    "test_change_feed.py", "test_delta_differential.py", "test_tpcds.py", "test_dml_conformance.py",
    "test_object_store.py", "test_aggregate_pushdown.py", "test_tpch.py", "test_external_manifest_store.py",
    "test_streaming.py", "test_write_differential.py", "test_cluster.py", "test_long_history.py",
    "test_connect.py",
)

# Modules whose sessions are launched with the same JVM settings (Delta's jars) run on one
# worker, one after another (the scheduler below), so that their JVM is launched and compiles
# its code once: a JVM is relaunched whenever a session's launch settings differ from the
# running one's (lance_spark.testing.local_session). Every other module is a unit of its own.
# (Not the S3 modules: each has its own S3 server, and Hadoop's FileSystem cache would keep
# the bucket's client of the first; local_session relaunches the JVM for a new endpoint.)
SHARED_JVM = {"test_change_feed.py": "delta-jvm", "test_delta_differential.py": "delta-jvm"}


@pytest.hookimpl(optionalhook=True)   # the line venvs run without pytest-xdist
def pytest_xdist_make_scheduler(config, log):
    """With --dist loadfile: pytest-xdist's scheduling by module, but the modules of one
    SHARED_JVM group are one unit of work (one worker, in the collection's order)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedJvmScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return SHARED_JVM.get(Path(module).name, module)

    return SharedJvmScheduling(config, log)


def pytest_collection_modifyitems(session, config, items):
    if not LONG:
        kept, left = _kept_in_make_test(items)
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = kept
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def module(item) -> str:
        return Path(str(item.fspath)).name

    # a shared group runs where its first module in LONGEST_FIRST would
    group_rank: dict[str, int] = {}
    for name, g in SHARED_JVM.items():
        group_rank[g] = min(group_rank.get(g, len(rank)), rank.get(name, len(rank)))

    def key(item):
        name = module(item)
        g = SHARED_JVM.get(name)
        return (group_rank[g] if g else rank.get(name, len(rank)), g or "", rank.get(name, len(rank)))

    items.sort(key=key)


_module_seconds: dict[str, float] = {}
_test_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    module = report.nodeid.split("::", 1)[0]
    _module_seconds[module] = _module_seconds.get(module, 0.0) + report.duration
    _test_seconds[report.nodeid] = _test_seconds.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    """Each module's time (setup, calls, teardown) on this pytest-xdist worker, longest first,
    in target/module-times-<worker>.txt: what LONGEST_FIRST is ordered by; each test's in
    target/test-times-<worker>.txt (its module fixture's setup counts for its first test)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None or not _module_seconds:
        return
    target = HERE.parent / "target"
    target.mkdir(parents=True, exist_ok=True)
    for name, times in (("module", _module_seconds), ("test", _test_seconds)):
        (target / f"{name}-times-{worker}.txt").write_text(
            "".join(f"{s:8.1f} {m}\n" for m, s in sorted(times.items(), key=lambda kv: -kv[1])))
