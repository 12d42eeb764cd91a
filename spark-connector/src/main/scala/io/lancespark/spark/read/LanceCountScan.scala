package io.lancespark.spark.read

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.read.LocalScan
import org.apache.spark.sql.types.{LongType, StructField, StructType}

/** COUNT(*) from the manifest (physical rows minus deleted rows) or, with a
  * filter, from page statistics that decide every row. Runs no job and reads
  * no data page. */
final class LanceCountScan(rows: Long, aggregates: Int, filter: Option[io.lancespark.table.filter.Filter] = None)
    extends LocalScan {
  override def readSchema(): StructType =
    StructType((0 until aggregates).map(i => StructField(s"count$i", LongType, nullable = false)))
  override def rows(): Array[InternalRow] = Array(InternalRow.fromSeq(Seq.fill(aggregates)(rows)))
  override def description(): String =
    s"LanceCountScan(rows = $rows, from ${filter.fold("the manifest")(f => s"statistics for [$f]")})"
}
