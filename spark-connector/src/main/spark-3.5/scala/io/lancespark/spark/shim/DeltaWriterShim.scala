package io.lancespark.spark.shim

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.write.DeltaWriter

/** Spark 3.5's DeltaWriter has no `reinsert` (4.0 added it). */
abstract class DeltaWriterShim extends DeltaWriter[InternalRow]
