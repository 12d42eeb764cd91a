package io.lancespark.spark.extensions

import org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LocalRelation, LogicalPlan, Project}
import org.apache.spark.sql.execution.{SparkPlan, SparkStrategy}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation

import io.lancespark.spark.LanceTable
import io.lancespark.spark.read.LanceScan

/** Lookups without a Spark job: a Lance scan whose plan leaves few rows (a
  * point lookup through a scalar index, `_rowaddr IN (...)`, a small LIMIT;
  * see [[LanceScan.driverRows]]) is read on the driver while the query is
  * planned and becomes a local relation of those rows; the Projects and
  * Filters above it are evaluated there too (Spark's own
  * `ConvertToLocalRelation`), so `collect()` runs no job: a lookup costs the
  * query's planning and the reads of the chunks holding its rows, not a
  * job's scheduling.
  *
  * A planner strategy (after the optimizer and the scan's push-down, so the
  * scan knows its filter, columns and LIMIT, and after [[LabelListScans]]) on
  * deterministic Projects and Filters over a scan of a Lance table (not the
  * scans of DELETE, UPDATE or MERGE, which run as jobs). */
object LocalScans extends SparkStrategy {

  override def apply(plan: LogicalPlan): Seq[SparkPlan] = relation(plan) match {
    case Some(r) => r.scan.asInstanceOf[LanceScan].driverRows match {
      case Some(rows) =>
        val local = plan.transformDown { case x: DataSourceV2ScanRelation if x eq r => LocalRelation(r.output, rows) }
        Seq(planLater(fold(local, 16)))
      case None => Nil
    }
    case None => Nil
  }

  /** The Projects and Filters over a local relation, evaluated into it. */
  private def fold(p: LogicalPlan, rounds: Int): LogicalPlan = {
    val next = ConvertToLocalRelation(p)
    if (rounds <= 0 || next.fastEquals(p)) next else fold(next, rounds - 1)
  }

  /** The Lance table scan under a chain of deterministic Projects and Filters. */
  private def relation(p: LogicalPlan): Option[DataSourceV2ScanRelation] = p match {
    case Project(list, child) if list.forall(_.deterministic) => relation(child)
    case Filter(cond, child) if cond.deterministic => relation(child)
    case r: DataSourceV2ScanRelation if r.relation.table.isInstanceOf[LanceTable] => r.scan match {
      case _: LanceScan => Some(r)
      case _ => None
    }
    case _ => None
  }
}
