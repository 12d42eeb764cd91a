package io.lancespark.format.v20.codec

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.ListBlock
import io.lancespark.format.input.PlannedRead
import io.lancespark.proto.encodings.{List => PbList}

/** A list page: end offsets into the item column (nulls marked by the null
  * adjustment); the page references `num_items` items, which the reader
  * fills from the item column after the offsets are read. */
private[v20] final case class ListCodec(list: PbList) extends ArrayCodec {
  private val offsets = ArrayCodec.of(list.getOffsets)
  private val adj = list.getNullOffsetAdjustment

  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block = {
    val ends = EndOffsets.decode(offsets, n, from, until, adj, "list offsets", ctx)
    if (ends.first + ends.total > list.getNumItems)
      ctx.fail(s"list offsets reach item ${ends.first + ends.total} but the page references ${list.getNumItems} items")
    ListBlock(until - from, ends.offsets, ends.validity, ends.first)
  }

  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit =
    EndOffsets.plan(offsets, n, from, until, adj, ctx, out)(Some(ctx.listItems))

  override def listItems: Option[Long] = Some(list.getNumItems)
}
