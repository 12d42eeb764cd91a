package io.lancespark.format.v21.codec

import java.lang.invoke.{MethodHandles, VarHandle}
import java.nio.{ByteBuffer, ByteOrder}

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

  /** The parsed symbol table: symbols (u64, little-endian bytes) and their
    * lengths by code (0 for the escape code and codes past the table), and
    * whether values are compressed at all; or what is wrong. */
  private val table: Either[String, FsstCodec.Table] = FsstCodec.parse(fsst.getSymbolTable.asReadOnlyByteBuffer())

  /** Decodes every value: each code byte becomes its symbol (written as 8
    * bytes, of which the next symbol overwrites the unused ones), the escape
    * byte the byte after it. One pass: the output grows when a value could
    * overrun it (at most 8 bytes a code). */
  private def expand(compressed: VarBlock, ctx: CodecContext): VarBlock = {
    val t = table match {
      case Right(t) => t
      case Left(problem) => ctx.fail(problem)
    }
    if (!t.on) return compressed
    val n = compressed.length.toInt
    val offs = compressed.offsets
    val (src, srcAt) = Codec.array(compressed.data)
    val from = srcAt.toLong
    val words = t.words
    val nativeWords = t.nativeWords
    val lens = t.lens
    val out = new Array[Long](n + 1)
    val inLen = offs(n) - offs(0)
    var dst = new Array[Byte](math.min(Int.MaxValue - 64L, inLen * 3 + 64).toInt)
    var o = 0
    var i = 0
    val limit = src.length.toLong
    while (i < n) {
      var p = (from + offs(i)).toInt
      val e = (from + offs(i + 1)).toInt
      if (from + offs(i) < 0 || from + offs(i + 1) > limit)
        ctx.fail(s"FSST value $i spans bytes [${offs(i)}, ${offs(i + 1)}) outside its ${limit - from} byte buffer")
      val most = o + 8L * (e - p) + 8
      if (most > dst.length) dst = FsstCodec.grow(dst, most)
      // codes until the first escape, without bounds checks: `most` bounds
      // every write, and p stays within [offs(i), offs(i + 1)) of `src`
      val U = FsstCodec.U
      val B = FsstCodec.ByteBase
      var run = true
      while (run && p < e) {
        val c = U.getByte(src, B + p) & 0xff
        val len = lens(c)
        if (len != 0) {
          U.putLong(dst, B + o, nativeWords(c))
          o += len
          p += 1
        } else run = false
      }
      while (p < e) {
        val c = src(p) & 0xff
        val len = lens(c)
        if (len != 0) {
          FsstCodec.LongLE.set(dst, o, words(c))
          o += len
          p += 1
        } else if (c == FsstCodec.Escape && p + 1 < e) {
          dst(o) = src(p + 1)
          o += 1
          p += 2
        } else if (c == FsstCodec.Escape) ctx.fail(s"FSST value $i ends with an escape byte")
        else ctx.fail(s"FSST code $c but the table has ${t.symbols} symbols")
      }
      out(i + 1) = o
      i += 1
    }
    VarBlock(n, out, ByteBuffer.wrap(dst, 0, o).slice().order(ByteOrder.LITTLE_ENDIAN), compressed.validity)
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

  private[codec] val U: sun.misc.Unsafe = {
    val f = classOf[sun.misc.Unsafe].getDeclaredField("theUnsafe")
    f.setAccessible(true)
    f.get(null).asInstanceOf[sun.misc.Unsafe]
  }
  private[codec] val ByteBase: Long = U.arrayBaseOffset(classOf[Array[Byte]]).toLong

  /** Little-endian longs written into byte arrays (no ByteBuffer in the loop). */
  private val LongLE: VarHandle = MethodHandles.byteArrayViewVarHandle(classOf[Array[Long]], ByteOrder.LITTLE_ENDIAN)

  /** A parsed symbol table, by code: the symbol's bytes as a little-endian
    * long and its length (0: the escape code, or no such symbol). */
  final class Table(val words: Array[Long], val lens: Array[Int], val symbols: Int, val on: Boolean) {
    /** `words` in the platform's byte order, for [[U]]'s stores. */
    val nativeWords: Array[Long] =
      if (ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN) words else words.map(java.lang.Long.reverseBytes)
  }

  def parse(raw: ByteBuffer): Either[String, Table] = {
    val t = raw.order(ByteOrder.LITTLE_ENDIAN)
    if (t.remaining() < 8) return Left(s"an FSST symbol table of ${t.remaining()} bytes")
    val header = t.getLong(0)
    val n = (header & 0xff).toInt
    if ((header >>> 32) != Magic) return Left(f"an FSST symbol table without its magic (header 0x$header%016x)")
    if (t.remaining() < 8 + 9L * n) return Left(s"an FSST symbol table of ${t.remaining()} bytes for $n symbols")
    val words = new Array[Long](256)
    val lens = new Array[Int](256)
    var i = 0
    while (i < n) {
      val len = t.get(8 + 8 * n + i) & 0xff
      if (len < 1 || len > 8) return Left(s"FSST symbol $i has length $len")
      if (i != Escape) {   // (a table has at most 255 symbols: code 255 is always the escape)
        words(i) = t.getLong(8 + 8 * i)
        lens(i) = len
      }
      i += 1
    }
    Right(new Table(words, lens, n, (header & (1L << 24)) != 0))
  }

  /** `dst` with room for at least `need` bytes, its bytes kept. */
  private def grow(dst: Array[Byte], need: Long): Array[Byte] = {
    val size = math.max(need, dst.length * 2L)
    if (size > Int.MaxValue - 64) throw new IllegalArgumentException(s"$size bytes of FSST-decoded values")
    java.util.Arrays.copyOf(dst, size.toInt)
  }
}
