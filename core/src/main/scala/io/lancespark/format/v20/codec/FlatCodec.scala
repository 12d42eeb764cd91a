package io.lancespark.format.v20.codec

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.{Bits, Block}
import io.lancespark.format.arrow.Block.{BitBlock, FixedBlock}
import io.lancespark.format.input.{ByteRange, PlannedRead}
import io.lancespark.proto.encodings.Flat

/** Fixed-width values back to back in one buffer: bitmaps (1 bit) or whole
  * bytes; only the bytes of the items asked for are read. */
private[v20] final case class FlatCodec(flat: Flat) extends ArrayCodec {
  private val bits: Long = flat.getBitsPerValue

  /** Where items [from, until) lie in the buffer: (offset, length) in bytes;
    * None for a width this reader does not support. */
  private def span(from: Long, until: Long): Option[(Long, Long)] =
    if (bits == 1) {
      val first = from >>> 3
      Some((first, (until + 7) / 8 - first))
    } else if (bits > 0 && bits % 8 == 0 && bits <= 8 * 1024 * 1024) {
      val width = bits / 8
      Some((from * width, (until - from) * width))
    } else None

  private def compressed: Boolean = flat.hasCompression && flat.getCompression.getScheme.nonEmpty

  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block = {
    if (compressed) ctx.fail(s"unsupported encoding: flat with '${flat.getCompression.getScheme}' compression")
    val count = until - from
    span(from, until) match {
      case Some((offset, len)) if bits == 1 =>
        BitBlock(count, new Bits(ctx.bytes(flat.getBuffer, offset, len, s"a bitmap of $n bits"), from & 7))
      case Some((offset, len)) =>
        val width = (bits / 8).toInt
        FixedBlock(count, width, ctx.bytes(flat.getBuffer, offset, len, s"$count values of $width bytes"))
      case None => ctx.fail(s"unsupported encoding: flat with $bits bits per value")
    }
  }

  /** The file range items [from, until) occupy, if known. */
  def range(from: Long, until: Long, ctx: PageContext): Option[ByteRange] =
    if (compressed) None else span(from, until).flatMap { case (o, l) => ctx.fileRange(flat.getBuffer, o, l) }

  /** Whole bytes of this width, if the values are bytes (a binary page's data). */
  def byteWidth: Option[Int] = if (!compressed && bits % 8 == 0 && bits > 0 && bits <= 64) Some((bits / 8).toInt) else None

  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit =
    range(from, until, ctx.page).foreach(out += PlannedRead(_))
}
