package io.lancespark.spark.shim

import org.apache.spark.sql.connector.catalog.{Table, TableCapability}

/** Spark 3.5-4.1 have no schema evolution of INSERT / writeTo (Spark 4.2's
  * `INSERT WITH SCHEMA EVOLUTION`): catalog writes keep Spark's check of the
  * columns against the table's. */
trait SchemaEvolutionShim extends Table {
  /** The capabilities a writable catalog table adds for schema evolution: none here. */
  protected def schemaEvolutionCapabilities: Seq[TableCapability] = Nil
}
