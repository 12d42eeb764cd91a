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
    * values (`items` holds the value number of each item's first occurrence)
    * and they look worth it: the first [[Sample]] values repeat among
    * themselves, or (a vocabulary larger than the sample: names, words) a
    * sample from the middle of the page meets them again. */
  def build(data: Array[Byte], start: Int => Int, end: Int => Int, n: Int, limit: Int): Option[StringDictionary] = {
    if (limit < 1) return None
    val sample = math.min(n, Sample)
    if (sample >= 256 && !fewDistinct(data, start, end, sample, sample * 9 / 10) &&
        !(n >= 4 * Sample && meetsAgain(data, start, end, n))) return None
    val table = new Table(data, start, end, limit)
    val indices = new Array[Byte](4 * n)
    // a large page is judged at an eighth, a quarter and a half of it: given
    // up when its distinct values so far, drawn as from a uniform vocabulary,
    // foretell more than the limit by a margin (rather than finding so at
    // 80% of a page of 55% distinct values)
    val looks = if (n >= 8 * Sample) Array(n / 8, n / 4, n / 2) else Array.emptyIntArray
    var look = 0
    var i = 0
    while (i < n) {
      if (look < looks.length && i == looks(look)) {
        if (foretold(table.size, i, n) > limit * Margin) return None
        look += 1
      }
      val id = table.idOf(i)
      if (id < 0) return None
      indices(4 * i) = id.toByte; indices(4 * i + 1) = (id >>> 8).toByte
      indices(4 * i + 2) = (id >>> 16).toByte; indices(4 * i + 3) = (id >>> 24).toByte
      i += 1
    }
    Some(StringDictionary(table.items, indices))
  }

  /** How far above the limit the distinct values foretold must be to give up early. */
  private[write] val Margin = 1.05

  /** The distinct values among `n` if `seen` were among the first `i`, the
    * values drawn uniformly from a vocabulary: its size V solves
    * seen = V (1 - e^(-i/V)) (bisection on log V), and the answer is
    * V (1 - e^(-n/V)); `n` when none repeated. Data of skewed frequencies
    * (words) repeat early, so that this foretells fewer, not more. */
  private[write] def foretold(seen: Int, i: Int, n: Int): Double = {
    if (seen >= i) return n.toDouble
    def drawn(v: Double, k: Int): Double = v * -math.expm1(-k / v)
    var lo = math.log(math.max(seen, 1).toDouble)
    var hi = math.log(1e15)
    var step = 0
    while (step < 60) {
      val mid = (lo + hi) / 2
      if (drawn(math.exp(mid), i) < seen) lo = mid else hi = mid
      step += 1
    }
    drawn(math.exp((lo + hi) / 2), n)
  }

  /** Whether at least 1% of the [[Sample]] values from the middle of the page
    * are among its first [[Sample]] values: values drawn from a vocabulary of
    * up to some 400,000 do (the middle sample meets the first with chance
    * Sample / vocabulary), unique values (ids, URLs, hashes) do not. */
  private def meetsAgain(data: Array[Byte], start: Int => Int, end: Int => Int, n: Int): Boolean = {
    val table = new Table(data, start, end, Sample)
    var i = 0
    while (i < Sample) { table.idOf(i); i += 1 }
    val seen = table.size
    val from = n / 2
    var met = 0
    i = from
    while (i < from + Sample) { if (table.find(i) >= 0) met += 1; i += 1 }
    seen > 0 && met >= Sample / 100
  }

  private def fewDistinct(data: Array[Byte], start: Int => Int, end: Int => Int, n: Int, limit: Int): Boolean = {
    val table = new Table(data, start, end, limit)
    var i = 0
    while (i < n) { if (table.idOf(i) < 0) return false; i += 1 }
    true
  }

  /** Item numbers of byte ranges, at most `limit` items (then -1). */
  private final class Table(data: Array[Byte], start: Int => Int, end: Int => Int, limit: Int) {
    // sized for the items seen, doubled as they come (pages of a few distinct
    // values, the common case, never allocate for the `limit` they may not reach)
    private var capacity = Integer.highestOneBit(math.max(16, math.min(limit, 512) * 2)) * 2
    private var mask = capacity - 1
    private var slots = emptySlots(capacity)
    private var first = new Array[Int](math.min(limit, 1024))   // the value each item was first seen as
    private var hashes = new Array[Int](first.length)
    private var count = 0

    private def emptySlots(n: Int): Array[Int] = { val a = new Array[Int](n); java.util.Arrays.fill(a, -1); a }

    def items: Array[Int] = java.util.Arrays.copyOf(first, count)

    /** The item of value `v`, added if new; -1 when new and `limit` items are taken. */
    def idOf(v: Int): Int = {
      val h = hash(start(v), end(v))
      val s = slotOf(v, h)
      val id = slots(s)
      if (id >= 0) id
      else if (count >= limit) -1
      else {
        if (count == first.length) {
          first = java.util.Arrays.copyOf(first, math.min(limit, 2 * count))
          hashes = java.util.Arrays.copyOf(hashes, first.length)
        }
        first(count) = v
        hashes(count) = h
        count += 1
        if (2 * count > capacity) grow() else slots(s) = count - 1
        count - 1
      }
    }

    /** The item of value `v`, -1 if it is none (nothing added). */
    def find(v: Int): Int = slots(slotOf(v, hash(start(v), end(v))))

    /** The slot holding value `v` (of hash `h`), or the empty slot where it would go. */
    private def slotOf(v: Int, h: Int): Int = {
      val s0 = start(v)
      val e0 = end(v)
      var s = h & mask
      while (true) {
        val id = slots(s)
        if (id < 0 || (hashes(id) == h && sameBytes(s0, e0, start(first(id)), end(first(id))))) return s
        s = (s + 1) & mask
      }
      -1
    }

    def size: Int = count

    /** Twice the slots, every item placed again by its hash. */
    private def grow(): Unit = {
      capacity *= 2
      mask = capacity - 1
      slots = emptySlots(capacity)
      var id = 0
      while (id < count) {
        var s = hashes(id) & mask
        while (slots(s) >= 0) s = (s + 1) & mask
        slots(s) = id
        id += 1
      }
    }

    /** Whether bytes [a, ae) and [b, be) are equal: values of up to 8 bytes
      * as one masked word each where 8 bytes can be loaded. */
    private def sameBytes(a: Int, ae: Int, b: Int, be: Int): Boolean = {
      val len = ae - a
      if (len != be - b) false
      else if (len <= 8 && a + 8 <= data.length && b + 8 <= data.length) {
        val m = if (len == 8) -1L else (1L << (8 * len)) - 1
        ((io.lancespark.format.file.RawBytes.longLE(data, a) ^ io.lancespark.format.file.RawBytes.longLE(data, b)) & m) == 0
      }
      else java.util.Arrays.equals(data, a, ae, data, b, be)
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
