package io.lancespark.table.index

import scala.collection.mutable

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{FieldVector, VarBinaryVector}
import org.roaringbitmap.RoaringBitmap

import io.lancespark.format.ReadCache
import io.lancespark.table.filter.{Filter, RowEvaluator}
import io.lancespark.table.filter.Filter.Column
import io.lancespark.table.storage.DatasetStorage

/** A BITMAP index as the reference writes it: `bitmap_page_lookup.lance`
  * holds one row per distinct value (`keys`, a null key for the null rows)
  * with the serialized row addresses holding it (`bitmaps`, see
  * [[RowAddrMap.parseInto]]). A leaf is tested on the keys; the bitmaps of
  * the keys it selects are read (only those rows of the file). Exact. */
final class BitmapIndex(storage: DatasetStorage, val entry: IndexEntry, rowsOf: Int => Long,
                        allocator: BufferAllocator) extends ScalarIndex {
  val column: Column = entry.fields.head
  private val Keys: Column = Vector("keys")

  private lazy val file: IndexFile = { opened = true; IndexFile.open(storage, entry, BitmapIndex.File) }
  private var opened = false
  private var keysRead: Option[FieldVector] = None
  private def keys: FieldVector = keysRead.getOrElse {
    val k = file.read(Seq("keys"), 0, file.numRows, allocator).head
    keysRead = Some(k)
    k
  }

  def rows(leaf: Filter, outcome: Boolean): Option[RowAddrMap.Rows] =
    ScalarIndex.onColumn(leaf, Keys).map { l =>
      val key = (storage.uri, entry.uuid, l, outcome)
      BitmapIndex.recall(key).getOrElse(BitmapIndex.remember(key, read(l, outcome)))
    }

  private def read(l: Filter, outcome: Boolean): RowAddrMap.Rows = {
    val n = file.numRows.toInt
    val (t, f) = RowEvaluator.evaluate3(l, Seq(keys), n)
    val hit = if (outcome) t else f
    val out = mutable.Map.empty[Int, RoaringBitmap]
    var i = hit.nextSetBit(0)
    while (i >= 0) {
      var j = i
      while (j + 1 < n && hit.get(j + 1)) j += 1
      val vs = file.read(Seq("bitmaps"), i.toLong, j + 1L, allocator)
      try {
        val b = vs.head.asInstanceOf[VarBinaryVector]
        (0 until (j + 1 - i)).foreach { k =>
          if (!b.isNull(k)) RowAddrMap.parseInto(b.get(k), rowsOf, out, file.path)
        }
      } finally vs.foreach(_.close())
      i = hit.nextSetBit(j + 1)
    }
    RowAddrMap.freeze(out)
  }

  def bytesRead: Long = if (opened) file.bytesRead else 0L
  override def close(): Unit = { keysRead.foreach(_.close()); if (opened) file.close() }
}

object BitmapIndex {
  val File = "bitmap_page_lookup.lance"

  /** Row sets the index gave recently, by dataset, index uuid, leaf (by
    * value) and outcome (nor do a fragment's rows change): a repeated lookup
    * of the same value parses its bitmaps once. Callers get copies. */
  private val cache = new ReadCache[(String, String, Filter, Boolean), RowAddrMap.Rows](64, 32L << 20)

  private def copy(rows: RowAddrMap.Rows): RowAddrMap.Rows = rows.map { case (f, b) => f -> b.clone() }

  private def recall(key: (String, String, Filter, Boolean)): Option[RowAddrMap.Rows] = cache.get(key).map(copy)

  private def remember(key: (String, String, Filter, Boolean), rows: RowAddrMap.Rows): RowAddrMap.Rows = {
    cache.put(key, copy(rows), rows.valuesIterator.map(_.getLongSizeInBytes).sum)
    rows
  }
}
