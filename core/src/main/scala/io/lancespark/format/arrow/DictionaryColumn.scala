package io.lancespark.format.arrow

/** What a decoded string column of one batch looked like before it was
  * expanded into its vector, when all its rows come from one page dictionary:
  * row i is item `itemOf(i)` (meaningful where the row is not null). A
  * consumer can then work per item (decode an item once, however many rows use
  * it). The items are shared by every batch of the page: `dictionary` tells two
  * batches of one dictionary apart from two of different ones. */
final class DictionaryColumn private[format] (ids: Array[Int], items: VarValues) {

  def rows: Int = ids.length

  def itemOf(row: Int): Int = ids(row)

  def itemCount: Int = items.offsets.length - 1

  /** `f(bytes, offset, length)` over item `k`'s bytes, which `f` must treat as read-only. */
  def withItem[T](k: Int)(f: (Array[Byte], Int, Int) => T): T = {
    val start = items.offsets(k).toInt
    f(items.bytes, start, (items.offsets(k + 1) - start).toInt)
  }

  /** The rows `keep(i) - base` (as the rows a batch keeps after deletions and filters). */
  def select(keep: Array[Int], base: Int): DictionaryColumn = {
    val out = new Array[Int](keep.length)
    var i = 0
    while (i < keep.length) { out(i) = ids(keep(i) - base); i += 1 }
    new DictionaryColumn(out, items)
  }

  /** An identity token of the dictionary (the same for every batch of one page). */
  def dictionary: AnyRef = items
}
