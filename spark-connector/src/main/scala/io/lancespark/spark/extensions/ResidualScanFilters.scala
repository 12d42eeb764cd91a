package io.lancespark.spark.extensions

import org.apache.spark.sql.catalyst.expressions.{And, Expression, PredicateHelper, SubqueryExpression}
import org.apache.spark.sql.catalyst.plans.logical.{Filter => FilterNode, LogicalPlan}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.util.V2ExpressionBuilder
import org.apache.spark.sql.connector.expressions.filter.Predicate
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation

import io.lancespark.spark.LanceTable
import io.lancespark.spark.MetadataColumns
import io.lancespark.spark.read.{LanceScan, PredicateTranslation}
import io.lancespark.table.filter.Filter

/** Predicates Spark puts above a Lance scan after it was built go into the
  * scan, as Spark's file tables take every predicate above them into their
  * scan when it is planned.
  *
  * A subquery (a correlated one that Spark turns into a join, a CTE used
  * twice) is optimized, and its scans built with the predicates pushed then,
  * before the query around it; Spark then infers more predicates for the
  * query (`IS NOT NULL` of join keys, mostly) and places them above the scans
  * already built, where they stay as a `Filter`. Two reads of one table alike
  * but for such a `Filter` (TPC-DS q1, q30, q81: `date_dim` and
  * `customer_address` in the CTE and in its decorrelated subquery) then have
  * different plans, and Spark builds their broadcasts twice; for a file
  * table the predicates all end up in the same scan and the broadcast is
  * reused. This rule (`injectPreCBORule`: after the operator optimizations,
  * before the statistics are used) ANDs the predicates the scan can evaluate
  * exactly into its filter ([[LanceScan.withMoreFilters]]) and keeps only
  * the others above it. Not for a scan with a LIMIT, nor for predicates on
  * metadata columns or with subqueries. Session setting
  * `spark.lance.pushResidualFilters=false` turns it off. */
object ResidualScanFilters extends Rule[LogicalPlan] with PredicateHelper {

  /** The session setting that turns the rule off. */
  val Conf: String = "spark.lance.pushResidualFilters"

  override def apply(plan: LogicalPlan): LogicalPlan =
    if (!conf.getConfString(Conf, "true").toBoolean) plan
    else plan.transform {
      case f @ FilterNode(_, r: DataSourceV2ScanRelation) if r.relation.table.isInstanceOf[LanceTable] =>
        r.scan match {
          case scan: LanceScan => pushed(f, r, scan)
          case _ => f
        }
    }

  /** The filter `f` over `r` with the conjuncts `scan` evaluates moved into it. */
  private def pushed(f: FilterNode, r: DataSourceV2ScanRelation, scan: LanceScan): LogicalPlan = {
    // a likely selective conjunct the scan already evaluates stays where it is: VisibleScanFilters shows it
    // above the scan (as it does above the same read of a CTE in the query around this subquery)
    val (taken, kept) = splitConjunctivePredicates(f.condition).map(c => c -> translated(c, r, scan))
      .partition { case (c, t) => t.exists(x => !(isLikelySelective(c) && scan.evaluatesAlready(x))) }
    if (taken.isEmpty) f
    else scan.withMoreFilters(taken.flatMap(_._2)) match {
      case None => f
      case Some(more) =>
        val rel = SharedSubqueryScans.replaced(r, Map[AnyRef, AnyRef](r.scan -> more))
        kept.map(_._1).reduceOption(And).fold(rel)(FilterNode(_, rel))
    }
  }

  /** `c` as a filter the scan evaluates exactly, when it is one. */
  private def translated(c: Expression, r: DataSourceV2ScanRelation, scan: LanceScan): Option[Filter] =
    if (!c.references.subsetOf(r.outputSet) || c.references.exists(a => MetadataColumns.names.contains(a.name))) None
    else asFilter(c).filter(scan.evaluates)

  /** A deterministic conjunct without subqueries as a Lance filter, when Spark's
    * V2 predicates and [[PredicateTranslation]] express it. */
  private[extensions] def asFilter(c: Expression): Option[Filter] =
    if (!c.deterministic || SubqueryExpression.hasSubquery(c)) None
    else new V2ExpressionBuilder(c, true).build().collect { case p: Predicate => p }.flatMap(p => PredicateTranslation(p))
}
