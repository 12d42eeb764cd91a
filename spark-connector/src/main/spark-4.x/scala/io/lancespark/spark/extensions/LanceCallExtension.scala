package io.lancespark.spark.extensions

import org.apache.spark.sql.SparkSessionExtensions

/** Spark 4 has CALL for catalogs' procedures (the catalog is a ProcedureCatalog):
  * nothing to install. It exists so that a configuration written for Spark 3.5
  * (`spark.sql.extensions=io.lancespark.spark.extensions.LanceCallExtension`)
  * also starts a Spark 4 session. */
final class LanceCallExtension extends (SparkSessionExtensions => Unit) {
  override def apply(e: SparkSessionExtensions): Unit = ()
}
