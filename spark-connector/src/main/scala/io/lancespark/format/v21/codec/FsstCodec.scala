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

  /** (symbols, their lengths, whether values are compressed), or a failure. */
  private def table(ctx: CodecContext): (Array[Long], Array[Int], Boolean) = {
    val t = fsst.getSymbolTable.asReadOnlyByteBuffer().order(java.nio.ByteOrder.LITTLE_ENDIAN)
    if (t.remaining() < 8) ctx.fail(s"an FSST symbol table of ${t.remaining()} bytes")
    val header = t.getLong(0)
    if ((header >>> 32) != FsstCodec.Magic) ctx.fail(f"an FSST symbol table without its magic (header 0x$header%016x)")
    val n = (header & 0xff).toInt
    val on = (header & (1L << 24)) != 0
    if (t.remaining() < 8 + 9L * n) ctx.fail(s"an FSST symbol table of ${t.remaining()} bytes for $n symbols")
    val symbols = Array.tabulate(n)(i => t.getLong(8 + 8 * i))
    val lens = Array.tabulate(n)(i => t.get(8 + 8 * n + i) & 0xff)
    lens.zipWithIndex.foreach { case (l, i) => if (l < 1 || l > 8) ctx.fail(s"FSST symbol $i has length $l") }
    (symbols, lens, on)
  }


  private def expand(compressed: VarBlock, ctx: CodecContext): VarBlock = {
    val (symbols, lens, on) = table(ctx)
    if (!on) return compressed
    val n = compressed.length.toInt
    val src = compressed.data
    val offs = compressed.offsets
    val nsym = symbols.length
    // symbol bytes, 8 per symbol, for copying
    val sym = new Array[Byte](nsym * 8)
    var k = 0
    while (k < nsym) {
      var b = 0
      var v = symbols(k)
      while (b < 8) { sym(8 * k + b) = v.toByte; v >>>= 8; b += 1 }
      k += 1
    }
    // first pass: sizes
    val out = new Array[Long](n + 1)
    var i = 0
    var total = 0L
    while (i < n) {
      var p = offs(i).toInt
      val e = offs(i + 1).toInt
      while (p < e) {
        val c = src.get(p) & 0xff
        if (c == FsstCodec.Escape) { total += 1; p += 2 }
        else if (c < nsym) { total += lens(c); p += 1 }
        else ctx.fail(s"FSST code $c but the table has $nsym symbols")
      }
      if (p != e) ctx.fail(s"FSST value $i ends with an escape byte")
      out(i + 1) = total
      i += 1
    }
    if (total > Int.MaxValue - 16) ctx.fail(s"$total bytes of FSST-decoded values in one batch")
    val dst = new Array[Byte](total.toInt)
    var o = 0
    i = 0
    while (i < n) {
      var p = offs(i).toInt
      val e = offs(i + 1).toInt
      while (p < e) {
        val c = src.get(p) & 0xff
        if (c == FsstCodec.Escape) { dst(o) = src.get(p + 1); o += 1; p += 2 }
        else { val l = lens(c); System.arraycopy(sym, 8 * c, dst, o, l); o += l; p += 1 }
      }
      i += 1
    }
    VarBlock(n, out, Codec.wrap(dst), compressed.validity)
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
