package io.lancespark.table.scan

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
}
