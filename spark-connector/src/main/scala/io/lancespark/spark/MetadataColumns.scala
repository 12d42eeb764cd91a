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

  private final case class Col(name: String, dataType: DataType, doc: String) extends MetadataColumn {
    override def isNullable: Boolean = false
    override def comment(): String = doc
  }

  val all: Array[MetadataColumn] = Array(
    Col(RowId, LongType, "row id: stable across compaction when the dataset has stable row ids, else the row address"),
    Col(RowAddr, LongType, "row address: fragment id << 32 | row offset"),
    Col(FragId, IntegerType, "fragment id"))

  val names: Set[String] = all.map(_.name).toSet
}
