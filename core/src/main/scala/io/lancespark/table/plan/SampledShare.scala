package io.lancespark.table.plan

import scala.util.Using

import org.apache.arrow.memory.RootAllocator

import io.lancespark.table.filter.Filter
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.Snapshot

/** The share of a scan's planned rows its filter keeps, measured on a sample
  * of them, for files whose statistics cannot estimate it (those of other
  * writers: pylance keeps no page statistics). The planned rows, in fragment
  * order, are cut into [[SampledShare.Windows]] equal strata; from each, one
  * run of [[SampledShare.WindowRows]] consecutive rows at a seeded random
  * position is read (the filter's columns only; deleted rows left out) and
  * the filter evaluated exactly: a run, not scattered rows, so that a stratum
  * costs one chunk of each column (a scattered sample would read most of
  * them); a random position, so that data with a period (cross-product
  * dimension tables) is not sampled at one phase; many short runs, not a few
  * long ones, since rows in runs of equal values (data sorted or clustered
  * by the filter's columns) make each run count about as one row.
  * Reproducible: the same plan gives the same sample. */
object SampledShare {
  val Windows: Int = 64
  val WindowRows: Int = 128

  /** The sampled share (hits over the non-deleted rows sampled), or None with
    * no planned row left after deletions. When no sampled row is kept, half a
    * stratum's share: matching rows in a run between two windows would not be
    * seen, so none seen is not taken for none there. All planned rows are read
    * (and the share is exact) when they are no more than the sample. */
  def of(snapshot: Snapshot, plans: Vector[FragmentPlan], filter: Filter, seed: Long = 0x5eedL): Option[Double] = {
    val ranges = windows(plans, seed)
    // the filter's columns that are the schema's (others, such as metadata columns, are the evaluator's)
    val fields = filter.columns.toSeq.map(_.head).distinct.flatMap(c => snapshot.schema.field(c))
    var hits = 0L
    var rows = 0L
    Using.resource(new RootAllocator()) { allocator =>
      ranges.groupBy(_._1).toVector.sortBy(_._1).foreach { case (i, rs) =>
        val read = rs.map(r => (r._2, r._3)).sortBy(_._1).toIndexedSeq
        Using.resource(FragmentScanner.of(snapshot, plans(i).fragment, Nil, Some(filter), allocator, _ => fields)) { s =>
          Using.resource(s.readView(read, None))(b => hits += b.rowCount)
          rows += s.liveRows(read)
        }
      }
    }
    val exact = ranges.map(r => r._3 - r._2).sum == plans.map(_.mayMatch.count).sum
    if (rows == 0) None
    else if (hits > 0 || exact) Some(hits.toDouble / rows)
    else Some(0.5 / Windows)
  }

  /** The physical row ranges to read, as (index into `plans`, from, until):
    * every planned row when they are few, else one window a stratum. */
  private[plan] def windows(plans: Vector[FragmentPlan], seed: Long): Vector[(Int, Long, Long)] = {
    // each planned range with the planned rows before it
    val spans = plans.zipWithIndex.flatMap { case (p, i) => p.mayMatch.ranges.map { case (a, b) => (i, a, b) } }
    val starts = spans.scanLeft(0L) { case (acc, (_, a, b)) => acc + (b - a) }.toArray
    val total = starts.last
    val sample = Windows.toLong * WindowRows
    if (total <= sample) return spans
    val random = new java.util.SplittableRandom(seed)
    val stratum = total / Windows
    (0 until Windows).toVector.flatMap { w =>
      val at = w * stratum + random.nextLong(stratum - WindowRows + 1)
      slice(spans, starts, at, at + WindowRows)
    }
  }

  /** The physical ranges of planned rows [from, until) (planned-row positions). */
  private def slice(spans: Vector[(Int, Long, Long)], starts: Array[Long], from: Long, until: Long): Vector[(Int, Long, Long)] = {
    val first = java.util.Arrays.binarySearch(starts, from) match {
      case k if k >= 0 => k
      case k => -k - 2
    }
    Iterator.from(first).takeWhile(k => k < spans.size && starts(k) < until).map { k =>
      val (i, a, b) = spans(k)
      (i, a + math.max(0L, from - starts(k)), math.min(b, a + (until - starts(k))))
    }.filter(r => r._3 > r._2).toVector
  }
}
