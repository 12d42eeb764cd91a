package io.lancespark.table.plan

import org.apache.arrow.vector.types.pojo.ArrowType
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.table.filter.{CompareOp, Filter, Lit}
import io.lancespark.table.filter.Filter._

/** Shares worked out by hand: 1,000 rows, 100 NULL, values 0..99, 100 distinct. */
class SelectivitySuite extends AnyFunSuite {
  private val k = Vector("k")
  private val summaries = Map(k -> ColumnSummary(new ArrowType.Int(64, true), 1000, Some(100L),
    Some(java.lang.Long.valueOf(0L)), Some(java.lang.Long.valueOf(99L)), Some(100L)))
  private def share(f: Filter): Double = Selectivity.of(f, summaries)
  private def cmp(op: CompareOp, v: Long) = Compare(k, op, Lit.LongLit(v))

  test("equality, ranges, IN and NULL tests from distinct count, bounds and null count") {
    assert(math.abs(share(cmp(CompareOp.Eq, 5)) - 0.9 / 100) < 1e-12)
    assert(share(cmp(CompareOp.Eq, 500)) == 0.0)
    assert(math.abs(share(cmp(CompareOp.Lt, 33)) - 0.9 * 33.0 / 99) < 1e-12)
    assert(share(cmp(CompareOp.Gt, 99)) == 0.0 && math.abs(share(cmp(CompareOp.GtEq, 0)) - 0.9) < 1e-12)
    assert(math.abs(share(In(k, Vector(Lit.LongLit(1), Lit.LongLit(2), Lit.LongLit(500)))) - 0.9 * 2 / 100) < 1e-12)
    assert(math.abs(share(IsNull(k)) - 0.1) < 1e-12 && math.abs(share(IsNotNull(k)) - 0.9) < 1e-12)
  }

  test("AND multiplies, OR adds less the overlap; unknown columns keep every row") {
    val (a, b) = (cmp(CompareOp.Eq, 5), cmp(CompareOp.Lt, 33))
    assert(math.abs(share(Filter.And(a, b)) - share(a) * share(b)) < 1e-12)
    assert(math.abs(share(Filter.Or(a, b)) - (share(a) + share(b) - share(a) * share(b))) < 1e-12)
    assert(share(Compare(Vector("other"), CompareOp.Eq, Lit.LongLit(1))) == 1.0)
  }

  test("range bounds on one column are one interval, not the product of their shares") {
    // 0..99 uniform: [20, 50) is 30 of the 99 steps, of the 90% non-null rows
    val between = Filter.And(cmp(CompareOp.GtEq, 20), Filter.And(IsNotNull(Vector("other")), cmp(CompareOp.Lt, 50)))
    assert(math.abs(share(between) - 0.9 * 30.0 / 99) < 1e-12)
    assert(share(Filter.And(cmp(CompareOp.Gt, 60), cmp(CompareOp.Lt, 40))) == 0.0)
    // without min and max, each bound counts as Spark's default share, multiplied
    val unbounded = Map(k -> summaries(k).copy(min = None, max = None))
    val (lo, hi) = (cmp(CompareOp.GtEq, 20), cmp(CompareOp.Lt, 50))
    assert(math.abs(Selectivity.of(Filter.And(lo, hi), unbounded) -
      Selectivity.of(lo, unbounded) * Selectivity.of(hi, unbounded)) < 1e-12 && Selectivity.of(lo, unbounded) > 0)
    // the tightest of two upper bounds
    assert(math.abs(share(Filter.And(cmp(CompareOp.Lt, 50), cmp(CompareOp.Lt, 33))) - 0.9 * 33.0 / 99) < 1e-12)
  }

  test("a filter's share carries the rows, nulls and distinct values through it") {
    val s = summaries(k).filtered(0.25)
    assert(s.rows == 250 && s.nullCount.contains(25L) && s.distinct.contains(25L) && s.min == summaries(k).min)
    assert(summaries(k).filtered(1.0) == summaries(k))
  }
}
