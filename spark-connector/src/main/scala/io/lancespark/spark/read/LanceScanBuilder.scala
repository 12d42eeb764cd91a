package io.lancespark.spark.read

import org.apache.spark.sql.connector.expressions.aggregate.{Aggregation, CountStar}
import org.apache.spark.sql.connector.expressions.filter.Predicate
import org.apache.spark.sql.connector.read.{Scan, ScanBuilder, SupportsPushDownAggregates, SupportsPushDownLimit, SupportsPushDownRequiredColumns, SupportsPushDownV2Filters}
import org.apache.spark.sql.types.{ArrayType, DataType, StructType}

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.spark.MetadataColumns
import io.lancespark.spark.options.{NearestConf, ReadConf}
import io.lancespark.table.filter.{Filter, FragmentStats, RowEvaluator}
import io.lancespark.table.aggregate.{AggFn, Aggregator, NumType}
import io.lancespark.table.storage.Snapshot
import io.lancespark.table.plan.Clustering
import io.lancespark.table.plan.ScanPlanner

/** Column pruning (nested too); predicates the connector can evaluate exactly,
  * which prune fragments and pages by their statistics and are then
  * evaluated on the rows of the pages left (pushed whole: Spark does not
  * filter again, and may push an aggregate or LIMIT on top); LIMIT; COUNT(*)
  * answered from the manifest, or from statistics when they decide every row.
  *
  * The scan evaluates a batch's predicates column by column, a leaf only on
  * the rows its siblings left undecided and a string test once per
  * dictionary item, and hands Spark the rows kept in place (a selection over
  * the decoded vectors, not a copy). */
final class LanceScanBuilder(snapshot: Snapshot, tableSchema: StructType, options: ReadConf,
    nearest: Option[NearestConf] = None, streamOptions: Map[String, String] = Map.empty)
    extends ScanBuilder with SupportsPushDownRequiredColumns with SupportsPushDownAggregates
    with SupportsPushDownV2Filters with SupportsPushDownLimit {

  private var required: StructType = tableSchema
  private var countOnly: Option[Int] = None
  private var accepted: Seq[(Predicate, Filter)] = Nil
  private var limit: Option[Int] = None
  /** Rows named by address in the predicates (point reads; see [[RowAddressPredicates]]). */
  private var restriction: Option[io.lancespark.table.plan.RowRestriction] = None

  override def pruneColumns(requiredSchema: StructType): Unit = required = requiredSchema

  override def pushPredicates(predicates: Array[Predicate]): Array[Predicate] = {
    if (!options.pushdown || nearest.exists(!_.prefilter)) return predicates
    if (nearest.isEmpty) restriction = RowAddressPredicates.restriction(predicates.toSeq, snapshot)
    val (ok, rest) = predicates.toSeq.map(p => p -> PredicateTranslation(p)).partition {
      case (_, Some(f)) => LanceScanBuilder.evaluable(snapshot, f)
      case _ => false
    }
    accepted = ok.map { case (p, f) => p -> f.get }
    rest.map(_._1).toArray
  }

  override def pushedPredicates(): Array[Predicate] = accepted.map(_._1).toArray

  private def filter: Option[Filter] = if (accepted.isEmpty) None else Some(Filter.and(accepted.map(_._2)))

  /** A nearest-neighbour search takes no LIMIT or aggregate: Spark applies them to its k rows. */
  override def pushLimit(n: Int): Boolean = nearest.isEmpty && { limit = Some(n); true }

  override def isPartiallyPushed: Boolean = true

  override def pushAggregation(aggregation: Aggregation): Boolean =
    if (nearest.isDefined) false
    else if (countable(aggregation)) {
      countOnly = Some(aggregation.aggregateExpressions().length)
      true
    } else if (!options.aggregatePushdown) false
    else {
      complete = completable.collect { case (a, c) if a eq aggregation => c }
      // a partial aggregation whose sums would be set aside every few rows is left to Spark, and so is
      // one of many small groups: Spark's generated hash aggregation then beats ours, and it merges
      // about as many rows as it would have read (GROUP BY a customer id of a sales table)
      aggregate = AggregateTranslation(aggregation, tableSchema, snapshot.schema)
        .filter(t => complete.isDefined ||
          (Aggregator.fewSetAside(t.aggregation, planner.largestMagnitudes(t.aggregation.summedColumns)) &&
            (t.aggregation.groupBy.isEmpty ||
              planner.fewGroups(t.aggregation.groupBy, LanceScanBuilder.minRowsPerGroup(t.aggregation, options)))))
      aggregate.isDefined
    }

  /** COUNT(*)s only, answered from the manifest or from statistics that decide every row. */
  private def countable(aggregation: Aggregation): Boolean =
    restriction.isEmpty && aggregation.groupByExpressions().isEmpty &&
      aggregation.aggregateExpressions().forall(_.isInstanceOf[CountStar]) && countRows.isDefined

  private lazy val countRows: Option[Long] = planner.countRows

  /** The aggregation the scan computes, per task: partially (Spark merges the
    * tasks' rows), or completely when `complete` (see [[supportCompletePushDown]]). */
  private var aggregate: Option[AggregateTranslation.Translated] = None
  private var complete: Option[Clustering] = None
  /** The aggregation [[supportCompletePushDown]] last accepted, and the clustering it found. */
  private var completable: Option[(Aggregation, Clustering)] = None

  /** Statistics are read once: by COUNT(*) pushdown if it asks, then by the scan. */
  private lazy val planner: ScanPlanner = ScanPlanner(snapshot, filter, options.useIndex, restriction)

  /** COUNT(*)s answered without the data; or an aggregation the scan
    * computes whose GROUP BY includes a column that the statistics show
    * clustered over the planned fragments (see [[Clustering]]): each group's
    * rows then fall between two cuts, the partitions are cut there, and each
    * task gives its groups' final results, with no shuffle or final
    * aggregation after it. Only where the sums cannot overflow their result
    * type ([[Aggregator.completable]]). */
  override def supportCompletePushDown(aggregation: Aggregation): Boolean = {
    completable = None
    if (nearest.isDefined) false
    else if (countable(aggregation)) true
    else if (!options.aggregatePushdown) false
    else {
      completable = for {
        agg <- AggregateTranslation(aggregation, tableSchema, snapshot.schema)
        if agg.aggregation.groupBy.nonEmpty && Aggregator.completable(agg.aggregation)
        c <- planner.clustering(agg.aggregation.groupBy)
      } yield aggregation -> c
      completable.isDefined
    }
  }

  override def build(): Scan = (countOnly, aggregate) match {
    case _ if nearest.isDefined => knnScan(nearest.get)
    case (Some(n), _) => new LanceCountScan(countRows.getOrElse(snapshot.countRows), n, filter)
    case (_, Some(agg)) =>
      val columns = agg.aggregation.columns.map(field)
      val filterFields = filter.toSeq.flatMap(_.columns.map(_.head)).distinct.map(field)
      val data = StructType(columns.map(f => tableSchema(f.name)))
      val rows = new LanceScan(snapshot, tableSchema, data, columns, Nil, data, options, filter, filterFields,
        None, planner)
      new LanceAggregateScan(rows, snapshot.storage.uri, snapshot.version, agg.aggregation, agg.output, filter, complete)
    case _ =>
      val (meta, data) = required.fields.partition(f => MetadataColumns.names.contains(f.name))
      val fields = data.toSeq.map(f => LanceScanBuilder.prune(field(f.name), f.dataType))
      val filterFields = filter.toSeq.flatMap(_.columns.map(_.head)).distinct.map(field)
      new LanceScan(snapshot, tableSchema, StructType(data), fields, meta.map(_.name).toSeq, required, options,
        filter, filterFields, limit, planner, streamOptions)
  }

  /** The search's rows: the pushed predicates are its prefilter (those not
    * pushed Spark applies to the k rows found). */
  private def knnScan(conf: NearestConf): Scan = {
    val (meta, cols) = required.fields.partition(f => MetadataColumns.names.contains(f.name))
    if (meta.nonEmpty)
      throw new IllegalArgumentException(s"${snapshot.storage.uri}: a nearest-neighbour search does not return " +
        s"the metadata column(s) ${meta.map(_.name).mkString(", ")}")
    // bad input (no such column, not a vector column, wrong dimension) fails here, on the driver
    io.lancespark.table.index.vector.VectorColumn.of(snapshot, conf.column, conf.vector.size)
    val data = cols.filterNot(_.name == LanceKnnScan.Distance)
    val fields = data.toSeq.map(f => LanceScanBuilder.prune(field(f.name), f.dataType))
    new LanceKnnScan(snapshot.storage.uri, snapshot.version, snapshot.schema, fields, StructType(data), required,
      conf, filter, snapshot.fragments.size)
  }

  private def field(name: String): LanceField = snapshot.schema.field(name).getOrElse(
    throw new LanceFormatException(s"${snapshot.storage.uri}: no column '$name'"))
}

object LanceScanBuilder {
  /** Rows a group must average for a partial GROUP BY to be pushed: the
    * option's (default 1,000), or at most [[DecimalSumMinRowsPerGroup]] for
    * one grouping column and a SUM of decimals. Spark adds decimals through
    * `Decimal` objects and multiplies them through `java.math.BigDecimal`, row
    * by row; the scan's sums are long (or 128-bit) additions, which pays
    * even over small groups of one key. Measured in one session against
    * Spark's aggregation of the same batches (2 cores, TPC-H): `SUM(l_extendedprice
    * * (1 - l_discount)) GROUP BY l_partkey` (30 rows a group) 0.36x at
    * scale factor 1, 1.01x at 3 (600,000 groups); Q15's (21 rows a group after
    * its filter) 0.84x at 3; `SUM(o_totalprice) GROUP BY o_custkey` (about 20)
    * 0.85x at 3. Not for two grouping columns (`GROUP BY l_partkey, l_suppkey`,
    * 7.5 rows a group: 1.55x at 1) nor for counts and extremes (`COUNT(*),
    * MAX(l_linenumber) GROUP BY l_partkey`: 1.51x at 3), where Spark's
    * generated aggregation is the faster. */
  def minRowsPerGroup(aggregation: io.lancespark.table.aggregate.Aggregation, options: ReadConf): Long = {
    val decimalSum = aggregation.aggregates.exists {
      case AggFn.Sum(e) => e.tpe.isInstanceOf[NumType.Dec]
      case _ => false
    }
    if (aggregation.groupBy.size == 1 && decimalSum) math.min(options.aggregateMinRowsPerGroup, DecimalSumMinRowsPerGroup)
    else options.aggregateMinRowsPerGroup
  }

  val DecimalSumMinRowsPerGroup: Long = 10L

  /** Whether a scan of `snapshot` evaluates `f` exactly: its columns exist in the version, of types it compares. */
  def evaluable(snapshot: Snapshot, f: Filter): Boolean =
    RowEvaluator.unsupported(f, (c: Filter.Column) => FragmentStats.field(snapshot.schema, c).map(_.arrowType)).isEmpty

  /** Keeps the struct children (at any depth, through lists) that `wanted` names. */
  def prune(f: LanceField, wanted: DataType): LanceField = (wanted, f) match {
    case (st: StructType, _) if f.isStruct =>
      f.withChildren(st.fields.toVector.flatMap { sf =>
        f.children.find(_.name == sf.name).map(prune(_, sf.dataType))
      })
    case (at: ArrayType, _) if f.isList && f.children.nonEmpty =>
      f.withChildren(Vector(prune(f.children.head, at.elementType)))
    case _ => f
  }
}
