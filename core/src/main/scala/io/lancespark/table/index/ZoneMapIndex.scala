package io.lancespark.table.index

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{UInt4Vector, UInt8Vector}
import org.apache.arrow.vector.types.pojo.ArrowType
import org.roaringbitmap.RoaringBitmap

import io.lancespark.format.stats.PageStat
import io.lancespark.table.filter.{ColumnStats, Filter, StatsPruner}
import io.lancespark.table.filter.Filter.Column
import io.lancespark.table.storage.DatasetStorage

/** A ZONEMAP index as the reference writes it: `zonemap.lance`, one row per
  * zone of a fragment (`fragment_id`, `zone_start`, `zone_length`, `min`,
  * `max`, `null_count`, `nan_count`). A leaf is answered by the zones whose
  * bounds admit it, as page statistics ([[StatsPruner]]): a superset.
  *
  * The reference counts zone starts and lengths in the rows it read at the
  * build, which are row offsets only where the fragment had no deleted rows
  * then: a fragment's zones are trusted only where their lengths add up to
  * its physical rows. */
final class ZoneMapIndex private (val entry: IndexEntry, arrowType: ArrowType,
                                  zones: Map[Int, IndexedSeq[PageStat]], rowsOf: Int => Long, read: Long)
    extends ScalarIndex {
  val column: Column = entry.fields.head
  private val Z: Column = Vector("zone")

  override val trusted: RoaringBitmap =
    ScalarIndex.zonesAddingUp(entry, f => zones.get(f).map(_.map(_.numRows).sum), rowsOf)

  def rows(leaf: Filter, outcome: Boolean): Option[RowAddrMap.Rows] =
    ScalarIndex.onColumn(leaf, Z).map { l =>
      val target = if (outcome) l else Filter.Not(l)
      trusted.toArray.toSeq.map { f =>
        val (may, _) = StatsPruner.candidateRanges(target, Map(Z -> ColumnStats.Pages(arrowType, zones(f))), rowsOf(f))
        val b = new RoaringBitmap()
        may.ranges.foreach { case (s, e) => b.add(s, e) }
        f -> b
      }.toMap
    }

  def bytesRead: Long = read
  override def close(): Unit = ()
}

object ZoneMapIndex {
  val File = "zonemap.lance"

  def open(storage: DatasetStorage, entry: IndexEntry, rowsOf: Int => Long, allocator: BufferAllocator): ZoneMapIndex = {
    val file = IndexFile.open(storage, entry, File)
    try {
      val n = file.numRows
      val vs = file.read(Seq("min", "max", "null_count", "fragment_id", "zone_start", "zone_length"), 0, n, allocator)
      try {
        val nulls = vs(2).asInstanceOf[UInt4Vector]
        val frag = vs(3).asInstanceOf[UInt8Vector]
        val start = vs(4).asInstanceOf[UInt8Vector]
        val length = vs(5).asInstanceOf[UInt8Vector]
        val zones = (0 until n.toInt).map { i =>
          frag.get(i).toInt -> PageStat(-1, -1, i, start.get(i), length.get(i), nulls.get(i).toLong & 0xffffffffL,
            IndexFile.statValue(vs(0), i), IndexFile.statValue(vs(1), i))
        }.groupBy(_._1).map { case (f, zs) => f -> zs.map(_._2).sortBy(_.firstRow).toIndexedSeq }
        new ZoneMapIndex(entry, file.field("min").arrowType, zones, rowsOf, file.bytesRead)
      } finally vs.foreach(_.close())
    } finally file.close()
  }
}
