package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

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

  /** Bytes a packed group of width `w` takes for values of `t` bits. */
  def packedBytes(w: Int): Int = GroupSize * w / 8

  /** Unpacks one group of width `w` at `src` (byte offset `at`) into `out`
    * (1024 values, zero-extended). */
  def unpack(src: ByteBuffer, at: Int, t: Int, w: Int, out: Array[Long]): Unit = {
    if (w == 0) { java.util.Arrays.fill(out, 0, GroupSize, 0L); return }
    val lanes = GroupSize / t
    val words = new Array[Long](lanes * w)
    var k = 0
    val n = words.length
    t match {
      case 8  => while (k < n) { words(k) = src.get(at + k) & 0xffL; k += 1 }
      case 16 => while (k < n) { words(k) = src.getShort(at + 2 * k) & 0xffffL; k += 1 }
      case 32 => while (k < n) { words(k) = src.getInt(at + 4 * k) & 0xffffffffL; k += 1 }
      case _  => while (k < n) { words(k) = src.getLong(at + 8 * k); k += 1 }
    }
    val mask = if (w >= 64) -1L else (1L << w) - 1
    var l = 0
    while (l < lanes) {
      var r = 0
      while (r < t) {
        val bit = r * w
        val word = bit / t
        val shift = bit % t
        var v = words(word * lanes + l) >>> shift
        if (shift + w > t) v |= words((word + 1) * lanes + l) << (t - shift)
        out(Order(r >>> 3) * 16 + (r & 7) * 128 + l) = v & mask
        r += 1
      }
      l += 1
    }
  }

  /** Writes the first `n` of `values` as `t`-bit little-endian integers into `dst` from value index `at`. */
  def store(values: Array[Long], n: Int, t: Int, dst: Array[Byte], at: Int): Unit = {
    var i = 0
    var o = at * (t / 8)
    t match {
      case 8 => while (i < n) { dst(o) = values(i).toByte; o += 1; i += 1 }
      case 16 => while (i < n) { val v = values(i); dst(o) = v.toByte; dst(o + 1) = (v >>> 8).toByte; o += 2; i += 1 }
      case 32 => while (i < n) {
        val v = values(i)
        dst(o) = v.toByte; dst(o + 1) = (v >>> 8).toByte; dst(o + 2) = (v >>> 16).toByte; dst(o + 3) = (v >>> 24).toByte
        o += 4; i += 1
      }
      case _ => while (i < n) {
        var v = values(i)
        var b = 0
        while (b < 8) { dst(o + b) = v.toByte; v >>>= 8; b += 1 }
        o += 8; i += 1
      }
    }
  }
}
