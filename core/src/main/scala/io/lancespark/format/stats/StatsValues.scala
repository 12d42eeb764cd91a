package io.lancespark.format.stats

import io.lancespark.format.file.RawBytes

import org.apache.arrow.memory.util.Float16
import org.apache.arrow.vector.types.FloatingPointPrecision
import org.apache.arrow.vector.types.pojo.ArrowType

/** How the values of a column compare, and their little-endian encodings. */
private[format] object StatsValues {

  /** How a column's values compare; None for columns without statistics. */
  private[format] sealed trait Kind
  private[format] final case class IntKind(width: Int, signed: Boolean) extends Kind
  private[format] final case class FloatKind(width: Int) extends Kind
  private[format] final case class DecimalKind(width: Int, precision: Int) extends Kind
  private[format] case object BoolKind extends Kind
  private[format] final case class FixedBinaryKind(width: Int) extends Kind
  private[format] final case class VarKind(utf8: Boolean) extends Kind

  private[format] def kindOf(t: ArrowType): Option[Kind] = t match {
    case i: ArrowType.Int => Some(IntKind(i.getBitWidth / 8, i.getIsSigned))
    case f: ArrowType.FloatingPoint => Some(FloatKind(f.getPrecision match {
      case FloatingPointPrecision.HALF => 2
      case FloatingPointPrecision.SINGLE => 4
      case FloatingPointPrecision.DOUBLE => 8
    }))
    case d: ArrowType.Date => Some(IntKind(if (d.getUnit == org.apache.arrow.vector.types.DateUnit.DAY) 4 else 8, signed = true))
    case t: ArrowType.Time => Some(IntKind(t.getBitWidth / 8, signed = true))
    case _: ArrowType.Timestamp => Some(IntKind(8, signed = true))
    case d: ArrowType.Decimal => Some(DecimalKind(d.getBitWidth / 8, d.getPrecision))
    case _: ArrowType.Bool => Some(BoolKind)
    case b: ArrowType.FixedSizeBinary => Some(FixedBinaryKind(b.getByteWidth))
    case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 => Some(VarKind(utf8 = true))
    case _: ArrowType.Binary | _: ArrowType.LargeBinary => Some(VarKind(utf8 = false))
    case _ => None
  }

  def le(v: BigInt, width: Int): Array[Byte] = {
    val be = v.toByteArray // big-endian two's complement
    val out = new Array[Byte](width)
    val fill: Byte = if (v.signum < 0) -1 else 0
    java.util.Arrays.fill(out, fill)
    var i = 0
    while (i < math.min(width, be.length)) { out(i) = be(be.length - 1 - i); i += 1 }
    out
  }

  def leLong(v: Long, width: Int): Array[Byte] = Array.tabulate(width)(i => (v >>> (8 * i)).toByte)

  /** Integer value i (width bytes) of `a`, sign- or zero-extended. */
  def intAt(a: Array[Byte], i: Int, width: Int, signed: Boolean): Long = {
    val v = RawBytes.uintLE(a, i * width, width)
    if (signed && width < 8) { val s = 64 - 8 * width; (v << s) >> s } else v
  }

  def floatAt(a: Array[Byte], i: Int, width: Int): Double = width match {
    case 2 => Float16.toFloat(intAt(a, i, 2, signed = false).toShort).toDouble
    case 4 => java.lang.Float.intBitsToFloat(intAt(a, i, 4, signed = false).toInt).toDouble
    case _ => java.lang.Double.longBitsToDouble(intAt(a, i, 8, signed = false))
  }

  /** Two's complement little-endian comparison of values i and j of width bytes. */
  def compareDecimal(a: Array[Byte], i: Int, j: Int, width: Int): Int = {
    val oi = i * width
    val oj = j * width
    if (width == 16) { // two words: the high one signed, then the low one unsigned
      val hi = java.lang.Long.compare(RawBytes.longLE(a, oi + 8), RawBytes.longLE(a, oj + 8))
      return if (hi != 0) hi else java.lang.Long.compareUnsigned(RawBytes.longLE(a, oi), RawBytes.longLE(a, oj))
    }
    val hi = java.lang.Byte.compare(a(oi + width - 1), a(oj + width - 1))
    if (hi != 0) return hi
    var k = width - 2
    while (k >= 0) {
      val c = Integer.compare(a(oi + k) & 0xff, a(oj + k) & 0xff)
      if (c != 0) return c
      k -= 1
    }
    0
  }

  def slice(a: Array[Byte], from: Int, len: Int): Array[Byte] = java.util.Arrays.copyOfRange(a, from, from + len)
}
