package io.lancespark.spark

import java.util

import org.apache.spark.sql.connector.catalog.{MetadataColumn, SupportsMetadataColumns, SupportsRead, TableCapability}
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import io.lancespark.spark.read.LanceScanBuilder
import io.lancespark.table.Snapshot

/** One version of a Lance dataset as a Spark table, opened on first use (a
  * DataFrameWriter asks for the table of a path that may not exist yet). */
final class LanceTable(val options: LanceOptions) extends SupportsRead with SupportsMetadataColumns {

  lazy val snapshot: Snapshot = LanceDataSource.snapshot(options)

  override def name(): String = s"lance.`${options.path}`"

  override lazy val schema: StructType = TypeMapping.forActiveSession().toSpark(snapshot.schema)

  override def capabilities(): util.Set[TableCapability] = util.EnumSet.of(TableCapability.BATCH_READ)

  override def metadataColumns(): Array[MetadataColumn] = MetadataColumns.all

  override def newScanBuilder(opts: CaseInsensitiveStringMap): ScanBuilder =
    new LanceScanBuilder(snapshot, schema, options)
}
