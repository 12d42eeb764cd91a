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


def new_session(conf: dict[str, str] | None = None, app: str = "lance-spark-interop"):
    """A local Spark session with the connector; `conf` adds settings."""
    import lance_spark
    from pyspark.sql import SparkSession

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
