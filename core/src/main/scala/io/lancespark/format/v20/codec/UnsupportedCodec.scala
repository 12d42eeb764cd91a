package io.lancespark.format.v20.codec

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.input.PlannedRead

/** An encoding Lance 2.0 writers do not produce: refused when decoded, with
  * its name and what this reader supports. */
private[v20] final case class UnsupportedCodec(name: String) extends ArrayCodec {
  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block =
    ctx.fail(s"unsupported encoding '$name' (not written by Lance 2.0 writers; this reader supports " +
      "flat, nullable, binary, dictionary, fixed_size_list, fixed_size_binary, list, struct)")

  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit = ()
}
