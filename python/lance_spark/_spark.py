"""Putting the connector jar on a Spark session."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict

JAR_NAME = "lance-spark-bundle_2.13-0.1.0.jar"
CONNECTOR_CLASS = "io.lancespark.spark.LanceDataSource"

#: Spark settings the connector needs, applied by configure() with ``.config(k, v)``.
CONNECTOR_SETTINGS: Dict[str, str] = {
    # Lance time32/time64 columns read as Spark's TIME type, which Spark 4.2 gates behind this flag.
    "spark.sql.timeType.enabled": "true",
    # The Lance catalog: lance.<namespace>.<table> under spark.sql.catalog.lance.warehouse
    # (default: <spark.sql.warehouse.dir>/lance), and path tables lance.`/abs/path`.
    "spark.sql.catalog.lance": "io.lancespark.spark.catalog.LanceCatalog",
}

_BUILD_HINT = (
    "build it with `build/sbt connector/assembly` and reinstall the package "
    "(or point the LANCE_SPARK_JAR environment variable at the bundle jar)"
)


def jar_path() -> str:
    """Path of the connector bundle jar: $LANCE_SPARK_JAR if set, else the jar shipped in the wheel."""
    env = os.environ.get("LANCE_SPARK_JAR")
    if env:
        if not Path(env).is_file():
            raise FileNotFoundError(f"LANCE_SPARK_JAR={env} does not exist; {_BUILD_HINT}")
        return str(Path(env).resolve())
    packaged = Path(__file__).resolve().parent / "jars" / JAR_NAME
    if not packaged.is_file():
        raise FileNotFoundError(
            f"the lance_spark connector jar is not packaged ({packaged} is missing); {_BUILD_HINT}")
    return str(packaged)


def _is_builder(x: Any) -> bool:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return False
    return isinstance(x, SparkSession.Builder)


def _is_session(x: Any) -> bool:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return False
    return isinstance(x, SparkSession)


def _builder_option(builder: Any, key: str):
    opts = getattr(builder, "_options", None)
    if isinstance(opts, dict):
        return opts.get(key)
    return None


def _connector_loadable(spark: Any) -> bool:
    jvm = spark._jvm
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass(CONNECTOR_CLASS)
        return True
    except Exception:
        pass
    try:
        jvm.java.lang.Class.forName(CONNECTOR_CLASS)
        return True
    except Exception:
        return False


def configure(x: Any):
    """Configure a ``SparkSession.Builder`` (before getOrCreate) or check an active ``SparkSession``.

    Builder: appends the connector jar to ``spark.jars`` (existing entries kept) and applies
    CONNECTOR_SETTINGS; returns the builder.  Session: raises RuntimeError if the connector is
    not on its classpath, else applies CONNECTOR_SETTINGS at runtime and returns the session.
    """
    if _is_builder(x):
        jar = jar_path()
        existing = _builder_option(x, "spark.jars")
        entries = [e for e in (existing or "").split(",") if e.strip()]
        if jar not in entries:
            entries.append(jar)
        x = x.config("spark.jars", ",".join(entries))
        for k, v in CONNECTOR_SETTINGS.items():
            x = x.config(k, v)
        return x
    if _is_session(x):
        if not _connector_loadable(x):
            raise RuntimeError(
                f"the lance_spark connector ({CONNECTOR_CLASS}) is not on this Spark session's "
                "classpath; jars cannot be added to a running session. Create the session with "
                "`lance_spark.configure(SparkSession.builder)...getOrCreate()` (or "
                "`lance_spark.session()`) before any other session exists, or launch with "
                "`spark-submit --jars $(python -c 'import lance_spark; print(lance_spark.jar_path())')`")
        for k, v in CONNECTOR_SETTINGS.items():
            x.conf.set(k, v)
        return x
    raise TypeError(
        f"lance_spark.configure expects a pyspark SparkSession.Builder or SparkSession, "
        f"got {type(x).__name__}")


def session(app_name: str = "lance-spark", master: str = "local[*]", **conf: Any):
    """A SparkSession with the connector: ``configure(builder.appName(..).master(..).config(**conf)).getOrCreate()``.

    Keyword settings use their Spark key, e.g. ``session(**{"spark.driver.memory": "2g"})``.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master)
    for k, v in conf.items():
        builder = builder.config(k, v)
    return configure(builder).getOrCreate()
