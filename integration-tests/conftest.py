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
