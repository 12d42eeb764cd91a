package io.lancespark.format.v20.codec

import java.nio.ByteBuffer

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.{FixedBlock, VarBlock}
import io.lancespark.format.input.{ByteRange, PlannedRead}
import io.lancespark.proto.encodings.Binary

/** Variable-width values: end offsets ("indices", nulls marked by the null
  * adjustment) and the values' bytes back to back. Only the bytes the items
  * asked for span are read, after their offsets. */
private[v20] final case class BinaryCodec(binary: Binary) extends ArrayCodec {
  private val indices = ArrayCodec.of(binary.getIndices)
  private val bytes = ArrayCodec.of(binary.getBytes)
  private val adj = binary.getNullAdjustment

  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block = {
    val ends = EndOffsets.decode(indices, n, from, until, adj, "binary indices", ctx)
    val data = if (ends.total == 0) ByteBuffer.allocate(0) else {
      // the page's values back to back; only this range's bytes are read
      bytes.decode(ends.first + ends.total, ends.first, ends.first + ends.total, top = false, ctx) match {
        case FixedBlock(_, 1, d) => d
        case other => ctx.fail(s"binary bytes decode to ${other.getClass.getSimpleName}, not bytes")
      }
    }
    VarBlock(until - from, ends.offsets, data, ends.validity)
  }

  private def byteCodec: Option[FlatCodec] = bytes match {
    case f: FlatCodec if f.byteWidth.contains(1) => Some(f)
    case _ => None
  }

  /** The offsets, then the value bytes they bracket; or, when the batch takes
    * the whole page, its bytes together with its offsets (so that the buffers
    * of adjacent whole pages make one read). */
  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit = {
    val wholeBytes: Option[ByteRange] =
      if (from > 0 || until < n) None
      else byteCodec.flatMap(_ => ctx.page.wholeRange(binary.getBytes.getFlat.getBuffer))
    wholeBytes.foreach(out += PlannedRead(_))
    EndOffsets.plan(indices, n, from, until, adj, ctx, out)(
      if (wholeBytes.isDefined) None
      else Some((first, last) => byteCodec.flatMap(_.range(first, last, ctx.page)).toSeq))
  }
}
