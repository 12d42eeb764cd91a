"""Local Spark sessions for tests, benchmarks and notebooks: one place that
sets them up (the connector's jar, UTC, small shuffles), starts a new JVM when
a setting is read only at JVM launch, and knows the Delta Lake settings used
for side-by-side comparisons."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Optional

from ._spark import configure

#: Delta Lake for Spark 4.2 (Maven Central), for differential tests and benchmarks.
DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"
#: Where Spark's ivy resolution keeps the packages it downloads.
IVY_DIR = Path(os.environ.get("LANCE_SPARK_IVY", Path.home() / ".cache" / "lance-spark" / "ivy"))

#: Settings Spark reads only when its JVM starts; and the S3 endpoint, since Hadoop's JVM-wide
#: FileSystem cache keeps an s3a:// bucket's client bound to the server it was first made for
#: (each test module starts its own S3 server).
LAUNCH_SETTINGS = ("spark.jars.packages", "spark.jars.ivy", "spark.driver.memory",
                   "spark.driver.extraJavaOptions", "spark.driver.extraClassPath",
                   "spark.hadoop.fs.s3a.endpoint")


def delta_settings() -> dict[str, str]:
    """Delta Lake as the session catalog (resolved from Maven Central at JVM launch)."""
    IVY_DIR.mkdir(parents=True, exist_ok=True)
    return {
        "spark.jars.packages": DELTA_PACKAGE,
        "spark.jars.ivy": str(IVY_DIR),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }


def restart_jvm(timeout: float = 60) -> Optional[int]:
    """Stops the active SparkContext and this process's Spark JVM, so that the
    next session launches a new JVM with its own launch settings. Waits up to
    `timeout` seconds for the JVM to exit (then kills it); its exit code, or
    None when there was none to stop or it was killed."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return None
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - the JVM may already be gone
        pass
    rc: Optional[int] = None
    if proc is not None:
        try:
            proc.stdin.close()          # the gateway JVM exits on EOF of its stdin
            rc = proc.wait(timeout=timeout)
        except Exception:  # noqa: BLE001
            proc.kill()
    SparkContext._gateway = None
    SparkContext._jvm = None
    return rc


def local_session(conf: Optional[Mapping[str, Any]] = None, app: str = "lance-spark",
                  cores: str = "2", driver_memory: str = "2g"):
    """A local[cores] session with the connector (UI off, UTC, cores shuffle
    partitions); `conf` adds or overrides settings. When a launch-only setting
    differs from the running JVM's, a new JVM is started (the active session
    must not be in use any more)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    settings: dict[str, Any] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": cores,
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": driver_memory,
    }
    settings.update(conf or {})
    launch = {k: str(settings[k]) for k in LAUNCH_SETTINGS if k in settings}
    if SparkContext._gateway is not None and getattr(SparkContext, "_lance_launch_settings", None) != launch:
        restart_jvm()
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app)
    for k, v in settings.items():
        builder = builder.config(k, str(v))
    session = configure(builder).getOrCreate()
    SparkContext._lance_launch_settings = launch   # what the running JVM was launched with
    return session
