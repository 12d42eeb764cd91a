package io.lancespark.format.v20.codec

import java.nio.{ByteBuffer, ByteOrder}

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.{FixedBlock, PackedBlock}
import io.lancespark.format.input.PlannedRead
import io.lancespark.proto.encodings.{ArrayEncoding, Flat, PackedStruct}

/** A struct of fixed-width fields stored row by row in one buffer (each row
  * the fields' values one after another; the fields' widths from their flat
  * encodings): the descriptions of a 2.0 blob column, (position, size). */
private[v20] final case class PackedStructCodec(ps: PackedStruct) extends ArrayCodec {

  /** A field's flat encoding, through a nullable wrapper that says there are no nulls. */
  private def flat(e: ArrayEncoding): Option[Flat] =
    if (e.hasFlat) Some(e.getFlat)
    else if (e.hasNullable && e.getNullable.hasNoNulls) flat(e.getNullable.getNoNulls.getValues)
    else None

  private def widths(ctx: PageContext): Vector[Int] = {
    if (ps.getInnerCount == 0) ctx.fail("unsupported encoding: packed_struct without fields")
    ps.getInnerList.asScala.toVector.map { e =>
      flat(e).filter(f => f.getBitsPerValue % 8 == 0 && f.getBitsPerValue > 0) match {
        case Some(f) => (f.getBitsPerValue / 8).toInt
        case None => ctx.fail(s"unsupported encoding: a packed_struct field encoded as ${e.getArrayEncodingCase}")
      }
    }
  }

  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block = {
    val ws = widths(ctx)
    val row = ws.sum
    val count = ctx.checkCount(until - from)
    val rows = ctx.bytes(ps.getBuffer, from * row, (until - from) * row, s"${until - from} packed rows of $row bytes")
    val starts = ws.scanLeft(0)(_ + _)
    val children = ws.zip(starts).map { case (w, at) =>
      val out = ByteBuffer.allocate(count * w).order(ByteOrder.LITTLE_ENDIAN)
      var i = 0
      while (i < count) {
        var k = 0
        while (k < w) { out.put(i * w + k, rows.get(rows.position() + i * row + at + k)); k += 1 }
        i += 1
      }
      FixedBlock(count.toLong, w, out): Block
    }
    PackedBlock(count.toLong, children)
  }

  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit = {
    val row = ps.getInnerList.asScala.map(e => flat(e).map(_.getBitsPerValue / 8).getOrElse(0L)).sum
    ctx.page.fileRange(ps.getBuffer, from * row, (until - from) * row).foreach(out += PlannedRead(_))
  }
}
