package io.lancespark.spark.shim

import org.apache.spark.sql.connector.catalog.{SupportsSchemaEvolution, TableCapability, TableChange}

/** Spark 4.2's schema evolution of catalog writes (`INSERT WITH SCHEMA
  * EVOLUTION INTO t ...`, `df.writeTo(t).withSchemaEvolution().append()`):
  * Spark computes the column changes the data needs and applies the ones the
  * table accepts through the catalog's alterTable before the write. A Lance
  * table accepts new nullable top-level columns (a metadata-only version);
  * other changes (type widenings, which rewrite a column) are left to Spark's
  * store-assignment casts, as without schema evolution. */
trait SchemaEvolutionShim extends SupportsSchemaEvolution {
  protected def schemaEvolutionCapabilities: Seq[TableCapability] = Seq(TableCapability.AUTOMATIC_SCHEMA_EVOLUTION)

  override def supportsColumnChange(change: TableChange.ColumnChange): Boolean = change match {
    case add: TableChange.AddColumn =>
      add.fieldNames().length == 1 && add.isNullable && add.defaultValue() == null
    case _ => false
  }
}
