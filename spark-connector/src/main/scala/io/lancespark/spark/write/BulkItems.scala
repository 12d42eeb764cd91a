package io.lancespark.spark.write

import org.apache.arrow.vector.{BaseFixedWidthVector, BigIntVector, Float4Vector, Float8Vector, IntVector,
  SmallIntVector, TinyIntVector, ValueVector}
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.Platform

/** Copies a Spark array of primitive values into an Arrow vector of the same
  * width in one memory copy (embeddings: hundreds of floats per row), where
  * the array is in Spark's unsafe layout and holds no NULL; otherwise the
  * caller writes the items one by one. */
private[write] final class BulkItems private (vector: BaseFixedWidthVector, width: Int) {

  /** Copies the `n` items of `a` to items [start, start + n); false (nothing
    * written) when `a` is not an unsafe array without NULLs. */
  def copy(a: org.apache.spark.sql.catalyst.util.ArrayData, start: Int, n: Int): Boolean = a match {
    case u: UnsafeArrayData if n > 0 && !hasNulls(u, n) =>
      while (vector.getValueCapacity < start + n) vector.reAlloc()
      val values = u.getBaseOffset + 8L + BulkItems.nullWords(n) * 8L
      Platform.copyMemory(u.getBaseObject, values, null, vector.getDataBuffer.memoryAddress() + start.toLong * width,
        n.toLong * width)
      BulkItems.setValid(vector, start, n)
      true
    case _ => false
  }

  private def hasNulls(u: UnsafeArrayData, n: Int): Boolean = {
    val words = BulkItems.nullWords(n)
    var i = 0
    var any = false
    while (i < words && !any) {
      any = Platform.getLong(u.getBaseObject, u.getBaseOffset + 8L + i * 8L) != 0L
      i += 1
    }
    any
  }
}

private[write] object BulkItems {
  /** For an item vector and Spark element type of the same width, else None. */
  def of(items: ValueVector, et: DataType): Option[BulkItems] = (items, et) match {
    case (v: TinyIntVector, ByteType) => Some(new BulkItems(v, 1))
    case (v: SmallIntVector, ShortType) => Some(new BulkItems(v, 2))
    case (v: IntVector, IntegerType) => Some(new BulkItems(v, 4))
    case (v: BigIntVector, LongType) => Some(new BulkItems(v, 8))
    case (v: Float4Vector, FloatType) => Some(new BulkItems(v, 4))
    case (v: Float8Vector, DoubleType) => Some(new BulkItems(v, 8))
    case _ => None
  }

  private def nullWords(n: Int): Long = (n + 63L) / 64L

  /** Marks items [start, start + n) valid: whole bytes at once. */
  private def setValid(v: BaseFixedWidthVector, start: Int, n: Int): Unit = {
    val buf = v.getValidityBuffer
    var i = start
    val end = start + n
    while (i < end && (i & 7) != 0) { setBit(buf, i); i += 1 }
    val wholeBytes = (end - i) >>> 3
    if (wholeBytes > 0) {
      Platform.setMemory(buf.memoryAddress() + (i >>> 3), -1.toByte, wholeBytes.toLong)
      i += wholeBytes << 3
    }
    while (i < end) { setBit(buf, i); i += 1 }
  }

  private def setBit(buf: org.apache.arrow.memory.ArrowBuf, i: Int): Unit = {
    val at = (i >>> 3).toLong
    buf.setByte(at, buf.getByte(at) | (1 << (i & 7)))
  }
}
