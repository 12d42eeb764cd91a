package io.lancespark.table.index

import org.apache.arrow.memory.BufferAllocator
import org.roaringbitmap.RoaringBitmap

import io.lancespark.schema.LanceSchema
import io.lancespark.table.filter.Filter
import io.lancespark.table.filter.Filter._
import io.lancespark.table.storage.DatasetStorage

/** A scalar index over one column, answering the filter's leaves on it. */
trait ScalarIndex extends AutoCloseable {
  def entry: IndexEntry
  /** The indexed column. */
  def column: Column

  /** The row addresses (by fragment) where `leaf` (a leaf on [[column]])
    * may be TRUE (`outcome`) or may be FALSE (`!outcome`): a superset, exact
    * for the fragments the index covers. None when the index cannot answer
    * or reading it would not pay (most of the index would be read). */
  def rows(leaf: Filter, outcome: Boolean): Option[RowAddrMap.Rows]

  /** The fragments whose rows [[rows]] decides: those the index covers, by default. */
  def trusted: org.roaringbitmap.RoaringBitmap = entry.covered

  /** Bytes read from the index's files so far. */
  def bytesRead: Long
}

object ScalarIndex {
  /** Index types read, by the last part of their details' type URL. */
  val BTree = "BTreeIndexDetails"
  val Bitmap = "BitmapIndexDetails"
  val ZoneMap = "ZoneMapIndexDetails"
  val BloomFilter = "BloomFilterIndexDetails"
  /** A bitmap over the elements of a list column's lists (the BITMAP file
    * layout, keys of the element type): answers label terms ([[LabelTerm]]),
    * never the filter's leaves on the list column. */
  val LabelList = "LabelListIndexDetails"
  val Supported: Set[String] = Set(BTree, Bitmap, ZoneMap, BloomFilter, LabelList)

  /** The fragments `entry` covers whose zones a zone-based index may be
    * trusted for: those whose zones' lengths (`zoneRows`, a fragment's sum;
    * None without zones) add up to its physical rows, as they do only if the
    * fragment had no deleted rows when the index was built. The others are
    * skipped with a log line. */
  def zonesAddingUp(entry: IndexEntry, zoneRows: Int => Option[Long], rowsOf: Int => Long): RoaringBitmap = {
    val b = new RoaringBitmap()
    entry.covered.toArray.foreach { f =>
      val total = zoneRows(f).getOrElse(-1L)
      if (total == rowsOf(f)) b.add(f)
      else IndexCatalog.skip(s"${entry.describe} for fragment $f: its zones hold $total rows, the fragment ${rowsOf(f)}")
    }
    b
  }

  /** The reader of `entry`, if its type and version are read here (else a log line). */
  def open(storage: DatasetStorage, schema: LanceSchema, entry: IndexEntry, rowsOf: Int => Long,
           allocator: BufferAllocator): Option[ScalarIndex] =
    if (!Supported.contains(entry.kind)) { IndexCatalog.skip(s"${entry.describe}: type not read"); None }
    else if (entry.indexVersion != 0 && !(entry.kind == LabelList && entry.indexVersion == 1)) {
      // LABEL_LIST version 1 (pylance 14) adds the NULL lists' rows beside the same element bitmaps:
      // not needed for the label terms answered (a NULL list never matches one)
      IndexCatalog.skip(s"${entry.describe}: index version ${entry.indexVersion} not read " +
        (if (entry.kind == LabelList) "(0 and 1 are)" else "(0 is)")); None
    } else if (entry.fields.size != 1 || entry.fieldIds.size != 1) {
      IndexCatalog.skip(s"${entry.describe}: not one column of the schema"); None
    } else entry.kind match {
      case BTree => BTreeIndex.open(storage, entry, allocator)
      case Bitmap | LabelList => Some(new BitmapIndex(storage, entry, rowsOf, allocator))
      case ZoneMap => Some(ZoneMapIndex.open(storage, entry, rowsOf, allocator))
      case BloomFilter => IndexCatalog.field(schema.fields, entry.fieldIds.head).map(f =>
        BloomFilterIndex.open(storage, entry, f.arrowType, rowsOf, allocator))
      case _ => None
    }

  /** `leaf` on another column (the index file's value column). */
  def onColumn(leaf: Filter, c: Column): Option[Filter] = leaf match {
    case x: Compare => Some(x.copy(column = c))
    case x: In => Some(x.copy(column = c))
    case _: IsNull => Some(IsNull(c))
    case _: IsNotNull => Some(IsNotNull(c))
    case x: StartsWith => Some(StartsWith(c, x.prefix))
    case _ => None
  }

  /** Whether `f` is a leaf an index on a column may answer. */
  def isLeaf(f: Filter): Boolean = f match {
    case _: Compare | _: In | _: IsNull | _: IsNotNull | _: StartsWith => true
    case _ => false
  }
}
