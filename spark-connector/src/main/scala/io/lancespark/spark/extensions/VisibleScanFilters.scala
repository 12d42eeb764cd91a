package io.lancespark.spark.extensions

import org.apache.spark.sql.catalyst.expressions.{And, Attribute, AttributeSet, EqualNullSafe, EqualTo, Expression, PredicateHelper, SubqueryExpression}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, LogicalPlan, Project}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

import io.lancespark.spark.LanceTable
import io.lancespark.table.filter.{Filter => LanceFilter}
import io.lancespark.table.plan.ScanPlanner

/** Shows Spark's dynamic pruning which small Lance tables a join reads filtered.
  *
  * Spark prunes the large side of a broadcast join at run time by the keys
  * the broadcast side holds (for a Lance scan see `LanceScan.filter`), but
  * only where it sees the broadcast side filtered: a `Filter` with a likely
  * selective predicate in its plan. Spark leaves a file table's predicates
  * above its scan, but a Lance scan takes its predicates into itself and
  * leaves none, so a fact table joined to `date_dim WHERE d_year = 2000` would
  * never be pruned by those dates. This rule (`injectPreCBORule`: after the
  * operator optimizations, before the scans are built) repeats, for a Lance
  * table read as one side of a join with at most a quarter of the broadcast
  * threshold's bytes of rows (2,621,440 rows at Spark's default 10 MB), the
  * likely selective conjuncts of its filter in a `Filter` above it: the scan
  * still evaluates the whole filter and returns only the rows that pass it,
  * and Spark evaluates those conjuncts again on these few rows. Not under the
  * cost-based optimizer (it would count their selectivity twice); the setting
  * `spark.lance.showScanFilters=false` turns it off.
  *
  * Nor where the table's page statistics show that its filter keeps many keys
  * ([[manyKeys]] by the statistics' estimate) spread over the whole range of
  * each of its join keys ([[ScanPlanner.keyShare]] at least [[SpreadShare]]):
  * TPC-H's `orders` filtered by a date or a status, whose `o_orderkey` values
  * lie anywhere. Such keys rule out no page of a table clustered by them, so
  * the scan would drop them when they arrive; until then Spark would have
  * collected them from the broadcast on the driver and held them, hundreds of
  * thousands of objects, for the whole query. */
object VisibleScanFilters extends Rule[LogicalPlan] with PredicateHelper {

  /** The session setting that turns the rule off. */
  val Conf: String = "spark.lance.showScanFilters"

  override def apply(plan: LogicalPlan): LogicalPlan =
    if (!conf.getConfString(Conf, "true").toBoolean || !conf.dynamicPartitionPruningEnabled || conf.cboEnabled) plan
    else plan.transformDown { case j: Join => j.mapChildren(side => shown(side, joinKeys(j, side.outputSet))) }

  /** The session setting of [[manyKeys]]. */
  val ManyKeysConf: String = "spark.lance.runtimeFilterSpreadKeys"

  /** Estimated keys from which a filtered table's join keys spread over their range are not shown
    * (session setting [[ManyKeysConf]], default 10,000). */
  private def manyKeys: Double =
    scala.util.Try(conf.getConfString(ManyKeysConf, "10000").trim.toDouble).getOrElse(10000.0)

  /** The share of a join key's range ([[ScanPlanner.keyShare]]) from which its keys count as spread over it. */
  val SpreadShare: Double = 0.9

  /** The attributes of `side` that the join's condition compares for equality with the other side. */
  private def joinKeys(j: Join, side: AttributeSet): Seq[Attribute] =
    j.condition.toSeq.flatMap(splitConjunctivePredicates).flatMap {
      case EqualTo(a: Attribute, b: Attribute) => Seq(a, b)
      case EqualNullSafe(a: Attribute, b: Attribute) => Seq(a, b)
      case _ => Nil
    }.filter(side.contains)

  /** A join side: the likely selective conjuncts of a small Lance table's filter repeated above it. */
  private def shown(side: LogicalPlan, keys: Seq[Attribute]): LogicalPlan = side match {
    case p @ Project(_, child) => p.withNewChildren(Seq(shown(child, keys)))
    case f @ Filter(cond, r: DataSourceV2Relation) if small(r) =>
      val selective = splitConjunctivePredicates(cond).filter(repeatable)
      if (selective.isEmpty || spread(r, cond, keys)) f else Filter(selective.reduce(And), f)
    case other => other
  }

  /** Whether the statistics of `r` show that `cond` keeps many rows whose
    * `keys` (each a column of `r`) lie all over each key's range. */
  private def spread(r: DataSourceV2Relation, cond: Expression, keys: Seq[Attribute]): Boolean = r.table match {
    case t: LanceTable if keys.nonEmpty =>
      val columns = keys.flatMap(k => r.output.find(_.exprId == k.exprId)).map(_.name).distinct
      val conjuncts = splitConjunctivePredicates(cond)
      val filters = conjuncts.flatMap(ResidualScanFilters.asFilter)
      // (the estimate is at most the table's rows: a table of fewer is not planned)
      columns.size == keys.distinct.size && filters.size == conjuncts.size && scala.util.Try {
        t.snapshot.countRows >= manyKeys && {
          val planner = ScanPlanner(t.snapshot, Some(LanceFilter.and(filters)))
          planner.plannedSize(1.0)._1 * planner.selectivity >= manyKeys &&
            columns.forall(c => planner.keyShare(c).exists(_ >= SpreadShare))
        }
      }.getOrElse(false)
    case _ => false
  }

  private def repeatable(c: Expression): Boolean =
    c.deterministic && !SubqueryExpression.hasSubquery(c) && isLikelySelective(c)

  private def small(r: DataSourceV2Relation): Boolean = r.table match {
    case t: LanceTable =>
      val threshold = conf.autoBroadcastJoinThreshold
      threshold > 0 && scala.util.Try(t.snapshot.countRows).toOption.exists(_ <= threshold / 4)
    case _ => false
  }
}
