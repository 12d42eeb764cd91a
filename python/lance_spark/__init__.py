"""lance_spark: Python helpers for the JVM-native Spark connector for Lance.

* ``jar_path()`` / ``configure()`` / ``session()`` put the connector jar on a Spark session;
* ``lance_spark.reader`` is an independent pure-Python reader of Lance datasets;
* ``LanceTable`` is a handle for table maintenance (history, tags, restore, vacuum) in PySpark;
* ``lance-spark`` (``python -m lance_spark``) is a small CLI over that reader.
"""
from __future__ import annotations

from ._spark import CONNECTOR_CLASS, CONNECTOR_SETTINGS, configure, jar_path, session
from .tables import LanceTable, LanceTags

__version__ = "0.1.0"

__all__ = ["CONNECTOR_CLASS", "CONNECTOR_SETTINGS", "LanceTable", "LanceTags", "configure", "jar_path", "session",
           "__version__"]
