package io.lancespark.format.input

import org.scalatest.funsuite.AnyFunSuite

class PrimitiveBuildersSuite extends AnyFunSuite {
  test("the builders keep every value added, in order, across their growth") {
    val longs = new LongArrayBuilder
    val ints = new IntArrayBuilder
    val n = 1000
    (0 until n).foreach { i => longs.add(i.toLong * 3000000000L - 7); ints.add(i * 31 - 500) }
    assert(longs.length == n && ints.length == n)
    assert(longs.result().toSeq == (0 until n).map(i => i.toLong * 3000000000L - 7))
    assert(ints.result().toSeq == (0 until n).map(i => i * 31 - 500))
    assert(new LongArrayBuilder().result().isEmpty && new IntArrayBuilder().result().isEmpty)
  }

  test("row counts of ranges: the sum of until - from") {
    assert(RowRangeSums.rows(Vector((0L, 10L), (20L, 21L), (5000000000L, 5000000100L))) == 111L)
    assert(RowRangeSums.rows(Vector.empty) == 0L)
  }
}
