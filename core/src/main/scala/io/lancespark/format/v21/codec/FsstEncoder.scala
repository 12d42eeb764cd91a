package io.lancespark.format.v21.codec

import java.nio.ByteOrder

import io.lancespark.format.file.{ByteBuilder, RawBytes}

/** The writing half of FSST ([[FsstCodec]] decodes): a symbol table learnt
  * from a sample of a page's values, and the values compressed with it.
  *
  * The table is learnt in a few rounds, as the FSST paper describes: the
  * sample is compressed with the current table (greedily, longest symbol
  * first; bytes no symbol covers are escaped), and the next table keeps the
  * 255 symbols of highest gain (uses times length) among the symbols used and
  * the concatenations of adjacent pairs (up to 8 bytes). */
final class FsstEncoder private (symbols: Array[Long], lens: Array[Int]) {
  import FsstEncoder._

  // Symbols of 3 to 8 bytes, found as the longest that matches (as if their
  // list were searched, longest first, for each position): a table by first
  // 3 bytes gives the 3-byte symbol and which longer lengths have symbols of
  // that prefix; each such length is then one probe of a table of the longer
  // symbols by their bytes. Many symbols may share a prefix (value-10 ...
  // value-99) at a cost of one probe per length, not per symbol.
  // Tables hold "infos": code | length << 8, -1 for none.

  /** By first 3 bytes (open addressing: `prefixKeys` holds prefix + 1, 0 for
    * empty): bit l of `prefixLens` set when a symbol of length l > 3 has
    * the prefix; `prefixInfo3` the 3-byte symbol. */
  private val (prefixKeys, prefixLens, prefixInfo3): (Array[Int], Array[Int], Array[Int]) = {
    val groups = symbols.indices.filter(c => lens(c) >= 3).groupBy(c => (symbols(c) & 0xffffff).toInt)
    val capacity = Integer.highestOneBit(math.max(8, groups.size * 2)) * 2
    val keys = new Array[Int](capacity)
    val lensOf = new Array[Int](capacity)
    val info3 = Array.fill(capacity)(-1)
    groups.foreach { case (prefix, cs) =>
      var slot = slotOf(prefix, capacity)
      while (keys(slot) != 0) slot = (slot + 1) & (capacity - 1)
      keys(slot) = prefix + 1
      cs.foreach { c => if (lens(c) == 3) info3(slot) = c | (3 << 8) else lensOf(slot) |= 1 << lens(c) }
    }
    (keys, lensOf, info3)
  }

  /** Symbols of 4 to 8 bytes by their bytes and length (open addressing). */
  private val (longWords, longInfo): (Array[Long], Array[Int]) = {
    val long = symbols.indices.filter(c => lens(c) >= 4)
    val capacity = Integer.highestOneBit(math.max(8, long.size * 2)) * 2
    val words = new Array[Long](capacity)
    val infos = Array.fill(capacity)(-1)
    long.foreach { c =>
      var slot = wordSlot(symbols(c), lens(c), capacity)
      while (infos(slot) >= 0) slot = (slot + 1) & (capacity - 1)
      words(slot) = symbols(c)
      infos(slot) = c | (lens(c) << 8)
    }
    (words, infos)
  }

  /** The first look: a direct-mapped table by a hash of the first 3 bytes.
    * A slot that one symbol of 3 or more bytes hashes to holds it (a word
    * hashing there either starts with it or has no such symbol); a slot that
    * several hash to is [[Crowded]] (the tables above decide); others are
    * [[Empty]] (a length no word reaches). */
  private val (directWords, directInfo): (Array[Long], Array[Int]) = {
    val words = new Array[Long](DirectSlots)
    val infos = Array.fill(DirectSlots)(Empty)
    symbols.indices.filter(c => lens(c) >= 3).foreach { c =>
      val slot = directSlot(symbols(c))
      if (infos(slot) == Empty) { words(slot) = symbols(c); infos(slot) = c | (lens(c) << 8) }
      else infos(slot) = Crowded
    }
    (words, infos)
  }

  /** The info of the symbol of 1 or 2 bytes to take at two bytes (b0 | b1 << 8):
    * the 2-byte symbol if there is one, else the 1-byte symbol b0, else -1. */
  private val singleInfo: Array[Int] = {
    val out = Array.fill(256)(-1)
    symbols.indices.filter(c => lens(c) == 1).foreach(c => out((symbols(c) & 0xff).toInt) = c | (1 << 8))
    out
  }
  private val shortInfo: Array[Int] = {
    val out = new Array[Int](65536)
    var k = 0
    while (k < 65536) { out(k) = singleInfo(k & 0xff); k += 1 } // (a loop: tabulate would box 64Ki ints)
    symbols.indices.filter(c => lens(c) == 2).foreach(c => out((symbols(c) & 0xffff).toInt) = c | (2 << 8))
    out
  }

  def size: Int = symbols.length

  /** The info (code | length << 8) of the longest symbol at `p` (of `avail`
    * bytes left), or -1. */
  private def matchAt(src: Array[Byte], p: Int, avail: Int): Int = {
    if (avail >= 3) {
      val av = if (avail >= 8) 8 else avail
      val word = RawBytes.uintLE(src, p, av)
      val direct = directSlot(word)
      val first = directInfo(direct)
      if (first != Crowded) {
        val len = first >>> 8
        return if (len <= av && (word & Masks(len)) == directWords(direct)) first else shortInfo((word & 0xffff).toInt)
      }
      crowded(word, av)
    } else if (avail == 2) shortInfo((src(p) & 0xff) | ((src(p + 1) & 0xff) << 8))
    else singleInfo(src(p) & 0xff)
  }

  /** The info of the longest symbol of 3 or more bytes starting `word` (of
    * `av` bytes), else of 2 or 1 bytes, else -1: for words of a crowded slot. */
  private def crowded(word: Long, av: Int): Int = {
    val prefix = (word & 0xffffff).toInt
    val mask = prefixKeys.length - 1
    var slot = slotOf(prefix, prefixKeys.length)
    var key = prefixKeys(slot)
    while (key != 0 && key != prefix + 1) { slot = (slot + 1) & mask; key = prefixKeys(slot) }
    if (key == 0) return shortInfo((word & 0xffff).toInt)
    var lengths = prefixLens(slot) & ((2 << av) - 1)
    while (lengths != 0) {
      val len = 31 - Integer.numberOfLeadingZeros(lengths)
      val info = longAt(word & Masks(len), len)
      if (info >= 0) return info
      lengths ^= 1 << len
    }
    val info3 = prefixInfo3(slot)
    if (info3 >= 0) info3 else shortInfo((word & 0xffff).toInt)
  }

  /** The info of the symbol of `len` (4 to 8) bytes `word`, or -1. */
  private def longAt(word: Long, len: Int): Int = {
    val mask = longInfo.length - 1
    var slot = wordSlot(word, len, longInfo.length)
    while (true) {
      val info = longInfo(slot)
      if (info < 0 || (longWords(slot) == word && (info >>> 8) == len)) return info
      slot = (slot + 1) & mask
    }
    -1
  }

  /** Compresses `src(from until until)` onto `out`. */
  def compress(src: Array[Byte], from: Int, until: Int, out: ByteBuilder): Unit = {
    out.ensure(2L * (until - from)) // at most two bytes (an escape) per input byte
    val dst = out.arr
    var o = out.size
    var p = from
    while (p < until) {
      val info = matchAt(src, p, until - p)
      if (info >= 0) { dst(o) = info.toByte; o += 1; p += info >>> 8 }
      else { dst(o) = FsstCodec.Escape.toByte; dst(o + 1) = src(p); o += 2; p += 1 }
    }
    out.size = o
  }

  /** The table as the encoding description holds it (fixed size: a u64
    * header, the symbols as u64 words, their lengths, zero padding). */
  def serialized: Array[Byte] = {
    val b = java.nio.ByteBuffer.allocate(TableBytes).order(ByteOrder.LITTLE_ENDIAN)
    b.putLong((FsstCodec.Magic << 32) | (1L << 24) | symbols.length.toLong)
    symbols.foreach(s => b.putLong(s))
    lens.foreach(l => b.put(l.toByte))
    b.array()
  }

  /** Tokens of one round over the sample: counts of each token (codes below
    * 256 are symbols, 256 + b the escaped byte b) and of adjacent pairs.
    * `two` is all zeros on entry; the pairs seen are listed in `touched`
    * (their number is returned), so that only they are read and cleared. */
  private def count(sample: Array[Byte], ends: Array[Int], one: Array[Int], two: Array[Int],
                    touched: Array[Int]): Int = {
    java.util.Arrays.fill(one, 0)
    var seen = 0
    var start = 0
    var v = 0
    while (v < ends.length) {
      val end = ends(v)
      var p = start
      var prev = -1
      while (p < end) {
        val info = matchAt(sample, p, end - p)
        val t = if (info >= 0) info & 0xff else 256 + (sample(p) & 0xff)
        one(t) += 1
        if (prev >= 0) {
          val pair = prev * Tokens + t
          if (two(pair) == 0) { touched(seen) = pair; seen += 1 }
          two(pair) += 1
        }
        prev = t
        p += (if (info >= 0) info >>> 8 else 1)
      }
      start = end
      v += 1
    }
    seen
  }

  private def token(t: Int): (Long, Int) = if (t < 256) (symbols(t), lens(t)) else ((t - 256).toLong, 1)

  /** The next round's table from this round's counts. */
  private def next(one: Array[Int], two: Array[Int], touched: Array[Int], seen: Int): FsstEncoder = {
    val gains = new java.util.HashMap[(Long, Int), java.lang.Long]()
    def offer(sym: Long, len: Int, gain: Long): Unit = {
      val k = (sym, len)
      val g = gains.get(k)
      if (g == null || g < gain) gains.put(k, gain)
    }
    var t = 0
    while (t < Tokens) {
      if (one(t) > 0) {
        val (s, l) = token(t)
        offer(s, l, one(t).toLong * l)
      }
      t += 1
    }
    var j = 0
    while (j < seen) {
      val i = touched(j)
      val (s1, l1) = token(i / Tokens)
      val (s2, l2) = token(i % Tokens)
      if (l1 + l2 <= 8) offer(s1 | (s2 << (8 * l1)), l1 + l2, two(i).toLong * (l1 + l2))
      two(i) = 0 // all zeros again for the next round
      j += 1
    }
    // the best MaxSymbols candidates by gain, then length, then symbol: one
    // primitive sort of (gain, length, candidate number) keys, the rare ties
    // of gain and length ordered by symbol after it
    val m = gains.size
    val syms = new Array[Long](m)
    val lensOf = new Array[Int](m)
    val keys = new Array[Long](m)
    var k = 0
    val it = gains.entrySet().iterator()
    while (it.hasNext) {
      val e = it.next()
      syms(k) = e.getKey._1
      lensOf(k) = e.getKey._2
      val g = math.min(e.getValue.longValue, FsstEncoder.MaxGain)
      keys(k) = ((FsstEncoder.MaxGain - g) << 36) | ((8L - lensOf(k)) << 32) | k
      k += 1
    }
    java.util.Arrays.sort(keys)
    val order = keys.map(x => (x & 0xffffffffL).toInt)
    var a = 0
    while (a < m) {
      var b = a + 1
      while (b < m && (keys(b) >>> 32) == (keys(a) >>> 32)) b += 1
      if (b - a > 1) {
        val run = order.slice(a, b).sortWith((x, y) => syms(x) < syms(y))
        System.arraycopy(run, 0, order, a, b - a)
      }
      a = b
    }
    val best = order.take(MaxSymbols)
    new FsstEncoder(best.map(c => syms(c)), best.map(c => lensOf(c)))
  }
}

object FsstEncoder {
  /** Bytes of a serialized table, as the reference's decoder requires. */
  val TableBytes: Int = 8 + 256 * 8 + 256
  /** Codes 0-254 are symbols; 255 escapes a byte. */
  val MaxSymbols: Int = 255
  /** The reference's rule for using FSST: values up to at least this many bytes... */
  val MinMaxLength: Int = 5
  /** ...and at least this many bytes of them in the page. */
  val MinInputBytes: Long = 32 * 1024

  private val Tokens = 512
  /** Gains are counted in a sample of tens of KiB: far below this bound. */
  private val MaxGain: Long = (1L << 27) - 1

  private def slotOf(prefix: Int, capacity: Int): Int = (prefix * 0x9E3779B1 >>> 8) & (capacity - 1)
  private val DirectSlots = 2048
  private val Empty: Int = 9 << 8
  private val Crowded: Int = Int.MaxValue
  private def directSlot(word: Long): Int = ((word & 0xffffff).toInt * 0x9E3779B1) >>> 21
  private def wordSlot(word: Long, len: Int, capacity: Int): Int =
    (((word + len) * 0xC2B2AE3D27D4EB4FL) >>> 40).toInt & (capacity - 1)
  private val Rounds = 5
  private val SampleBytes = 16 * 1024
  private val Masks: Array[Long] = Array.tabulate(9)(l => if (l == 8) -1L else (1L << (8 * l)) - 1)

  /** A table learnt from values `0 until n` of `data` (value i is
    * `start(i) until end(i)`), from a sample of about 16 KiB of whole values
    * spread over the page. */
  def train(data: Array[Byte], start: Int => Int, end: Int => Int, n: Int): FsstEncoder = {
    val total = if (n == 0) 0L else end(n - 1).toLong - start(0)
    val stride = math.max(1, math.ceil(total.toDouble / SampleBytes).toInt)
    val sample = new ByteBuilder(SampleBytes + 1024)
    val ends = Array.newBuilder[Int]
    var v = 0
    while (v < n && sample.size < 2 * SampleBytes) {
      val len = math.min(end(v) - start(v), 1024) // (long values: their first KiB)
      sample.put(data, start(v), len)
      ends += sample.size
      v += stride
    }
    val bytes = sample.toArray
    val sampleEnds = ends.result()
    val one = new Array[Int](Tokens)
    val two = new Array[Int](Tokens * Tokens)
    val touched = new Array[Int](bytes.length + 1) // (at most one pair per sample byte)
    var table = new FsstEncoder(Array.emptyLongArray, Array.emptyIntArray)
    var round = 0
    while (round < Rounds) {
      val seen = table.count(bytes, sampleEnds, one, two, touched)
      table = table.next(one, two, touched, seen)
      round += 1
    }
    table
  }
}

/** Compresses the pages of string columns with FSST, as the reference does
  * when values reach 5 bytes and the page 32 KiB, if that makes them smaller.
  * A column's table is learnt from one page and used for its next ones (each
  * page stores its table) while it compresses them nearly as well (a
  * learning costs a sixth of a page's compression), and learnt again at
  * least every `RelearnPages` pages. One per file writer: it keeps each
  * column's last table. */
private[v21] final class FsstPages {

  /** A column's last table: `ratio` is what it made of the page it was
    * learnt from, `pages` how many pages used it. */
  private final class LearntTable(val encoder: FsstEncoder, val serialized: Array[Byte], val ratio: Double,
                                  var pages: Int)
  private val learnt = scala.collection.mutable.LongMap.empty[LearntTable]

  /** Pages a learnt table serves at most, and how much worse than on the
    * page it was learnt from it may compress the next ones. */
  private val RelearnPages = 16
  private val ReuseSlack = 1.03

  /** The `n` values of a page of `column` (value i ends at `end(i)` in
    * `data`; `total` bytes, the longest `maxLen`) FSST-compressed: the
    * table, the codes, each value's end. */
  def compress(column: Int, data: Array[Byte], end: Int => Long, n: Int, maxLen: Long,
               total: Long): Option[(Array[Byte], Array[Byte], Array[Long])] = {
    if (maxLen < FsstEncoder.MinMaxLength || total < FsstEncoder.MinInputBytes) return None
    def startOf(i: Int): Int = if (i == 0) 0 else end(i - 1).toInt
    def endOf(i: Int): Int = end(i).toInt
    def compressWith(enc: FsstEncoder): (ByteBuilder, Array[Long]) = {
      val out = new ByteBuilder((total / 2).toInt + 1024)
      val ends = new Array[Long](n)
      var i = 0
      while (i < n) { enc.compress(data, startOf(i), endOf(i), out); ends(i) = out.size; i += 1 }
      (out, ends)
    }
    val reused = learnt.get(column.toLong).filter(_.pages < RelearnPages).flatMap { t =>
      val (out, ends) = compressWith(t.encoder)
      if (out.size <= total * t.ratio * ReuseSlack) { t.pages += 1; Some((t.serialized, out, ends)) } else None
    }
    val (table, out, ends) = reused.getOrElse {
      val enc = FsstEncoder.train(data, startOf, endOf, n)
      val (out, ends) = compressWith(enc)
      val serialized = enc.serialized
      learnt.update(column.toLong, new LearntTable(enc, serialized, out.size.toDouble / total, 1))
      (serialized, out, ends)
    }
    if (out.size + FsstEncoder.TableBytes < 0.9 * total) Some((table, out.arr, ends)) else None
  }
}
