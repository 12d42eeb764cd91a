package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.lancespark.format.arrow.{Bits, Block}
import io.lancespark.format.arrow.Block.{BitBlock, FixedBlock}
import io.lancespark.proto.encodings21.Flat

/** Fixed-width values back to back: a bitmap (1 bit, LSB first) or whole
  * bytes per value, optionally compressed as one buffer (zstd, lz4). */
final case class FlatCodec(flat: Flat) extends Codec {
  val bits: Long = flat.getBitsPerValue

  def describe: String = s"flat($bits)" + (if (flat.hasData) s"+${GeneralCodec.schemeName(flat.getData)}" else "")

  private def data(buf: ByteBuffer, ctx: CodecContext): ByteBuffer =
    if (flat.hasData) GeneralCodec.decompress(flat.getData, buf, ctx) else buf

  /** `n` values from `buf`. */
  def values(raw: ByteBuffer, n: Int, ctx: CodecContext): Block = {
    val buf = data(raw, ctx)
    if (bits == 1) {
      ctx.check(0, (n + 7) / 8, buf.remaining(), s"a bitmap of $n values")
      BitBlock(n, new Bits(buf, 0))
    } else if (bits > 0 && bits % 8 == 0 && bits <= 8L * 1024 * 1024) {
      val width = (bits / 8).toInt
      ctx.check(0, n.toLong * width, buf.remaining(), s"$n values of $width bytes")
      FixedBlock(n, width, buf)
    } else ctx.fail(s"unsupported encoding: flat values of $bits bits")
  }

  override def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block = {
    if (buffers.size != 1) ctx.fail(s"flat values in ${buffers.size} chunk buffers, expected 1")
    values(buffers.head, n, ctx)
  }

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block = values(buffer, n, ctx)

  override def fixedBits: Option[Long] = if (flat.hasData) None else Some(bits)

  override def fixedPerValue(data: ByteBuffer, n: Int, ctx: CodecContext): Block = values(data, n, ctx)
}
