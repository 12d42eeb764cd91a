package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.lancespark.format.arrow.{Bits, Block}
import io.lancespark.format.arrow.Block.{BitBlock, FixedBlock}
import io.lancespark.format.file.BitBuilder
import io.lancespark.proto.encodings21.{CompressiveEncoding, Flat}

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

object FlatCodec {
  /** Flat values of `bits` bits each. */
  def encoding(bits: Long): CompressiveEncoding =
    CompressiveEncoding.newBuilder().setFlat(Flat.newBuilder().setBitsPerValue(bits)).build()
}

/** Fixed-width values of `w` bytes stored as they are. */
private[v21] final class FlatValues(src: Array[Byte], w: Int) extends MiniBlockValues {
  val encoding: CompressiveEncoding = FlatCodec.encoding(8L * w)
  def buffersPerChunk: Int = 1
  def preferred(v: Int): Int = MiniBlockValues.pow2AtMost(math.max(1, 8186 / w))
  def chunk(v: Int, n: Int): Seq[Array[Byte]] = Seq(java.util.Arrays.copyOfRange(src, v * w, (v + n) * w))
}

/** Booleans: a bitmap per chunk. */
private[v21] final class BoolValues(bits: BitBuilder) extends MiniBlockValues {
  val encoding: CompressiveEncoding = FlatCodec.encoding(1)
  def buffersPerChunk: Int = 1
  def preferred(v: Int): Int = 8192
  def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
    val out = new Array[Byte]((n + 7) / 8)
    var i = 0
    while (i < n) { if (bits.get(v + i)) out(i >>> 3) = (out(i >>> 3) | (1 << (i & 7))).toByte; i += 1 }
    Seq(out)
  }
}
