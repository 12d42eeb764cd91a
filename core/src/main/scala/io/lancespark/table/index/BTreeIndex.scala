package io.lancespark.table.index

import scala.collection.mutable

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{BaseIntVector, FieldVector, UInt8Vector}

import io.lancespark.format.ReadCache
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
final class BTreeIndex private (storage: DatasetStorage, val entry: IndexEntry, private val lookedUp: BTreeIndex.Lookup,
                                allocator: BufferAllocator) extends ScalarIndex {
  private val lookup: ColumnStats.Pages = lookedUp.pages
  private val dataRows: Long = lookedUp.dataRows
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
      val keys = BTreeIndex.integerKeys(l, outcome)
      keys.flatMap(lookupKeys).getOrElse(scan(l, outcome))
    }

  private def bounds: Option[(Array[Long], Array[Long])] = lookedUp.bounds

  /** Equality or IN on an integer column: the rows holding `keys` (sorted),
    * from the pages whose bounds admit a key (decoded pages are kept in a
    * process cache, as the reference keeps its index pages), by a merged walk
    * of each page's keys over its sorted values. Some(None) when the pages to
    * read are most of the index (a scan costs as much); None when this path
    * does not apply (the caller tests every value of the pages). */
  private def lookupKeys(keys: Array[Long]): Option[Option[RowAddrMap.Rows]] = bounds.flatMap { case (mins, maxs) =>
    val n = mins.length
    val touched = new java.util.BitSet(n)
    var p = 0
    keys.foreach { key =>
      while (p < n && maxs(p) < key) p += 1
      var q = p
      while (q < n && mins(q) <= key) { if (maxs(q) >= key) touched.set(q); q += 1 }
    }
    val pages = Iterator.iterate(touched.nextSetBit(0))(i => touched.nextSetBit(i + 1)).takeWhile(_ >= 0).toArray
    if (pages.iterator.map(lookup.pages(_).numRows).sum * 2 > dataRows && n > 2) Some(None)
    else {
      val loaded = sortedPages(pages)
      if (loaded.exists(_.isEmpty)) None
      else {
        val out = mutable.Map.empty[Int, org.roaringbitmap.RoaringBitmap]
        pages.indices.foreach { j =>
          val page = loaded(j).get
          val (min, max) = (mins(pages(j)), maxs(pages(j)))
          val lo = BTreeIndex.lowerBound(keys, 0, keys.length, min)
          val hi = if (max == Long.MaxValue) keys.length else BTreeIndex.lowerBound(keys, lo, keys.length, max + 1)
          page.find(keys, lo, hi, addr => RowAddrMap.add(out, addr))
        }
        Some(Some(RowAddrMap.freeze(out)))
      }
    }
  }

  /** Lookup pages `pages` (ascending) decoded: from the cache, or read in runs
    * of consecutive pages; None for a page not sorted as the layout says. */
  private def sortedPages(pages: Array[Int]): Array[Option[BTreeIndex.SortedPage]] = {
    val key = (i: Int) => (storage.uri, entry.uuid, lookup.pages(i).firstRow)
    val out: Array[Option[BTreeIndex.SortedPage]] = pages.map(i => BTreeIndex.pageCache.get(key(i)))
    var j = 0
    while (j < pages.length) {
      if (out(j).isDefined) j += 1
      else {
        var e = j + 1
        while (e < pages.length && out(e).isEmpty && pages(e) == pages(e - 1) + 1 && e - j < 16) e += 1
        val first = lookup.pages(pages(j)).firstRow
        val last = lookup.pages(pages(e - 1))
        val vs = data.read(Seq("values", "ids"), first, last.firstRow + last.numRows, allocator)
        try {
          (j until e).foreach { k =>
            val ps = lookup.pages(pages(k))
            out(k) = BTreeIndex.SortedPage.of(vs(0), vs(1).asInstanceOf[UInt8Vector], (ps.firstRow - first).toInt,
              (ps.firstRow - first + ps.numRows).toInt).map(pg => BTreeIndex.pageCache.put(key(pages(k)), pg, pg.bytes))
          }
        } finally vs.foreach(_.close())
        j = e
      }
    }
    out
  }

  /** Every value of the pages whose bounds admit the leaf, tested. */
  private def scan(l: Filter, outcome: Boolean): Option[RowAddrMap.Rows] = {
    val target = if (outcome) l else Filter.Not(l)
    val (may, _) = StatsPruner.candidateRanges(target, Map(Values -> lookup), dataRows)
    if (may.count * 2 > dataRows && lookup.pages.size > 2) None // most of the index: a scan costs as much
    else {
      val out = mutable.Map.empty[Int, org.roaringbitmap.RoaringBitmap]
      may.ranges.foreach { case (s, e) =>
        var from = s
        while (from < e) {
          val until = math.min(e, from + BTreeIndex.ReadRows)
          val n = (until - from).toInt
          val vs = data.read(Seq("values", "ids"), from, until, allocator)
          try {
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
  /** A page of an integer column's index: its values after the nulls
    * (ascending) and their row addresses. */
  private[index] final class SortedPage(values: Array[Long], addrs: Array[Long]) {
    def bytes: Long = 16L * values.length + 64

    /** Calls `hit` with the address of every value equal to one of keys [lo, hi) (sorted). */
    def find(keys: Array[Long], lo: Int, hi: Int, hit: Long => Unit): Unit = {
      var pos = 0
      var k = lo
      while (k < hi && pos < values.length) {
        val key = keys(k)
        pos = lowerBound(values, pos, values.length, key)
        while (pos < values.length && values(pos) == key) { hit(addrs(pos)); pos += 1 }
        k += 1
      }
    }
  }

  private[index] object SortedPage {
    /** Rows [from, until) of an index read: nulls first, then ascending
      * values (else None: the caller tests every value). */
    def of(values: FieldVector, ids: UInt8Vector, from: Int, until: Int): Option[SortedPage] = values match {
      case v: BaseIntVector =>
        var first = from
        while (first < until && v.isNull(first)) first += 1
        val n = until - first
        val (vs, as) = (new Array[Long](n), new Array[Long](n))
        var ok = true
        var i = 0
        while (i < n && ok) {
          val r = first + i
          if (v.isNull(r) || ids.isNull(r)) ok = false
          else {
            vs(i) = v.getValueAsLong(r)
            as(i) = ids.get(r)
            if (i > 0 && vs(i) < vs(i - 1)) ok = false
          }
          i += 1
        }
        if (ok) Some(new SortedPage(vs, as)) else None
      case _ => None
    }
  }

  /** Decoded pages by dataset, index uuid and first row: at most a sixteenth
    * of the heap (up to 1 GiB). */
  private[index] val pageCache = new ReadCache[(String, String, Long), SortedPage](
    1 << 20, math.min(1L << 30, Runtime.getRuntime.maxMemory / 16))

  /** The first position in [from, until) of sorted `a` whose value is at least `key`. */
  private[index] def lowerBound(a: Array[Long], from: Int, until: Int, key: Long): Int = {
    var lo = from
    var hi = until
    while (lo < hi) {
      val mid = (lo + hi) >>> 1
      if (a(mid) < key) lo = mid + 1 else hi = mid
    }
    lo
  }

  /** The integers an equality or IN leaf is TRUE for (sorted, distinct):
    * such a leaf is answered by binary searches in the sorted values instead
    * of a test of every value of the pages it may hit (1,000 keys of an IN hit
    * about 1,000 pages of thousands of values). */
  private[index] def integerKeys(l: Filter, outcome: Boolean): Option[Array[Long]] =
    if (!outcome) None
    else l match {
      case in: Filter.In if in.keyTest.isDefined => in.keyTest.map(_.keys) // sorted once per filter
      case Filter.In(_, vs) if vs.nonEmpty && vs.forall(v => v.isInstanceOf[Lit.LongLit] || v.isNull) =>
        Some(Filter.sortedDistinct(vs.collect { case Lit.LongLit(v) => v }.toArray))
      case Filter.Compare(_, CompareOp.Eq | CompareOp.EqNullSafe, Lit.LongLit(v)) => Some(Array(v))
      case _ => None
    }

  /** A BTREE's lookup as read once (and cached): its pages, the rows of its
    * page data, and the bounds its integer lookups walk. */
  private[index] final class Lookup(val pages: ColumnStats.Pages, val dataRows: Long) {
    /** The lookup's bounds as longs (pages without values: an empty range);
      * None unless the column is a signed integer with bounds on every page
      * holding values, ascending from page to page. */
    lazy val bounds: Option[(Array[Long], Array[Long])] = pages.arrowType match {
      case i: org.apache.arrow.vector.types.pojo.ArrowType.Int if i.getIsSigned =>
        val n = pages.pages.size
        val (mins, maxs) = (new Array[Long](n), new Array[Long](n))
        var ok = true
        pages.pages.iterator.zipWithIndex.foreach { case (p, i) =>
          (p.min, p.max) match {
            case (Some(a: java.lang.Long), Some(b: java.lang.Long)) => mins(i) = a; maxs(i) = b
            case _ if p.nullCount == p.numRows => mins(i) = Long.MaxValue; maxs(i) = Long.MinValue
            case _ => ok = false
          }
        }
        // the walk below relies on pages in value order: bounds ascending from page to page
        var last = Long.MinValue
        var i = 0
        while (ok && i < n) {
          if (mins(i) != Long.MaxValue) {
            if (mins(i) > maxs(i) || mins(i) < last) ok = false
            last = maxs(i)
          }
          i += 1
        }
        if (ok) Some((mins, maxs)) else None
      case _ => None
    }
  }

  val LookupFile = "page_lookup.lance"
  val DataFile = "page_data.lance"
  val DefaultBatchSize = 4096L
  private val ReadRows = 65536L

  /** Lookups read recently, by dataset and index uuid (an index's files never
    * change): a lookup is read once, not once a query. */
  private val lookups = new ReadCache[(String, String), Lookup](32, Long.MaxValue)

  /** The index's lookup read (or reused); None (and a log line) for a layout not read here. */
  def open(storage: DatasetStorage, entry: IndexEntry, allocator: BufferAllocator): Option[BTreeIndex] = {
    val key = (storage.uri, entry.uuid)
    lookups.get(key) match {
      case Some(l) => Some(new BTreeIndex(storage, entry, l, allocator))
      case None =>
        val opened = read(storage, entry, allocator)
        opened.foreach(ix => lookups.put(key, ix.lookedUp, 0L))
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
          } else Some(new BTreeIndex(storage, entry, new Lookup(ColumnStats.Pages(arrowType, pages), dataRows), allocator))
        } finally vs.foreach(_.close())
      }
    } finally lookupFile.close()
  }
}
