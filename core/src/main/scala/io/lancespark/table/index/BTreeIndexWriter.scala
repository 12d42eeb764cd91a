package io.lancespark.table.index

import scala.collection.mutable.ArrayBuffer

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{UInt4Vector, UInt8Vector}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType}

import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.DatasetStorage

/** Writes a BTREE index in the reference's layout (see [[BTreeIndex]]) from
  * (value, row address) pairs in the index's order ([[IndexValues.ordering]]:
  * nulls first): `page_data.lance` (`values`, `ids`: uint64 not null) in
  * pages of `batchSize` rows, then `page_lookup.lance` with each page's
  * `min` (its first value, null when the page starts with nulls), `max` (its
  * last value), `null_count` and `page_idx`, and the schema metadata
  * `batch_size` and `range_partitioned` = false, as pylance 14 writes them. */
final class BTreeIndexWriter(storage: DatasetStorage, uuid: String, valueType: ArrowType, version: DataFileVersion,
                             allocator: BufferAllocator, batchSize: Int = BTreeIndex.DefaultBatchSize.toInt)
    extends SortedIndexWriter {
  require(batchSize > 0, "batchSize must be positive")

  private val data = new IndexFileWriter(storage, uuid, BTreeIndex.DataFile, Seq(
    new Field("values", FieldType.nullable(valueType), null),
    new Field("ids", FieldType.notNullable(new ArrowType.Int(64, false)), null)), Map.empty, version)

  /** Keyed values ([[KeyCodec]]) are buffered as keys, others as values. */
  private val codec: Option[KeyCodec] = KeyCodec.of(valueType)
  private val pageKeys: Array[Long] = if (codec.isDefined) new Array[Long](batchSize) else null
  private val pageValues: Array[Any] = if (codec.isDefined) null else new Array[Any](batchSize)
  private val ids = new Array[Long](batchSize)
  private var size = 0
  private var pageNulls = 0 // the page's nulls: its first rows
  private val mins = ArrayBuffer.empty[Any]
  private val maxs = ArrayBuffer.empty[Any]
  private val nullCounts = ArrayBuffer.empty[Long]
  private var seen = false // a non-null value was added
  private var lastKey = 0L
  private var last: Any = null
  private var rows = 0L

  private def outOfOrder(value: Any, before: Any): Nothing =
    throw new IllegalArgumentException(s"index input out of order at row $rows: $value after $before")

  def add(value: Any, addr: Long): Unit = {
    if (value == null) {
      if (seen) outOfOrder(null, codec.fold(last)(_.value(lastKey)))
      ids(size) = addr
      if (pageValues != null) pageValues(size) = null
      pageNulls += 1
    } else codec match {
      case Some(c) =>
        val k = c.keyOf(value)
        if (seen && k < lastKey) outOfOrder(value, c.value(lastKey))
        pageKeys(size) = k; ids(size) = addr
        lastKey = k; seen = true
      case None =>
        if (seen && IndexValues.ordering.compare(last, value) > 0) outOfOrder(value, last)
        pageValues(size) = value; ids(size) = addr
        last = value; seen = true
    }
    size += 1
    rows += 1
    if (size == batchSize) flush()
  }

  override def addKeys(keyCodec: KeyCodec, keys: Array[Long], addrs: Array[Long], n: Int): Unit =
    if (!codec.contains(keyCodec)) super.addKeys(keyCodec, keys, addrs, n)
    else {
      var i = 0
      while (i < n) {
        val take = math.min(n - i, batchSize - size)
        var prev = if (seen) lastKey else Long.MinValue
        var j = i
        while (j < i + take) {
          if (keys(j) < prev) outOfOrder(keyCodec.value(keys(j)), keyCodec.value(prev))
          prev = keys(j); j += 1
        }
        System.arraycopy(keys, i, pageKeys, size, take)
        System.arraycopy(addrs, i, ids, size, take)
        size += take; rows += take; i += take
        lastKey = prev; seen = true
        if (size == batchSize) flush()
      }
    }

  private def flush(): Unit = if (size > 0) {
    val n = size
    val v = codec match {
      case Some(c) =>
        val out = new Field("values", FieldType.nullable(valueType), null).createVector(allocator)
        try {
          out.setInitialCapacity(n)
          out.allocateNew()
          // the first pageNulls rows stay null (validity cleared by allocateNew)
          var i = pageNulls
          while (i < n) { c.set(out, i, pageKeys(i)); i += 1 }
          out.setValueCount(n)
          out
        } catch { case e: Throwable => out.close(); throw e }
      case None => IndexValues.vector("values", valueType, pageValues.take(n).toIndexedSeq, allocator)
    }
    val idv = new UInt8Vector(new Field("ids", FieldType.notNullable(new ArrowType.Int(64, false)), null), allocator)
    try {
      idv.allocateNew(n)
      var i = 0
      while (i < n) { idv.set(i, ids(i)); i += 1 }
      idv.setValueCount(n)
      data.write(Seq(v, idv))
    } finally { v.close(); idv.close() }
    def at(i: Int): Any = if (i < pageNulls) null else codec match {
      case Some(c) => c.value(pageKeys(i))
      case None => pageValues(i)
    }
    mins += at(0)
    maxs += at(n - 1)
    nullCounts += pageNulls.toLong
    size = 0
    pageNulls = 0
  }

  def finish(): Seq[(String, Long)] = {
    flush()
    val dataSize = data.finish()
    val lookup = new IndexFileWriter(storage, uuid, BTreeIndex.LookupFile, Seq(
      new Field("min", FieldType.nullable(valueType), null),
      new Field("max", FieldType.nullable(valueType), null),
      new Field("null_count", FieldType.notNullable(new ArrowType.Int(32, false)), null),
      new Field("page_idx", FieldType.notNullable(new ArrowType.Int(32, false)), null)),
      Map("batch_size" -> batchSize.toString, "range_partitioned" -> "false"), version)
    try {
      val n = mins.size
      val minV = IndexValues.vector("min", valueType, mins.toIndexedSeq, allocator)
      val maxV = IndexValues.vector("max", valueType, maxs.toIndexedSeq, allocator)
      val nc = new UInt4Vector(new Field("null_count", FieldType.notNullable(new ArrowType.Int(32, false)), null), allocator)
      val pi = new UInt4Vector(new Field("page_idx", FieldType.notNullable(new ArrowType.Int(32, false)), null), allocator)
      try {
        nc.allocateNew(math.max(n, 1)); pi.allocateNew(math.max(n, 1))
        (0 until n).foreach { i => nc.set(i, nullCounts(i).toInt); pi.set(i, i) }
        nc.setValueCount(n); pi.setValueCount(n)
        if (n > 0) lookup.write(Seq(minV, maxV, nc, pi))
      } finally Seq(minV, maxV, nc, pi).foreach(_.close())
      val lookupSize = lookup.finish()
      Seq(BTreeIndex.DataFile -> dataSize, BTreeIndex.LookupFile -> lookupSize)
    } catch { case e: Throwable => lookup.close(); throw e }
  }

  def rowsAdded: Long = rows
  def abort(): Unit = { data.close(); IndexFileWriter.removeDir(storage, uuid) }
}

/** A writer of one index's files from (value, row address) pairs in the
  * index's order. */
trait SortedIndexWriter {
  /** The next pair; values must not decrease ([[IndexValues.ordering]]). */
  def add(value: Any, addr: Long): Unit
  /** The next `n` pairs of non-null values as keys of `codec` (not
    * decreasing); the same as adding their values one by one, which writers
    * of keyed columns do in bulk. */
  def addKeys(codec: KeyCodec, keys: Array[Long], addrs: Array[Long], n: Int): Unit = {
    var i = 0
    while (i < n) { add(codec.value(keys(i)), addrs(i)); i += 1 }
  }
  /** Writes the remaining files; each file's name and size. */
  def finish(): Seq[(String, Long)]
  def rowsAdded: Long
  /** Closes what is open and removes the index's directory. */
  def abort(): Unit
}
