package io.lancespark.table.scan

import io.lancespark.format.arrow.DictionaryColumn

/** A batch's string column as items of one page dictionary, as a scan hands
  * it out (see [[FragmentBatch.dictionary]]): row i is item `itemOf(i)`
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

  /** An identity token of the dictionary (the same for every batch of one page). */
  def dictionary: AnyRef = column.dictionary
}
