package io.lancespark.table.filter

import io.lancespark.format.input.LongArrayBuilder

/** A set of rows as sorted, disjoint, non-adjacent half-open ranges
  * [start, end). Immutable. */
final class RowRanges private (private val b: Array[Long]) {

  def numRanges: Int = b.length / 2
  def start(i: Int): Long = b(2 * i)
  def end(i: Int): Long = b(2 * i + 1)
  def ranges: Vector[(Long, Long)] = Vector.tabulate(numRanges)(i => (start(i), end(i)))
  def isEmpty: Boolean = b.isEmpty
  def nonEmpty: Boolean = b.nonEmpty
  /** Number of rows. */
  def count: Long = { var s = 0L; var i = 0; while (i < b.length) { s += b(i + 1) - b(i); i += 2 }; s }

  def contains(row: Long): Boolean = {
    // last range whose start <= row
    var lo = 0; var hi = numRanges - 1; var found = -1
    while (lo <= hi) {
      val mid = (lo + hi) >>> 1
      if (start(mid) <= row) { found = mid; lo = mid + 1 } else hi = mid - 1
    }
    found >= 0 && row < end(found)
  }

  /** Whether all of [from, until) is in the set. */
  def containsAll(from: Long, until: Long): Boolean =
    from >= until || intersect(RowRanges(from, until)).count == until - from

  def union(o: RowRanges): RowRanges = combine(o, _ || _)
  def intersect(o: RowRanges): RowRanges = combine(o, _ && _)
  def minus(o: RowRanges): RowRanges = combine(o, _ && !_)
  /** The rows of [0, numRows) not in the set. */
  def complement(numRows: Long): RowRanges = RowRanges(0, numRows).minus(this)

  /** Sweep over all boundaries of both sets (each sorted): between two
    * consecutive boundaries membership is constant; a row is in a set when an
    * odd number of its boundaries are at or below it. Linear, no boxing (an
    * index selection intersects sets of many thousand ranges). */
  private def combine(o: RowRanges, f: (Boolean, Boolean) => Boolean): RowRanges = {
    val a = b
    val c = o.b
    val out = new RowRanges.Builder
    var i = 0
    var j = 0
    var kept = false  // whether [s, next boundary) is in the result
    var s = 0L
    while (i < a.length || j < c.length) {
      val v = if (j >= c.length || (i < a.length && a(i) <= c(j))) a(i) else c(j)
      if (kept && v > s) out.add(s, v)
      while (i < a.length && a(i) <= v) i += 1
      while (j < c.length && c(j) <= v) j += 1
      kept = f((i & 1) == 1, (j & 1) == 1)
      s = v
    }
    out.result()
  }

  override def equals(o: Any): Boolean = o match {
    case r: RowRanges => java.util.Arrays.equals(b, r.b)
    case _ => false
  }
  override def hashCode: Int = java.util.Arrays.hashCode(b)
  override def toString: String = ranges.map { case (s, e) => s"[$s, $e)" }.mkString("RowRanges(", ", ", ")")
}

object RowRanges {
  val empty: RowRanges = new RowRanges(Array.emptyLongArray)

  def apply(start: Long, end: Long): RowRanges =
    if (end <= start) empty else new RowRanges(Array(start, end))

  def all(numRows: Long): RowRanges = apply(0, numRows)

  /** Any ranges, in any order, possibly overlapping. */
  def of(ranges: (Long, Long)*): RowRanges = {
    val out = new Builder
    ranges.filter(r => r._2 > r._1).sortBy(_._1).foreach { case (s, e) => out.add(s, e) }
    out.result()
  }

  /** Builds a set from ranges added in increasing order of start (overlapping
    * or adjacent ranges are merged). */
  final class Builder {
    private val out = new LongArrayBuilder
    private var curStart = -1L
    private var curEnd = -1L
    private var open = false
    def add(start: Long, end: Long): this.type = {
      if (end > start) {
        if (open && start <= curEnd) curEnd = math.max(curEnd, end)
        else {
          if (open) { require(start >= curEnd, "ranges must be added in increasing order"); out.add(curStart); out.add(curEnd) }
          curStart = start; curEnd = end; open = true
        }
      }
      this
    }
    def result(): RowRanges = {
      if (open) { out.add(curStart); out.add(curEnd); open = false }
      new RowRanges(out.result())
    }
  }
}
