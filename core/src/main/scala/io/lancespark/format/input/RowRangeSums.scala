package io.lancespark.format.input

/** Sums over row ranges `[from, until)` without boxing each range's count
  * (`ranges.map(...).sum` boxes a `Long` per range, and a batch of rows an
  * index selected holds a range per row). */
object RowRangeSums {
  /** The rows of `ranges`. */
  def rows(ranges: IndexedSeq[(Long, Long)]): Long = {
    var n = 0L
    var i = 0
    while (i < ranges.length) { val r = ranges(i); n += r._2 - r._1; i += 1 }
    n
  }
}
