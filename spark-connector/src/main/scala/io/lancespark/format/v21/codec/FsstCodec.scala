package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.VarBlock
import io.lancespark.proto.encodings21.Fsst

/** FSST: strings compressed with a symbol table of up to 255 symbols of 1 to
  * 8 bytes, one table per page (in the encoding description). A code byte
  * stands for its symbol; the escape byte 255 stands for the byte after it.
  *
  * The table: a u64 header (number of symbols in bits 0-7; bit 24 set when
  * the values are compressed at all; "FSST" in bits 32-63), the symbols as
  * u64 words (little-endian, unused bytes zero), then one length byte each. */
final case class FsstCodec(fsst: Fsst) extends Codec {
  private val inner: Codec = Codec.of(fsst.getValues)

  def describe: String = s"fsst(${inner.describe})"

  /** The parsed symbol table: symbols (u64, little-endian bytes), their
    * lengths, and whether values are compressed at all; or what is wrong. */
  private lazy val table: Either[String, (Array[Long], Array[Int], Boolean)] = {
    val t = fsst.getSymbolTable.asReadOnlyByteBuffer().order(java.nio.ByteOrder.LITTLE_ENDIAN)
    if (t.remaining() < 8) Left(s"an FSST symbol table of ${t.remaining()} bytes")
    else {
      val header = t.getLong(0)
      val n = (header & 0xff).toInt
      if ((header >>> 32) != FsstCodec.Magic) Left(f"an FSST symbol table without its magic (header 0x$header%016x)")
      else if (t.remaining() < 8 + 9L * n) Left(s"an FSST symbol table of ${t.remaining()} bytes for $n symbols")
      else {
        val symbols = Array.tabulate(n)(i => t.getLong(8 + 8 * i))
        val lens = Array.tabulate(n)(i => t.get(8 + 8 * n + i) & 0xff)
        lens.indexWhere(l => l < 1 || l > 8) match {
          case -1 => Right((symbols, lens, (header & (1L << 24)) != 0))
          case i => Left(s"FSST symbol $i has length ${lens(i)}")
        }
      }
    }
  }

  /** Decodes every value: each code byte becomes its symbol (written as 8
    * bytes, of which the next symbol overwrites the unused ones), the escape
    * byte the byte after it. */
  private def expand(compressed: VarBlock, ctx: CodecContext): VarBlock = {
    val (symbols, lens, on) = table.fold(ctx.fail, identity)
    if (!on) return compressed
    val n = compressed.length.toInt
    val offs = compressed.offsets
    val base = offs(0).toInt
    val inLen = (offs(n) - offs(0)).toInt
    val (src, srcAt) = Codec.array(compressed.data)
    val from = srcAt + base
    val nsym = symbols.length
    val out = new Array[Long](n + 1)
    // the decoded size, and 8 bytes of slack for the last symbol's word
    val dst = new Array[Byte](decodedSize(src, from, from + inLen, lens).toInt + 8)
    val dstBuf = ByteBuffer.wrap(dst).order(java.nio.ByteOrder.LITTLE_ENDIAN)
    var o = 0
    var i = 0
    while (i < n) {
      var p = from + (offs(i) - base).toInt
      val e = from + (offs(i + 1) - base).toInt
      while (p < e) {
        val c = src(p) & 0xff
        if (c < nsym) {
          dstBuf.putLong(o, symbols(c))
          o += lens(c)
          p += 1
        } else if (c == FsstCodec.Escape && p + 1 < e) {
          dst(o) = src(p + 1)
          o += 1
          p += 2
        } else if (c == FsstCodec.Escape) ctx.fail(s"FSST value $i ends with an escape byte")
        else ctx.fail(s"FSST code $c but the table has $nsym symbols")
      }
      if (p != e) ctx.fail(s"FSST value $i ends with an escape byte")
      out(i + 1) = o
      i += 1
    }
    VarBlock(n, out, Codec.wrap(dst), compressed.validity)
  }

  private def decodedSize(src: Array[Byte], from: Int, until: Int, lens: Array[Int]): Long = {
    var total = 0L
    var p = from
    while (p < until) {
      val c = src(p) & 0xff
      if (c == FsstCodec.Escape) { total += 1; p += 2 }
      else { total += (if (c < lens.length) lens(c) else 0); p += 1 }
    }
    if (total > Int.MaxValue - 64) throw new IllegalArgumentException(s"$total bytes of FSST-decoded values")
    total
  }

  private def asVar(b: Block, ctx: CodecContext): VarBlock = b match {
    case v: VarBlock => v
    case other => ctx.fail(s"FSST values decode to ${other.getClass.getSimpleName}, not variable-width values")
  }

  override def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block =
    expand(asVar(inner.miniBlock(buffers, n, ctx), ctx), ctx)

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block =
    expand(asVar(inner.block(buffer, n, ctx), ctx), ctx)

  override def variablePerValue(stored: VarBlock, ctx: CodecContext): Block =
    expand(asVar(inner.variablePerValue(stored, ctx), ctx), ctx)
}

object FsstCodec {
  val Magic: Long = 0x46535354L // "FSST"
  val Escape: Int = 255
}
