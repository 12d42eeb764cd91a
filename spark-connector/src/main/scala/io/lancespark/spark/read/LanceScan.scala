package io.lancespark.spark.read

import java.util.OptionalLong

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.read.{Batch, InputPartition, PartitionReaderFactory, Scan, Statistics, SupportsReportStatistics}
import org.apache.spark.sql.types.StructType

import io.lancespark.schema.LanceField
import io.lancespark.table.filter.Filter
import io.lancespark.spark.SerializableHadoopConf
import io.lancespark.spark.options.ReadConf
import io.lancespark.table.model.Snapshot
import io.lancespark.table.scan.ScanPlanner

/** A scan of one version: one input partition per fragment, large fragments
  * split into row ranges so every core has work. */
final class LanceScan(
    snapshot: Snapshot,
    dataSchema: StructType,
    fields: Seq[LanceField],
    metadataColumns: Seq[String],
    outputSchema: StructType,
    options: ReadConf,
    filter: Option[Filter] = None,
    filterFields: Seq[LanceField] = Nil,
    limit: Option[Int],
    planner: ScanPlanner)
    extends Scan with Batch with SupportsReportStatistics {

  override def readSchema(): StructType = outputSchema

  override def toBatch: Batch = this

  override def supportedCustomMetrics(): Array[org.apache.spark.sql.connector.metric.CustomMetric] = ScanMetrics.all

  override def description(): String =
    s"LanceScan(${snapshot.storage.uri}, version=${snapshot.version}, " +
      s"columns=[${outputSchema.fieldNames.mkString(", ")}], fragments=${snapshot.fragments.size}" +
      filter.fold("")(f => s", pushedFilters=[$f]") + limit.fold("")(n => s", limit=$n") + ")"

  override def planInputPartitions(): Array[InputPartition] = {
    val split = options.splitRows.getOrElse(LanceScan.defaultSplit(snapshot))
    val parts = planner.plans.flatMap { plan =>
      LanceScan.chunks(plan.mayMatch.ranges, split).zipWithIndex.map { case (ranges, i) =>
        LanceInputPartition(plan.fragment, ranges, first = i == 0)
      }
    }
    val limited = (limit, filter) match {
      case (Some(n), None) =>
        // without a filter every planned row (minus deletions) is returned: stop once n are covered
        val covered = parts.scanLeft(0L)((acc, p) => acc + p.rows - p.fragment.deletedRows.min(p.rows))
        parts.take(math.max(1, covered.indexWhere(_ >= n) match { case -1 => parts.size; case i => i }))
      case _ => parts
    }
    limited.toArray
  }

  override def reportDriverMetrics(): Array[org.apache.spark.sql.connector.metric.CustomTaskMetric] =
    if (filter.isEmpty) Array.empty
    else Array(
      ScanMetrics.value(ScanMetrics.FragmentsPruned, planner.fragmentsPruned.toLong),
      ScanMetrics.value(ScanMetrics.PagesPruned, planner.pagesPruned),
      ScanMetrics.value(ScanMetrics.RowsSkippedByStats, planner.rowsSkipped))

  override def createReaderFactory(): PartitionReaderFactory = {
    val session = SparkSession.active
    val conf = session.sparkContext.broadcast(new SerializableHadoopConf(session.sessionState.newHadoopConf()))
    LanceReaderFactory(snapshot.storage.uri, snapshot.version, snapshot.schema, fields, dataSchema,
      metadataColumns, outputSchema, snapshot.hasStableRowIds, options, conf, filter, filterFields, limit)
  }

  override def estimateStatistics(): Statistics = new Statistics {
    private val bytes = snapshot.fragments.flatMap(_.files).map(_.sizeBytes).sum
    override def sizeInBytes(): OptionalLong =
      if (bytes > 0) OptionalLong.of(bytes) else OptionalLong.empty()
    override def numRows(): OptionalLong = OptionalLong.of(snapshot.countRows)
  }
}

object LanceScan {
  /** Groups row ranges into partitions of at most `split` rows (long ranges are cut). */
  def chunks(ranges: Vector[(Long, Long)], split: Long): Vector[Vector[(Long, Long)]] = {
    require(split > 0, s"rows per partition must be positive, got $split")
    val out = Vector.newBuilder[Vector[(Long, Long)]]
    var cur = Vector.empty[(Long, Long)]
    var rows = 0L
    ranges.foreach { case (s0, e) =>
      var s = s0
      while (s < e) {
        val take = math.min(e - s, split - rows)
        cur :+= (s -> (s + take))
        rows += take
        s += take
        if (rows >= split) { out += cur; cur = Vector.empty; rows = 0 }
      }
    }
    if (cur.nonEmpty) out += cur
    out.result()
  }

  /** Rows per partition: about two partitions per core, at least 64K rows. */
  def defaultSplit(snapshot: Snapshot): Long = {
    val cores = math.max(1, SparkSession.active.sparkContext.defaultParallelism)
    val total = snapshot.fragments.map(_.physicalRows).sum
    math.max(65536L, (total + 2L * cores - 1) / (2L * cores))
  }
}
