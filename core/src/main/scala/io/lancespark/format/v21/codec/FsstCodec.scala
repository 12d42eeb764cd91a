package io.lancespark.format.v21.codec

import java.nio.{ByteBuffer, ByteOrder}

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.VarBlock
import io.lancespark.format.file.RawBytes
import io.lancespark.proto.encodings21.{CompressiveEncoding, Fsst}

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
    * byte the byte after it. The codes of all values are expanded in one loop
    * (no per-value work in it: values are short, a few codes each), noting the
    * output position of every input byte; each value's output offset is then
    * the position noted for its first byte. The output has room for the
    * most the codes can produce, so the loop needs no checks of its room. */
  private def expand(compressed: VarBlock, ctx: CodecContext): VarBlock = {
    val t = table match {
      case Right(t) => t
      case Left(problem) => ctx.fail(problem)
    }
    if (!t.on) return compressed
    val n = compressed.length.toInt
    val offs = compressed.offsets
    val src = Codec.array(compressed.data)
    val srcAt = Codec.arrayStart(compressed.data)
    val first = srcAt.toLong + offs(0)
    val last = srcAt.toLong + offs(n)
    if (first < 0 || last > src.length || last < first)
      ctx.fail(s"FSST values span bytes [${offs(0)}, ${offs(n)}) outside their ${src.length - srcAt} byte buffer")
    val inLen = (last - first).toInt
    val pos = FsstCodec.positions(inLen + 1)
    val lens = t.lens
    val nativeWords = t.nativeWords
    val U = RawBytes.U
    val B = RawBytes.ByteBase
    val I = RawBytes.IntBase
    val start = first.toInt
    val end = last.toInt
    // room for the output: at most 8 bytes a code, plus the 8 bytes the last
    // symbol's word store may write past its length. A block of up to
    // 512 KiB of codes expands into this thread's scratch, copied out at its exact
    // size (no zeroing of a fresh array, no pass to size it); a larger one
    // into an array sized by a first pass over its codes.
    val most = 8L * inLen + 16
    val inScratch = most <= FsstCodec.ScratchBytes
    val dst =
      if (inScratch) FsstCodec.outputScratch.get()
      else {
        val est = t.estimate
        var sum = 16L
        var q = start
        while (q < end) { sum += est(U.getByte(src, B + q) & 0xff); q += 1 }
        if (sum > Int.MaxValue - 64) ctx.fail(s"$sum bytes of FSST-decoded values in one block")
        new Array[Byte](sum.toInt)
      }
    var p = start
    var o = 0
    // without bounds checks: `dst` has room for every write; p - start
    // stays within [0, inLen) of `pos` and p within [first, last) of `src`
    while (p < end) {
      // four codes at a time while they are all symbols (the common case: no
      // escape, no code past the table), without a branch per code
      while (p + 4 <= end && {
        val c0 = U.getByte(src, B + p) & 0xff
        val c1 = U.getByte(src, B + p + 1) & 0xff
        val c2 = U.getByte(src, B + p + 2) & 0xff
        val c3 = U.getByte(src, B + p + 3) & 0xff
        val l0 = lens(c0); val l1 = lens(c1); val l2 = lens(c2); val l3 = lens(c3)
        if ((l0 == 0) | (l1 == 0) | (l2 == 0) | (l3 == 0)) false
        else {
          val at = I + 4L * (p - start)
          U.putInt(pos, at, o)
          U.putLong(dst, B + o, nativeWords(c0))
          val o1 = o + l0
          U.putInt(pos, at + 4, o1)
          U.putLong(dst, B + o1, nativeWords(c1))
          val o2 = o1 + l1
          U.putInt(pos, at + 8, o2)
          U.putLong(dst, B + o2, nativeWords(c2))
          val o3 = o2 + l2
          U.putInt(pos, at + 12, o3)
          U.putLong(dst, B + o3, nativeWords(c3))
          o = o3 + l3
          p += 4
          true
        }
      }) ()
      if (p < end) {   // one code: an escape, an invalid code, or the last few
        val c = U.getByte(src, B + p) & 0xff
        U.putInt(pos, I + 4L * (p - start), o)
        val len = lens(c)
        if (len != 0) {
          U.putLong(dst, B + o, nativeWords(c))
          o += len
          p += 1
        } else if (c == FsstCodec.Escape && p + 1 < end) {
          pos(p + 1 - start) = -1   // an escaped byte: no value may start here
          dst(o) = src(p + 1)
          o += 1
          p += 2
        } else if (c == FsstCodec.Escape) ctx.fail(s"FSST value ${n - 1} ends with an escape byte")
        else ctx.fail(s"FSST code $c but the table has ${t.symbols} symbols")
      }
    }
    pos(inLen) = o
    val out = new Array[Long](n + 1)
    val base = offs(0)
    var i = 1
    while (i < n) {
      val q = offs(i) - base
      if (q < 0 || q > inLen || offs(i) > offs(i + 1)) ctx.fail(s"FSST value $i has offsets [${offs(i)}, ${offs(i + 1)})")
      val at = pos(q.toInt)
      if (at < 0) ctx.fail(s"FSST value ${i - 1} ends with an escape byte")
      out(i) = at
      i += 1
    }
    out(n) = o
    val data = if (inScratch) ByteBuffer.wrap(java.util.Arrays.copyOf(dst, o)) else ByteBuffer.wrap(dst, 0, o).slice()
    VarBlock(n, out, data.order(ByteOrder.LITTLE_ENDIAN), compressed.validity)
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
  /** `plain` values compressed with the symbol table `table`. */
  def encoding(plain: CompressiveEncoding, table: Array[Byte]): CompressiveEncoding =
    CompressiveEncoding.newBuilder().setFsst(Fsst.newBuilder().setValues(plain)
      .setSymbolTable(com.google.protobuf.ByteString.copyFrom(table))).build()

  val Magic: Long = 0x46535354L // "FSST"
  val Escape: Int = 255

  /** Per thread: expanded values of a block of up to `ScratchBytes / 8`
    * input bytes, before they are copied out. */
  private val ScratchBytes: Int = 4 << 20
  private val outputScratch: ThreadLocal[Array[Byte]] = ThreadLocal.withInitial(() => new Array[Byte](ScratchBytes))

  /** Per thread: the output position of each input byte of the block being
    * expanded (scratch, overwritten by the next block). */
  private val scratch: ThreadLocal[Array[Int]] = ThreadLocal.withInitial(() => new Array[Int](1 << 16))

  /** Scratch of at least `size` ints; past 1Mi (large full-zip values) a
    * fresh array, so that no thread keeps a large one. */
  private def positions(size: Int): Array[Int] = {
    val have = scratch.get()
    if (have.length >= size) have
    else if (size > (1 << 20)) new Array[Int](size)
    else {
      val bigger = new Array[Int](math.max(size, have.length * 2))
      scratch.set(bigger)
      bigger
    }
  }

  /** A parsed symbol table, by code: the symbol's bytes as a little-endian
    * long and its length (0: the escape code, or no such symbol). */
  final class Table(val words: Array[Long], val lens: Array[Int], val symbols: Int, val on: Boolean) {
    /** `words` in the platform's byte order, for [[U]]'s stores. */
    val nativeWords: Array[Long] =
      if (ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN) words else words.map(java.lang.Long.reverseBytes)

    /** Output bytes counted per input byte when sizing the output: a code's
      * length, 1 for the escape (whose escaped byte is counted as a code, at
      * most 8: an upper bound). */
    val estimate: Array[Int] = Array.tabulate(256)(c => if (c == Escape) 1 else math.max(lens(c), 1))
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
}
