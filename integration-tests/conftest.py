"""Shared fixtures for interop tests: one local Spark session per module, with
the connector's bundle jar added by lance_spark.configure."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# `make test-long` (LANCE_LONG_TESTS=1) runs what `make test` leaves out to stay inside CI's budget
LONG = os.environ.get("LANCE_LONG_TESTS") == "1"
long_only = pytest.mark.skipif(not LONG, reason="make test-long (LANCE_LONG_TESTS=1)")
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
# pytest-xdist's loadfile schedule, which hands out modules in collection order, does not end
# with one long module on one worker while the other has nothing left. The rest keep their order.
LONGEST_FIRST = (
    "test_change_feed.py", "test_delta_differential.py", "test_tpcds.py", "test_dml_conformance.py",
    "test_object_store.py", "test_aggregate_pushdown.py", "test_tpch.py", "test_external_manifest_store.py",
    "test_streaming.py", "test_write_differential.py", "test_cluster.py", "test_long_history.py",
    "test_connect.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))


_module_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    module = report.nodeid.split("::", 1)[0]
    _module_seconds[module] = _module_seconds.get(module, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    """Each module's time (setup, calls, teardown) on this pytest-xdist worker, longest first,
    in target/module-times-<worker>.txt: what LONGEST_FIRST is ordered by."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None or not _module_seconds:
        return
    out = HERE.parent / "target" / f"module-times-{worker}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"{s:8.1f} {m}\n" for m, s in sorted(_module_seconds.items(), key=lambda kv: -kv[1])))
