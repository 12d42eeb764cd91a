package io.lancespark.format.arrow

import org.apache.arrow.vector.types.DateUnit
import org.apache.arrow.vector.types.pojo.ArrowType

/** What a decoded column of one batch looked like before it was expanded into
  * its vector, when all its rows come from one page dictionary: row i is item
  * `itemOf(i)` (meaningful where the row is not null). A consumer can then
  * work per item (decode or test an item once, however many rows use it). The
  * items are shared by every batch of the page: `dictionary` tells two batches
  * of one dictionary apart from two of different ones. Items are strings
  * (`withItem`) or, for integer-like columns, fixed-width values (`itemKeys`).
  *
  * The rows' items are held as the decoded chunks' index arrays (segment k:
  * `which(k)` from `start(k)`, `count(k)` rows), joined into one array only
  * when a caller asks for rows one by one. */
final class DictionaryColumn private[format] (which: Array[Array[Int]], start: Array[Int], count: Array[Int],
                                              val rows: Int, items: DictionaryValues) {
  require(which.length == start.length && which.length == count.length && {
    var total = 0L; var k = 0
    while (k < count.length) { total += count(k); k += 1 }
    total == rows
  }, "dictionary segments do not cover the rows")

  // the rows' items in one array, made on first use (a batch is read by one thread)
  private var joined: Array[Int] =
    if (which.length == 1 && start(0) == 0 && which(0).length == rows) which(0) else null

  /** Every row's item (what `itemOf` gives), which the caller must not change. */
  private[lancespark] def itemIds: Array[Int] = {
    if (joined == null) {
      val out = new Array[Int](rows)
      var at = 0
      var k = 0
      while (k < which.length) { System.arraycopy(which(k), start(k), out, at, count(k)); at += count(k); k += 1 }
      joined = out
    }
    joined
  }

  def itemOf(row: Int): Int = itemIds(row)

  /** Sets bit r of `out` (words of 64 rows) for each row r whose item k has
    * `pass(k) == 1` (`pass` holding 0 or 1 an item); bits of other rows are
    * left as they are. A word's 64 bits are gathered in a register, then
    * or-ed into `out` once. */
  private[lancespark] def markRows(pass: Array[Long], out: Array[Long]): Unit = {
    var row = 0
    var acc = 0L
    var k = 0
    while (k < which.length) {
      val w = which(k)
      var j = start(k)
      val end = j + count(k)
      while (j < end) {
        // the rows of this segment up to the end of the current word
        val stop = math.min(end, j + (64 - (row & 63)))
        while (j < stop) { acc |= pass(w(j)) << row; row += 1; j += 1 }
        if ((row & 63) == 0) { out((row - 1) >>> 6) |= acc; acc = 0L }
      }
      k += 1
    }
    if ((row & 63) != 0) out(row >>> 6) |= acc
  }

  def itemCount: Int = DictionaryColumn.itemCount(items)

  /** Whether the items are fixed-width values (read through `itemKeys`), not strings. */
  def isFixed: Boolean = items.isInstanceOf[FixedValues]

  /** `f(bytes, offset, length)` over item `k`'s bytes, which `f` must treat as
    * read-only (string items). */
  def withItem[T](k: Int)(f: (Array[Byte], Int, Int) => T): T = items match {
    case v: VarValues =>
      val from = v.offsets(k).toInt
      f(v.bytes, from, (v.offsets(k + 1) - from).toInt)
    case other => throw new IllegalStateException(s"withItem on ${other.getClass.getSimpleName} items")
  }

  /** A copy of string item `k`'s bytes. */
  def itemBytes(k: Int): Array[Byte] = items match {
    case v: VarValues => java.util.Arrays.copyOfRange(v.bytes, v.offsets(k).toInt, v.offsets(k + 1).toInt)
    case other => throw new IllegalStateException(s"itemBytes on ${other.getClass.getSimpleName} items")
  }

  /** Fixed-width items as signed integers of their width (16-byte decimals:
    * their low word), shared by every batch of the page; the caller must not
    * change them. */
  def itemKeys: Array[Long] = items match {
    case f: FixedValues => f.keys
    case other => throw new IllegalStateException(s"itemKeys on ${other.getClass.getSimpleName} items")
  }

  /** The rows `keep(i) - base` (as the rows a batch keeps after deletions and filters). */
  def select(keep: Array[Int], base: Int): DictionaryColumn = {
    val ids = itemIds
    val out = new Array[Int](keep.length)
    var i = 0
    while (i < keep.length) { out(i) = ids(keep(i) - base); i += 1 }
    DictionaryColumn(out, items)
  }

  /** An identity token of the dictionary (the same for every batch of one page). */
  def dictionary: AnyRef = items
}

object DictionaryColumn {

  /** Row i is item `ids(i)`. */
  private[format] def apply(ids: Array[Int], items: DictionaryValues): DictionaryColumn =
    new DictionaryColumn(Array(ids), Array(0), Array(ids.length), ids.length, items)

  private[format] def itemCount(items: DictionaryValues): Int = items match {
    case v: VarValues   => v.offsets.length - 1
    case f: FixedValues => f.count
    case AllNullValues  => 0
  }

  /** Column types read as fixed-width dictionary items where their pages are
    * dictionary-encoded, whose items a filter tests as integer keys (a row's
    * key being its value as a signed integer of its width; decimals of at most
    * 18 digits: the low word of their 128 bits). */
  def fixedItems(t: ArrowType): Boolean = t match {
    case i: ArrowType.Int => i.getIsSigned
    case d: ArrowType.Date => d.getUnit == DateUnit.DAY
    case d: ArrowType.Decimal => d.getBitWidth == 128 && d.getPrecision <= 18
    case _ => false
  }
}
