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

  private val values = new ArrayBuffer[Any](batchSize)
  private val ids = new Array[Long](batchSize)
  private val mins = ArrayBuffer.empty[Any]
  private val maxs = ArrayBuffer.empty[Any]
  private val nullCounts = ArrayBuffer.empty[Long]
  private var last: Any = null
  private var rows = 0L

  def add(value: Any, addr: Long): Unit = {
    if (rows > 0 && IndexValues.ordering.compare(last, value) > 0)
      throw new IllegalArgumentException(s"index input out of order at row $rows: $value after $last")
    ids(values.size) = addr
    values += value
    last = value
    rows += 1
    if (values.size == batchSize) flush()
  }

  private def flush(): Unit = if (values.nonEmpty) {
    val n = values.size
    val v = IndexValues.vector("values", valueType, values.toIndexedSeq, allocator)
    val idv = new UInt8Vector(new Field("ids", FieldType.notNullable(new ArrowType.Int(64, false)), null), allocator)
    try {
      idv.allocateNew(n)
      var i = 0
      while (i < n) { idv.set(i, ids(i)); i += 1 }
      idv.setValueCount(n)
      data.write(Seq(v, idv))
    } finally { v.close(); idv.close() }
    mins += values.head
    maxs += values.last
    nullCounts += values.count(_ == null).toLong
    values.clear()
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
  /** Writes the remaining files; each file's name and size. */
  def finish(): Seq[(String, Long)]
  def rowsAdded: Long
  /** Closes what is open and removes the index's directory. */
  def abort(): Unit
}
