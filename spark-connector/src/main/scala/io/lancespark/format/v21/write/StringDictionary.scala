package io.lancespark.format.v21.write

/** A dictionary of variable-width values (strings, binaries): the distinct
  * values in order of first appearance and each value's item number (u32,
  * little-endian), for pages of few distinct values.
  *
  * Values are byte ranges of one buffer (`start(i)` to `end(i)`); the table
  * is open addressing over those ranges, so no value is copied or boxed. A
  * page whose first values are nearly all distinct is given up on early. */
private[write] final case class StringDictionary(items: Array[Int], indices: Array[Byte]) {
  def count: Int = items.length
}

private[write] object StringDictionary {
  /** Values sampled first: if nearly all of them (90%) are distinct, no dictionary. */
  private val Sample = 4096

  /** The dictionary of the `n` values, if they have at most `limit` distinct
    * values (`items` holds the value number of each item's first occurrence). */
  def build(data: Array[Byte], start: Int => Int, end: Int => Int, n: Int, limit: Int): Option[StringDictionary] = {
    if (limit < 1) return None
    val sample = math.min(n, Sample)
    if (sample >= 256 && !fewDistinct(data, start, end, sample, sample * 9 / 10)) return None
    val table = new Table(data, start, end, limit)
    val indices = new Array[Byte](4 * n)
    var i = 0
    while (i < n) {
      val id = table.idOf(i)
      if (id < 0) return None
      indices(4 * i) = id.toByte; indices(4 * i + 1) = (id >>> 8).toByte
      indices(4 * i + 2) = (id >>> 16).toByte; indices(4 * i + 3) = (id >>> 24).toByte
      i += 1
    }
    Some(StringDictionary(table.items, indices))
  }

  private def fewDistinct(data: Array[Byte], start: Int => Int, end: Int => Int, n: Int, limit: Int): Boolean = {
    val table = new Table(data, start, end, limit)
    var i = 0
    while (i < n) { if (table.idOf(i) < 0) return false; i += 1 }
    true
  }

  /** Item numbers of byte ranges, at most `limit` items (then -1). */
  private final class Table(data: Array[Byte], start: Int => Int, end: Int => Int, limit: Int) {
    private val capacity = Integer.highestOneBit(math.max(16, limit * 2)) * 2
    private val mask = capacity - 1
    private val slots = { val a = new Array[Int](capacity); java.util.Arrays.fill(a, -1); a }
    private val first = new Array[Int](limit)   // the value each item was first seen as
    private val hashes = new Array[Int](limit)
    private var size = 0

    def items: Array[Int] = java.util.Arrays.copyOf(first, size)

    def idOf(v: Int): Int = {
      val s0 = start(v)
      val e0 = end(v)
      val h = hash(s0, e0)
      var s = h & mask
      while (true) {
        val id = slots(s)
        if (id < 0) {
          if (size >= limit) return -1
          slots(s) = size
          first(size) = v
          hashes(size) = h
          size += 1
          return size - 1
        }
        if (hashes(id) == h) {
          val w = first(id)
          if (java.util.Arrays.equals(data, s0, e0, data, start(w), end(w))) return id
        }
        s = (s + 1) & mask
      }
      -1
    }

    private def hash(from: Int, until: Int): Int = {
      var h = 0x9E3779B9 * (until - from + 1)
      var p = from
      while (p + 8 <= until) {
        val x = io.lancespark.format.file.RawBytes.longLE(data, p)
        h = Integer.rotateLeft(h ^ java.lang.Long.hashCode(x * 0xC2B2AE3D27D4EB4FL), 13) * 5 + 0xE6546B64
        p += 8
      }
      while (p < until) { h = (h ^ (data(p) & 0xff)) * 0x01000193; p += 1 }
      h ^= h >>> 16
      h *= 0x85EBCA6B
      h ^ (h >>> 13)
    }
  }

}
