package io.lancespark.table.index.vector

import io.lancespark.schema.{LanceField, LanceFormatException, LogicalType}
import io.lancespark.table.storage.Snapshot

/** The searched column: a top-level fixed-size list of float32 or float64. */
final case class VectorColumn(field: LanceField, dim: Int, itemType: String)

object VectorColumn {
  val FloatItems: Set[String] = Set("float", "double")

  /** The column `name` of `snapshot`, checked to be a vector column of `dim` values. */
  def of(snapshot: Snapshot, name: String, dim: Int): VectorColumn = {
    val where = snapshot.storage.uri
    val field = snapshot.schema.field(name).getOrElse(throw new IllegalArgumentException(
      s"$where: nearest-neighbour column '$name' does not exist; columns: ${snapshot.schema.fields.map(_.name).mkString(", ")}"))
    if (!field.isFixedSizeList)
      throw new IllegalArgumentException(
        s"$where: nearest-neighbour column '$name' is not a vector column (a fixed-size list of floats), it is ${field.logicalType}")
    val item = LogicalType.fixedSizeListItem(field.logicalType)
    if (!FloatItems.contains(item))
      throw new IllegalArgumentException(
        s"$where: nearest-neighbour column '$name' holds $item values; only float and double vectors are searched")
    val size = field.logicalType.substring(field.logicalType.lastIndexOf(':') + 1).toInt
    if (size != dim)
      throw new IllegalArgumentException(
        s"$where: the query vector has $dim values but column '$name' holds vectors of $size")
    VectorColumn(field, size, item)
  }

  def fail(where: String, problem: String): Nothing = throw LanceFormatException(where, problem)
}
