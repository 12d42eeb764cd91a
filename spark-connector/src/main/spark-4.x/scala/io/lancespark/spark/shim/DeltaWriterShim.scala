package io.lancespark.spark.shim

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.write.DeltaWriter

/** Spark 4's DeltaWriter: MERGE and UPDATE plans may send a row as `reinsert`
  * (its default throws); for Lance that is an insert of the new row. */
abstract class DeltaWriterShim extends DeltaWriter[InternalRow] {
  override def reinsert(metadata: InternalRow, row: InternalRow): Unit = insert(row)
}
