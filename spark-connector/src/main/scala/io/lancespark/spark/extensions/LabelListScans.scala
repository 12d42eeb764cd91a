package io.lancespark.spark.extensions


import org.apache.spark.sql.catalyst.expressions.{And, ArrayContains, ArraysOverlap, Attribute, CreateArray, Expression, Literal, Or}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan, Project}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.execution.{SparkPlan, SparkStrategy}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation
import org.apache.spark.sql.types._

import io.lancespark.spark.read.{LanceScan, PredicateTranslation}
import io.lancespark.table.filter.Lit
import io.lancespark.table.index.{LabelClause, LabelTerm}

/** Lets a Lance scan use LABEL_LIST indices for `array_contains(col, v)` and
  * `arrays_overlap(col, array(v...))` on its list columns, which Spark does
  * not push to a V2 scan. A planner strategy (run after the optimizer, so
  * after the scan's push-down): on Projects and Filters over a Lance scan's
  * relation, the Filters' conjuncts that are such predicates, or ORs of them,
  * on top-level columns with literal values, become the scan's label clauses
  * ([[LanceScan.withLabels]]); the plan is then planned again with that scan
  * by Spark's own strategy. The Filters stay: Spark evaluates them on the rows
  * read, so the results are those without the index. */
object LabelListScans extends SparkStrategy {

  override def apply(plan: LogicalPlan): Seq[SparkPlan] = relation(plan) match {
    case Some(r) =>
      val scan = r.scan.asInstanceOf[LanceScan]
      val clauses = conditions(plan).flatMap(conjuncts).flatMap(c => clause(c, r)).distinct.toVector
      if (clauses.isEmpty) Nil
      else withScan(r, scan.withLabels(clauses)) match {
        case Some(narrowed) =>
          Seq(planLater(plan.transformDown { case x: DataSourceV2ScanRelation if x eq r => narrowed }))
        case None => Nil
      }
    case None => Nil
  }

  /** `r` with `scan` in place of its scan. Not `copy`: the relation's fields
    * differ between Spark lines sharing one bundle (4.2's and 4.3's), so its
    * constructor is called with its own fields (`makeCopy`); if that fails, the
    * scan is left as it is (no index, same rows). */
  private def withScan(r: DataSourceV2ScanRelation, scan: LanceScan): Option[DataSourceV2ScanRelation] =
    scala.util.Try {
      val args = r.productIterator.map {
        case s: LanceScan if s eq r.scan => scan
        case a => a.asInstanceOf[AnyRef]
      }.toArray
      r.makeCopy(args).asInstanceOf[DataSourceV2ScanRelation]
    }.toOption.filter(_.scan eq scan)

  /** The Lance scan relation under a chain of deterministic Projects and
    * Filters (at least one Filter), if its scan has no label clauses yet. */
  private def relation(p: LogicalPlan): Option[DataSourceV2ScanRelation] = {
    def go(q: LogicalPlan, sawFilter: Boolean): Option[DataSourceV2ScanRelation] = q match {
      case Project(list, child) if list.forall(_.deterministic) => go(child, sawFilter)
      case Filter(cond, child) if cond.deterministic => go(child, sawFilter = true)
      case r: DataSourceV2ScanRelation if sawFilter => r.scan match {
        case s: LanceScan if s.labels.isEmpty => Some(r)
        case _ => None
      }
      case _ => None
    }
    go(p, sawFilter = false)
  }

  private def conditions(p: LogicalPlan): Seq[Expression] = p match {
    case Project(_, child) => conditions(child)
    case Filter(cond, child) => cond +: conditions(child)
    case _ => Nil
  }

  private def conjuncts(e: Expression): Seq[Expression] = e match {
    case And(l, r) => conjuncts(l) ++ conjuncts(r)
    case other => Seq(other)
  }

  private def disjuncts(e: Expression): Seq[Expression] = e match {
    case Or(l, r) => disjuncts(l) ++ disjuncts(r)
    case other => Seq(other)
  }

  /** A conjunct as a clause: one label term, or an OR of them. */
  private def clause(e: Expression, r: DataSourceV2ScanRelation): Option[LabelClause] = {
    val terms = disjuncts(e).map(term(_, r))
    if (terms.forall(_.isDefined)) Some(LabelClause(terms.flatten.toVector)) else None
  }

  private def term(e: Expression, r: DataSourceV2ScanRelation): Option[LabelTerm] = e match {
    case ArrayContains(c: Attribute, v: Literal) => for {
      col <- column(c, r)
      lit <- lit(v.value, v.dataType)
    } yield LabelTerm(col, Vector(lit))
    case ArraysOverlap(c: Attribute, vs) if values(vs).isDefined => column(c, r).map(LabelTerm(_, values(vs).get))
    case ArraysOverlap(vs, c: Attribute) if values(vs).isDefined => column(c, r).map(LabelTerm(_, values(vs).get))
    case _ => None
  }

  /** The top-level list column of the relation `c` is. */
  private def column(c: Attribute, r: DataSourceV2ScanRelation): Option[Vector[String]] =
    r.output.find(_.exprId == c.exprId).filter(_.dataType.isInstanceOf[ArrayType]).map(a => Vector(a.name))

  /** The values of a literal array, or of an array of literals. */
  private def values(e: Expression): Option[Vector[Lit]] = e match {
    case Literal(null, _) => None
    case Literal(a: ArrayData, ArrayType(et, _)) =>
      val vs = (0 until a.numElements()).map(i => if (a.isNullAt(i)) Some(Lit.NullLit) else lit(a.get(i, et), et))
      if (vs.forall(_.isDefined)) Some(vs.flatten.toVector) else None
    case CreateArray(children, _) =>
      val vs = children.map {
        case l: Literal => lit(l.value, l.dataType)
        case _ => None
      }
      if (vs.forall(_.isDefined)) Some(vs.flatten.toVector) else None
    case _ => None
  }

  /** A Spark value as the filter's literal (as the pushed predicates' are).
    * Not floats: Spark's array_contains equates -0.0 and 0.0, the index's keys
    * differ. */
  private def lit(v: Any, t: DataType): Option[Lit] = t match {
    case ByteType | ShortType | IntegerType | LongType | DateType | TimestampType | _: StringType | BinaryType |
        BooleanType => PredicateTranslation.literalValue(v, t)
    case _ => if (v == null) Some(Lit.NullLit) else None
  }
}
