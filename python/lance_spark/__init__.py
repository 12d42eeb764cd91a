"""lance_spark: Python helpers for the JVM-native Spark connector for Lance.

* ``jar_path()`` / ``configure()`` / ``session()`` put the connector's bundle jar on a Spark
  session: the wheel has one bundle per Spark line (``bundles()``), and the one for the installed
  pyspark is chosen without starting a JVM; ``configure()`` also takes Spark Connect builders
  (``remote("local")``, ``remote("sc://...")``) and sessions;
* ``lance_spark.reader`` is an independent pure-Python reader of Lance datasets;
* ``LanceTable`` is a handle for table maintenance (history, tags, restore, vacuum) in PySpark;
* ``lance-spark`` (``python -m lance_spark``) is a small CLI over that reader.
"""
from __future__ import annotations

from ._spark import (CATALOG_CLASS, CONNECTOR_CLASS, CONNECTOR_SETTINGS, SPARK_LINES, bundle_of, bundles,
                     configure, connector_settings, jar_path, session)
from .tables import LanceTable, LanceTags
from .vectors import knn_join, vector_search

__version__ = "0.1.0"

__all__ = ["CATALOG_CLASS", "CONNECTOR_CLASS", "CONNECTOR_SETTINGS", "LanceTable", "LanceTags", "SPARK_LINES",
           "bundle_of", "bundles", "configure", "connector_settings", "jar_path", "knn_join", "session", "vector_search", "__version__"]
