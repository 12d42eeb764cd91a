package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.FixedBlock
import io.lancespark.proto.encodings21.Constant

/** Every value is the bytes of `value`; nothing is stored. */
final case class ConstantCodec(constant: Constant) extends Codec {
  def describe: String = "constant"

  private def repeat(n: Int, ctx: CodecContext): Block = {
    if (!constant.hasValue) ctx.fail("a constant encoding without a value")
    val v = constant.getValue.toByteArray
    if (v.isEmpty) ctx.fail("a constant encoding with an empty value")
    if (n.toLong * v.length > Int.MaxValue - 16) ctx.fail(s"$n constant values of ${v.length} bytes are too many")
    val out = new Array[Byte](n * v.length)
    var i = 0
    while (i < n) { System.arraycopy(v, 0, out, i * v.length, v.length); i += 1 }
    FixedBlock(n, v.length, Codec.wrap(out))
  }

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block = repeat(n, ctx)

  override def fixedBits: Option[Long] = Some(0L)

  override def fixedPerValue(data: ByteBuffer, n: Int, ctx: CodecContext): Block = repeat(n, ctx)
}
