"""lance_spark.jar_path / configure (builder and active session)."""
from __future__ import annotations

from pathlib import Path

import pytest

import lance_spark
from lance_spark import _spark

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402


@pytest.fixture
def fake_jar(tmp_path, monkeypatch):
    jar = tmp_path / "lance-spark-bundle_2.13-0.1.0.jar"
    jar.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip
    monkeypatch.setenv("LANCE_SPARK_JAR", str(jar))
    return str(jar.resolve())


def test_jar_path_from_env(fake_jar):
    assert lance_spark.jar_path() == fake_jar


def test_jar_path_env_pointing_nowhere(monkeypatch, tmp_path):
    monkeypatch.setenv("LANCE_SPARK_JAR", str(tmp_path / "nope.jar"))
    with pytest.raises(FileNotFoundError, match="nope.jar"):
        lance_spark.jar_path()


def test_jar_path_without_packaged_jar(monkeypatch, tmp_path):
    monkeypatch.delenv("LANCE_SPARK_JAR", raising=False)
    monkeypatch.setattr(_spark, "__file__", str(tmp_path / "lance_spark" / "_spark.py"))
    with pytest.raises(FileNotFoundError, match=r"make jar"):
        lance_spark.jar_path()


def test_builder_gets_the_jar_appended(fake_jar):
    b = SparkSession.Builder().config("spark.jars", "/opt/other.jar")
    out = lance_spark.configure(b)
    assert out is b or isinstance(out, SparkSession.Builder)
    assert out._options["spark.jars"] == f"/opt/other.jar,{fake_jar}"
    # idempotent
    lance_spark.configure(out)
    assert out._options["spark.jars"] == f"/opt/other.jar,{fake_jar}"


def test_builder_without_jars(fake_jar, monkeypatch):
    monkeypatch.setattr(_spark, "CONNECTOR_SETTINGS", {"spark.lance.test": "1"})
    b = lance_spark.configure(SparkSession.Builder())
    assert b._options["spark.jars"] == fake_jar
    assert b._options["spark.lance.test"] == "1"


@pytest.mark.parametrize("bad", [123, "spark", None])
def test_configure_rejects_other_things(bad):
    with pytest.raises(TypeError, match="SparkSession"):
        lance_spark.configure(bad)


@pytest.fixture(scope="module")
def plain_spark():
    spark = (SparkSession.Builder().master("local[1]").appName("lance-spark-test")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
             .getOrCreate())
    yield spark
    spark.stop()


def test_configure_active_session_without_the_jar(plain_spark):
    with pytest.raises(RuntimeError) as e:
        lance_spark.configure(plain_spark)
    msg = str(e.value)
    assert "io.lancespark.spark.LanceDataSource" in msg
    assert "lance_spark.configure(SparkSession.builder)" in msg
    assert "spark-submit --jars" in msg and "jar_path()" in msg


def test_configure_active_session_with_the_connector(plain_spark, monkeypatch):
    # stand-in for a session whose classpath has the connector
    monkeypatch.setattr(_spark, "CONNECTOR_CLASS", "org.apache.spark.sql.SparkSession")
    monkeypatch.setattr(_spark, "CONNECTOR_SETTINGS", {"spark.lance.test.runtime": "yes"})
    assert lance_spark.configure(plain_spark) is plain_spark
    assert plain_spark.conf.get("spark.lance.test.runtime") == "yes"
