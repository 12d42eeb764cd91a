package io.lancespark.table.plan

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.proto.table.DataFragment
import io.lancespark.table.filter.RowRanges
import io.lancespark.table.model.FragmentInfo

/** Where the sample of a plan's rows is taken (the share it measures is checked
  * against pylance's counts in `test_planning_statistics.py`). */
class SampledShareSuite extends AnyFunSuite {
  private def plan(id: Long, rows: Long, ranges: (Long, Long)*): FragmentPlan =
    FragmentPlan(FragmentInfo(id, Vector.empty, None, rows, DataFragment.getDefaultInstance), RowRanges.of(ranges: _*),
      RowRanges.of())

  private val plans = Vector(
    plan(0, 100000, (0L, 30000L), (50000L, 100000L)),   // 80,000 planned rows
    plan(1, 60000, (10000L, 11000L)),                     // 1,000
    plan(2, 200000, (0L, 200000L)))                        // 200,000

  test("one run of rows in each of the equal strata of the planned rows, within them, reproducible") {
    val w = SampledShare.windows(plans, 7L)
    assert(w == SampledShare.windows(plans, 7L) && w != SampledShare.windows(plans, 8L))
    // every sampled row is a planned row of its fragment, and no row is sampled twice
    w.foreach { case (i, a, b) => assert(b > a && plans(i).mayMatch.containsAll(a, b), (i, a, b)) }
    val rows = w.flatMap { case (i, a, b) => (a until b).map(i -> _) }
    assert(rows.size == SampledShare.Windows * SampledShare.WindowRows && rows.distinct.size == rows.size)
    // the planned rows in order: fragment 0's ranges, then fragment 1's, then 2's (281,000);
    // each stratum of 281,000 / 16 holds exactly one run of 512
    val order = plans.zipWithIndex.flatMap { case (p, i) => p.mayMatch.ranges.map { case (a, b) => (i, a, b) } }
    val before = order.scanLeft(0L)((acc, r) => acc + (r._3 - r._2))
    def position(i: Int, row: Long): Long = {
      val k = order.indexWhere(r => r._1 == i && row >= r._2 && row < r._3)
      before(k) + (row - order(k)._2)
    }
    val stratum = 281000L / SampledShare.Windows
    val perStratum = rows.groupBy { case (i, row) => position(i, row) / stratum }
    assert(perStratum.keySet == (0L until SampledShare.Windows).toSet && perStratum.values.forall(_.size == SampledShare.WindowRows))
    // a run that crosses from one planned range into the next continues there
    val crossing = SampledShare.windows(Vector(plan(0, 20000, (0L, 4100L), (9000L, 20000L))), 3L)
    assert(crossing.map(r => r._3 - r._2).sum == SampledShare.Windows * SampledShare.WindowRows)
  }

  test("every planned row when they are no more than the sample") {
    val few = Vector(plan(0, 5000, (0L, 3000L)), plan(1, 9000, (100L, 200L), (8000L, 9000L)))
    assert(SampledShare.windows(few, 1L) == Vector((0, 0L, 3000L), (1, 100L, 200L), (1, 8000L, 9000L)))
  }
}
