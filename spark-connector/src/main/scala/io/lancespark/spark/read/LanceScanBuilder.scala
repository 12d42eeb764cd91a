package io.lancespark.spark.read

import org.apache.spark.sql.connector.expressions.aggregate.{Aggregation, CountStar}
import org.apache.spark.sql.connector.expressions.filter.Predicate
import org.apache.spark.sql.connector.read.{Scan, ScanBuilder, SupportsPushDownAggregates, SupportsPushDownLimit, SupportsPushDownRequiredColumns, SupportsPushDownV2Filters}
import org.apache.spark.sql.types.{ArrayType, DataType, StructType}

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.spark.MetadataColumns
import io.lancespark.spark.options.ReadConf
import io.lancespark.table.filter.{Filter, FragmentStats, RowEvaluator}
import io.lancespark.table.model.Snapshot
import io.lancespark.table.scan.ScanPlanner

/** Column pruning (nested too); predicates the connector can evaluate exactly,
  * which prune fragments and pages by their statistics; LIMIT; COUNT(*)
  * answered from the manifest, or from statistics when they decide every row.
  *
  * The rows of the pages left are filtered by Spark (the predicates are also
  * returned as post-scan filters): its generated code is faster than an
  * evaluation here followed by a copy of the rows kept. Only when the
  * statistics decide every row range (each all or nothing) are the
  * predicates pushed whole, so that a COUNT(*) or LIMIT can be pushed too. */
final class LanceScanBuilder(snapshot: Snapshot, tableSchema: StructType, options: ReadConf)
    extends ScanBuilder with SupportsPushDownRequiredColumns with SupportsPushDownAggregates
    with SupportsPushDownV2Filters with SupportsPushDownLimit {

  private var required: StructType = tableSchema
  private var countOnly: Option[Int] = None
  private var accepted: Seq[(Predicate, Filter)] = Nil
  /** Whether Spark filters the rows read (the scan prunes by statistics only). */
  private var sparkFiltersRows: Boolean = false
  private var limit: Option[Int] = None

  override def pruneColumns(requiredSchema: StructType): Unit = required = requiredSchema

  override def pushPredicates(predicates: Array[Predicate]): Array[Predicate] = {
    if (!options.pushdown) return predicates
    val typeOf = (c: Filter.Column) => FragmentStats.field(snapshot.schema, c).map(_.arrowType)
    val (ok, rest) = predicates.toSeq.map(p => p -> PredicateTranslation(p)).partition {
      case (_, Some(f)) => RowEvaluator.unsupported(f, typeOf).isEmpty
      case _ => false
    }
    accepted = ok.map { case (p, f) => p -> f.get }
    sparkFiltersRows = accepted.nonEmpty && planner.countIfDecided.isEmpty
    if (sparkFiltersRows) predicates else rest.map(_._1).toArray
  }

  override def pushedPredicates(): Array[Predicate] = accepted.map(_._1).toArray

  private def filter: Option[Filter] = if (accepted.isEmpty) None else Some(Filter.and(accepted.map(_._2)))

  override def pushLimit(n: Int): Boolean = { limit = Some(n); true }

  override def isPartiallyPushed: Boolean = true

  override def pushAggregation(aggregation: Aggregation): Boolean = {
    val onlyCounts = aggregation.groupByExpressions().isEmpty &&
      aggregation.aggregateExpressions().forall(_.isInstanceOf[CountStar])
    if (!onlyCounts) return false
    val rows = filter match {
      case None => Some(snapshot.countRows)
      case Some(_) => planner.countIfDecided
    }
    if (rows.isDefined) countOnly = Some(aggregation.aggregateExpressions().length)
    countRows = rows
    rows.isDefined
  }

  private var countRows: Option[Long] = None

  /** Statistics are read once: by COUNT(*) pushdown if it asks, then by the scan. */
  private lazy val planner: ScanPlanner = ScanPlanner(snapshot, filter)

  override def supportCompletePushDown(aggregation: Aggregation): Boolean = true

  override def build(): Scan = (countOnly, countRows) match {
    case (Some(n), Some(rows)) => new LanceCountScan(rows, n, filter)
    case _ =>
      val (meta, data) = required.fields.partition(f => MetadataColumns.names.contains(f.name))
      val fields = data.toSeq.map(f => LanceScanBuilder.prune(field(f.name), f.dataType))
      val filterFields = filter.toSeq.flatMap(_.columns.map(_.head)).distinct.map(field)
      new LanceScan(snapshot, tableSchema, StructType(data), fields, meta.map(_.name).toSeq, required, options,
        filter, filterFields, limit, planner, filterRows = !sparkFiltersRows)
  }

  private def field(name: String): LanceField = snapshot.schema.field(name).getOrElse(
    throw new LanceFormatException(s"${snapshot.storage.uri}: no column '$name'"))
}

object LanceScanBuilder {
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
