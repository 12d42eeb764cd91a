package io.lancespark.table.scan

import io.lancespark.format.arrow.DictionaryColumn

/** A batch's column as items of one page dictionary, as a scan hands it out
  * (strings: [[FragmentBatch.dictionary]]; numbers, dates and narrow decimals:
  * [[FragmentBatch.fixedDictionary]]): row i is item `itemOf(i)`
  * (meaningful where the row is not null), so a consumer can work once per
  * item however many rows use it. */
final class ColumnDictionary private[table] (private[table] val column: DictionaryColumn) {

  def rows: Int = column.rows

  def itemOf(row: Int): Int = column.itemOf(row)

  def itemCount: Int = column.itemCount

  /** `f(bytes, offset, length)` over item `k`'s bytes, which `f` must treat as read-only. */
  def withItem[T](k: Int)(f: (Array[Byte], Int, Int) => T): T = column.withItem(k)(f)

  /** A copy of item `k`'s bytes. */
  def itemBytes(k: Int): Array[Byte] = column.itemBytes(k)

  /** Every row's item (what `itemOf` gives), which the caller must not change. */
  def itemIds: Array[Int] = column.itemIds

  /** Whether the items are fixed-width values (numbers, dates, decimals of at
    * most 18 digits: see [[FragmentBatch.fixedDictionary]]), not strings. */
  def isFixed: Boolean = column.isFixed

  /** Fixed-width items as signed integers of their width (a decimal's unscaled
    * value), which the caller must not change. */
  def itemKeys: Array[Long] = column.itemKeys

  /** An identity token of the dictionary (the same for every batch of one page). */
  def dictionary: AnyRef = column.dictionary
}
