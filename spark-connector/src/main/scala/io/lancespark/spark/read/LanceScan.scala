package io.lancespark.spark.read

import java.util.OptionalLong

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.expressions.NamedReference
import org.apache.spark.sql.connector.read.colstats.ColumnStatistics
import org.apache.spark.sql.connector.read.{Batch, InputPartition, PartitionReaderFactory, Scan, Statistics, SupportsReportStatistics}
import org.apache.spark.sql.types.{StringType, StructType}

import io.lancespark.schema.LanceField
import io.lancespark.table.filter.Filter
import io.lancespark.spark.SerializableHadoopConf
import io.lancespark.spark.options.ReadConf
import io.lancespark.table.model.{FragmentInfo, Snapshot}
import io.lancespark.table.scan.{Clustering, FragmentPlan, ScanPlanner, Selectivity}

/** A scan of one version: the row ranges left after pruning, fragment after
  * fragment, packed into input partitions of about equal rows (see
  * [[LanceScan.defaultSplit]]). */
final class LanceScan(
    snapshot: Snapshot,
    tableSchema: StructType,
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

  /** What decides the rows and columns this scan returns: one version of one
    * dataset (its path, version and commit time), the columns, metadata
    * columns, filter, limit and read options. Two scans alike in all of these
    * return the same rows, so Spark may compute their exchanges once: it
    * compares scans with `equals` before reusing a shuffle or broadcast (as it
    * does for file scans), for example for the same join in a query and in its
    * subquery. Filters are compared up to the order of their operands. */
  private val identity: (String, Long, Option[java.time.Instant], StructType, Seq[String], Option[Filter],
    Option[Int], ReadConf) =
    (snapshot.storage.uri, snapshot.version, snapshot.timestamp, outputSchema, metadataColumns,
      filter.map(Filter.normalized), limit, options)

  override def equals(other: Any): Boolean = other match {
    case that: LanceScan => that.identity == identity
    case _ => false
  }

  override def hashCode(): Int = identity.hashCode()

  override def toBatch: Batch = this

  override def supportedCustomMetrics(): Array[org.apache.spark.sql.connector.metric.CustomMetric] = ScanMetrics.all

  override def description(): String =
    s"LanceScan(${snapshot.storage.uri}, version=${snapshot.version}, " +
      s"columns=[${outputSchema.fieldNames.mkString(", ")}], fragments=${snapshot.fragments.size}" +
      filter.fold("")(f => s", pushedFilters=[$f]") + limit.fold("")(n => s", limit=$n") + ")"

  override def planInputPartitions(): Array[InputPartition] = {
    val split = splitRows
    // every planned row range, fragment after fragment, cut into partitions of
    // at most `split` rows: a partition may end in one fragment and go on in
    // the next (short tasks of small fragments cost more than they read)
    val parts = LanceScan.pack(planner.plans.map(p => p -> p.mayMatch.ranges), split).map { part =>
      LanceInputPartition(part.map { case (plan, ranges) =>
        FragmentPiece(plan.fragment, ranges, first = ranges.head._1 == plan.mayMatch.ranges.head._1)
      })
    }
    val limited = (limit, filter) match {
      case (Some(n), None) =>
        // without a filter every planned row (minus deletions) is returned: stop once n are covered
        val covered = parts.scanLeft(0L)((acc, p) =>
          acc + p.pieces.map(c => c.rows - c.fragment.deletedRows.min(c.rows)).sum)
        parts.take(math.max(1, covered.indexWhere(_ >= n) match { case -1 => parts.size; case i => i }))
      case _ => parts
    }
    limited.toArray
  }

  private def splitRows: Long = options.splitRows.getOrElse(LanceScan.defaultSplit(snapshot, tableSchema))

  /** Partitions of about the same rows as [[planInputPartitions]]'s, but cut
    * only at `clustering`'s cuts (each value of its column in one partition),
    * each piece listing the cuts inside it (where a task may hand out the
    * groups it holds). */
  def planClusteredPartitions(clustering: Clustering): Array[InputPartition] =
    LanceScan.packAtCuts(planner.plans.map(p => p -> p.mayMatch.ranges), splitRows,
      (p: FragmentPlan, from: Long, until: Long) => clustering.within(p.fragment.id, from, until)).map { part =>
      LanceInputPartition(part.map { case (plan, ranges, cuts) =>
        FragmentPiece(plan.fragment, ranges, first = ranges.head._1 == plan.mayMatch.ranges.head._1, cuts)
      })
    }.toArray

  override def reportDriverMetrics(): Array[org.apache.spark.sql.connector.metric.CustomTaskMetric] =
    if (filter.isEmpty) Array.empty
    else Array(
      ScanMetrics.value(ScanMetrics.FragmentsPruned, planner.fragmentsPruned.toLong),
      ScanMetrics.value(ScanMetrics.PagesPruned, planner.pagesPruned),
      ScanMetrics.value(ScanMetrics.RowsSkippedByStats, planner.rowsSkipped))

  /** Made once per scan: Spark asks each copy of the scan's plan node for it
    * while it plans (to know whether the scan is columnar). */
  override def createReaderFactory(): PartitionReaderFactory = readerFactory

  private[read] lazy val readerFactory: LanceReaderFactory = {
    val session = SparkSession.active
    val conf = SerializableHadoopConf.broadcast(session)
    LanceReaderFactory(snapshot.storage.uri, snapshot.version, snapshot.schema, fields, dataSchema,
      metadataColumns, outputSchema, snapshot.hasStableRowIds, options, conf, filter, filterFields, limit)
  }

  /** Statistics of the scan as planned, for Spark's join planning: the rows
    * of the row ranges left after pruning (each fragment's share of them less
    * its deleted share), at most LIMIT; the bytes of the same share of each
    * fragment's files (what the scan returns, not what it reads), scaled by
    * the columns read as Spark scales a projection of a file relation (its
    * per-row size estimate: 8 bytes plus each column's default size), so a
    * Lance scan weighs its bytes on disk as a Parquet scan does.
    * From the manifest and the statistics already read for pruning; never
    * from the data. Fragments whose manifest entry has no file sizes count
    * Spark's per-row estimate per row. Under the cost-based optimizer the
    * rows are also scaled by the filter's estimated selectivity, the bytes are
    * the rows times the per-row size (as Spark sizes an analyzed table, in
    * any format), and the column statistics come with them. */
  override def estimateStatistics(): Statistics = {
    val shares = planner.plans.map { p =>
      val f = p.fragment
      val share = if (f.physicalRows > 0) p.mayMatch.count.toDouble / f.physicalRows else 0.0
      val bytes = LanceScan.fragmentBytes(f, tableSchema)
      val kept = if (f.physicalRows > 0) f.numRows.toDouble / f.physicalRows else 0.0
      (share * f.numRows, share * kept * bytes)
    }
    val cbo = SparkSession.active.sessionState.conf.cboEnabled
    // the filter's share of the rows left, as the optimizer estimates a Filter
    // above a scan (the scan evaluates its filter: no Filter is left to
    // estimate); only for the cost-based optimizer, which alone makes that estimate
    val kept = filter.filter(_ => cbo).fold(1.0) { f =>
      Selectivity.of(f, planner.summaries(f.columns.toSet))
    }
    val planned = shares.map(_._1).sum * kept
    val rows = math.min(planned, limit.fold(Double.MaxValue)(_.toDouble))
    // without the cost-based optimizer, the file bytes, as Spark sizes a file
    // relation; with it, the rows times Spark's per-row size, as it sizes an
    // analyzed table (`CatalogStatistics.toPlanStats`): then a join side
    // weighs the same whatever format its rows are stored in
    lazy val data = outputSchema.fields.filter(f => dataSchema.fieldNames.contains(f.name) && !metadataColumns.contains(f.name))
    lazy val summaries = planner.summaries(data.map(f => Vector(f.name)).toSet).map { case (c, s) => c -> s.filtered(kept) }
    def avgLens: Map[String, Long] = summaries.flatMap { case (c, s) => s.avgLen.map(c.head -> _) }
    val bytes =
      if (cbo) math.max(1.0, math.ceil(rows) * LanceScan.rowSize(outputSchema, avgLens))
      else shares.map(_._2).sum * kept * (if (planned > 0) rows / planned else 1.0) *
        LanceScan.rowSize(outputSchema) / LanceScan.rowSize(tableSchema)
    // column statistics only for the cost-based optimizer (the only user of
    // them): they read the page statistics of every column the scan returns,
    // carried through the filter as the optimizer carries them through a Filter
    val columns =
      if (!cbo) new java.util.HashMap[NamedReference, ColumnStatistics]()
      else CboStatistics.of(data.toSeq, summaries)
    LanceScan.statistics(math.ceil(rows).toLong, math.ceil(bytes).toLong, columns)
  }
}

object LanceScan {
  /** Spark's per-row size estimate of a schema (`EstimationUtils.getSizePerRow`'s
    * rule): 8 bytes, plus per column its mean length where known (a string's
    * plus 12, its object's overhead), else its type's default size. */
  def rowSize(schema: StructType, avgLen: Map[String, Long] = Map.empty): Double =
    8.0 + schema.fields.map { f =>
      avgLen.get(f.name).fold(f.dataType.defaultSize.toDouble) { n =>
        f.dataType match {
          case _: StringType => n + 12.0
          case _ => n.toDouble
        }
      }
    }.sum

  def statistics(rows: Long, bytes: Long,
                 columns: java.util.Map[NamedReference, ColumnStatistics] = java.util.Map.of()): Statistics = new Statistics {
    override def sizeInBytes(): OptionalLong = OptionalLong.of(bytes)
    override def numRows(): OptionalLong = OptionalLong.of(rows)
    override def columnStats(): java.util.Map[NamedReference, ColumnStatistics] = columns
  }

  /** Groups row ranges into partitions of at most `split` rows (long ranges are cut). */
  def chunks(ranges: Vector[(Long, Long)], split: Long): Vector[Vector[(Long, Long)]] =
    pack(Vector(() -> ranges), split).map(_.flatMap(_._2))

  /** The row ranges of several sources (fragments), in order, cut into
    * partitions of at most `split` rows: each partition its sources' ranges,
    * a source's ranges in one piece per partition. */
  def pack[K](sources: Vector[(K, Vector[(Long, Long)])], split: Long): Vector[Vector[(K, Vector[(Long, Long)])]] = {
    require(split > 0, s"rows per partition must be positive, got $split")
    val out = Vector.newBuilder[Vector[(K, Vector[(Long, Long)])]]
    var part = Vector.empty[(K, Vector[(Long, Long)])]
    var rows = 0L
    sources.foreach { case (key, ranges) =>
      var cur = Vector.empty[(Long, Long)]
      ranges.foreach { case (s0, e) =>
        var s = s0
        while (s < e) {
          val take = math.min(e - s, split - rows)
          cur :+= (s -> (s + take))
          rows += take
          s += take
          if (rows >= split) { part :+= (key -> cur); out += part; part = Vector.empty; cur = Vector.empty; rows = 0 }
        }
      }
      if (cur.nonEmpty) part :+= (key -> cur)
    }
    if (part.nonEmpty) out += part
    out.result()
  }

  /** Rows per partition when the read sets no `splitRows`: the rows shared
    * evenly among as many partitions as Spark's file scan makes of files of
    * the same bytes (`FilePartition`): a partition holds up to the table's
    * cost per core (cores: `spark.sql.files.minPartitionNum`, else the
    * default parallelism), at least `spark.sql.files.openCostInBytes` (4 MB)
    * and at most `spark.sql.files.maxPartitionBytes` (128 MB); the cost of a
    * fragment is its data bytes plus the open cost; a fragment larger than a
    * partition is cut, and the pieces are packed in order. So a table gets
    * one partition per core, one of a few MB a single partition, and many
    * small fragments a partition per few dozen of them, as the same bytes in
    * Parquet files would. Beyond one partition per core the count is rounded
    * up to a multiple of the cores. */
  def defaultSplit(snapshot: Snapshot, tableSchema: StructType): Long = {
    val session = SparkSession.active
    val conf = session.sessionState.conf
    val bytes = snapshot.fragments.map(fragmentBytes(_, tableSchema))
    val open = conf.filesOpenCostInBytes.toDouble
    val cores = math.max(1, conf.filesMinPartitionNum.getOrElse(session.sparkContext.defaultParallelism))
    val maxSplit = math.min(conf.filesMaxPartitionBytes.toDouble, math.max(open, bytes.map(_ + open).sum / cores))
    var partitions = 0L
    var current = 0.0 // the cost packed into the last partition
    bytes.foreach { b =>
      val pieces = math.max(1L, math.ceil(b / maxSplit).toLong)
      (0L until pieces).foreach { i =>
        val piece = math.min(maxSplit, b - i * maxSplit)
        if (partitions == 0 || current + piece > maxSplit) { partitions += 1; current = 0.0 }
        current += piece + open
      }
    }
    // more than one wave of tasks: whole waves, so that no core idles in the
    // last (a Parquet scan cannot cut its row groups so; row ranges can be cut)
    val tasks = if (partitions > cores) (partitions + cores - 1) / cores * cores else math.max(1L, partitions)
    val rows = snapshot.fragments.map(_.physicalRows).sum
    math.max(1L, (rows + tasks - 1) / tasks)
  }

  /** Like [[pack]], but a partition ends only at a position where the rows
    * may be cut: a cut (`cutsWithin(source, from, until)`: the cuts of a
    * source in [from, until], in order) at or after the end of the source's
    * rows before it, and at or before the start of the next rows. Each
    * partition ends at the first such position once it holds `split` rows.
    * Each piece comes with the positions inside it where the rows may be cut. */
  def packAtCuts[K](sources: Vector[(K, Vector[(Long, Long)])], split: Long,
                    cutsWithin: (K, Long, Long) => Vector[Long]): Vector[Vector[(K, Vector[(Long, Long)], Vector[Long])]] = {
    require(split > 0, s"rows per partition must be positive, got $split")
    type Piece = (K, Vector[(Long, Long)], Vector[Long])
    val out = Vector.newBuilder[Vector[Piece]]
    var part = Vector.empty[Piece]
    var rows = 0L
    sources.foreach { case (plan, ranges) =>
      var cur = Vector.empty[(Long, Long)]
      var curCuts = Vector.empty[Long]
      var readUpTo = 0L // end of the rows of this fragment read so far
      ranges.foreach { case (s, e) =>
        // the range's pieces between the cuts inside it
        val inside = cutsWithin(plan, s + 1, e - 1)
        val starts = s +: inside
        val ends = inside :+ e
        starts.zip(ends).foreach { case (a, b) =>
          val safe = cutsWithin(plan, readUpTo, a).nonEmpty
          if (safe && rows >= split) {
            if (cur.nonEmpty) part :+= ((plan, cur, curCuts))
            out += part
            part = Vector.empty; cur = Vector.empty; curCuts = Vector.empty; rows = 0L
          } else if (safe && rows > 0) curCuts :+= a
          // one range across the cuts inside a range (batches are not cut there)
          cur = cur.lastOption match {
            case Some((x, y)) if y == a => cur.init :+ (x -> b)
            case _ => cur :+ (a -> b)
          }
          rows += b - a
          readUpTo = b
        }
      }
      if (cur.nonEmpty) part :+= ((plan, cur, curCuts))
    }
    if (part.nonEmpty) out += part
    out.result()
  }

  /** The bytes of a fragment's data files; for a manifest without file sizes
    * (as older writers leave them), Spark's per-row estimate for each row. */
  def fragmentBytes(f: FragmentInfo, tableSchema: StructType): Double =
    if (f.files.forall(_.sizeBytes > 0)) f.files.map(_.sizeBytes).sum.toDouble
    else f.physicalRows * rowSize(tableSchema)
}
