package io.lancespark.format.v20.codec

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.{FixedBlock, VarBlock}
import io.lancespark.format.input.PlannedRead
import io.lancespark.proto.encodings.FixedSizeBinary

/** Binary values of one width stored back to back, read as variable-width values. */
private[v20] final case class FixedSizeBinaryCodec(fsb: FixedSizeBinary) extends ArrayCodec {
  private val bytes = ArrayCodec.of(fsb.getBytes)
  private val w = fsb.getByteWidth.toLong

  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block = {
    val count = until - from
    val c = ctx.checkCount(count)
    bytes.decode(Math.multiplyExact(n, w), from * w, until * w, top = false, ctx) match {
      case FixedBlock(_, 1, data) => VarBlock(count, Array.tabulate(c + 1)(i => i * w), data, None)
      case other => ctx.fail(s"fixed_size_binary bytes decode to ${other.getClass.getSimpleName}")
    }
  }

  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit =
    bytes.plan(Math.multiplyExact(n, w), from * w, until * w, ctx, out)
}
