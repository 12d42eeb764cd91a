package io.lancespark.format.v21.write

import io.lancespark.format.file.RawBytes

/** A dictionary of fixed-width values (integers, floats, dates, decimals,
  * fixed-size binaries of up to 16 bytes): the distinct values (in order of
  * first appearance, or sorted by [[FixedDictionary.sorted]]) as one flat block, and each value's item number (u32,
  * little-endian) to be bit-packed. As the reference does for repeated
  * fixed-width values (e.g. decimal quantities, a few status codes). */
private[write] final case class FixedDictionary(items: Array[Byte], indices: Array[Byte], count: Int)

private[write] object FixedDictionary {
  /** Least values in a page worth a dictionary. */
  private val MinValues = 16

  /** Most a dictionary may take, as a share of what the values take without
    * it: its indices bit-packed plus its items as stored (general compression
    * of sorted items, e.g. a page's 11,000 Zipf-distributed user ids in 2.3
    * bytes each, makes a dictionary pay where raw items would not). */
  val MaxShare: Double = 0.9

  /** Bytes of `n` indices into `count` items, bit-packed in groups of 1,024. */
  def indexBytes(n: Int, count: Int): Long = {
    val bits = math.max(1, 32 - Integer.numberOfLeadingZeros(math.max(count, 1) - 1))
    ((n + 1023) / 1024).toLong * (4 + 128L * bits)
  }

  /** The dictionary of the `n` values of `w` bytes in `src`, if it is on and
    * could take at most [[MaxShare]] of `plainBytes` (what the values take
    * without it) with its items stored in at least one byte each; the caller
    * checks with the items as it stores them. */
  def build(src: Array[Byte], n: Int, w: Int, enabled: Boolean, plainBytes: Long): Option[FixedDictionary] = {
    if (!enabled || n < MinValues || w > 16) return None
    val budget = (MaxShare * plainBytes).toLong
    // most distinct values that could still pay, at a byte an item
    val limit = math.min(n / 2, budget).toInt
    if (limit < 1) return None
    // the first values nearly all distinct (random doubles, ids), or so many
    // distinct that their indices alone would take the budget (ints of a
    // thousand values, already bit-packed as tightly): no dictionary,
    // without hashing them all
    val sample = math.min(n, Sample)
    if (sample >= 256) {
      val distinct = distinctUpTo(src, w, sample, sample * 9 / 10)
      if (distinct < 0) return None
      if (indexBytes(n, distinct) > budget) return None
    }
    val table = new Table(limit)
    val indices = new Array[Byte](4 * n)
    var i = 0
    while (i < n) {
      val at = i * w
      val lo = RawBytes.uintLE(src, at, math.min(w, 8))
      val hi = if (w > 8) RawBytes.uintLE(src, at + 8, w - 8) else 0L
      val id = table.idOf(hi, lo)
      if (id < 0) return None
      indices(4 * i) = id.toByte; indices(4 * i + 1) = (id >>> 8).toByte
      indices(4 * i + 2) = (id >>> 16).toByte; indices(4 * i + 3) = (id >>> 24).toByte
      i += 1
    }
    val count = table.size
    if (indexBytes(n, count) + count > budget) return None
    val items = new Array[Byte](count * w)
    var k = 0
    while (k < count) {
      put(items, k * w, math.min(w, 8), table.lo(k))
      if (w > 8) put(items, k * w + 8, w - 8, table.hi(k))
      k += 1
    }
    Some(FixedDictionary(items, indices, count))
  }

  private val Sample = 4096

  /** Least dictionary bytes worth trying general compression on. */
  val MinCompressedBytes: Int = 1024

  /** `d` (items of `w` <= 8 bytes) with its items in ascending order of their
    * little-endian value, indices renumbered: neighbouring items then share
    * their high bytes, which general compression of the dictionary exploits. */
  def sorted(d: FixedDictionary, w: Int): FixedDictionary = {
    require(w <= 8, s"sorting $w-byte items")
    val values = new Array[Long](d.count)
    var v = 0
    while (v < d.count) { values(v) = RawBytes.uintLE(d.items, v * w, w); v += 1 }
    val order = values.clone()
    java.util.Arrays.sort(order)
    val rank = new Array[Int](d.count)
    v = 0
    while (v < d.count) { rank(v) = java.util.Arrays.binarySearch(order, values(v)); v += 1 }
    val items = new Array[Byte](d.items.length)
    var k = 0
    while (k < d.count) { put(items, k * w, w, order(k)); k += 1 }
    val indices = new Array[Byte](d.indices.length)
    var i = 0
    while (i < indices.length) {
      val old = (d.indices(i) & 0xff) | (d.indices(i + 1) & 0xff) << 8 | (d.indices(i + 2) & 0xff) << 16 |
        (d.indices(i + 3) & 0xff) << 24
      val r = rank(old)
      indices(i) = r.toByte; indices(i + 1) = (r >>> 8).toByte
      indices(i + 2) = (r >>> 16).toByte; indices(i + 3) = (r >>> 24).toByte
      i += 4
    }
    FixedDictionary(items, indices, d.count)
  }

  /** The number of distinct values among the first `n`, or -1 if more than `limit`. */
  private def distinctUpTo(src: Array[Byte], w: Int, n: Int, limit: Int): Int = {
    val table = new Table(limit)
    var i = 0
    while (i < n) {
      val at = i * w
      if (table.idOf(if (w > 8) RawBytes.uintLE(src, at + 8, w - 8) else 0L, RawBytes.uintLE(src, at, math.min(w, 8))) < 0) return -1
      i += 1
    }
    table.size
  }

  private def put(dst: Array[Byte], at: Int, len: Int, x: Long): Unit = {
    var b = 0
    while (b < len) { dst(at + b) = (x >>> (8 * b)).toByte; b += 1 }
  }

  /** Open addressing from a 128-bit value to its item number, at most
    * `limit` items (then `idOf` answers -1). */
  private final class Table(limit: Int) {
    private val capacity = Integer.highestOneBit(math.max(16, limit * 2)) * 2
    private val mask = capacity - 1
    private val slots = { val a = new Array[Int](capacity); java.util.Arrays.fill(a, -1); a }
    private val his = new Array[Long](limit)
    private val los = new Array[Long](limit)
    var size: Int = 0

    def hi(k: Int): Long = his(k)
    def lo(k: Int): Long = los(k)

    def idOf(hi: Long, lo: Long): Int = {
      var h = java.lang.Long.hashCode(lo * 0x9E3779B97F4A7C15L ^ hi * 0xC2B2AE3D27D4EB4FL)
      h ^= h >>> 16
      var s = h & mask
      while (true) {
        val id = slots(s)
        if (id < 0) {
          if (size >= limit) return -1
          slots(s) = size
          his(size) = hi
          los(size) = lo
          size += 1
          return size - 1
        }
        if (los(id) == lo && his(id) == hi) return id
        s = (s + 1) & mask
      }
      -1
    }
  }
}
