package io.lancespark.format.v21.codec

import java.nio.{ByteBuffer, ByteOrder}

/** FastLanes bit-unpacking of groups of 1024 values, as the reference's
  * bit-packing writes them. A group of values of `t` bits (8, 16, 32 or 64)
  * packed to `w` bits is `1024 * w / t` words of `t` bits. The words are
  * interleaved over `1024 / t` lanes (word k of lane l is word `k * lanes + l`);
  * each lane is a little-endian bit stream holding `t` values of `w` bits, and
  * value r of lane l is output value `ORDER(r / 8) * 16 + (r % 8) * 128 + l`.
  * A sequential (non-transposed) unpacker gives wrong values. */
object FastLanes {
  val GroupSize: Int = 1024

  private val Order: Array[Int] = Array(0, 4, 2, 6, 1, 5, 3, 7)

  /** Bytes a group packed to `w` bits takes. */
  def packedBytes(w: Int): Int = GroupSize * w / 8

  /** The output position of value r of lane l. */
  def position(r: Int, l: Int): Int = Order(r >>> 3) * 16 + (r & 7) * 128 + l

  /** For each `t` (8, 16, 32, 64, by log2(t) - 3), output position -> the
    * value's row in its lane times the lanes, plus its lane. */
  private val inverse: Array[Array[Int]] = Array(8, 16, 32, 64).map { t =>
    val lanes = GroupSize / t
    val inv = new Array[Int](GroupSize)
    for (r <- 0 until t; l <- 0 until lanes) inv(position(r, l)) = r * lanes + l
    inv
  }

  /** Value `p` (an output position) of the group of width `w` (`t`-bit
    * values) whose packed words start at byte `at` of `src`, read from its one
    * or two words without unpacking the group. */
  def valueAt(src: ByteBuffer, at: Int, t: Int, w: Int, p: Int): Long =
    if (w == 0) 0L
    else {
      val lanes = GroupSize / t
      val rl = inverse(Integer.numberOfTrailingZeros(t) - 3)(p)
      val (r, l) = (rl / lanes, rl % lanes)
      val bit = r * w
      val shift = bit % t
      val word = (bit / t) * lanes + l
      val mask = if (w >= 64) -1L else (1L << w) - 1
      val in = if (src.order() eq ByteOrder.LITTLE_ENDIAN) src else src.duplicate().order(ByteOrder.LITTLE_ENDIAN)
      val lo = wordAt(in, at, t, word) >>> shift
      val v = if (shift + w > t) lo | (wordAt(in, at, t, word + lanes) << (t - shift)) else lo
      v & mask
    }

  /** Word `k` of `t` bits (unsigned) of the little-endian packed words at byte `at`. */
  private def wordAt(in: ByteBuffer, at: Int, t: Int, k: Int): Long =
    t match {
      case 8  => in.get(at + k) & 0xffL
      case 16 => in.getShort(at + 2 * k) & 0xffffL
      case 32 => in.getInt(at + 4 * k) & 0xffffffffL
      case _  => in.getLong(at + 8 * k)
    }

  private val scratch: ThreadLocal[Scratch] = ThreadLocal.withInitial(() => new Scratch)

  /** This thread's scratch for [[unpack]]. */
  def localScratch(): Scratch = scratch.get()

  /** Scratch for [[unpack]]: the packed words and the unpacked values. */
  final class Scratch {
    val words: Array[Long] = new Array[Long](GroupSize)
    val values: Array[Long] = new Array[Long](GroupSize)
    val ints: Array[Int] = new Array[Int](GroupSize)
    val unpackedInts: Array[Int] = new Array[Int](GroupSize)
    val shorts: Array[Short] = new Array[Short](GroupSize)
  }

  /** Unpacks the group of width `w` at byte `at` of `src` and writes its first
    * `take` values as `t`-bit little-endian integers into `dst` from value
    * `dstIndex`. */
  def unpack(src: ByteBuffer, at: Int, t: Int, w: Int, take: Int, dst: Array[Byte], dstIndex: Int,
             s: Scratch): Unit = {
    val bytes = t / 8
    val base = dstIndex * bytes
    if (w == 0) {
      java.util.Arrays.fill(dst, base, base + take * bytes, 0.toByte)
      return
    }
    val values = unpackValues(src, at, t, w, s)
    val out = ByteBuffer.wrap(dst, base, take * bytes).slice().order(ByteOrder.LITTLE_ENDIAN)
    t match {
      case 64 => out.asLongBuffer().put(values, 0, take)
      case 32 =>
        val ints = s.ints
        var i = 0
        while (i < take) { ints(i) = values(i).toInt; i += 1 }
        out.asIntBuffer().put(ints, 0, take)
      case 16 =>
        val shorts = s.shorts
        var i = 0
        while (i < take) { shorts(i) = values(i).toShort; i += 1 }
        out.asShortBuffer().put(shorts, 0, take)
      case _ =>
        var i = 0
        while (i < take) { dst(base + i) = values(i).toByte; i += 1 }
    }
  }

  /** [[unpack]] into ints from `dst(dstIndex)`, for dictionary indices and
    * levels (`t` <= 32; a 32-bit value of 2^31 or more comes out negative):
    * in 32-bit arithmetic, a whole group straight into `dst`. */
  def unpackInts(src: ByteBuffer, at: Int, t: Int, w: Int, take: Int, dst: Array[Int], dstIndex: Int,
                 s: Scratch): Unit = {
    if (w == 0) {
      java.util.Arrays.fill(dst, dstIndex, dstIndex + take, 0)
      return
    }
    val lanes = GroupSize / t
    val n = lanes * w
    val words = s.ints
    val in = if (src.order() eq ByteOrder.LITTLE_ENDIAN) src else src.duplicate().order(ByteOrder.LITTLE_ENDIAN)
    if (w == 1 && (t == 16 || t == 8)) {
      if (take == GroupSize) unpackBits(in, at, t, dst, dstIndex) else unpackFirstBits(in, at, t, take, dst, dstIndex)
      return
    }
    var k = 0
    t match {
      case 8  => while (k < n) { words(k) = in.get(at + k) & 0xff; k += 1 }
      case 16 => while (k < n) { words(k) = in.getShort(at + 2 * k) & 0xffff; k += 1 }
      case _  => while (k < n) { words(k) = in.getInt(at + 4 * k); k += 1 }
    }
    val whole = take == GroupSize
    val out = if (whole) dst else s.unpackedInts
    val base = if (whole) dstIndex else 0
    val mask = if (w >= 32) -1 else (1 << w) - 1
    var r = 0
    while (r < t) {
      val bit = r * w
      val lo = (bit / t) * lanes
      val shift = bit % t
      val rowBase = base + Order(r >>> 3) * 16 + (r & 7) * 128
      var l = 0
      if (shift + w > t) {
        val hi = lo + lanes
        val back = t - shift
        while (l < lanes) {
          out(rowBase + l) = ((words(lo + l) >>> shift) | (words(hi + l) << back)) & mask
          l += 1
        }
      } else {
        while (l < lanes) {
          out(rowBase + l) = (words(lo + l) >>> shift) & mask
          l += 1
        }
      }
      r += 1
    }
    if (!whole) System.arraycopy(out, 0, dst, dstIndex, take)
  }

  /** A whole group of 16- or 8-bit values packed to one bit each (the
    * definition levels of a nullable column, one per row): each packed word
    * read once and its bits stored straight to their positions, unrolled.
    * Bit r of lane l's word is value `ORDER(r / 8) * 16 + (r % 8) * 128 + l`:
    * rows 0-7 at l + 128 r, rows 8-15 at l + 64 + 128 (r - 8). About 2.3
    * times as fast as the general loop, which the JIT does not vectorize. */
  private def unpackBits(in: ByteBuffer, at: Int, t: Int, dst: Array[Int], dstIndex: Int): Unit =
    if (t == 16) {
      var l = 0
      while (l < 64) {
        val v = in.getShort(at + 2 * l).toInt
        eightBits(dst, dstIndex + l, v)
        eightBits(dst, dstIndex + l + 64, v >>> 8)
        l += 1
      }
    } else {
      var l = 0
      while (l < 128) {
        eightBits(dst, dstIndex + l, in.get(at + l).toInt)
        l += 1
      }
    }

  /** Bits 0-7 of `v` to positions `b`, `b + 128`, ..., `b + 896` (rows 0-7 of a lane). */
  private def eightBits(dst: Array[Int], b: Int, v: Int): Unit = {
    dst(b) = v & 1
    dst(b + 128) = (v >>> 1) & 1
    dst(b + 256) = (v >>> 2) & 1
    dst(b + 384) = (v >>> 3) & 1
    dst(b + 512) = (v >>> 4) & 1
    dst(b + 640) = (v >>> 5) & 1
    dst(b + 768) = (v >>> 6) & 1
    dst(b + 896) = (v >>> 7) & 1
  }

  /** The first `take` (< 1024) values of such a group: only the rows of the
    * lanes that hold them (a mini-block chunk of 128 wide values has 128
    * levels: rows 0 and 8 of 16-bit lanes, 0 of 8-bit ones). */
  private def unpackFirstBits(in: ByteBuffer, at: Int, t: Int, take: Int, dst: Array[Int], dstIndex: Int): Unit = {
    val lanes = GroupSize / t
    var r = 0
    while (r < t) {
      val rowBase = Order(r >>> 3) * 16 + (r & 7) * 128
      if (rowBase < take) {
        val until = math.min(lanes, take - rowBase)
        val b = dstIndex + rowBase
        var l = 0
        if (t == 16) while (l < until) { dst(b + l) = (in.getShort(at + 2 * l) >>> r) & 1; l += 1 }
        else while (l < until) { dst(b + l) = (in.get(at + l) >>> r) & 1; l += 1 }
      }
      r += 1
    }
  }

  /** The 1024 values of the group at byte `at` (w > 0), in `s.values`. */
  private def unpackValues(src: ByteBuffer, at: Int, t: Int, w: Int, s: Scratch): Array[Long] = {
    val lanes = GroupSize / t
    val n = lanes * w
    val words = s.words
    val in = src.duplicate().order(ByteOrder.LITTLE_ENDIAN)
    in.position(at)
    var k = 0
    t match {
      case 8  => while (k < n) { words(k) = in.get(at + k) & 0xffL; k += 1 }
      case 16 => while (k < n) { words(k) = in.getShort(at + 2 * k) & 0xffffL; k += 1 }
      case 32 => while (k < n) { words(k) = in.getInt(at + 4 * k) & 0xffffffffL; k += 1 }
      case _  => in.slice().order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(words, 0, n)
    }
    val mask = if (w >= 64) -1L else (1L << w) - 1
    val values = s.values
    var r = 0
    while (r < t) {
      val bit = r * w
      val word = bit / t
      val shift = bit % t
      val rowBase = Order(r >>> 3) * 16 + (r & 7) * 128
      val lo = word * lanes
      var l = 0
      if (shift + w > t) {
        val hi = lo + lanes
        val back = t - shift
        while (l < lanes) {
          values(rowBase + l) = ((words(lo + l) >>> shift) | (words(hi + l) << back)) & mask
          l += 1
        }
      } else {
        while (l < lanes) {
          values(rowBase + l) = (words(lo + l) >>> shift) & mask
          l += 1
        }
      }
      r += 1
    }
    values
  }

  /** Packs 1024 values (each below 2^w) of `t` bits into `w`-bit FastLanes
    * words, written little-endian into `dst` at byte `at` ([[packedBytes]] of
    * them): the inverse of [[unpack]]. */
  def pack(values: Array[Long], t: Int, w: Int, dst: Array[Byte], at: Int, s: Scratch): Unit =
    pack(values, t, w, dst, at, s.words)

  /** As above, with `words` (at least [[GroupSize]] longs) for scratch. */
  def pack(values: Array[Long], t: Int, w: Int, dst: Array[Byte], at: Int, words: Array[Long]): Unit = {
    if (w == 0) return
    val lanes = GroupSize / t
    val n = lanes * w
    java.util.Arrays.fill(words, 0, n, 0L)
    val mask = if (w >= 64) -1L else (1L << w) - 1
    val wordMask = if (t == 64) -1L else (1L << t) - 1
    var r = 0
    while (r < t) {
      val bit = r * w
      val word = bit / t
      val shift = bit % t
      val rowBase = Order(r >>> 3) * 16 + (r & 7) * 128
      val lo = word * lanes
      val spill = shift + w > t
      var l = 0
      while (l < lanes) {
        val v = values(rowBase + l) & mask
        words(lo + l) |= (v << shift) & wordMask
        if (spill) words(lo + lanes + l) |= v >>> (t - shift)
        l += 1
      }
      r += 1
    }
    val out = ByteBuffer.wrap(dst, at, n * (t / 8)).slice().order(ByteOrder.LITTLE_ENDIAN)
    var k = 0
    t match {
      case 64 => out.asLongBuffer().put(words, 0, n)
      case 32 => while (k < n) { out.putInt(4 * k, words(k).toInt); k += 1 }
      case 16 => while (k < n) { out.putShort(2 * k, words(k).toShort); k += 1 }
      case _  => while (k < n) { out.put(k, words(k).toByte); k += 1 }
    }
  }

  /** ORs value `v` (at most `w` bits) as output position `p` into the group of `t`-bit values
    * packed to `w` bits at byte `at` of `dst` (little-endian words): with the group's bytes zeroed
    * first, placing each non-zero value this way gives what [[pack]] gives, in time proportional
    * to the non-zero values (levels of long lists: a one where a list starts, zeros elsewhere). */
  def orValue(dst: Array[Byte], at: Int, t: Int, w: Int, p: Int, v: Long): Unit = {
    val lanes = GroupSize / t
    val rl = inverse(Integer.numberOfTrailingZeros(t) - 3)(p)
    val r = rl / lanes
    val l = rl % lanes
    val bit = r * w
    val shift = bit % t
    val word = (bit / t) * lanes + l
    val wordMask = if (t == 64) -1L else (1L << t) - 1
    orWord(dst, at, t, word, (v << shift) & wordMask)
    if (shift + w > t) orWord(dst, at, t, word + lanes, v >>> (t - shift))
  }

  private def orWord(dst: Array[Byte], at: Int, t: Int, k: Int, bits: Long): Unit = {
    val from = at + k * (t / 8)
    var b = 0
    while (b < t / 8) { dst(from + b) = (dst(from + b) | (bits >>> (8 * b))).toByte; b += 1 }
  }

  /** Bits needed for the largest of `values(0 until n)` taken as unsigned. */
  def width(values: Array[Long], n: Int): Int = {
    var or = 0L
    var i = 0
    while (i < n) { or |= values(i); i += 1 }
    64 - java.lang.Long.numberOfLeadingZeros(or)
  }
}
