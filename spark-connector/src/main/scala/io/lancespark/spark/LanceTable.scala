package io.lancespark.spark

import java.util

import org.apache.spark.sql.connector.catalog.{MetadataColumn, SupportsMetadataColumns, SupportsRead, TableCapability}
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import io.lancespark.spark.read.LanceScanBuilder
import io.lancespark.table.Snapshot

/** One version of a Lance dataset as a Spark table. */
final class LanceTable(val snapshot: Snapshot, val options: LanceOptions)
    extends SupportsRead with SupportsMetadataColumns {

  override def name(): String = s"lance.`${snapshot.storage.uri}`"

  override lazy val schema: StructType = TypeMapping.forActiveSession().toSpark(snapshot.schema)

  override def capabilities(): util.Set[TableCapability] = util.EnumSet.of(TableCapability.BATCH_READ)

  override def metadataColumns(): Array[MetadataColumn] = MetadataColumns.all

  override def newScanBuilder(opts: CaseInsensitiveStringMap): ScanBuilder =
    new LanceScanBuilder(snapshot, schema, options)
}
