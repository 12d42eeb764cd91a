package org.apache.spark.sql.lancespark

import scala.util.Try

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.catalog.CatalogPlugin

/** The session's catalogs, for the CALL extension on Spark 3.5 (Spark's
  * CatalogManager is private to org.apache.spark.sql). */
object CatalogAccess {
  /** The catalog of that name; None if there is none. */
  def catalog(session: SparkSession, name: String): Option[CatalogPlugin] =
    Try(session.sessionState.catalogManager.catalog(name)).toOption

  def currentCatalog(session: SparkSession): String = session.sessionState.catalogManager.currentCatalog.name()
}
