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


@pytest.fixture(scope="module")
def spark():
    import lance_spark
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("lance-spark-interop")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g"))
    session = lance_spark.configure(builder).getOrCreate()
    yield session
    session.stop()
