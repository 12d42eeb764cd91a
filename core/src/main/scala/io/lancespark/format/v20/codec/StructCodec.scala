package io.lancespark.format.v20.codec

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.StructBlock
import io.lancespark.format.input.PlannedRead

/** A 2.0 struct page: nothing but its length (2.0 structs have no validity;
  * the children are columns of their own). */
private[v20] case object StructCodec extends ArrayCodec {
  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block = StructBlock(until - from)
  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit = ()
}
