package io.lancespark.spark.read

import java.util.OptionalLong

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.read.{Batch, InputPartition, PartitionReaderFactory, Scan, Statistics, SupportsReportStatistics}
import org.apache.spark.sql.types.StructType

import io.lancespark.format.LanceField
import io.lancespark.spark.{LanceOptions, SerializableHadoopConf}
import io.lancespark.table.Snapshot

/** A scan of one version: one input partition per fragment, large fragments
  * split into row ranges so every core has work. */
final class LanceScan(
    snapshot: Snapshot,
    dataSchema: StructType,
    fields: Seq[LanceField],
    metadataColumns: Seq[String],
    outputSchema: StructType,
    options: LanceOptions)
    extends Scan with Batch with SupportsReportStatistics {

  override def readSchema(): StructType = outputSchema

  override def toBatch: Batch = this

  override def supportedCustomMetrics(): Array[org.apache.spark.sql.connector.metric.CustomMetric] = ScanMetrics.all

  override def description(): String =
    s"LanceScan(${snapshot.storage.uri}, version=${snapshot.version}, " +
      s"columns=[${outputSchema.fieldNames.mkString(", ")}], fragments=${snapshot.fragments.size})"

  override def planInputPartitions(): Array[InputPartition] = {
    val split = options.splitRows.getOrElse(LanceScan.defaultSplit(snapshot))
    val parts = for {
      frag <- snapshot.fragments if frag.numRows > 0
      start <- 0L until frag.physicalRows by split
    } yield LanceInputPartition(frag, start, math.min(frag.physicalRows, start + split))
    parts.toArray
  }

  override def createReaderFactory(): PartitionReaderFactory = {
    val conf = new SerializableHadoopConf(SparkSession.active.sessionState.newHadoopConf())
    LanceReaderFactory(snapshot.storage.uri, snapshot.version, snapshot.schema, fields, dataSchema,
      metadataColumns, outputSchema, snapshot.hasStableRowIds, options.batchSize, conf)
  }

  override def estimateStatistics(): Statistics = new Statistics {
    private val bytes = snapshot.fragments.flatMap(_.files).map(_.sizeBytes).sum
    override def sizeInBytes(): OptionalLong =
      if (bytes > 0) OptionalLong.of(bytes) else OptionalLong.empty()
    override def numRows(): OptionalLong = OptionalLong.of(snapshot.countRows)
  }
}

object LanceScan {
  /** Rows per partition: about two partitions per core, at least 64K rows. */
  def defaultSplit(snapshot: Snapshot): Long = {
    val cores = math.max(1, SparkSession.active.sparkContext.defaultParallelism)
    val total = snapshot.fragments.map(_.physicalRows).sum
    math.max(65536L, (total + 2L * cores - 1) / (2L * cores))
  }
}
