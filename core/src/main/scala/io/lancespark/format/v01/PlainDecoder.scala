package io.lancespark.format.v01

import org.apache.arrow.memory.ArrowBuf
import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision}
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.schema.LanceField

/** Plain encoding: fixed-width values back to back, booleans bit-packed from
  * the page start; a fixed-size list stores its items this way, `listSize` per
  * row. There is no validity: a null is stored as whatever value the writer had. */
private[v01] object PlainDecoder {

  /** Width in bytes of a plainly encoded Arrow type; 0 for bit-packed booleans. */
  def width(t: ArrowType): Option[Int] = t match {
    case _: ArrowType.Bool => Some(0)
    case i: ArrowType.Int => Some(i.getBitWidth / 8)
    case f: ArrowType.FloatingPoint => Some(f.getPrecision match {
        case FloatingPointPrecision.HALF => 2
        case FloatingPointPrecision.SINGLE => 4
        case FloatingPointPrecision.DOUBLE => 8
      })
    case d: ArrowType.Date => Some(if (d.getUnit == DateUnit.DAY) 4 else 8)
    case t: ArrowType.Time => Some(t.getBitWidth / 8)
    case _: ArrowType.Timestamp | _: ArrowType.Duration => Some(8)
    case d: ArrowType.Decimal => Some(d.getBitWidth / 8)
    case b: ArrowType.FixedSizeBinary => Some(b.getByteWidth)
    case _ => None
  }

  /** Copies values of `segments` (rows, `perRow` values each) of `width` bytes into `dst`. */
  def copyBytes(io: PageReader, f: LanceField, segments: Seq[Segment], perRow: Int, width: Int, dst: ArrowBuf): Unit = {
    var out = 0L
    segments.foreach { s =>
      val n = s.length * perRow
      val buf = io.values(f, s.batch, s.start * perRow, n, width, perRow)
      dst.setBytes(out * width, buf)
      out += n
    }
  }

  /** Copies bit-packed booleans of `segments` into `dst` (bits). */
  def copyBits(io: PageReader, f: LanceField, segments: Seq[Segment], perRow: Int, totalValues: Long, dst: ArrowBuf): Unit = {
    val out = new Array[Byte](((totalValues + 7) / 8).toInt)
    var o = 0L
    segments.foreach { s =>
      val first = s.start * perRow
      val n = s.length * perRow
      val p = io.page(f, s.batch)
      if (first + n > p.length * perRow)
        io.fail(f, s"batch ${s.batch}: values [$first, ${first + n}) are outside the page of ${p.length * perRow} values")
      val lo = first / 8
      val hi = (first + n + 7) / 8
      val buf = io.bytes(f, s.batch, p.position + lo, hi - lo)
      val src = new Array[Byte](buf.remaining())
      buf.get(src)
      val shift = (first % 8).toInt
      var i = 0L
      while (i < n) {
        val bit = i + shift
        if ((src((bit >>> 3).toInt) & (1 << (bit & 7).toInt)) != 0) {
          val d = o + i
          out((d >>> 3).toInt) = (out((d >>> 3).toInt) | (1 << (d & 7).toInt)).toByte
        }
        i += 1
      }
      o += n
    }
    dst.setBytes(0, out)
  }

  /** List positions of rows `[start, end]` (end inclusive): `end - start + 1` ints or longs. */
  def positions(io: PageReader, f: LanceField, s: Segment, large: Boolean): Array[Long] = {
    val n = (s.length + 1).toInt
    val buf = io.values(f, s.batch, s.start, n, if (large) 8 else 4)
    val out = new Array[Long](n)
    var i = 0
    while (i < n) {
      out(i) = if (large) buf.getLong(i * 8) else buf.getInt(i * 4).toLong
      if (out(i) < 0 || (i > 0 && out(i) < out(i - 1)))
        io.fail(f, s"batch ${s.batch}: list positions decrease or are negative at row ${s.start + i}")
      i += 1
    }
    out
  }
}
