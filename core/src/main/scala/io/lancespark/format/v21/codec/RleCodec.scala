package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.FixedBlock
import io.lancespark.format.file.ByteBuilder
import io.lancespark.format.file.RawBytes.{ByteBase, NativeLittleEndian, U}
import io.lancespark.proto.encodings21.{CompressiveEncoding, Rle}

/** Run-length encoding: the run values (fixed width) and the run lengths
  * (unsigned, 8 bits in mini-block chunks).
  *  - mini-block chunk: two buffers, the values then the lengths;
  *  - block: a u64 byte length of the values, the values, the lengths. */
final case class RleCodec(rle: Rle) extends Codec {
  private def flatBits(e: CompressiveEncoding): Option[Int] =
    if (e.getCompressionCase == CompressiveEncoding.CompressionCase.FLAT && !e.getFlat.hasData)
      Some(e.getFlat.getBitsPerValue.toInt)
    else None

  private val valueBits = flatBits(rle.getValues)
  private val lengthBits = flatBits(rle.getRunLengths)
  // the widths this reader expands, checked once (every chunk of the page asks)
  private val readableValueBits: Option[Int] = valueBits.filter(b => b % 8 == 0 && b >= 8 && b <= 128)
  private val readableLengthBits: Option[Int] = lengthBits.filter(b => b == 8 || b == 16 || b == 32)

  def describe: String = s"rle(${valueBits.getOrElse("?")}-bit values, ${lengthBits.getOrElse("?")}-bit runs)"

  private def expand(values: ByteBuffer, lengths: ByteBuffer, n: Int, ctx: CodecContext): Block = {
    val vb = readableValueBits.getOrElse(ctx.unsupported(describe, "page (run values not flat whole bytes)"))
    val lb = readableLengthBits.getOrElse(ctx.unsupported(describe, "page (run lengths)"))
    val w = vb / 8
    val lw = lb / 8
    val runs = values.remaining() / w
    if (values.remaining() % w != 0) ctx.fail(s"run values of ${values.remaining()} bytes are not whole $w-byte values")
    if (lengths.remaining() < runs.toLong * lw) ctx.fail(s"$runs runs but ${lengths.remaining() / lw} run lengths")
    val out = new Array[Byte](n * w)
    val vs = values.duplicate().order(java.nio.ByteOrder.LITTLE_ENDIAN)
    val value = new Array[Byte](w)
    var pos = 0 // values written
    var r = 0
    while (r < runs && pos < n) {
      val len = lw match {
        case 1 => lengths.get(r) & 0xff
        case 2 => lengths.getShort(2 * r) & 0xffff
        case _ => lengths.getInt(4 * r)
      }
      if (len < 0) ctx.fail(s"run length $len")
      val take = math.min(len, n - pos)
      // the run's value read in place (absolute indexes, as the lengths are): no buffer view per run
      if (w == 1) java.util.Arrays.fill(out, pos, pos + take, values.get(r))
      else if (take <= RleCodec.ShortRun && w == 4) {
        // short runs of ints and longs (keys repeated a few times): a store per value, where
        // the copies below cost a call each
        // (unchecked stores: pos + take <= n, and out holds n values)
        val v = vs.getInt(4 * r)
        val nv = if (NativeLittleEndian) v else Integer.reverseBytes(v)
        var at = ByteBase + 4L * pos
        val end = at + 4L * take
        while (at < end) { U.putInt(out, at, nv); at += 4 }
      } else if (take <= RleCodec.ShortRun && w == 8) {
        val v = vs.getLong(8 * r)
        val nv = if (NativeLittleEndian) v else java.lang.Long.reverseBytes(v)
        var at = ByteBase + 8L * pos
        val end = at + 8L * take
        while (at < end) { U.putLong(out, at, nv); at += 8 }
      } else if (take > 0) {
        var b = 0
        while (b < w) { value(b) = values.get(r * w + b); b += 1 }
        // one copy of the value, then doubling copies of what is written
        val start = pos * w
        val total = take * w
        System.arraycopy(value, 0, out, start, w)
        var done = w
        while (done < total) {
          val k = math.min(done, total - done)
          System.arraycopy(out, start, out, start + done, k)
          done += k
        }
      }
      pos += take
      r += 1
    }
    if (pos != n) ctx.fail(s"runs cover $pos values, expected $n")
    FixedBlock(n, w, Codec.wrap(out))
  }

  override def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block = {
    if (n == 0) return FixedBlock(0, valueBits.getOrElse(8) / 8, Codec.wrap(new Array[Byte](0)))
    if (buffers.size != 2) ctx.fail(s"run-length values in ${buffers.size} chunk buffers, expected 2")
    expand(buffers(0), buffers(1), n, ctx)
  }

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block = {
    ctx.check(0, 8, buffer.remaining(), "a run-length header")
    val valuesLen = buffer.getLong(0)
    ctx.check(8, valuesLen, buffer.remaining(), "run values")
    expand(Codec.slice(buffer, 8, valuesLen.toInt),
      Codec.slice(buffer, 8 + valuesLen.toInt, buffer.remaining() - 8 - valuesLen.toInt), n, ctx)
  }
}

object RleCodec {
  /** Runs of at most this many 4- or 8-byte values are written value by value. */
  private val ShortRun: Int = 32

  /** The runs of `n` values of `w` bytes at `from` in `src`: the run values,
    * and the run lengths (u8: longer runs are split). */
  def encode(src: Array[Byte], from: Int, n: Int, w: Int,
             values: ByteBuilder, lengths: ByteBuilder): Unit = {
    var i = 0
    while (i < n) {
      var j = i + 1
      while (j < n && j - i < 255 && same(src, from + i * w, from + j * w, w)) j += 1
      values.put(src, from + i * w, w)
      lengths.putByte(j - i)
      i = j
    }
  }

  /** The number of runs (split at 255) of `n` values of `w` bytes, or a
    * number above `limit` as soon as there are more than `limit` runs. */
  def runs(src: Array[Byte], from: Int, n: Int, w: Int, limit: Int = Int.MaxValue): Int = {
    require(from >= 0 && from.toLong + n.toLong * w <= src.length, s"$n values of $w bytes from $from in ${src.length}")
    var runs = 0
    var i = 0
    while (i < n && runs <= limit) {
      var j = i + 1
      while (j < n && j - i < 255 && same(src, from + i * w, from + j * w, w)) j += 1
      runs += 1
      i = j
    }
    runs
  }

  /** Whether the `w`-byte values at `a` and `b` (both within `src`) are equal. */
  private def same(src: Array[Byte], a: Int, b: Int, w: Int): Boolean = {
    import io.lancespark.format.file.RawBytes.{ByteBase, U}
    w match {
      case 8 => U.getLong(src, ByteBase + a) == U.getLong(src, ByteBase + b)
      case 4 => U.getInt(src, ByteBase + a) == U.getInt(src, ByteBase + b)
      case 2 => U.getShort(src, ByteBase + a) == U.getShort(src, ByteBase + b)
      case 1 => src(a) == src(b)
      case _ => java.util.Arrays.equals(src, a, a + w, src, b, b + w)
    }
  }
}

/** Runs of equal values of `w` bytes: run values, then u8 run lengths. */
private[v21] final class RleValues(src: Array[Byte], w: Int) extends MiniBlockValues {
  val encoding: CompressiveEncoding = CompressiveEncoding.newBuilder().setRle(Rle.newBuilder()
    .setValues(FlatCodec.encoding(8L * w)).setRunLengths(FlatCodec.encoding(8))).build()
  def buffersPerChunk: Int = 2
  def preferred(v: Int): Int = 2048
  def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
    val values = new ByteBuilder()
    val lengths = new ByteBuilder()
    RleCodec.encode(src, v * w, n, w, values, lengths)
    Seq(values.toArray, lengths.toArray)
  }
}
