package io.lancespark.spark.shim

import org.apache.spark.sql.connector.catalog.Identifier

import io.lancespark.spark.procedures.LanceProcedure

/** Spark 3.5 has no ProcedureCatalog: the catalog's procedures are found by
  * io.lancespark.spark.extensions.LanceCallExtension (CALL on 3.5). */
trait ProcedureCatalogShim {
  def procedure(ident: Identifier): LanceProcedure
  def procedureIds(namespace: Array[String]): Array[Identifier]
}
