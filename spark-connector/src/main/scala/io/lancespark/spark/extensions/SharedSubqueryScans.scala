package io.lancespark.spark.extensions

import org.apache.spark.sql.catalyst.expressions.{AttributeReference, ExprId, Expression, PredicateHelper, ScalarSubquery,
  UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Average, Count, Max, Min, Sum}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, LogicalPlan, Project, SubqueryAlias, View}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.datasources.v2.{DataSourceV2Relation, DataSourceV2ScanRelation}
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import io.lancespark.spark.LanceTable
import io.lancespark.spark.options.ReadOptions
import io.lancespark.spark.read.LanceScan

/** Scalar subqueries over one Lance table with the same filter read it once,
  * as Spark reads a file table once for them.
  *
  * `SELECT count(*) FROM t WHERE q BETWEEN 1 AND 20`, `SELECT avg(a) FROM t
  * WHERE q BETWEEN 1 AND 20` and `SELECT avg(b) FROM t WHERE ...` in one query
  * (TPC-DS q9 has 15 of them, in 5 groups) are merged by Spark's optimizer
  * (`MergeScalarSubqueries`) into one aggregate over one scan when their
  * scans are the same. A file table's are: its columns are pruned after that
  * rule. A DataSource V2 table's scans are built, each with its own columns,
  * before it, so for Spark they differ and each subquery runs its own job.
  * This rule, before Spark's, gives the subqueries of such a group one scan
  * returning the union of their columns ([[LanceScan.mergedWith]]), the same
  * instance with the same output attributes, which Spark then merges.
  *
  * A Spark optimizer rule (`injectPreCBORule`: once, after the operator
  * optimizations, when the subqueries' plans are optimized and their scans
  * built) on the query's non-correlated scalar subqueries of the shape
  * `Aggregate` (no grouping; count, sum, avg, min, max) over Projects over a
  * `LanceScan` with no LIMIT. Aggregates pushed into a scan
  * (`LanceAggregateScan`) keep their scans: [[SharedSubqueryReads]] turns the
  * push-down off, at analysis, for the subqueries this rule can share. Off when Spark would not merge them
  * (subquery reuse off, its rule excluded) or `spark.lance.shareSubqueryScans`
  * is false. */
object SharedSubqueryScans extends Rule[LogicalPlan] {

  /** The session setting that turns the rule off. */
  val Conf: String = "spark.lance.shareSubqueryScans"

  private final case class Candidate(subquery: ScalarSubquery, relation: DataSourceV2ScanRelation, scan: LanceScan)

  override def apply(plan: LogicalPlan): LogicalPlan = {
    if (!enabled) return plan
    val candidates: Seq[Candidate] = scalarSubqueries(plan).flatMap(candidate)
    if (candidates.size < 2) return plan

    // groups of candidates whose scans merge (differ in their columns only)
    val groups = candidates.foldLeft(Vector.empty[(LanceScan, Vector[Candidate])]) { case (acc, c) =>
      val at = acc.indexWhere { case (merged, _) => merged.mergedWith(c.scan).isDefined }
      if (at < 0) acc :+ (c.scan -> Vector(c))
      else {
        val (merged, members) = acc(at)
        acc.updated(at, merged.mergedWith(c.scan).get -> (members :+ c))
      }
    }
    val replaced: Map[ExprId, LogicalPlan] = groups.filter { case (_, members) =>
      members.size > 1 && members.map(_.relation).distinct.size > 1
    }.flatMap { case (merged, members) => share(merged, members) }.toMap
    if (replaced.isEmpty) plan
    else plan.transformAllExpressions {
      case s: ScalarSubquery if replaced.contains(s.exprId) => s.withNewPlan(replaced(s.exprId))
    }
  }

  /** Each member's plan over one relation of `merged`, its attributes those
    * of the members where they return the column. */
  private def share(merged: LanceScan, members: Vector[Candidate]): Seq[(ExprId, LogicalPlan)] = {
    val known: Map[String, AttributeReference] =
      members.flatMap(_.relation.output).groupBy(_.name).map { case (n, as) => n -> as.head }
    val output = merged.readSchema().fieldNames.toSeq.map(known)
    val shared = withScan(members.head.relation, merged, output)
    val byName = output.map(a => a.name -> a).toMap
    members.map { m =>
      val rename: Map[ExprId, AttributeReference] = m.relation.output.map(a => a.exprId -> byName(a.name)).toMap
      val plan = m.subquery.plan.transformUp {
        case r: DataSourceV2ScanRelation if r eq m.relation => shared
      }.transformAllExpressions {
        case a: AttributeReference if rename.contains(a.exprId) => rename(a.exprId)
      }
      m.subquery.exprId -> plan
    }
  }

  /** `r` with another scan and output, its other fields as they are. By its
    * constructor's arguments (`makeCopy`), not `copy`: the relation's fields
    * change between Spark lines (4.3 adds some) and a compiled `copy` call
    * binds to one line's. */
  private def withScan(r: DataSourceV2ScanRelation, scan: LanceScan, output: Seq[AttributeReference]): LogicalPlan =
    replaced(r, Map[AnyRef, AnyRef](r.scan -> scan, r.output -> output))

  /** `node` made again from its constructor's arguments, those in `by`
    * (found by identity) replaced. */
  private[extensions] def replaced(node: LogicalPlan, by: Map[AnyRef, AnyRef]): LogicalPlan = {
    val args: Array[AnyRef] = node.productIterator.map { a =>
      val arg = a.asInstanceOf[AnyRef]
      by.collectFirst { case (k, v) if k eq arg => v }.getOrElse(arg)
    }.toArray
    node.makeCopy(args)
  }

  /** The subquery as a candidate: a mergeable aggregate over Projects over a Lance scan. */
  private def candidate(s: ScalarSubquery): Option[Candidate] =
    mergeableAggregateInput(s.plan).flatMap(leaf).collect {
      case r if r.scan.isInstanceOf[LanceScan] => Candidate(s, r, r.scan.asInstanceOf[LanceScan])
    }

  /** The plan's own non-correlated, deterministic scalar subqueries (not those nested in them). */
  private[extensions] def scalarSubqueries(plan: LogicalPlan): Seq[ScalarSubquery] =
    plan.flatMap(_.expressions).flatMap(_.collect {
      case s: ScalarSubquery if s.outerAttrs.isEmpty && s.deterministic => s
    })

  /** The input of an aggregate Spark can merge with another: no grouping, simple functions. */
  private[extensions] def mergeableAggregateInput(plan: LogicalPlan): Option[LogicalPlan] = plan match {
    case a: Aggregate if a.groupingExpressions.isEmpty && a.aggregateExpressions.forall(simple) => Some(a.child)
    case _ => None
  }

  private def leaf(plan: LogicalPlan): Option[DataSourceV2ScanRelation] = plan match {
    case Project(list, child) if list.forall(_.deterministic) => leaf(child)
    case r: DataSourceV2ScanRelation if r.relation.table.isInstanceOf[LanceTable] => Some(r)
    case _ => None
  }

  /** Aggregates that Spark merges with one another: hash aggregates (their
    * buffers of fixed-width types), not distinct, not filtered. */
  private def simple(e: Expression): Boolean =
    e.deterministic && e.collect { case a: AggregateExpression => a }.forall { a =>
      !a.isDistinct && a.filter.isEmpty && (a.aggregateFunction match {
        case f @ (_: Count | _: Sum | _: Average | _: Min | _: Max) =>
          f.aggBufferAttributes.forall(b => UnsafeRow.isMutable(b.dataType))
        case _ => false
      })
    }

  private[extensions] def enabled: Boolean = {
    val excluded = conf.getConfString("spark.sql.optimizer.excludedRules", "")
    conf.getConfString(Conf, "true").toBoolean &&
      conf.getConfString("spark.sql.execution.reuseSubquery", "true").toBoolean &&
      !excluded.contains("MergeScalarSubqueries") && !excluded.contains("MergeSubplans")
  }
}

/** The analysis side of [[SharedSubqueryScans]]: scalar subqueries that read
  * one Lance table with the same filter, two or more of them in a query,
  * have their reads' aggregate push-down turned off (the read option
  * `aggregatePushdown`), so that their scans stay plain row scans, which the
  * optimizer rule then shares and Spark merges into one job, instead of one
  * job per pushed aggregate. Subqueries alone with their table and filter keep
  * the push-down. An analyzer rule (`injectPostHocResolutionRule`): the
  * subqueries are optimized, and their scans built, before any optimizer rule
  * of the query sees them together. */
object SharedSubqueryReads extends Rule[LogicalPlan] with PredicateHelper {

  override def apply(plan: LogicalPlan): LogicalPlan = {
    if (!SharedSubqueryScans.enabled) return plan
    val reads: Seq[(ScalarSubquery, DataSourceV2Relation, Seq[Expression])] =
      SharedSubqueryScans.scalarSubqueries(plan).flatMap { s =>
        SharedSubqueryScans.mergeableAggregateInput(s.plan).flatMap(below(_, Vector.empty)).map(r => (s, r._1, r._2))
      }
    if (reads.size < 2) return plan
    val groups = reads.groupBy { case (_, r, conds) => (r.table.name(), r.options, conds.map(normalized).toSet) }
    val marked: Set[ExprId] = groups.values.filter(_.size > 1).flatten.map(_._1.exprId).toSet
    if (marked.isEmpty) plan
    else plan.transformAllExpressions {
      case s: ScalarSubquery if marked.contains(s.exprId) => s.withNewPlan(s.plan.transformUp {
        case r: DataSourceV2Relation if r.table.isInstanceOf[LanceTable] && !off(r) =>
          val opts = new java.util.HashMap[String, String](r.options.asCaseSensitiveMap())
          opts.put(ReadOptions.AggregatePushdown.name, "false")
          SharedSubqueryScans.replaced(r, Map[AnyRef, AnyRef](r.options -> new CaseInsensitiveStringMap(opts)))
      })
    }
  }

  private def off(r: DataSourceV2Relation): Boolean =
    Option(r.options.get(ReadOptions.AggregatePushdown.name)).contains("false")

  /** The Lance relation a plan reads through Projects, Filters, aliases and
    * views, with the Filters' conditions. */
  private def below(plan: LogicalPlan, conds: Vector[Expression]): Option[(DataSourceV2Relation, Seq[Expression])] =
    plan match {
      case Project(list, child) if list.forall(_.deterministic) => below(child, conds)
      case Filter(cond, child) if cond.deterministic => below(child, conds ++ splitConjunctivePredicates(cond))
      case SubqueryAlias(_, child) => below(child, conds)
      case v: View => below(v.child, conds)
      case r: DataSourceV2Relation if r.table.isInstanceOf[LanceTable] => Some(r -> conds)
      case _ => None
    }

  /** A condition with its attributes named only (ids and qualifiers dropped). */
  private def normalized(e: Expression): Expression = e.transform {
    case a: AttributeReference => a.withExprId(ExprId(0L)).withQualifier(Nil)
  }.canonicalized
}
