package io.lancespark.table.index

import org.apache.arrow.vector._
import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision}
import org.apache.arrow.vector.types.pojo.ArrowType

/** The values of a fixed-width column as `long` sort keys: the signed order
  * of the keys is [[IndexValues.ordering]] of the values, so that an index
  * build sorts and merges primitive arrays instead of boxed values. Integers,
  * dates and timestamps are their own keys; a float or double is the bits of
  * the double turned so that signed order is `java.lang.Double.compare` (NaN
  * last, -0.0 before 0.0); a boolean is 0 or 1. Nulls have no key (they are
  * kept apart: they sort first). */
sealed abstract class KeyCodec {
  /** Row `i` of `v` (not null) as a key. */
  def key(v: ValueVector, i: Int): Long
  /** A value in [[IndexValues]]' form (not null) as a key. */
  def keyOf(value: Any): Long
  /** A key as a value in [[IndexValues]]' form. */
  def value(key: Long): Any
  /** Sets row `i` of `v` (a vector of the codec's type, allocated) to `key`. */
  def set(v: FieldVector, i: Int, key: Long): Unit
}

object KeyCodec {

  /** The codec of a column of Arrow type `t`, when its values are keyed. */
  def of(t: ArrowType): Option[KeyCodec] = t match {
    case i: ArrowType.Int if i.getIsSigned => Some(Integral)
    case d: ArrowType.Date if d.getUnit == DateUnit.DAY => Some(Integral)
    case _: ArrowType.Timestamp => Some(Integral)
    case f: ArrowType.FloatingPoint if f.getPrecision != FloatingPointPrecision.HALF => Some(Floating)
    case _: ArrowType.Bool => Some(Bool)
    case _ => None
  }

  private def boxed(value: Any): Nothing =
    throw new IllegalArgumentException(s"a ${value.getClass.getName} value has no key of this column's type")

  /** Signed integers, dates (days) and timestamps. */
  case object Integral extends KeyCodec {
    def key(v: ValueVector, i: Int): Long = v match {
      case x: BigIntVector => x.get(i)
      case x: IntVector => x.get(i).toLong
      case x: SmallIntVector => x.get(i).toLong
      case x: TinyIntVector => x.get(i).toLong
      case x: DateDayVector => x.get(i).toLong
      case x: TimeStampVector => x.get(i)
      case other => throw new IllegalArgumentException(s"no integer key in a ${other.getClass.getSimpleName}")
    }
    def keyOf(value: Any): Long = value match { case l: java.lang.Long => l.longValue; case o => boxed(o) }
    def value(key: Long): Any = java.lang.Long.valueOf(key)
    def set(v: FieldVector, i: Int, key: Long): Unit = v match {
      case x: BigIntVector => x.set(i, key)
      case x: IntVector => x.set(i, key.toInt)
      case x: SmallIntVector => x.set(i, key.toShort)
      case x: TinyIntVector => x.set(i, key.toByte)
      case x: DateDayVector => x.set(i, key.toInt)
      case x: TimeStampVector => x.set(i, key)
      case other => throw new IllegalArgumentException(s"no integer key goes into a ${other.getClass.getSimpleName}")
    }
  }

  /** Floats and doubles: the double's bits (NaN canonical), negative values' bits but the sign flipped. */
  case object Floating extends KeyCodec {
    def ofDouble(d: Double): Long = {
      val b = java.lang.Double.doubleToLongBits(d)
      b ^ ((b >> 63) & Long.MaxValue)
    }
    def toDouble(key: Long): Double = java.lang.Double.longBitsToDouble(key ^ ((key >> 63) & Long.MaxValue))
    def key(v: ValueVector, i: Int): Long = v match {
      case x: Float8Vector => ofDouble(x.get(i))
      case x: Float4Vector => ofDouble(x.get(i).toDouble)
      case other => throw new IllegalArgumentException(s"no float key in a ${other.getClass.getSimpleName}")
    }
    def keyOf(value: Any): Long = value match { case d: java.lang.Double => ofDouble(d.doubleValue); case o => boxed(o) }
    def value(key: Long): Any = java.lang.Double.valueOf(toDouble(key))
    def set(v: FieldVector, i: Int, key: Long): Unit = v match {
      case x: Float8Vector => x.set(i, toDouble(key))
      case x: Float4Vector => x.set(i, toDouble(key).toFloat)
      case other => throw new IllegalArgumentException(s"no float key goes into a ${other.getClass.getSimpleName}")
    }
  }

  case object Bool extends KeyCodec {
    def key(v: ValueVector, i: Int): Long = v match {
      case x: BitVector => x.get(i).toLong
      case other => throw new IllegalArgumentException(s"no boolean key in a ${other.getClass.getSimpleName}")
    }
    def keyOf(value: Any): Long = value match { case b: java.lang.Boolean => if (b) 1L else 0L; case o => boxed(o) }
    def value(key: Long): Any = java.lang.Boolean.valueOf(key != 0L)
    def set(v: FieldVector, i: Int, key: Long): Unit = v match {
      case x: BitVector => x.set(i, key.toInt)
      case other => throw new IllegalArgumentException(s"no boolean key goes into a ${other.getClass.getSimpleName}")
    }
  }
}

/** A stable sort of (key, row address) pairs held in two arrays by key: a
  * least-significant-digit radix sort of the keys' offsets from their
  * minimum, in 12-bit digits, as many as the keys' range needs (two for a
  * range under 2^24). Pairs of equal keys keep their order, so pairs read in
  * row address order come out ordered by (key, address). */
object KeySort {
  private val Bits = 12
  private val Buckets = 1 << Bits

  /** Sorts `keys(0 until n)` (signed order), moving `addrs` along. */
  def sort(keys: Array[Long], addrs: Array[Long], n: Int): Unit = if (n > 1) {
    if (n < 64) insertion(keys, addrs, n)
    else {
      var min = keys(0); var max = keys(0)
      var i = 1
      while (i < n) { val k = keys(i); if (k < min) min = k; if (k > max) max = k; i += 1 }
      val range = max - min // as unsigned: the offsets k - min are in [0, range]
      val bits = 64 - java.lang.Long.numberOfLeadingZeros(range)
      val digits = (bits + Bits - 1) / Bits
      var src = keys; var srcA = addrs
      var dst: Array[Long] = null; var dstA: Array[Long] = null
      val counts = new Array[Int](Buckets)
      var d = 0
      while (d < digits) {
        val shift = d * Bits
        java.util.Arrays.fill(counts, 0)
        i = 0
        while (i < n) { counts((((src(i) - min) >>> shift).toInt) & (Buckets - 1)) += 1; i += 1 }
        var sum = 0; var b = 0
        var trivial = false
        while (b < Buckets) { val c = counts(b); if (c == n) trivial = true; counts(b) = sum; sum += c; b += 1 }
        if (!trivial) {
          if (dst == null) { dst = new Array[Long](n); dstA = new Array[Long](n) }
          i = 0
          while (i < n) {
            val k = src(i)
            val b2 = (((k - min) >>> shift).toInt) & (Buckets - 1)
            val at = counts(b2)
            dst(at) = k; dstA(at) = srcA(i)
            counts(b2) = at + 1
            i += 1
          }
          val t = src; src = dst; dst = t
          val tA = srcA; srcA = dstA; dstA = tA
        }
        d += 1
      }
      if (!(src eq keys)) {
        System.arraycopy(src, 0, keys, 0, n)
        System.arraycopy(srcA, 0, addrs, 0, n)
      }
    }
  }

  private def insertion(keys: Array[Long], addrs: Array[Long], n: Int): Unit = {
    var i = 1
    while (i < n) {
      val k = keys(i); val a = addrs(i)
      var j = i - 1
      while (j >= 0 && keys(j) > k) { keys(j + 1) = keys(j); addrs(j + 1) = addrs(j); j -= 1 }
      keys(j + 1) = k; addrs(j + 1) = a
      i += 1
    }
  }
}
