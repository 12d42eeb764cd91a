package io.lancespark.format.v01

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.input.RandomAccessSource

/** Where one field's data for one batch lives: a file position and a count
  * (values for plain / dictionary pages, rows for var-binary pages, rows + 1
  * offsets for list pages). */
final case class PageInfo(position: Long, length: Long)

/** The 0.1 page table: for every field id from `minFieldId` to `maxFieldId`
  * (holes and struct fields included, stored as (0, 0)) and every batch, a
  * (position i64, length i64) pair; a field's batches are contiguous. */
final class PageTable private (
    val minFieldId: Int,
    val maxFieldId: Int,
    val numBatches: Int,
    entries: Array[Long]) {

  def contains(fieldId: Int): Boolean = fieldId >= minFieldId && fieldId <= maxFieldId

  def get(fieldId: Int, batch: Int): PageInfo = {
    require(contains(fieldId) && batch >= 0 && batch < numBatches)
    val i = ((fieldId - minFieldId) * numBatches + batch) * 2
    PageInfo(entries(i), entries(i + 1))
  }
}

object PageTable {
  def read(source: RandomAccessSource, position: Long, minFieldId: Int, maxFieldId: Int, numBatches: Int): PageTable = {
    val path = source.path
    if (maxFieldId < minFieldId)
      throw LanceFormatException(path, s"no field ids to read (min $minFieldId, max $maxFieldId)")
    val cells = (maxFieldId.toLong - minFieldId + 1) * numBatches * 2
    if (cells * 8 > source.size)
      throw LanceFormatException(path,
        s"truncated or corrupt: a page table of ${maxFieldId - minFieldId + 1} fields x $numBatches batches does not fit in ${source.size} bytes")
    val buf = source.read(position, cells * 8)
    val entries = new Array[Long](cells.toInt)
    buf.asLongBuffer().get(entries)
    var i = 0
    while (i < entries.length) {
      if (entries(i) < 0)
        throw LanceFormatException(path, s"corrupt page table at $position: negative entry ${entries(i)}")
      i += 1
    }
    new PageTable(minFieldId, maxFieldId, numBatches, entries)
  }
}
