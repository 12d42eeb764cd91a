package io.lancespark.table.aggregate

import scala.collection.mutable

import org.apache.arrow.vector._

import io.lancespark.format.arrow.NullCounts
import io.lancespark.table.scan.ColumnDictionary

/** Dense group numbers for the rows of batches, over one or more grouping
  * columns: each column's values get codes (0 is NULL) that last across
  * batches, and a group is a combination of codes. A string column's codes
  * are looked up once per dictionary item where the reader decoded the
  * column so. Group `g`'s values: [[write]]. */
final class GroupKeys(columns: Vector[String]) {

  private val codes: Vector[ColumnCodes] = columns.map(_ => new ColumnCodes)

  /** Groups of packed code combinations (two or more columns). */
  private val combos = new LongIntMap
  private val comboCodes = mutable.ArrayBuffer.empty[Array[Int]]
  /** Combinations whose codes outgrow their share of a long (then all of them go here). */
  private val wide = mutable.HashMap.empty[Vector[Int], Int]
  private val bits: Int = if (columns.size <= 1) 64 else 64 / columns.size

  /** The groups of a batch without grouping columns (see [[groups]]). */
  private var zeros: Array[Int] = Array.emptyIntArray

  /** Whether a row had NULL in the one grouping column (its code 0 exists without rows). */
  private var nullSeen = false

  /** Whether group `g` (below [[groupCount]]) holds rows. */
  def present(g: Int): Boolean = columns.size != 1 || g != 0 || nullSeen

  def groupCount: Int = columns.size match {
    case 0 => 1
    case 1 => codes.head.size
    case _ => comboCodes.size
  }

  /** The group of each of `rows` (positions in the vectors). */
  def groups(vectors: String => ValueVector, dictionaries: String => Option[ColumnDictionary], rows: Array[Int]): Array[Int] = {
    val m = rows.length
    if (columns.isEmpty) {   // one group: the same zeros for every batch of this size (callers only read them)
      if (zeros.length != m) zeros = new Array[Int](m)
      return zeros
    }
    val perColumn = columns.indices.map(i => codes(i).of(vectors(columns(i)), dictionaries(columns(i)), rows))
    if (columns.size == 1) {
      if (!nullSeen) nullSeen = GroupKeys.hasZero(perColumn.head)
      return perColumn.head
    }
    val out = new Array[Int](m)
    val sizes = codes.map(_.size)
    val cells = sizes.foldLeft(1L)(_ * _)
    if (wide.isEmpty && cells <= DenseCells) {
      // few combinations possible: a table indexed by the codes, no hashing
      if (denseSizes != sizes) {    // new codes: the groups so far at their new indexes
        if (dense.length < cells) dense = new Array[Int](cells.toInt)
        java.util.Arrays.fill(dense, -1)
        denseSizes = sizes
        comboCodes.indices.foreach(g => dense(denseIndex(comboCodes(g), sizes)) = g)
      }
      var j = 0
      while (j < m) {
        var idx = 0
        var i = 0
        while (i < perColumn.size) { idx = idx * sizes(i) + perColumn(i)(j); i += 1 }
        var g = dense(idx)
        if (g < 0) { g = combination(perColumn, j); dense(idx) = g }
        out(j) = g
        j += 1
      }
    } else {
      var j = 0
      while (j < m) {
        out(j) = combination(perColumn, j)
        j += 1
      }
    }
    out
  }

  /** Groups by the index of their codes in a table of `sizes` (see [[groups]]). */
  private var dense: Array[Int] = Array.empty
  private var denseSizes: Vector[Int] = Vector.empty
  private val DenseCells = 1 << 16

  private def denseIndex(cs: Array[Int], sizes: Vector[Int]): Int = {
    var idx = 0
    var i = 0
    while (i < cs.length) { idx = idx * sizes(i) + cs(i); i += 1 }
    idx
  }

  private def combination(perColumn: IndexedSeq[Array[Int]], j: Int): Int = {
    var packed = 0L
    var fits = wide.isEmpty
    var i = 0
    while (fits && i < perColumn.size) {
      val c = perColumn(i)(j)
      if (bits < 32 && c >= (1 << bits)) fits = false
      packed = (packed << bits) | (c.toLong & ((1L << bits) - 1))
      i += 1
    }
    if (fits) {
      val g = combos.getOrElse(packed, -1)
      if (g >= 0) g
      else {
        val fresh = comboCodes.size
        combos.put(packed, fresh)
        comboCodes += perColumn.map(_(j)).toArray
        fresh
      }
    } else {
      if (wide.isEmpty) comboCodes.indices.foreach(g => wide(comboCodes(g).toVector) = g)
      val key = perColumn.map(_(j)).toVector
      wide.getOrElseUpdate(key, { comboCodes += key.toArray; comboCodes.size - 1 })
    }
  }

  /** Writes group `g`'s value of each grouping column into `out` from
    * index 0: null for NULL; a string column's as its UTF-8 bytes, any
    * other's as a java.lang.Long (a decimal's unscaled value, a date's days,
    * a boolean's 0 or 1). */
  def write(g: Int, out: Array[Any]): Unit = columns.size match {
    case 0 => ()
    case 1 => out(0) = codes.head.value(g)
    case _ =>
      val cs = comboCodes(g)
      var i = 0
      while (i < cs.length) { out(i) = codes(i).value(cs(i)); i += 1 }
  }
}

private object GroupKeys {
  def hasZero(a: Array[Int]): Boolean = {
    var i = 0
    while (i < a.length) { if (a(i) == 0) return true; i += 1 }
    false
  }
}

/** One column's value codes, 0 for NULL, the others in order of appearance
  * (a column's values are all integers, kept unboxed, or all strings). */
private final class ColumnCodes {
  private val longs = new LongIntMap
  private var longValues: Array[Long] = new Array[Long](16) // by code; 0 unused (NULL)
  private val strings = mutable.HashMap.empty[java.nio.ByteBuffer, Int]
  private val stringValues = mutable.ArrayBuffer[Array[Byte]](null)
  private var count = 1
  // the last integer looked up and its code: rows of one value often follow one another
  private var lastLong = 0L
  private var lastCode = -1
  // while the integers come in increasing order (a sorted or clustered column), each
  // new one is greater than all before: its code is the next, with no lookup (`longs`
  // is filled only once a smaller one comes)
  private var increasing = true

  def size: Int = count
  def value(code: Int): Any =
    if (code == 0) null
    else if (stringValues.size > 1) stringValues(code)
    else java.lang.Long.valueOf(longValues(code))

  private def longCode(v: Long): Int =
    if (lastCode >= 0 && v == lastLong) lastCode
    else {
      var c = -1
      if (increasing && (lastCode < 0 || v > lastLong)) c = newLong(v)
      else {
        if (increasing) {
          increasing = false
          var k = 1
          while (k < count) { longs.put(longValues(k), k); k += 1 }
        }
        c = longs.getOrElse(v, -1)
        if (c < 0) { c = newLong(v); longs.put(v, c) }
      }
      lastLong = v
      lastCode = c
      c
    }

  private def newLong(v: Long): Int = {
    val c = count
    if (c == longValues.length) longValues = java.util.Arrays.copyOf(longValues, c * 2)
    longValues(c) = v
    count += 1
    c
  }

  private def bytesCode(b: Array[Byte]): Int = {
    val key = java.nio.ByteBuffer.wrap(b)
    strings.getOrElse(key, { val fresh = count; strings(key) = fresh; stringValues += b; count += 1; fresh })
  }

  def of(v: ValueVector, dictionary: Option[ColumnDictionary], rows: Array[Int]): Array[Int] = {
    val m = rows.length
    val out = new Array[Int](m)
    val hasNulls = NullCounts.any(v)
    def isNull(r: Int): Boolean = hasNulls && v.isNull(r)
    var j = 0
    v match {
      case s: VarCharVector =>
        dictionary.filter(_.rows == s.getValueCount) match {
          case Some(d) =>
            val itemCodes = Array.fill(d.itemCount)(-1)
            while (j < m) {
              val r = rows(j)
              val k = d.itemOf(r)
              out(j) =
                if (isNull(r)) 0
                else if (k < 0) bytesCode(s.get(r))
                else {
                  if (itemCodes(k) < 0) itemCodes(k) = bytesCode(d.itemBytes(k))
                  itemCodes(k)
                }
              j += 1
            }
          case None =>
            while (j < m) { val r = rows(j); out(j) = if (isNull(r)) 0 else bytesCode(s.get(r)); j += 1 }
        }
      case x: BigIntVector => while (j < m) { val r = rows(j); out(j) = if (isNull(r)) 0 else longCode(x.get(r)); j += 1 }
      case x: TimeStampVector => while (j < m) { val r = rows(j); out(j) = if (isNull(r)) 0 else longCode(x.get(r)); j += 1 }
      case x: IntVector => while (j < m) { val r = rows(j); out(j) = if (isNull(r)) 0 else longCode(x.get(r).toLong); j += 1 }
      case x: DateDayVector => while (j < m) { val r = rows(j); out(j) = if (isNull(r)) 0 else longCode(x.get(r).toLong); j += 1 }
      case x: SmallIntVector => while (j < m) { val r = rows(j); out(j) = if (isNull(r)) 0 else longCode(x.get(r).toLong); j += 1 }
      case x: TinyIntVector => while (j < m) { val r = rows(j); out(j) = if (isNull(r)) 0 else longCode(x.get(r).toLong); j += 1 }
      case x: BitVector => while (j < m) { val r = rows(j); out(j) = if (isNull(r)) 0 else longCode(x.get(r).toLong); j += 1 }
      case x: DecimalVector =>
        val buf = x.getDataBuffer
        while (j < m) { val r = rows(j); out(j) = if (isNull(r)) 0 else longCode(buf.getLong(16L * r)); j += 1 }
      case other => throw new IllegalArgumentException(
        s"cannot group by column '${other.getField.getName}' (${other.getClass.getSimpleName})")
    }
    out
  }
}

/** Open addressing from long keys to non-negative ints, growing. */
private final class LongIntMap {
  private var mask: Int = 63
  private var keys: Array[Long] = new Array[Long](64)
  private var vals: Array[Int] = Array.fill(64)(-1)
  private var count: Int = 0

  private def slot(k: Long, mask: Int): Int = { val h = k * 0x9E3779B97F4A7C15L; (h ^ (h >>> 32)).toInt & mask }

  def getOrElse(k: Long, default: Int): Int = {
    var i = slot(k, mask)
    while (vals(i) >= 0) { if (keys(i) == k) return vals(i); i = (i + 1) & mask }
    default
  }

  def put(k: Long, v: Int): Unit = {
    if (2 * (count + 1) > mask) grow()
    var i = slot(k, mask)
    while (vals(i) >= 0 && keys(i) != k) i = (i + 1) & mask
    if (vals(i) < 0) count += 1
    keys(i) = k; vals(i) = v
  }

  private def grow(): Unit = {
    val (ok, ov) = (keys, vals)
    mask = mask * 2 + 1
    keys = new Array[Long](mask + 1)
    vals = Array.fill(mask + 1)(-1)
    var i = 0
    while (i < ok.length) {
      if (ov(i) >= 0) {
        var s = slot(ok(i), mask)
        while (vals(s) >= 0) s = (s + 1) & mask
        keys(s) = ok(i); vals(s) = ov(i)
      }
      i += 1
    }
  }
}
