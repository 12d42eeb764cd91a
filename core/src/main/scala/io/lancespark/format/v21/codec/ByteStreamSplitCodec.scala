package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.FixedBlock
import io.lancespark.proto.encodings21.{ByteStreamSplit, CompressiveEncoding}

/** Byte stream split: `n` values of `w` bytes stored as `w` streams of `n`
  * bytes, stream k holding byte k of every value (usually under general
  * compression, which then finds the similar bytes together). */
final case class ByteStreamSplitCodec(bss: ByteStreamSplit) extends Codec {
  private val bits: Option[Int] =
    if (bss.getValues.getCompressionCase == CompressiveEncoding.CompressionCase.FLAT && !bss.getValues.getFlat.hasData)
      Some(bss.getValues.getFlat.getBitsPerValue.toInt)
    else None

  def describe: String = s"byte-stream-split(${bits.getOrElse("?")})"

  private def join(buf: ByteBuffer, n: Int, ctx: CodecContext): Block = {
    val b = bits.filter(x => x % 8 == 0 && x >= 8 && x <= 128).getOrElse(ctx.unsupported(describe, "page"))
    val w = b / 8
    ctx.check(0, n.toLong * w, buf.remaining(), s"$n split values of $w bytes")
    val src = Codec.bytes(buf)
    val out = new Array[Byte](n * w)
    var k = 0
    while (k < w) {
      var i = 0
      val base = k * n
      while (i < n) { out(i * w + k) = src(base + i); i += 1 }
      k += 1
    }
    FixedBlock(n, w, Codec.wrap(out))
  }

  override def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block = {
    if (buffers.size != 1) ctx.fail(s"split values in ${buffers.size} chunk buffers, expected 1")
    join(buffers.head, n, ctx)
  }

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block = join(buffer, n, ctx)
}
