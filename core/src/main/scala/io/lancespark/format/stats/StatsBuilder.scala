package io.lancespark.format.stats

import scala.collection.mutable.ArrayBuffer

import com.google.protobuf.ByteString
import org.apache.arrow.memory.{BufferAllocator, RootAllocator}

import io.lancespark.format.file.ExtraGlobals
import io.lancespark.schema.LanceField

/** The page statistics a 2.x file writer gathers for `fields` (leaves outside
  * lists, of a type statistics cover, in column order): bounds per page or
  * per block of a page, and each field's distinct-value sketch over the whole
  * file. They are stored in global buffers 1 and 2, which the schema's
  * metadata names (see [[PageStatistics]]). */
private[format] final class StatsBuilder(val fields: Vector[LanceField]) {

  private val kinds: Map[Int, StatsValues.Kind] =
    fields.flatMap(f => StatsValues.kindOf(f.arrowType).map(f.id -> _)).toMap
  private val entries = ArrayBuffer.empty[StatsCollector.RawStat]
  private val sketches: Map[Int, DistinctSketch] = kinds.keys.map(_ -> DistinctSketch.empty()).toMap

  /** Whether a field has statistics. */
  def covers(fieldId: Int): Boolean = kinds.contains(fieldId)

  /** Whether no entry was added. */
  def isEmpty: Boolean = entries.isEmpty

  /** Adds all values of a page of a field to its sketch. */
  def sketch(fieldId: Int, page: PageValues): Unit =
    StatsCollector.addTo(sketches(fieldId), kinds(fieldId), page, 0, page.rows)

  /** Adds an entry for rows [from, until) of a page of a column: the page's
    * index in the column, and the column's row where `from` is. */
  def add(column: Int, fieldId: Int, pageIndex: Int, firstRow: Long, page: PageValues, from: Int, until: Int): Unit = {
    val kind = kinds(fieldId)
    val (nulls, mn, mx) = StatsCollector.collect(kind, page, from, until)
    entries += StatsCollector.RawStat(column, fieldId, pageIndex, firstRow, until - from, nulls, mn, mx,
      StatsCollector.valueBytes(kind, page, from, until))
  }

  /** The entries and the sketches as Arrow IPC files (global buffers 1 and
    * 2), made with `allocator` or a temporary one. */
  def globals(allocator: Option[BufferAllocator]): ExtraGlobals = {
    val alloc = allocator.getOrElse(new RootAllocator())
    try ExtraGlobals(
      Seq(StatsStore.toIpc(fields, entries.toSeq, alloc),
        StatsStore.sketchesToIpc(fields.map(f => f.id -> sketches(f.id)), alloc)),
      Seq(PageStatistics.BufferKey -> ByteString.copyFromUtf8("1"),
        PageStatistics.SketchBufferKey -> ByteString.copyFromUtf8("2")))
    finally if (allocator.isEmpty) alloc.close()
  }
}
