package io.lancespark.format.v20.codec

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.FslBlock
import io.lancespark.format.input.PlannedRead
import io.lancespark.proto.encodings.FixedSizeList

/** Fixed-size lists (vectors): item k of list i is item i * dimension + k of
  * the items array. */
private[v20] final case class FixedSizeListCodec(fsl: FixedSizeList) extends ArrayCodec {
  private val items = ArrayCodec.of(fsl.getItems)
  private val dim = fsl.getDimension.toLong

  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block = {
    if (fsl.getHasValidity) ctx.fail("unsupported encoding: fixed_size_list with has_validity (a 2.1 layout)")
    if (dim <= 0) ctx.fail(s"fixed_size_list with dimension $dim")
    FslBlock(until - from, dim.toInt, items.decode(Math.multiplyExact(n, dim), from * dim, until * dim, top = false, ctx))
  }

  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit =
    if (!fsl.getHasValidity && dim > 0) items.plan(Math.multiplyExact(n, dim), from * dim, until * dim, ctx, out)
}
