package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.FixedBlock
import io.lancespark.format.file.{ByteBuilder, RawBytes}
import io.lancespark.proto.encodings21.{CompressiveEncoding, InlineBitpacking, OutOfLineBitpacking}

/** Bit-packing with the width stored inline: groups of up to 1024 values,
  * each a `t`-bit little-endian width `w` followed by the FastLanes-packed
  * group ([[FastLanes]]). A mini-block chunk holds one group; a block holds
  * groups back to back (the last one padded to 1024 values). */
final case class InlineBitpackingCodec(bp: InlineBitpacking) extends Codec {
  private val t: Int = bp.getUncompressedBitsPerValue.toInt

  def describe: String = s"bitpack(inline, $t-bit)"

  private def groups(buf: ByteBuffer, n: Int, ctx: CodecContext): Block = {
    val out = new Array[Byte](n * (t / 8))
    val scratch = ctx.scratch
    eachGroup(buf, n, ctx)((pos, w, take, done) => FastLanes.unpack(buf, pos, t, w, take, out, done, scratch))
    FixedBlock(n, t / 8, Codec.wrap(out))
  }

  /** What is done with one group: its packed words at byte `at`, `width` bits a
    * value, `count` values, `done` values before it. (A function type of its
    * own: `(Int, Int, Int, Int) => Unit` is not specialized and would box four
    * Ints a group.) */
  private trait GroupUnpack { def apply(at: Int, width: Int, count: Int, done: Int): Unit }

  /** `unpack(at, width, take, done)` for each group: its packed bytes at `at`. */
  private def eachGroup(buf: ByteBuffer, n: Int, ctx: CodecContext)(unpack: GroupUnpack): Unit = {
    if (t != 8 && t != 16 && t != 32 && t != 64) ctx.fail(s"inline bit-packing of $t-bit values")
    if (bp.hasValues) ctx.unsupported(describe + "+" + GeneralCodec.schemeName(bp.getValues), "page")
    val bytes = t / 8
    var pos = 0
    var done = 0
    while (done < n) {
      val w = width(buf, pos, ctx)
      val take = math.min(FastLanes.GroupSize, n - done)
      unpack(pos + bytes, w, take, done)
      done += take
      pos += bytes + FastLanes.packedBytes(w)
    }
  }

  /** The width of the group at byte `pos`, checked, and that its packed words are in `buf`. */
  private def width(buf: ByteBuffer, pos: Int, ctx: CodecContext): Int = {
    val bytes = t / 8
    ctx.check(pos, bytes, buf.remaining(), "a bit-packing width")
    val w = bytes match {
      case 1 => buf.get(pos) & 0xffL
      case 2 => buf.getShort(pos) & 0xffffL
      case 4 => buf.getInt(pos) & 0xffffffffL
      case _ => buf.getLong(pos)
    }
    if (w < 0 || w > t) ctx.fail(s"bit-packing width $w for $t-bit values")
    ctx.check(pos + bytes, FastLanes.packedBytes(w.toInt), buf.remaining(), s"a group packed to $w bits")
    w.toInt
  }

  override def miniBlockIndices(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Array[Int] =
    if (t > 32 || buffers.size != 1 || n > FastLanes.GroupSize) super.miniBlockIndices(buffers, n, ctx)
    else {
      val out = new Array[Int](n)
      val scratch = ctx.scratch
      eachGroup(buffers.head, n, ctx)((pos, w, take, done) =>
        FastLanes.unpackInts(buffers.head, pos, t, w, take, out, done, scratch))
      out
    }

  /** The chunk's one group's width and the byte its packed words start at. */
  private def onlyGroup(buf: ByteBuffer, n: Int, ctx: CodecContext): Option[(Int, Int)] =
    if ((t != 8 && t != 16 && t != 32 && t != 64) || bp.hasValues || n > FastLanes.GroupSize) None
    else Some((width(buf, 0, ctx), t / 8))

  override def miniBlockAt(buffers: IndexedSeq[ByteBuffer], n: Int, positions: Array[Int], ctx: CodecContext): Option[Block] =
    if (buffers.size != 1) None
    else onlyGroup(buffers.head, n, ctx).map { case (w, at) =>
      val bytes = t / 8
      val out = java.nio.ByteBuffer.allocate(positions.length * bytes).order(java.nio.ByteOrder.LITTLE_ENDIAN)
      var i = 0
      while (i < positions.length) {
        val v = FastLanes.valueAt(buffers.head, at, t, w, positions(i))
        bytes match {
          case 1 => out.put(i, v.toByte)
          case 2 => out.putShort(2 * i, v.toShort)
          case 4 => out.putInt(4 * i, v.toInt)
          case _ => out.putLong(8 * i, v)
        }
        i += 1
      }
      FixedBlock(positions.length, bytes, Codec.wrap(out.array()))
    }

  override def miniBlockIndicesAt(buffers: IndexedSeq[ByteBuffer], n: Int, positions: Array[Int],
                                  ctx: CodecContext): Option[Array[Int]] =
    if (t > 32 || buffers.size != 1) None
    else onlyGroup(buffers.head, n, ctx).map { case (w, at) =>
      positions.map(p => FastLanes.valueAt(buffers.head, at, t, w, p).toInt)
    }

  override def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block = {
    if (buffers.size != 1) ctx.fail(s"bit-packed values in ${buffers.size} chunk buffers, expected 1")
    if (n > FastLanes.GroupSize) ctx.fail(s"a bit-packed chunk of $n values (at most ${FastLanes.GroupSize})")
    groups(buffers.head, n, ctx)
  }

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block = groups(buffer, n, ctx)
}

/** Bit-packing with one width for the whole buffer (`values` is flat(w)):
  * whole groups of 1024 `u`-bit values FastLanes-packed to `w` bits; a last,
  * partial group is packed the same way (padded) or stored raw, whichever the
  * writer found smaller (the buffer's size tells which). */
final case class OutOfLineBitpackingCodec(bp: OutOfLineBitpacking) extends Codec {
  private val u: Int = bp.getUncompressedBitsPerValue.toInt

  private val w: Option[Int] =
    if (bp.getValues.getCompressionCase == CompressiveEncoding.CompressionCase.FLAT && !bp.getValues.getFlat.hasData)
      Some(bp.getValues.getFlat.getBitsPerValue.toInt)
    else None

  def describe: String = s"bitpack(${w.getOrElse("?")} of $u bits)"

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block = {
    val bytes = u / 8
    val out = new Array[Byte](n * bytes)
    val scratch = ctx.scratch
    val tail = groups(buffer, n, ctx) { (at, width, take, done) =>
      FastLanes.unpack(buffer, at, u, width, take, out, done, scratch)
    }
    tail.foreach { at =>
      val d = buffer.duplicate(); d.position(at)
      d.get(out, (n / FastLanes.GroupSize) * FastLanes.GroupSize * bytes, (n % FastLanes.GroupSize) * bytes)
    }
    FixedBlock(n, bytes, Codec.wrap(out))
  }

  // levels: unpacked straight to ints
  override def blockInts(buffer: ByteBuffer, n: Int, ctx: CodecContext, what: String): Array[Int] =
    if (u > 16) super.blockInts(buffer, n, ctx, what)
    else {
      val out = new Array[Int](n)
      val scratch = ctx.scratch
      val tail = groups(buffer, n, ctx) { (at, width, take, done) =>
        FastLanes.unpackInts(buffer, at, u, width, take, out, done, scratch)
      }
      tail.foreach { at =>
        var i = (n / FastLanes.GroupSize) * FastLanes.GroupSize
        var p = at
        while (i < n) {
          out(i) = if (u == 8) buffer.get(p) & 0xff else buffer.getShort(p) & 0xffff
          p += u / 8; i += 1
        }
      }
      out
    }

  /** Calls `unpack(byte position, width, values, values before)` for each
    * packed group of the buffer's `n` values; returns the byte position of a
    * last partial group stored raw, if it is. */
  private def groups(buffer: ByteBuffer, n: Int, ctx: CodecContext)(unpack: (Int, Int, Int, Int) => Unit): Option[Int] = {
    // (a match, not a Set: this runs for every chunk a page decodes)
    u match { case 8 | 16 | 32 | 64 => (); case _ => ctx.fail(s"bit-packing of $u-bit values") }
    val width = w.getOrElse(ctx.unsupported(describe, "block buffer (packed values not flat)"))
    if (width < 0 || width > u) ctx.fail(s"bit-packing to $width bits of $u-bit values")
    val bytes = u / 8
    val groupBytes = FastLanes.packedBytes(width)
    // whole groups take ceil(1024 * w / u) words of u bits
    val groupWords = (FastLanes.GroupSize.toLong * width + u - 1) / u
    val whole = n / FastLanes.GroupSize
    val tail = n % FastLanes.GroupSize
    val words = buffer.remaining() / bytes
    val tailRaw = tail > 0 && words == whole * groupWords + tail
    var g = 0
    val count = whole + (if (tail > 0 && !tailRaw) 1 else 0)
    while (g < count) {
      val at = (g * groupWords * bytes).toInt
      ctx.check(at, groupBytes, buffer.remaining(), s"bit-packed group $g")
      unpack(at, width, math.min(FastLanes.GroupSize, n - g * FastLanes.GroupSize), g * FastLanes.GroupSize)
      g += 1
    }
    if (!tailRaw) None
    else {
      val at = (whole * groupWords * bytes).toInt
      ctx.check(at, tail.toLong * bytes, buffer.remaining(), "the unpacked tail")
      Some(at)
    }
  }
}

object InlineBitpackingCodec {
  /** The values of `w` bytes bit-packed in groups of 1024, each at its own width. */
  def encoding(w: Int): CompressiveEncoding = CompressiveEncoding.newBuilder()
    .setInlineBitpacking(InlineBitpacking.newBuilder().setUncompressedBitsPerValue(8L * w)).build()

  /** Values [v, v + n) of `w` bytes in `src` as one group (its tail zero). */
  private[v21] def readGroup(src: Array[Byte], v: Int, n: Int, w: Int, group: Array[Long]): Unit = {
    var i = 0
    while (i < n) { group(i) = RawBytes.uintLE(src, (v + i) * w, w); i += 1 }
    java.util.Arrays.fill(group, n, 1024, 0L)
  }

  /** Bytes of `n` values of `w` bytes bit-packed in groups of 1024, each at its own width. */
  def packedBytes(src: Array[Byte], n: Int, w: Int): Long = {
    val group = new Array[Long](1024)
    var packed = 0L
    var v = 0
    while (v < n) {
      val k = math.min(1024, n - v)
      readGroup(src, v, k, w, group)
      packed += w + 1024L * FastLanes.width(group, k) / 8
      v += k
    }
    packed
  }

  /** One group of up to 1024 `t`-bit values (`values`, the unused tail zero):
    * its width as a `t`-bit integer, then the values FastLanes-packed to it. */
  def encodeGroup(values: Array[Long], t: Int, out: ByteBuilder): Unit = {
    val w = FastLanes.width(values, FastLanes.GroupSize)
    val bytes = t / 8
    var b = 0
    while (b < bytes) { out.putByte(if (b == 0) w else 0); b += 1 }
    val packed = new Array[Byte](FastLanes.packedBytes(w))
    FastLanes.pack(values, t, w, packed, 0, FastLanes.localScratch())
    out.put(packed, 0, packed.length)
  }
}

object OutOfLineBitpackingCodec {
  /** Levels (16-bit) packed to `w` bits. */
  def levelsEncoding(w: Int): CompressiveEncoding = CompressiveEncoding.newBuilder().setOutOfLineBitpacking(
    OutOfLineBitpacking.newBuilder().setUncompressedBitsPerValue(16).setValues(FlatCodec.encoding(w))).build()

  /** Up to this many non-zero levels in a group are placed one by one rather than packed. */
  private val SparseLevels: Int = 64

  /** `n` unsigned 16-bit levels packed to `w` bits: whole groups of 1024, and a
    * last partial group packed (padded) only when that is strictly smaller
    * than storing it raw, so that the size tells a reader which it is. */
  def encodeLevels(levels: Array[Int], from: Int, n: Int, w: Int, out: ByteBuilder): Unit = {
    val size = FastLanes.GroupSize
    val group = new Array[Long](size)
    val groupBytes = FastLanes.packedBytes(w)
    val whole = n / size
    val tail = n % size
    val packTail = tail > 0 && groupBytes < 2 * tail
    val groups = whole + (if (packTail) 1 else 0)
    val packed = new Array[Byte](groupBytes)
    val words = new Array[Long](size)
    var g = 0
    while (g < groups) {
      val take = math.min(size, n - g * size)
      val base = from + g * size
      // few non-zero levels (none, or the starts of long lists) are placed one by one into
      // zeroed words in one pass; past SparseLevels of them the group is packed value by value
      java.util.Arrays.fill(packed, 0.toByte)
      var nonZero = 0
      var i = 0
      while (i < take && nonZero <= SparseLevels) {
        val l = levels(base + i) & 0xffff
        if (l != 0) {
          nonZero += 1
          if (nonZero <= SparseLevels) FastLanes.orValue(packed, 0, 16, w, i, l.toLong)
        }
        i += 1
      }
      if (nonZero <= SparseLevels) out.put(packed, 0, groupBytes)
      else {
        i = 0
        while (i < take) { group(i) = (levels(base + i) & 0xffff).toLong; i += 1 }
        java.util.Arrays.fill(group, take, size, 0L)
        FastLanes.pack(group, 16, w, packed, 0, words)
        out.put(packed, 0, groupBytes)
      }
      g += 1
    }
    if (tail > 0 && !packTail) {
      var i = 0
      while (i < tail) { out.putShort(levels(from + whole * size + i)); i += 1 }
    }
  }
}

/** Integers of `w` bytes bit-packed in groups of 1024, each with its own width. */
private[v21] final class BitpackedValues(src: Array[Byte], w: Int) extends MiniBlockValues {
  val encoding: CompressiveEncoding = InlineBitpackingCodec.encoding(w)
  def buffersPerChunk: Int = 1
  def preferred(v: Int): Int = 1024
  def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
    val group = new Array[Long](1024)
    InlineBitpackingCodec.readGroup(src, v, n, w, group)
    val out = new ByteBuilder(8 * 1024 + 16)
    InlineBitpackingCodec.encodeGroup(group, 8 * w, out)
    Seq(out.toArray)
  }
}
