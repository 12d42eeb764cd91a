package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.FixedBlock
import io.lancespark.format.file.RawBytes
import io.lancespark.format.file.RawBytes.{ByteBase, NativeLittleEndian, U}
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
    FixedBlock(n, w, Codec.wrap(ByteStreamSplitCodec.join(Codec.bytes(buf), n, w)))
  }

  override def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block = {
    if (buffers.size != 1) ctx.fail(s"split values in ${buffers.size} chunk buffers, expected 1")
    join(buffers.head, n, ctx)
  }

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block = join(buffer, n, ctx)
}

object ByteStreamSplitCodec {
  /** Split values of `bits` (32 or 64 for pylance's reader) under no further encoding. */
  def encoding(bits: Long): CompressiveEncoding =
    CompressiveEncoding.newBuilder()
      .setByteStreamSplit(ByteStreamSplit.newBuilder().setValues(FlatCodec.encoding(bits))).build()

  /** `n` values of `w` bytes from `src` at `from`, as `w` streams of `n` bytes. */
  def split(src: Array[Byte], from: Int, n: Int, w: Int): Array[Byte] = {
    val out = new Array[Byte](n * w)
    var i = 0
    while (i < n) {
      val at = from + i * w
      var k = 0
      while (k < w) { out(k * n + i) = src(at + k); k += 1 }
      i += 1
    }
    out
  }

  /** The `n` values of `w` bytes whose `w` streams of `n` bytes are `src`'s
    * first `n * w` bytes. 8- and 4-byte values go 8 (4) at a time: a word
    * loaded from each stream, the 8x8 (4x4) byte matrix transposed in
    * registers (swaps of bytes, then pairs, then quads), the values stored
    * whole; a load and a store per value instead of one per byte. */
  def join(src: Array[Byte], n: Int, w: Int): Array[Byte] = {
    if (src.length < n.toLong * w) throw new IllegalArgumentException(s"${src.length} bytes for $n split values of $w bytes")
    val out = new Array[Byte](n * w)
    val i0 = if (w == 8) join8(src, n, out) else if (w == 4) join4(src, n, out) else 0
    var k = 0
    while (k < w) {
      var i = i0
      val from = k * n
      while (i < n) { out(i * w + k) = src(from + i); i += 1 }
      k += 1
    }
    out
  }

  private final val B1 = 0x00FF00FF00FF00FFL
  private final val B2 = 0x0000FFFF0000FFFFL
  private final val B4 = 0x00000000FFFFFFFFL

  /** Values [0, the returned count) of 8 bytes joined (a multiple of 8). */
  private def join8(src: Array[Byte], n: Int, out: Array[Byte]): Int = {
    var i = 0
    while (i + 8 <= n) {
      // r_k: byte j is byte k of value i + j
      var r0 = RawBytes.longLE(src, i); var r1 = RawBytes.longLE(src, n + i)
      var r2 = RawBytes.longLE(src, 2 * n + i); var r3 = RawBytes.longLE(src, 3 * n + i)
      var r4 = RawBytes.longLE(src, 4 * n + i); var r5 = RawBytes.longLE(src, 5 * n + i)
      var r6 = RawBytes.longLE(src, 6 * n + i); var r7 = RawBytes.longLE(src, 7 * n + i)
      var t = 0L
      t = ((r0 >>> 8) ^ r1) & B1; r1 ^= t; r0 ^= t << 8
      t = ((r2 >>> 8) ^ r3) & B1; r3 ^= t; r2 ^= t << 8
      t = ((r4 >>> 8) ^ r5) & B1; r5 ^= t; r4 ^= t << 8
      t = ((r6 >>> 8) ^ r7) & B1; r7 ^= t; r6 ^= t << 8
      t = ((r0 >>> 16) ^ r2) & B2; r2 ^= t; r0 ^= t << 16
      t = ((r1 >>> 16) ^ r3) & B2; r3 ^= t; r1 ^= t << 16
      t = ((r4 >>> 16) ^ r6) & B2; r6 ^= t; r4 ^= t << 16
      t = ((r5 >>> 16) ^ r7) & B2; r7 ^= t; r5 ^= t << 16
      t = ((r0 >>> 32) ^ r4) & B4; r4 ^= t; r0 ^= t << 32
      t = ((r1 >>> 32) ^ r5) & B4; r5 ^= t; r1 ^= t << 32
      t = ((r2 >>> 32) ^ r6) & B4; r6 ^= t; r2 ^= t << 32
      t = ((r3 >>> 32) ^ r7) & B4; r7 ^= t; r3 ^= t << 32
      // now r_j is value i + j
      val at = ByteBase + 8L * i
      if (NativeLittleEndian) {
        U.putLong(out, at, r0); U.putLong(out, at + 8, r1); U.putLong(out, at + 16, r2); U.putLong(out, at + 24, r3)
        U.putLong(out, at + 32, r4); U.putLong(out, at + 40, r5); U.putLong(out, at + 48, r6); U.putLong(out, at + 56, r7)
      } else {
        val rs = Array(r0, r1, r2, r3, r4, r5, r6, r7)
        var j = 0
        while (j < 8) { U.putLong(out, at + 8L * j, java.lang.Long.reverseBytes(rs(j))); j += 1 }
      }
      i += 8
    }
    i
  }

  /** Values [0, the returned count) of 4 bytes joined (a multiple of 4). */
  private def join4(src: Array[Byte], n: Int, out: Array[Byte]): Int = {
    var i = 0
    while (i + 4 <= n) {
      var r0 = RawBytes.intLE(src, i); var r1 = RawBytes.intLE(src, n + i)
      var r2 = RawBytes.intLE(src, 2 * n + i); var r3 = RawBytes.intLE(src, 3 * n + i)
      var t = 0
      t = ((r0 >>> 8) ^ r1) & 0x00FF00FF; r1 ^= t; r0 ^= t << 8
      t = ((r2 >>> 8) ^ r3) & 0x00FF00FF; r3 ^= t; r2 ^= t << 8
      t = ((r0 >>> 16) ^ r2) & 0x0000FFFF; r2 ^= t; r0 ^= t << 16
      t = ((r1 >>> 16) ^ r3) & 0x0000FFFF; r3 ^= t; r1 ^= t << 16
      val at = ByteBase + 4L * i
      if (NativeLittleEndian) { U.putInt(out, at, r0); U.putInt(out, at + 4, r1); U.putInt(out, at + 8, r2); U.putInt(out, at + 12, r3) }
      else {
        U.putInt(out, at, Integer.reverseBytes(r0)); U.putInt(out, at + 4, Integer.reverseBytes(r1))
        U.putInt(out, at + 8, Integer.reverseBytes(r2)); U.putInt(out, at + 12, Integer.reverseBytes(r3))
      }
      i += 4
    }
    i
  }
}

/** Fixed-width values of `w` bytes stored split, each chunk's values as `w`
  * streams (the write side; chosen under lz4 or zstd, which then find the
  * similar high bytes of floats, e.g. their signs and exponents, together). */
private[v21] final class SplitValues(src: Array[Byte], w: Int) extends MiniBlockValues {
  val encoding: CompressiveEncoding = ByteStreamSplitCodec.encoding(8L * w)
  def buffersPerChunk: Int = 1
  def preferred(v: Int): Int = MiniBlockValues.pow2AtMost(math.max(1, 8186 / w))
  def chunk(v: Int, n: Int): Seq[Array[Byte]] = Seq(ByteStreamSplitCodec.split(src, v * w, n, w))
}
