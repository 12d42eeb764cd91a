package io.lancespark.format.arrow

import org.apache.arrow.memory.util.MemoryUtil
import org.apache.arrow.vector.{FieldVector, NullVector, ValueVector}

/** Null counts of Arrow vectors read from their validity bits 64 at a time
  * (Arrow's `getNullCount` reads them a byte at a time through checked
  * getters: a visible share of a scan's time over millions of values). */
object NullCounts {

  /** The number of null values of `v` (as `v.getNullCount`). */
  def count(v: ValueVector): Int = bits(v) match {
    case None => v.getNullCount
    case Some(address) =>
      val n = v.getValueCount
      val words = n >>> 6
      var valid = 0L
      var w = 0
      while (w < words) { valid += java.lang.Long.bitCount(MemoryUtil.getLong(address + 8L * w)); w += 1 }
      var i = words << 6
      while (i < n) { if ((MemoryUtil.getByte(address + (i >>> 3)) & (1 << (i & 7))) != 0) valid += 1; i += 1 }
      (n - valid).toInt
  }

  /** Whether any value of `v` is null, stopping at the first word holding one. */
  def any(v: ValueVector): Boolean = bits(v) match {
    case None => v.getNullCount > 0
    case Some(address) =>
      val n = v.getValueCount
      val words = n >>> 6
      var w = 0
      while (w < words && MemoryUtil.getLong(address + 8L * w) == -1L) w += 1
      if (w < words) true
      else {
        var i = words << 6
        while (i < n && (MemoryUtil.getByte(address + (i >>> 3)) & (1 << (i & 7))) != 0) i += 1
        i < n
      }
  }

  /** Whether each of `rows` (positions in `v`) is null, read from the
    * validity bits by address (bounds checked once, by [[bits]]). */
  def nullsAt(v: ValueVector, rows: Array[Int]): Array[Boolean] = bits(v) match {
    case None => Array.tabulate(rows.length)(j => v.isNull(rows(j)))
    case Some(address) =>
      val n = v.getValueCount
      val out = new Array[Boolean](rows.length)
      var j = 0
      while (j < rows.length) {
        val i = rows(j)
        if (i < 0 || i >= n) throw new IndexOutOfBoundsException(s"row $i of a vector of $n values")
        out(j) = (MemoryUtil.getByte(address + (i >>> 3)) & (1 << (i & 7))) == 0
        j += 1
      }
      out
  }

  /** The address of `v`'s validity bits, checked to hold one per value; None
    * where they cannot be read so (no values, no validity buffer, a null vector). */
  private def bits(v: ValueVector): Option[Long] = v match {
    case _: NullVector => None
    case f: FieldVector if f.getValueCount > 0 =>
      val b = f.getValidityBuffer
      if (b == null || b.capacity < (f.getValueCount + 7L) / 8 || b.memoryAddress() == 0L) None
      else Some(b.memoryAddress())
    case _ => None
  }
}
