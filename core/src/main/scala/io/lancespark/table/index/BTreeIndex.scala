package io.lancespark.table.index

import scala.collection.mutable

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{BaseIntVector, BigIntVector, FieldVector, IntVector, SmallIntVector, TinyIntVector, UInt8Vector}

import io.lancespark.format.stats.PageStat
import io.lancespark.table.filter.{ColumnStats, CompareOp, Filter, Lit, RowEvaluator, StatsPruner}
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
        val keys = BTreeIndex.integerKeys(l, outcome)
        may.ranges.foreach { case (s, e) =>
          var from = s
          while (from < e) {
            val until = math.min(e, from + BTreeIndex.ReadRows)
            val n = (until - from).toInt
            // with keys: the values first, then the row ids of the positions found only
            val vs = data.read(if (keys.isDefined) Seq("values") else Seq("values", "ids"), from, until, allocator)
            try {
              keys.flatMap(k => BTreeIndex.findSorted(vs.head, n, k)) match {
                case Some(found) =>
                  if (found.nonEmpty) {
                    val ranges = BTreeIndex.runs(found, from)
                    val ids = data.readRanges(Seq("ids"), ranges, allocator)
                    try {
                      val v = ids.head.asInstanceOf[UInt8Vector]
                      var i = 0
                      while (i < v.getValueCount) { RowAddrMap.add(out, v.get(i)); i += 1 }
                    } finally ids.foreach(_.close())
                  }
                case None =>
                  val idv = if (keys.isDefined) data.read(Seq("ids"), from, until, allocator) else vs.drop(1)
                  try {
                    val (t, f) = RowEvaluator.evaluate3(l, vs.take(1), n)
                    val hit = if (outcome) t else f
                    val ids = idv.head.asInstanceOf[UInt8Vector]
                    var i = hit.nextSetBit(0)
                    while (i >= 0) { RowAddrMap.add(out, ids.get(i)); i = hit.nextSetBit(i + 1) }
                  } finally if (keys.isDefined) idv.foreach(_.close())
              }
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
  /** The integers an equality or IN leaf is TRUE for (sorted, distinct):
    * such a leaf is answered by binary searches in the sorted values instead
    * of a test of every value of the pages it may hit (1,000 keys of an IN hit
    * about 1,000 pages of thousands of values). */
  private[index] def integerKeys(l: Filter, outcome: Boolean): Option[Array[Long]] =
    if (!outcome) None
    else l match {
      case Filter.In(_, vs) if vs.nonEmpty && vs.forall(v => v.isInstanceOf[Lit.LongLit] || v.isNull) =>
        Some(vs.collect { case Lit.LongLit(v) => v }.distinct.sorted.toArray)
      case Filter.Compare(_, CompareOp.Eq | CompareOp.EqNullSafe, Lit.LongLit(v)) => Some(Array(v))
      case _ => None
    }

  /** Ascending positions (counted from `base`) as ranges of consecutive rows. */
  private[index] def runs(positions: Array[Int], base: Long): IndexedSeq[(Long, Long)] = {
    val out = Vector.newBuilder[(Long, Long)]
    var i = 0
    while (i < positions.length) {
      var j = i
      while (j + 1 < positions.length && positions(j + 1) == positions(j) + 1) j += 1
      out += ((base + positions(i), base + positions(j) + 1L))
      i = j + 1
    }
    out.result()
  }

  /** Whether the first `n` values are nulls first, then non-decreasing. */
  private def nullsFirstThenSorted(v: BaseIntVector, first: Int, n: Int): Boolean = v match {
    case b: BigIntVector =>
      // no NULL after the first value, and the 8-byte values in order (read from the buffer)
      val nullsAfter = if (b.getValueCount == n) b.getNullCount - first else countNulls(b, first, n)
      if (nullsAfter != 0) false
      else {
        val buf = b.getDataBuffer
        var i = first + 1
        var prev = if (first < n) buf.getLong(first.toLong * 8) else 0L
        var ok = true
        while (i < n && ok) {
          val x = buf.getLong(i.toLong * 8)
          if (x < prev) ok = false
          prev = x
          i += 1
        }
        ok
      }
    case _ =>
      var i = first + 1
      var ok = true
      while (i < n && ok) {
        if (v.isNull(i) || v.getValueAsLong(i) < v.getValueAsLong(i - 1)) ok = false
        i += 1
      }
      ok
  }

  private def countNulls(v: BaseIntVector, from: Int, until: Int): Int = {
    var c = 0
    var i = from
    while (i < until) { if (v.isNull(i)) c += 1; i += 1 }
    c
  }

  /** The positions in `values` (the first `n` of a read of the index's
    * sorted values: nulls first, then ascending) holding one of `keys`
    * (sorted); None when the values are not signed integers or are not in
    * that order (the caller then tests every value). */
  private[index] def findSorted(values: FieldVector, n: Int, keys: Array[Long]): Option[Array[Int]] = values match {
    case v: BaseIntVector if v.isInstanceOf[BigIntVector] || v.isInstanceOf[IntVector] ||
        v.isInstanceOf[SmallIntVector] || v.isInstanceOf[TinyIntVector] =>
      var first = 0
      while (first < n && v.isNull(first)) first += 1
      if (!nullsFirstThenSorted(v, first, n)) None
      else if (first >= n || keys.isEmpty) Some(Array.emptyIntArray)
      else {
        val out = new mutable.ArrayBuilder.ofInt
        val last = v.getValueAsLong(n - 1)
        var k = java.util.Arrays.binarySearch(keys, v.getValueAsLong(first))
        if (k < 0) k = -k - 1
        var pos = first
        while (k < keys.length && keys(k) <= last) {
          val key = keys(k)
          // the first position at or after `pos` whose value is at least `key`
          var lo = pos
          var hi = n
          while (lo < hi) {
            val mid = (lo + hi) >>> 1
            if (v.getValueAsLong(mid) < key) lo = mid + 1 else hi = mid
          }
          pos = lo
          while (pos < n && v.getValueAsLong(pos) == key) { out += pos; pos += 1 }
          k += 1
        }
        Some(out.result())
      }
    case _ => None
  }

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
