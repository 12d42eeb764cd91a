package io.lancespark.spark.read

import java.util.OptionalLong

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, InterpretedUnsafeProjection}
import org.apache.spark.sql.connector.expressions.{Expressions, NamedReference}
import org.apache.spark.sql.connector.expressions.filter.Predicate
import org.apache.spark.sql.connector.read.colstats.ColumnStatistics
import org.apache.spark.sql.connector.read.{Batch, Scan, Statistics, SupportsReportStatistics, SupportsRuntimeV2Filtering}
import org.apache.spark.sql.types._

import io.lancespark.schema.LanceField
import io.lancespark.table.filter.Filter
import io.lancespark.table.index.LabelClause
import io.lancespark.table.scan.BlobColumns
import io.lancespark.spark.{ConfSource, HadoopConfs}
import io.lancespark.spark.options.ReadConf
import io.lancespark.table.storage.Snapshot
import io.lancespark.table.plan.Clustering
import io.lancespark.table.plan.FragmentPiece
import io.lancespark.table.plan.PartitionPlanner
import io.lancespark.table.plan.ScanPlanner
import io.lancespark.table.plan.SplitTarget

/** A scan of one version: the row ranges left after pruning, fragment after
  * fragment, packed into input partitions of about equal rows (see
  * [[PartitionPlanner]] and [[LanceScan.defaultSplit]]). `planConf`: the session's
  * Hadoop configuration when the scan was made, while the query was optimized (the
  * query plan's copy, [[HadoopConfs]]), which its reader factory ships: physical
  * planning, where Spark asks for the factory, has no query plan tracker to find it by. */
final class LanceScan(
    private val snapshot: Snapshot,
    private val tableSchema: StructType,
    private val dataSchema: StructType,
    private val fields: Seq[LanceField],
    private val metadataColumns: Seq[String],
    private val outputSchema: StructType,
    private val options: ReadConf,
    private val filter: Option[Filter] = None,
    private val filterFields: Seq[LanceField] = Nil,
    private val limit: Option[Int],
    private val planner: ScanPlanner,
    private val streamOptions: Map[String, String] = Map.empty,
    private val planConf: Configuration = HadoopConfs.active,
    private val splitByPlan: Boolean = false)
    extends Scan with SupportsReportStatistics with SupportsRuntimeV2Filtering {

  override def readSchema(): StructType = outputSchema

  /** What decides the rows and columns this scan returns: one version of one
    * dataset (its path, version and commit time), the columns, metadata
    * columns, filter, limit and read options. Two scans alike in all of these
    * return the same rows, so Spark may compute their exchanges once: it
    * compares scans with `equals` before reusing a shuffle or broadcast (as it
    * does for file scans), for example for the same join in a query and in its
    * subquery. Filters are compared up to the order of their operands. */
  private lazy val identity: (String, Long, Option[java.time.Instant], StructType, Seq[String], Option[Filter],
    Option[Int], ReadConf, Vector[LabelClause]) =
    (snapshot.storage.uri, snapshot.version, snapshot.timestamp, outputSchema, metadataColumns,
      filter.map(Filter.normalized), limit, options, planner.labels)

  /** The label predicates (`array_contains`/`arrays_overlap` on list columns)
    * the session extension found above this scan ([[LanceScan.withLabels]]). */
  def labels: Vector[LabelClause] = planner.labels

  /** This scan, its rows narrowed by `clauses` where LABEL_LIST indices
    * answer them (rows that may match; Spark still evaluates the predicates). */
  def withLabels(clauses: Vector[LabelClause]): LanceScan =
    new LanceScan(snapshot, tableSchema, dataSchema, fields, metadataColumns, outputSchema, options, filter,
      filterFields, limit, planner.withLabels(clauses), streamOptions, planConf)

  /** One scan returning the columns of both this one and `that`, when the two
    * differ in their columns only (the same version, filter, metadata
    * columns, read options and labels, no LIMIT): the data columns in the
    * table's order, then the metadata columns. None when they differ in more,
    * or read one column pruned to different nested fields. For scalar
    * subqueries over one table that Spark can then merge into one job
    * (see `io.lancespark.spark.extensions.SharedSubqueryScans`). */
  private[spark] def mergedWith(that: LanceScan): Option[LanceScan] = {
    val same = that.snapshot.storage.uri == snapshot.storage.uri && that.snapshot.version == snapshot.version &&
      that.snapshot.timestamp == snapshot.timestamp && that.metadataColumns == metadataColumns &&
      that.filter.map(Filter.normalized) == filter.map(Filter.normalized) && limit.isEmpty && that.limit.isEmpty &&
      that.options == options && that.planner.labels == planner.labels && that.streamOptions == streamOptions
    if (!same) return None
    val byName: Map[String, (LanceField, org.apache.spark.sql.types.StructField)] =
      (fields.zip(dataSchema.fields) ++ that.fields.zip(that.dataSchema.fields)).groupBy(_._1.name).flatMap {
        case (name, variants) if variants.map(_._2.dataType).distinct.size == 1 => Some(name -> variants.head)
        case _ => None
      }
    val names = (fields ++ that.fields).map(_.name).distinct
    if (names.exists(n => !byName.contains(n))) return None
    val ordered = tableSchema.fieldNames.toSeq.filter(byName.contains).map(byName)
    if (ordered.size != names.size) return None
    val data = StructType(ordered.map(_._2))
    val meta = outputSchema.fields.filter(f => metadataColumns.contains(f.name))
    // (the same filter: the same filter fields)
    Some(new LanceScan(snapshot, tableSchema, data, ordered.map(_._1), metadataColumns, StructType(data.fields ++ meta),
      options, filter, filterFields, limit, planner, streamOptions, planConf))
  }

  /** Whether `f` is one of the conjuncts of the scan's filter (up to their operands' order). */
  private[spark] def evaluatesAlready(f: Filter): Boolean = filterConjuncts.contains(Filter.normalized(f))

  private lazy val filterConjuncts: Set[Filter] = {
    def split(g: Filter): Seq[Filter] = g match {
      case Filter.And(l, r) => split(l) ++ split(r)
      case other => Seq(other)
    }
    filter.fold(Set.empty[Filter])(f => split(Filter.normalized(f)).toSet)
  }

  /** Whether the scan evaluates `f` exactly, as the push-down decides it ([[LanceScanBuilder.evaluable]]). */
  private[spark] def evaluates(f: Filter): Boolean = LanceScanBuilder.evaluable(snapshot, f)

  /** This scan with `more` predicates ANDed to its filter (those Spark
    * inferred after the push-down, see
    * `io.lancespark.spark.extensions.ResidualScanFilters`); None with a
    * LIMIT, which the filter would have to come before. */
  private[spark] def withMoreFilters(more: Seq[Filter], splitByPlan: Boolean = false): Option[LanceScan] =
    if (limit.isDefined || more.isEmpty) None
    else {
      val combined = Filter.and(filter.toSeq ++ more)
      val columns = combined.columns.toSeq.map(_.head).distinct
      val resolved = columns.flatMap(c => snapshot.schema.field(c))
      if (resolved.size != columns.size) None
      else Some(new LanceScan(snapshot, tableSchema, dataSchema, fields, metadataColumns, outputSchema, options,
        Some(combined), resolved, limit, planner.withFilter(Some(combined)), streamOptions, planConf, splitByPlan))
    }

  override def equals(other: Any): Boolean = other match {
    case that: LanceScan => that.identity == identity
    case _ => false
  }

  override def hashCode(): Int = identity.hashCode()

  override def toBatch: Batch = {
    val runtime = Option(pendingRuntime.get()).flatten
    pendingRuntime.remove()
    runtime match {
      case Some((narrowed, extra)) => new LanceBatch(this, narrowed.partitions, readerFactory, Some(extra))
      case None => new LanceBatch(this, partitions, readerFactory)
    }
  }

  /** The columns Spark may filter this scan by while the query runs: its
    * top-level data columns of integer, date, timestamp and string types
    * (the types of join keys) by which the scan's plan can be narrowed: an
    * index on the column, or page statistics showing its values clustered
    * ([[ScanPlanner.prunesBy]]); none with a LIMIT, nor for a scan of fewer
    * than [[LanceScan.runtimeFilterRows]] planned rows (a dimension: the pages
    * it could skip cost less than Spark's handling of the keys). Spark's dynamic pruning
    * then gives the scan, once the broadcast side of a join on such a column
    * is built, the keys it holds ([[filter]]). Not the others: pruning by
    * them would skip no page, and Spark's handling of the keys costs the
    * query more than dropping the rows early saves. */
  override def filterAttributes(): Array[NamedReference] = runtimeColumns

  private lazy val runtimeColumns: Array[NamedReference] =
    if (limit.isDefined || plannedRows < LanceScan.runtimeFilterRows) Array.empty
    else outputSchema.fields.filter { f =>
      dataSchema.fieldNames.contains(f.name) && !metadataColumns.contains(f.name) &&
        LanceScan.runtimeFilterable(f.dataType) && planner.prunesBy(f.name)
    }.map(f => Expressions.column("`" + f.name.replace("`", "``") + "`"))

  /** The planned rows and their bytes ([[ScanPlanner.plannedSize]]), found once. */
  private lazy val plannedSize: (Double, Double) = planner.plannedSize(LanceScan.rowSize(tableSchema))

  private def plannedRows: Double = plannedSize._1

  /** Predicates Spark found while running the query (dynamic pruning: `key IN
    * (the keys of the other side of a broadcast join)`): the next [[toBatch]]
    * on this thread plans the scan with them ANDed to its filter, so the page
    * statistics and indices prune by them, and its partitions carry them to
    * the readers, which drop the rows they reject (rows the join would drop).
    * Spark asks for the batch right after, on the same thread; a scan shared
    * by two plan nodes with different runtime filters thus plans each node's
    * own. Predicates the scan cannot evaluate exactly are left out, and all
    * of them when the plan they narrow keeps more than
    * [[LanceScan.RuntimeFilterKeep]] of the planned rows. */
  override def filter(predicates: Array[Predicate]): Unit = {
    val more = if (limit.isDefined) Nil else predicates.toSeq.flatMap(p => PredicateTranslation(p)).filter(evaluates)
    // kept only where the page statistics or an index rule out pages: keys
    // spread over every page (TPC-H's `lineitem` by the `orders` keys its
    // dates keep) would only be tested on every row, at more cost than the
    // join's own probe of the rows they drop; the narrowed scan resolved the
    // fields of every column its filter reads
    val runtime = withMoreFilters(more, splitByPlan = true)
      .filter(narrowed => narrowed.plannedRows <= LanceScan.RuntimeFilterKeep * plannedRows)
      .map(narrowed => narrowed -> RuntimeFilter(more, narrowed.filterFields))
    pendingRuntime.set(runtime)
    runtime.foreach(r => lastRuntime = Some(r._1))
  }

  /** The scan with the runtime predicates [[filter]] was last given on this
    * thread, and those predicates, until [[toBatch]] takes them. */
  private val pendingRuntime: ThreadLocal[Option[(LanceScan, RuntimeFilter)]] = new ThreadLocal()

  /** The scan narrowed by the last runtime predicates, for the metrics Spark shows. */
  @volatile private var lastRuntime: Option[LanceScan] = None

  /** `spark.readStream.format("lance")`: the versions after this one's, as micro-batches. */
  override def toMicroBatchStream(checkpointLocation: String): org.apache.spark.sql.connector.read.streaming.MicroBatchStream = {
    if (filter.isDefined || limit.isDefined || metadataColumns.nonEmpty)
      throw new IllegalArgumentException(s"${snapshot.storage.uri}: a streaming read returns the table's columns only")
    new io.lancespark.spark.streaming.LanceMicroBatchStream(snapshot, tableSchema, fields, dataSchema, outputSchema,
      options, io.lancespark.spark.options.StreamOptions.conf(streamOptions))
  }

  override def supportedCustomMetrics(): Array[org.apache.spark.sql.connector.metric.CustomMetric] = ScanMetrics.all

  override def description(): String =
    s"LanceScan(${snapshot.storage.uri}, version=${snapshot.version}, " +
      s"columns=[${outputSchema.fieldNames.mkString(", ")}], fragments=${snapshot.fragments.size}" +
      filter.fold("")(f => s", pushedFilters=[$f]") +
      (if (labels.isEmpty) "" else labels.mkString(", labels=[", ", ", "]")) +
      (if (planner.indicesUsed.isEmpty) "" else planner.indicesUsed.mkString(", indices=[", ", ", "]")) + limit.fold("")(n => s", limit=$n") + ")"

  /** The input partitions (see [[PartitionPlanner.partitions]]); without a
    * filter, a LIMIT leaves out those it does not need. */
  private[read] def partitions: Vector[Vector[FragmentPiece]] =
    PartitionPlanner.partitions(planner.plans, splitRows, limit.filter(_ => filter.isEmpty && labels.isEmpty).map(_.toLong))

  /** The dataset and version this scan reads. */
  private[spark] def source: (String, Long) = (snapshot.storage.uri, snapshot.version)

  /** The fragment ids each input partition reads, piece after piece, in
    * order: for writers that need each fragment's rows in one task
    * (add_columns without a shuffle). */
  private[spark] def fragmentsByPartition: Vector[Vector[Long]] = partitions.map(_.map(_.fragment.id))

  /** Rows per partition: the `splitRows` option, else by the session's file
    * partitioning over the whole table, or (a scan narrowed at run time, or
    * to the rows its indices selected) over the rows its plan kept: 100,000
    * rows an index picks out of 10M are shared among the cores, not packed
    * into partitions sized for the whole table (one task of 83,000 rows
    * beside one of 17,000). */
  private def splitRows: Long = options.splitRows.getOrElse(
    if (splitByPlan || planner.indicesUsed.nonEmpty) LanceScan.plannedSplit(planner, tableSchema, readShare)
    else LanceScan.defaultSplit(snapshot, tableSchema, readShare))

  /** The share of the fragments' bytes the scan reads: the bytes of its
    * stored output columns and of the columns only its filter reads, from one
    * fragment's column metadata ([[ScanPlanner.columnShare]]; 1 where the
    * files do not say). Partitions are sized by what their tasks read, not by
    * whole files: pylance's uncompressed `store_sales` (1.5 GB at TPC-DS scale
    * factor 3) made 16 partitions for any four of its columns where Parquet's
    * file scan makes 4, and with Spark's 200 shuffle partitions every map task
    * writes 200 shuffle files: q28 took 1.69x Parquet's time, 0.90x with 4. */
  private lazy val readShare: Double = {
    val stored = outputSchema.fieldNames.filter(n => dataSchema.fieldNames.contains(n) && !metadataColumns.contains(n))
    val names = (stored.toSeq ++ filterFields.map(_.name)).distinct
    planner.columnShare(names).map(s => math.min(1.0, math.max(0.0, s))).getOrElse(1.0)
  }

  /** Partitions cut only at `clustering`'s cuts (see [[PartitionPlanner.clusteredPartitions]]). */
  private[read] def clusteredPartitions(clustering: Clustering): Vector[Vector[FragmentPiece]] =
    PartitionPlanner.clusteredPartitions(planner.plans, splitRows, clustering)

  override def reportDriverMetrics(): Array[org.apache.spark.sql.connector.metric.CustomTaskMetric] =
    lastRuntime.getOrElse(this).plannerMetrics

  /** What the planner pruned (by statistics, by indices). */
  private def plannerMetrics: Array[org.apache.spark.sql.connector.metric.CustomTaskMetric] =
    if (filter.isEmpty && labels.isEmpty) Array.empty
    else Array(
      ScanMetrics.value(ScanMetrics.FragmentsPruned, planner.fragmentsPruned.toLong),
      ScanMetrics.value(ScanMetrics.PagesPruned, planner.pagesPruned),
      ScanMetrics.value(ScanMetrics.RowsSkippedByStats, planner.rowsSkipped),
      ScanMetrics.value(ScanMetrics.FragmentsPrunedByIndex, planner.fragmentsPrunedByIndex.toLong),
      ScanMetrics.value(ScanMetrics.FragmentsDecidedByIndex, planner.fragmentsDecidedByIndex.toLong),
      ScanMetrics.value(ScanMetrics.RowsSelectedByIndex, planner.rowsSelectedByIndex))

  /** Made once per scan: Spark asks each copy of the scan's plan node (each
    * its own batch) for it while it plans (to know whether the scan is columnar). */
  private[read] lazy val readerFactory: LanceReaderFactory =
    factoryWith(ConfSource.broadcast(SparkSession.active, planConf))

  private def factoryWith(conf: ConfSource): LanceReaderFactory =
    LanceReaderFactory(snapshot.storage.uri, snapshot.version, snapshot.schema, fields, dataSchema,
      metadataColumns, outputSchema, snapshot.hasStableRowIds, options, conf, filter, filterFields, limit)

  /** This scan's rows, read here on the driver, when the plan says they are
    * few: at most `localScanRows` rows planned (the row ranges left by the
    * manifest, the indices, `_rowaddr`/`_rowid` predicates and the page
    * statistics, less deleted shares; at most LIMIT) and at most
    * [[LanceScan.LocalScanBytes]] of them, and no blob values' bytes. The
    * same readers as the scan's tasks (its pieces, filter and LIMIT), so the
    * rows are the same. None: the scan runs as a Spark job. */
  private[spark] lazy val driverRows: Option[Vector[InternalRow]] = {
    val max = options.localScanRows
    if (max <= 0 || BlobColumns.readsBytes(fields)) None
    else {
      val rows = math.min(plannedRows, limit.fold(Double.MaxValue)(_.toDouble))
      if (rows > max || estimateStatistics().sizeInBytes().orElse(Long.MaxValue) > LanceScan.LocalScanBytes) None
      else Some(readAll())
    }
  }

  private def readAll(): Vector[InternalRow] = {
    // interpreted: a few thousand rows at most, fewer than it takes for generating and looking
    // up a projection's code (each query, a millisecond or two) to pay
    val toRow = InterpretedUnsafeProjection.createProjection(
      outputSchema.fields.toSeq.zipWithIndex.map { case (f, i) => BoundReference(i, f.dataType, f.nullable) })
    val onDriver = factoryWith(ConfSource.OnDriver(snapshot.storage.configuration))
    val cap = limit.fold(Long.MaxValue)(_.toLong)
    val out = Vector.newBuilder[InternalRow]
    var n = 0L
    partitions.iterator.takeWhile(_ => n < cap).foreach { pieces =>
      val reader = onDriver.createColumnarReader(LanceInputPartition(pieces))
      try {
        while (n < cap && reader.next()) {
          val it = reader.get().rowIterator()
          while (n < cap && it.hasNext) { out += toRow(it.next()).copy(); n += 1 }
        }
      } finally reader.close()
    }
    out.result()
  }

  /** The share of the planned bytes the scan's columns take: Spark's per-row
    * size estimate with the widths Lance stores ([[LanceScan.storedRowSize]],
    * Spark's rule for a Parquet relation, whose columns' bytes it does not
    * know), or the bytes of their columns in the files where those are less
    * (one fragment's column metadata; metadata columns, computed, at their
    * Spark size). Weighed by the types alone, the integer keys of a table
    * whose other columns pylance stored uncompressed weigh more than Parquet's
    * of the same rows (TPC-H Q18/Q21: sort-merge joins where Parquet
    * broadcasts); weighed by the bytes alone, its one-character strings
    * (4-byte offsets each) weigh more (TPC-DS q64 at scale factor 1). */
  private lazy val projectedShare: Double = {
    val (stored, computed) = outputSchema.fields.partition(f => dataSchema.fieldNames.contains(f.name) &&
      !metadataColumns.contains(f.name))
    val whole = LanceScan.storedRowSize(tableSchema)
    val byTypes = LanceScan.storedRowSize(outputSchema) / whole
    planner.columnShare(stored.map(_.name).toSeq) match {
      case Some(share) => math.min(byTypes, share + computed.map(f => f.dataType.defaultSize.toDouble).sum / whole)
      case None => byTypes
    }
  }

  /** The share of the planned rows the scan's filter keeps, found once: as
    * the statistics of its columns estimate it ([[ScanPlanner.selectivity]];
    * 1 without a filter or without statistics); but where some of its columns
    * have no statistics (files of other writers: pylance keeps none) and the
    * scan weighed at that share is more than Spark broadcasts, as measured on
    * a sample of the planned rows ([[ScanPlanner.sampledSelectivity]]: a few
    * thousand rows of the filter's columns read, the filter evaluated), so
    * that a selective filter on a dimension table lets it be broadcast as its
    * statistics would (TPC-DS q48, q85 and q91 on pylance's tables weighed
    * all 1.9 million rows of `customer_demographics` where their filters keep
    * under a tenth: sort-merge joins, 1.5x-2x Parquet's time). Only when the
    * decision depends on it: a scan already small enough, or with broadcasts
    * off, reads nothing. Session setting [[LanceScan.SampleFilterShareConf]]. */
  private lazy val filterShare: Double = {
    val estimated = planner.selectivity
    val threshold = SparkSession.active.sessionState.conf.autoBroadcastJoinThreshold
    def rowsAt(kept: Double): Double = math.min(plannedRows * kept, limit.fold(Double.MaxValue)(_.toDouble))
    def worth = threshold > 0 && LanceScan.sampleFilterShare && bytesAt(estimated, rowsAt(estimated)) > threshold &&
      planner.filterLacksStatistics
    if (filter.isEmpty || !worth) estimated else planner.sampledSelectivity.getOrElse(estimated)
  }

  /** The bytes of the scan without the cost-based optimizer, its filter
    * keeping `kept` of the planned rows and `rows` returned (see [[estimateStatistics]]). */
  private def bytesAt(kept: Double, rows: Double): Double = {
    val planned = plannedRows * kept
    math.max(plannedSize._2 * kept * (if (planned > 0) rows / planned else 1.0) * projectedShare,
      rows * LanceScan.rowSize(outputSchema) * LanceScan.InMemoryShare)
  }

  /** Statistics of the scan as planned, for Spark's join planning: the rows
    * of the row ranges left after pruning (each fragment's share of them less
    * its deleted share), times the share of them the scan's filter keeps as
    * the page statistics estimate it ([[filterShare]]: the scan evaluates its
    * filter, so no Filter is left above it for the optimizer to estimate), at
    * most LIMIT. The bytes: without the cost-based optimizer, the same share
    * of each fragment's files (what the scan returns, not what it reads),
    * scaled by the share of them its columns take ([[projectedShare]]:
    * Spark's per-row size rule for file relations, or their bytes in the
    * files where less), so a Lance scan weighs about what the same projection
    * of Parquet would whatever its writer compressed; but never less than
    * [[LanceScan.InMemoryShare]] of the rows times Spark's per-row size, so
    * that columns the files keep in a few bytes a row (codes of a few values,
    * keys written sorted) do not make millions of rows look small enough to
    * broadcast (TPC-DS q10, q35, q69 and q85 broadcast the 1.9 million rows
    * of `customer_demographics`, 1.0x-1.17x Parquet's time; 0.7x-0.8x not).
    * From the manifest, the column metadata of one data file and the
    * statistics already read for pruning; never from the data. Fragments
    * whose manifest entry has no file sizes count Spark's per-row estimate
    * per row. With the cost-based optimizer the bytes are the rows times the
    * per-row size (as Spark sizes an analyzed table, in any format), and the
    * column statistics come with them. */
  override def estimateStatistics(): Statistics = {
    val cbo = SparkSession.active.sessionState.conf.cboEnabled
    val kept = filterShare
    val planned = plannedRows * kept
    val rows = math.min(planned, limit.fold(Double.MaxValue)(_.toDouble))
    lazy val data = outputSchema.fields.filter(f => dataSchema.fieldNames.contains(f.name) && !metadataColumns.contains(f.name))
    lazy val summaries = planner.summaries(data.map(f => Vector(f.name)).toSet).map { case (c, s) => c -> s.filtered(kept) }
    def avgLens: Map[String, Long] = summaries.flatMap { case (c, s) => s.avgLen.map(c.head -> _) }
    val bytes =
      if (cbo) math.max(1.0, math.ceil(rows) * LanceScan.rowSize(outputSchema, avgLens))
      else bytesAt(kept, rows)
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
  /** The session setting of the fewest planned rows of a scan that Spark may
    * prune at run time (see [[LanceScan.filterAttributes]]; default 500,000). */
  val RuntimeFilterRowsConf: String = "spark.lance.runtimeFilterRows"

  /** The largest share of a scan's planned rows a runtime filter may leave
    * for the scan to take it ([[LanceScan.filter]]). */
  val RuntimeFilterKeep: Double = 0.9

  /** The session setting that, `false`, keeps a scan from sampling its rows
    * for its filter's share where its columns have no statistics (see
    * `filterShare`; default `true`). */
  val SampleFilterShareConf: String = "spark.lance.sampleFilterShare"

  def sampleFilterShare: Boolean = SparkSession.active.conf.get(SampleFilterShareConf, "true").trim.toLowerCase match {
    case "true" => true
    case "false" => false
    case other => throw new IllegalArgumentException(s"$SampleFilterShareConf must be true or false, not '$other'")
  }

  def runtimeFilterRows: Double =
    scala.util.Try(SparkSession.active.conf.get(RuntimeFilterRowsConf, "500000").trim.toDouble).getOrElse(500000.0)

  /** The least share of Spark's per-row size estimate (its in-memory size of
    * the rows) a scan's rows weigh without the cost-based optimizer: about
    * the least that Parquet files of TPC tables take of it (TPC-H `lineitem`
    * 0.19, `orders` 0.31 at scale factor 1), so a scan weighs no less than
    * well-compressed Parquet of its rows would; a third kept TPC-H Q7 and Q21
    * from broadcasting 1.5 to 1.8 million rows of two keys, which they gain
    * from (1.5x Parquet's time for Q21 at scale factor 0.3). */
  val InMemoryShare: Double = 0.2

  /** Most bytes (as [[LanceScan.estimateStatistics]] sizes them) a scan read on the driver may have. */
  val LocalScanBytes: Long = 64L << 20

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

  /** Spark's per-row size estimate with the widths Lance stores: the same
    * per-type sizes, but a decimal of any precision in 16 bytes (Arrow's
    * decimal128; Spark guesses 8 for precision 18 or less, as Parquet stores
    * them). A projection's share of a file's bytes is taken from it: with
    * Spark's own sizes the integer keys of a table of decimals, as pylance
    * writes it (uncompressed), weigh twice their share, and their joins
    * become sort-merge joins where Parquet's rows get broadcasts. */
  def storedRowSize(schema: StructType): Double = 8.0 + schema.fields.map(f => storedSize(f.dataType)).sum

  private def storedSize(t: DataType): Double = t match {
    case _: DecimalType => 16.0
    case s: StructType => s.fields.map(f => storedSize(f.dataType)).sum
    case other => other.defaultSize.toDouble
  }

  /** Whether a column of type `t` may be filtered at run time (see [[LanceScan.filterAttributes]]). */
  def runtimeFilterable(t: DataType): Boolean = t match {
    case ByteType | ShortType | IntegerType | LongType | DateType | TimestampType | TimestampNTZType => true
    case _: StringType => true
    case _ => false
  }

  def statistics(rows: Long, bytes: Long,
                 columns: java.util.Map[NamedReference, ColumnStatistics] = java.util.Map.of()): Statistics = new Statistics {
    override def sizeInBytes(): OptionalLong = OptionalLong.of(bytes)
    override def numRows(): OptionalLong = OptionalLong.of(rows)
    override def columnStats(): java.util.Map[NamedReference, ColumnStatistics] = columns
  }

  /** Rows per partition when the read sets no `splitRows` (see
    * [[PartitionPlanner.defaultSplit]]), by the session's file partitioning:
    * `spark.sql.files.maxPartitionBytes` (128 MB), `spark.sql.files.openCostInBytes`
    * (4 MB), cores `spark.sql.files.minPartitionNum`, else the default parallelism. */
  def defaultSplit(snapshot: Snapshot, tableSchema: StructType, share: Double = 1.0): Long =
    PartitionPlanner.defaultSplit(snapshot.fragments, rowSize(tableSchema), splitTarget, share)

  /** Like [[defaultSplit]] over the rows `planner` kept (see [[PartitionPlanner.plannedSplit]]). */
  def plannedSplit(planner: ScanPlanner, tableSchema: StructType, share: Double = 1.0): Long =
    PartitionPlanner.plannedSplit(planner.plans, rowSize(tableSchema), splitTarget, share)

  private def splitTarget: SplitTarget = {
    val session = SparkSession.active
    val conf = session.sessionState.conf
    SplitTarget(conf.filesMaxPartitionBytes, conf.filesOpenCostInBytes,
      conf.filesMinPartitionNum.getOrElse(session.sparkContext.defaultParallelism))
  }
}
