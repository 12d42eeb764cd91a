package io.lancespark.table.index

import scala.collection.mutable

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.UInt8Vector

import io.lancespark.format.stats.PageStat
import io.lancespark.table.filter.{ColumnStats, Filter, RowEvaluator, StatsPruner}
import io.lancespark.table.filter.Filter.Column
import io.lancespark.table.storage.DatasetStorage

/** A BTREE index as the reference writes it: `page_data.lance` holds the
  * column's values sorted (nulls first) with their row addresses (`values`,
  * `ids`), in pages of `batch_size` rows (page p: rows [p * batch_size,
  * (p + 1) * batch_size)); `page_lookup.lance` holds each page's min, max
  * and null count (`min`, `max`, `null_count`, `page_idx`). A leaf is
  * answered by the pages whose bounds admit it (the lookup as page
  * statistics of the page data), whose values are then tested exactly. */
final class BTreeIndex private (storage: DatasetStorage, val entry: IndexEntry, private val lookup: ColumnStats.Pages,
                                private val dataRows: Long, allocator: BufferAllocator) extends ScalarIndex {
  val column: Column = entry.fields.head
  private val Values: Column = Vector("values")

  private var dataFile: Option[IndexFile] = None
  private def data: IndexFile = dataFile.getOrElse {
    val f = IndexFile.open(storage, entry, BTreeIndex.DataFile)
    dataFile = Some(f)
    f
  }

  def rows(leaf: Filter, outcome: Boolean): Option[RowAddrMap.Rows] =
    ScalarIndex.onColumn(leaf, Values).flatMap { l =>
      val target = if (outcome) l else Filter.Not(l)
      val (may, _) = StatsPruner.candidateRanges(target, Map(Values -> lookup), dataRows)
      if (may.count * 2 > dataRows && lookup.pages.size > 2) None // most of the index: a scan costs as much
      else {
        val out = mutable.Map.empty[Int, org.roaringbitmap.RoaringBitmap]
        may.ranges.foreach { case (s, e) =>
          var from = s
          while (from < e) {
            val until = math.min(e, from + BTreeIndex.ReadRows)
            val vs = data.read(Seq("values", "ids"), from, until, allocator)
            try {
              val n = (until - from).toInt
              val (t, f) = RowEvaluator.evaluate3(l, vs.take(1), n)
              val hit = if (outcome) t else f
              val ids = vs(1).asInstanceOf[UInt8Vector]
              var i = hit.nextSetBit(0)
              while (i >= 0) { RowAddrMap.add(out, ids.get(i)); i = hit.nextSetBit(i + 1) }
            } finally vs.foreach(_.close())
            from = until
          }
        }
        Some(RowAddrMap.freeze(out))
      }
    }

  def bytesRead: Long = dataFile.map(_.bytesRead).getOrElse(0L)
  override def close(): Unit = dataFile.foreach(_.close())
}

object BTreeIndex {
  val LookupFile = "page_lookup.lance"
  val DataFile = "page_data.lance"
  val DefaultBatchSize = 4096L
  private val ReadRows = 65536L

  /** Lookups read recently, by dataset and index uuid (an index's files never
    * change): a lookup is read once, not once a query. */
  private val lookups = new java.util.LinkedHashMap[(String, String), (ColumnStats.Pages, Long)](16, 0.75f, true) {
    override def removeEldestEntry(e: java.util.Map.Entry[(String, String), (ColumnStats.Pages, Long)]): Boolean = size() > 32
  }

  /** The index's lookup read (or reused); None (and a log line) for a layout not read here. */
  def open(storage: DatasetStorage, entry: IndexEntry, allocator: BufferAllocator): Option[BTreeIndex] = {
    val key = (storage.uri, entry.uuid)
    lookups.synchronized(Option(lookups.get(key))) match {
      case Some((pages, rows)) => Some(new BTreeIndex(storage, entry, pages, rows, allocator))
      case None =>
        val opened = read(storage, entry, allocator)
        opened.foreach(ix => lookups.synchronized(lookups.put(key, (ix.lookup, ix.dataRows))))
        opened
    }
  }

  private def read(storage: DatasetStorage, entry: IndexEntry, allocator: BufferAllocator): Option[BTreeIndex] = {
    val lookupFile = IndexFile.open(storage, entry, LookupFile)
    try {
      val md = lookupFile.metadata
      if (md.get("range_partitioned").exists(_ != "false")) {
        IndexCatalog.skip(s"${entry.describe}: range-partitioned BTREE layout not read"); None
      } else {
        val batch = md.get("batch_size").map(_.toLong).getOrElse(DefaultBatchSize)
        val n = lookupFile.numRows
        val vs = lookupFile.read(Seq("min", "max", "null_count", "page_idx"), 0, n, allocator)
        try {
          val arrowType = lookupFile.field("min").arrowType
          val nulls = vs(2).asInstanceOf[org.apache.arrow.vector.UInt4Vector]
          val pageIdx = vs(3).asInstanceOf[org.apache.arrow.vector.UInt4Vector]
          val dataRows = {
            val d = IndexFile.open(storage, entry, DataFile)
            try d.numRows finally d.close()
          }
          val pages = (0 until n.toInt).map { i =>
            val p = pageIdx.get(i).toLong & 0xffffffffL
            val first = p * batch
            val rows = math.max(0L, math.min(batch, dataRows - first))
            PageStat(-1, -1, i, first, rows, nulls.get(i).toLong & 0xffffffffL,
              IndexFile.statValue(vs(0), i), IndexFile.statValue(vs(1), i))
          }.sortBy(_.firstRow)
          val covered = pages.map(_.numRows).sum
          if (covered != dataRows) {
            IndexCatalog.skip(s"${entry.describe}: its pages cover $covered of $dataRows rows"); None
          } else Some(new BTreeIndex(storage, entry, ColumnStats.Pages(arrowType, pages), dataRows, allocator))
        } finally vs.foreach(_.close())
      }
    } finally lookupFile.close()
  }
}
