package io.lancespark.spark

import org.apache.spark.sql.connector.catalog.MetadataColumn
import org.apache.spark.sql.types.{DataType, IntegerType, LongType}

/** Hidden columns every Lance table exposes (select them by name). */
object MetadataColumns {
  /** Stable row id when the dataset has them, else the row address. */
  val RowId = "_rowid"
  /** fragment id << 32 | row offset within the fragment. */
  val RowAddr = "_rowaddr"
  val FragId = "_fragid"
  /** The version that created the row / last updated it (stable row ids; 1 where a fragment records none). */
  val CreatedAt = "_row_created_at_version"
  val LastUpdatedAt = "_row_last_updated_at_version"

  private final case class Col(name: String, dataType: DataType, doc: String) extends MetadataColumn {
    override def isNullable: Boolean = false
    override def comment(): String = doc
  }

  val all: Array[MetadataColumn] = Array(
    Col(RowId, LongType, "row id: stable across compaction when the dataset has stable row ids, else the row address"),
    Col(RowAddr, LongType, "row address: fragment id << 32 | row offset"),
    Col(FragId, IntegerType, "fragment id"),
    Col(CreatedAt, LongType, "the dataset version that created the row (tables with stable row ids; else 1)"),
    Col(LastUpdatedAt, LongType, "the dataset version that last updated the row (tables with stable row ids; else 1)"))

  val names: Set[String] = all.map(_.name).toSet
}
