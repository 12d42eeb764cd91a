package io.lancespark.format.v01

import java.nio.ByteBuffer

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.format.input.RandomAccessSource

/** Rows `[start, end)` of one batch's page (or of a nested field's page, whose
  * positions count child values rather than rows). */
private[v01] final case class Segment(batch: Int, start: Long, end: Long) {
  def length: Long = end - start
}

/** Bounds-checked reads of page data, errors naming the file and the field. */
private[v01] final class PageReader(val source: RandomAccessSource, pageTable: PageTable) {

  def path: String = source.path

  def fail(f: LanceField, problem: String): Nothing =
    throw LanceFormatException(path, s"column '${f.name}' (field id ${f.id}): $problem")

  def page(f: LanceField, batch: Int): PageInfo = {
    if (!pageTable.contains(f.id))
      fail(f, s"field id is outside the page table (ids ${pageTable.minFieldId}..${pageTable.maxFieldId})")
    pageTable.get(f.id, batch)
  }

  /** `count` values of `width` bytes starting at value `first` of the page of
    * `f` in `batch`, which holds `page.length * perEntry` values. */
  def values(f: LanceField, batch: Int, first: Long, count: Long, width: Long, perEntry: Long = 1): ByteBuffer = {
    val p = page(f, batch)
    if (first < 0 || count < 0 || first + count > p.length * perEntry)
      fail(f, s"batch $batch: values [$first, ${first + count}) are outside the page of ${p.length * perEntry} values")
    bytes(f, batch, p.position + first * width, count * width)
  }

  /** Checks, without reading, that `values` would succeed; bits when `width` is 0. */
  def check(f: LanceField, batch: Int, first: Long, count: Long, width: Long, perEntry: Long): Unit = {
    val p = page(f, batch)
    if (first < 0 || count < 0 || first + count > p.length * perEntry)
      fail(f, s"batch $batch: values [$first, ${first + count}) are outside the page of ${p.length * perEntry} values")
    val end = if (width == 0) p.position + (first + count + 7) / 8 else p.position + (first + count) * width
    if (end > source.size)
      fail(f, s"batch $batch: page bytes [${p.position}, $end) are outside the file of ${source.size} bytes")
  }

  /** Raw bytes of a page of `f`, checked against the file size. */
  def bytes(f: LanceField, batch: Int, position: Long, length: Long): ByteBuffer = {
    if (position < 0 || length < 0 || position + length > source.size)
      fail(f, s"${if (batch >= 0) s"batch $batch: page" else "dictionary"} bytes [$position, ${position + length}) are outside the file of ${source.size} bytes")
    source.read(position, length)
  }
}
