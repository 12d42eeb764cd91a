package io.lancespark.spark.extensions

import org.apache.spark.sql.catalyst.expressions.{And, Expression, PredicateHelper, SubqueryExpression}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, LogicalPlan, Project}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

import io.lancespark.spark.LanceTable

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
  * `spark.lance.showScanFilters=false` turns it off. */
object VisibleScanFilters extends Rule[LogicalPlan] with PredicateHelper {

  /** The session setting that turns the rule off. */
  val Conf: String = "spark.lance.showScanFilters"

  override def apply(plan: LogicalPlan): LogicalPlan =
    if (!conf.getConfString(Conf, "true").toBoolean || !conf.dynamicPartitionPruningEnabled || conf.cboEnabled) plan
    else plan.transformDown { case j: Join => j.mapChildren(shown) }

  /** A join side: the likely selective conjuncts of a small Lance table's filter repeated above it. */
  private def shown(side: LogicalPlan): LogicalPlan = side match {
    case p @ Project(_, child) => p.withNewChildren(Seq(shown(child)))
    case f @ Filter(cond, r: DataSourceV2Relation) if small(r) =>
      val selective = splitConjunctivePredicates(cond).filter(repeatable)
      if (selective.isEmpty) f else Filter(selective.reduce(And), f)
    case other => other
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
