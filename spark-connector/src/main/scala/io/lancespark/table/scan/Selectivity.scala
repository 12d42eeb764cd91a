package io.lancespark.table.scan

import io.lancespark.table.filter.{BoundLeaf, CompareOp, Domain, Filter, Outcomes, PageBounds, ValueTest}
import io.lancespark.table.filter.Filter._

/** The estimated share of rows a filter keeps, from [[ColumnSummary]]s (a
  * cost-based optimizer's estimate, as Spark's own filter estimation makes
  * it from column statistics: equality 1/distinct, ranges by the position of
  * the literal between min and max, IN its values in range over distinct,
  * IS NULL the null share; AND multiplies, OR adds less the overlap). What it
  * cannot estimate counts as keeping every row. */
object Selectivity {

  def of(filter: Filter, summaries: Map[Column, ColumnSummary]): Double = clamp(filter match {
    case AlwaysTrue => 1.0
    case AlwaysFalse => 0.0
    case And(l, r) => of(l, summaries) * of(r, summaries)
    case Or(l, r) => val (a, b) = (of(l, summaries), of(r, summaries)); a + b - a * b
    case Not(c) => 1.0 - of(c, summaries)
    case leaf => summaries.get(leaf.columns.head).fold(1.0)(leafShare(leaf, _))
  })

  private def clamp(x: Double): Double = if (x.isNaN) 1.0 else math.max(0.0, math.min(1.0, x))

  private def leafShare(leaf: Filter, s: ColumnSummary): Double = {
    if (s.rows <= 0) return 0.0
    val nulls = s.nullCount.fold(0.0)(_.toDouble / s.rows)
    leaf match {
      case IsNull(_) => nulls
      case IsNotNull(_) => 1.0 - nulls
      case _ =>
        Domain.of(s.arrowType).flatMap(d => BoundLeaf.bind(leaf, d).toOption).fold(1.0) { b =>
          val pass = passShare(b.test, s)
          val onTrue = (if (b.onPass.contains(Outcomes.True)) pass else 0.0) +
            (if (b.onFail.contains(Outcomes.True)) 1.0 - pass else 0.0)
          (if (b.onNull.contains(Outcomes.True)) nulls else 0.0) + (1.0 - nulls) * onTrue
        }
    }
  }

  /** Share of the non-null values that pass the test. */
  private def passShare(test: ValueTest, s: ColumnSummary): Double = {
    import ValueTest._
    val one = s.distinct.filter(_ > 0).fold(0.1)(1.0 / _)
    val keys = PageBounds.of(s.arrowType, s.min, s.max) match {
      case k: PageBounds.Keys if k.lo != Long.MinValue && k.hi != Long.MaxValue => Some(k)
      case _ => None
    }
    def inRange(k: Long): Boolean = keys.forall(b => k >= b.lo && k <= b.hi)
    /** Share of values below (or at, `inclusive`) k. */
    def below(k: Long, inclusive: Boolean): Double = keys.fold(1.0 / 3) { b =>
      if (k < b.lo || (k == b.lo && !inclusive)) 0.0
      else if (k > b.hi || (k == b.hi && inclusive)) 1.0
      else if (b.hi == b.lo) 1.0
      else (k.toDouble - b.lo) / (b.hi.toDouble - b.lo) + (if (inclusive) one else 0.0)
    }
    test match {
      case Const(r) => if (r) 1.0 else 0.0
      case KeyCmp(op, k) => op match {
        case CompareOp.Eq | CompareOp.EqNullSafe => if (inRange(k)) one else 0.0
        case CompareOp.NotEq => if (inRange(k)) 1.0 - one else 1.0
        case CompareOp.Lt => below(k, inclusive = false)
        case CompareOp.LtEq => below(k, inclusive = true)
        case CompareOp.Gt => 1.0 - below(k, inclusive = true)
        case CompareOp.GtEq => 1.0 - below(k, inclusive = false)
      }
      case KeyIn(ks) => ks.count(inRange) * one
      case BytesCmp(CompareOp.Eq | CompareOp.EqNullSafe, _) | DecCmp(CompareOp.Eq | CompareOp.EqNullSafe, _) => one
      case BytesIn(vs) => vs.size * one
      case DecIn(vs) => vs.size * one
      case _ => 1.0
    }
  }
}
