package io.lancespark.table.plan

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
    case a: And => conjunction(conjuncts(a), summaries)
    case Or(l, r) => val (a, b) = (of(l, summaries), of(r, summaries)); a + b - a * b
    case Not(c) => 1.0 - of(c, summaries)
    case leaf => summaries.get(leaf.columns.head).fold(1.0)(leafShare(leaf, _))
  })

  private def conjuncts(f: Filter): Vector[Filter] = f match {
    case And(l, r) => conjuncts(l) ++ conjuncts(r)
    case other => Vector(other)
  }

  /** A range bound on an integer-like column with known min and max: `col < k`,
    * `col <= k`, `col > k`, `col >= k`. */
  private final case class Bound(column: Column, op: CompareOp, key: Long)

  private def bound(f: Filter, summaries: Map[Column, ColumnSummary]): Option[Bound] =
    if (!BoundLeaf.isLeaf(f)) None
    else for {
      s <- summaries.get(f.columns.head)
      if keyBounds(s).isDefined   // an interval needs min and max
      d <- Domain.of(s.arrowType)
      b <- BoundLeaf.bind(f, d).toOption
      if b.onNull == Outcomes.Null && b.onPass == Outcomes.True && b.onFail == Outcomes.False
      k <- Some(b.test).collect {
        case ValueTest.KeyCmp(op @ (CompareOp.Lt | CompareOp.LtEq | CompareOp.Gt | CompareOp.GtEq), key) => Bound(b.column, op, key)
      }
    } yield k

  /** Conjuncts multiply, except that the range bounds on one column are one
    * interval: `d >= a AND d < b` keeps the rows between a and b, as Spark's
    * filter estimation gets by narrowing the column's min and max at each
    * bound (not the product of the two shares). */
  private def conjunction(parts: Vector[Filter], summaries: Map[Column, ColumnSummary]): Double = {
    val bounds = parts.map(p => p -> bound(p, summaries))
    val intervals = bounds.collect { case (_, Some(b)) => b }.groupBy(_.column).filter(_._2.size > 1)
    val rest = bounds.collect { case (p, b) if b.forall(x => !intervals.contains(x.column)) => of(p, summaries) }
    rest.product * intervals.map { case (c, bs) => interval(bs, summaries(c)) }.product
  }

  /** Share of the rows within all of `bounds` (one column): below the lowest
    * upper bound less below-or-at the highest lower bound, of the non-null rows. */
  private def interval(bounds: Vector[Bound], s: ColumnSummary): Double = {
    if (s.rows <= 0) return 0.0
    val below = shareBelow(s)
    val upper = bounds.filter(b => b.op == CompareOp.Lt || b.op == CompareOp.LtEq)
      .map(b => below(b.key, b.op == CompareOp.LtEq)).reduceOption(_ min _).getOrElse(1.0)
    val lower = bounds.filter(b => b.op == CompareOp.Gt || b.op == CompareOp.GtEq)
      .map(b => below(b.key, b.op == CompareOp.Gt)).reduceOption(_ max _).getOrElse(0.0)
    (1.0 - nullShare(s)) * math.max(0.0, upper - lower)
  }

  private def clamp(x: Double): Double = if (x.isNaN) 1.0 else math.max(0.0, math.min(1.0, x))

  /** Share of the rows that are null (none when unknown); rows > 0. */
  private def nullShare(s: ColumnSummary): Double = s.nullCount.fold(0.0)(_.toDouble / s.rows)

  private def leafShare(leaf: Filter, s: ColumnSummary): Double = {
    if (s.rows <= 0) return 0.0
    val nulls = nullShare(s)
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
    val one = oneValue(s)
    val keys = keyBounds(s)
    def inRange(k: Long): Boolean = keys.forall(b => k >= b.lo && k <= b.hi)
    val below = shareBelow(s)
    test match {
      case Const(r) => if (r) 1.0 else 0.0
      case KeyCmp(op, k) => op match {
        case CompareOp.Eq | CompareOp.EqNullSafe => if (inRange(k)) one else 0.0
        case CompareOp.NotEq => if (inRange(k)) 1.0 - one else 1.0
        case CompareOp.Lt => below(k, false)
        case CompareOp.LtEq => below(k, true)
        case CompareOp.Gt => 1.0 - below(k, true)
        case CompareOp.GtEq => 1.0 - below(k, false)
      }
      case KeyIn(ks) => ks.count(inRange) * one
      case BytesCmp(CompareOp.Eq | CompareOp.EqNullSafe, _) | DecCmp(CompareOp.Eq | CompareOp.EqNullSafe, _) => one
      case BytesIn(vs) => vs.size * one
      case DecIn(vs) => vs.size * one
      case _ => 1.0
    }
  }

  /** Share of the non-null values equal to one value: 1/distinct. */
  private def oneValue(s: ColumnSummary): Double = s.distinct.filter(_ > 0).fold(0.1)(1.0 / _)

  private def keyBounds(s: ColumnSummary): Option[PageBounds.Keys] = PageBounds.of(s.arrowType, s.min, s.max) match {
    case k: PageBounds.Keys if k.lo != Long.MinValue && k.hi != Long.MaxValue => Some(k)
    case _ => None
  }

  /** Share of the non-null values below (or at, when inclusive) a key,
    * uniform between min and max (a third without bounds). */
  private def shareBelow(s: ColumnSummary): (Long, Boolean) => Double = {
    val one = oneValue(s)
    val keys = keyBounds(s)
    (k, inclusive) => keys.fold(1.0 / 3) { b =>
      if (k < b.lo || (k == b.lo && !inclusive)) 0.0
      else if (k > b.hi || (k == b.hi && inclusive)) 1.0
      else if (b.hi == b.lo) 1.0
      else math.min(1.0, (k.toDouble - b.lo) / (b.hi.toDouble - b.lo) + (if (inclusive) one else 0.0))
    }
  }
}
