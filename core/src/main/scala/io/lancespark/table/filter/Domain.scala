package io.lancespark.table.filter

import java.math.{BigDecimal => JBigDecimal, BigInteger}

import org.apache.arrow.vector.types.pojo.ArrowType

/** How the values Spark sees for a column compare, and the representation
  * the engine compares them in. Most types map to signed long keys ordered as
  * Spark orders the values ([[Domain.Keyed]]). */
sealed trait Domain

object Domain {
  /** Values as signed long keys in Spark's order. */
  sealed trait Keyed extends Domain

  /** Exact numbers: integers, dates (days), timestamps (µs), times (ns),
    * durations (µs) with key = value; decimals of precision <= 18 with key =
    * unscaled value at `scale`; uint64 (`unsigned64`) with key = value - 2^63. */
  final case class Exact(scale: Int, unsigned64: Boolean) extends Keyed
  /** float16/32/64: key = [[doubleKey]] (NaN greatest, -0.0 = 0.0). */
  case object Floating extends Keyed
  /** false = 0, true = 1. */
  case object Bool extends Keyed
  /** Decimals of precision > 18: java.math.BigDecimal, compared by value. */
  final case class BigDec(scale: Int) extends Domain
  /** Strings (UTF-8) and binaries: unsigned lexicographic bytes. */
  case object Bytes extends Domain
  /** Arrow's null type: every value is NULL. */
  case object AllNull extends Domain

  def of(t: ArrowType): Option[Domain] = t match {
    case i: ArrowType.Int => Some(Exact(0, unsigned64 = !i.getIsSigned && i.getBitWidth == 64))
    case _: ArrowType.FloatingPoint => Some(Floating)
    case _: ArrowType.Bool => Some(Bool)
    case _: ArrowType.Date | _: ArrowType.Time | _: ArrowType.Timestamp | _: ArrowType.Duration => Some(Exact(0, unsigned64 = false))
    case d: ArrowType.Decimal => Some(if (d.getPrecision <= 18) Exact(d.getScale, unsigned64 = false) else BigDec(d.getScale))
    case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 | _: ArrowType.Binary | _: ArrowType.LargeBinary |
         _: ArrowType.FixedSizeBinary => Some(Bytes)
    case _: ArrowType.Null => Some(AllNull)
    case _ => None
  }

  /** A double as a long key: NaN is Long.MaxValue (greater than +Infinity),
    * -0.0 and 0.0 are the same key, otherwise the order of doubles. */
  def doubleKey(d: Double): Long =
    if (d != d) Long.MaxValue
    else {
      val bits = java.lang.Double.doubleToRawLongBits(if (d == 0.0) 0.0 else d)
      bits ^ ((bits >> 63) & Long.MaxValue)
    }

  private val LongMin = JBigDecimal.valueOf(Long.MinValue)
  private val LongMax = JBigDecimal.valueOf(Long.MaxValue)
  private val TwoTo63 = new JBigDecimal(BigInteger.ONE.shiftLeft(63))

  /** Where an exact value falls among long keys. */
  sealed trait KeyPos
  final case class At(key: Long) extends KeyPos
  /** Strictly between `floor` and `floor + 1`. */
  final case class Between(floor: Long) extends KeyPos
  case object BelowAll extends KeyPos
  case object AboveAll extends KeyPos

  /** The position of an exact value among the keys of an [[Exact]] domain. */
  def exactKey(d: Exact, v: JBigDecimal): KeyPos = {
    var x = v.movePointRight(d.scale)
    if (d.unsigned64) x = x.subtract(TwoTo63)
    if (x.compareTo(LongMin) < 0) BelowAll
    else if (x.compareTo(LongMax) > 0) AboveAll
    else {
      val fl = x.setScale(0, java.math.RoundingMode.FLOOR)
      if (fl.compareTo(x) == 0) At(fl.longValueExact) else Between(fl.longValueExact)
    }
  }

  /** Spark's value of an unsigned 64-bit integer's bits, as a key of Exact(0, unsigned64 = true). */
  def unsignedKey(raw: Long): Long = raw ^ Long.MinValue
}
