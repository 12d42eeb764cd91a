"""Shared fixtures for interop tests: one local Spark session per module, with
the connector's bundle jar added by lance_spark.configure."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Python UDF workers run this interpreter (the venv with pyarrow), and times are UTC.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ["TZ"] = "UTC"
time.tzset()


def _restart_jvm() -> None:
    """Ends this process's Spark JVM (no session may be running), so the next
    session launches a new one: settings read only at launch (spark.jars.packages)
    then take effect."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        proc.stdin.close()          # the JVM exits when its stdin closes
        proc.wait(60)
    SparkContext._gateway = None
    SparkContext._jvm = None


def new_session(conf: dict[str, str] | None = None, app: str = "lance-spark-interop"):
    """A local Spark session with the connector; `conf` adds settings. Settings
    that only a new JVM reads (spark.jars.packages) get one."""
    import lance_spark
    from pyspark.sql import SparkSession

    if conf and "spark.jars.packages" in conf:
        _restart_jvm()

    builder = (SparkSession.builder.master("local[2]").appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    return lance_spark.configure(builder).getOrCreate()


@pytest.fixture(scope="module")
def spark():
    session = new_session()
    yield session
    session.stop()
