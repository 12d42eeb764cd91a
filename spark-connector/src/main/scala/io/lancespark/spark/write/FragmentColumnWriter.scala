package io.lancespark.spark.write

import java.util.UUID

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.VectorSchemaRoot
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.types.StructType

import io.lancespark.schema.LanceFormatException
import io.lancespark.spark.SerializableHadoopConf
import io.lancespark.spark.read.ArrowAllocators
import io.lancespark.table.commit.FragmentColumns
import io.lancespark.table.evolution.ColumnAddition
import io.lancespark.table.storage.{DatasetStorage, FragmentWriter}
import io.lancespark.table.model.WrittenFragment

/** What every task of an addition of columns needs; serialized to executors.
  * The rows it is given are `[_rowaddr, new columns...]` (`sparkSchema`
  * without the key), each fragment's rows together and by address within a
  * task (fragments in any order). */
final case class AddColumnsTask(
    uri: String,
    hadoopConf: SerializableHadoopConf,
    plan: ColumnAddition,
    sparkSchema: StructType,
    maxRowsPerPage: Option[Int],
    filePrefix: String = "addcol-" + UUID.randomUUID().toString.take(8),
    deletedRow: Option[InternalRow] = None) {

  /** Writes a file for each fragment that has rows in `rows` (each
    * fragment's rows together, by address), and, with `alsoEmpty`, for those fragments besides. */
  def writePartition(rows: Iterator[InternalRow], alsoEmpty: Seq[Long] = Nil): Seq[FragmentColumns] = {
    val storage = DatasetStorage(uri, hadoopConf.value)
    val written = scala.collection.mutable.ArrayBuffer.empty[FragmentColumns]
    val in = rows.buffered
    try {
      val seen = scala.collection.mutable.HashSet.empty[Long]
      while (in.hasNext) {
        val frag = AddColumnsTask.address(uri, in.head) >>> 32
        if (!seen.add(frag))  // sorted by address, or read fragment after fragment: a fragment's rows are contiguous
          throw new IllegalStateException(s"$uri: rows of fragment $frag are not contiguous in the task's input")
        written += FragmentColumns(frag, writeFragment(storage, frag, in))
      }
      alsoEmpty.foreach(f => written += FragmentColumns(f, writeFragment(storage, f, Iterator.empty.buffered)))
      written.toVector
    } catch {
      case e: Throwable =>
        written.foreach(w => FragmentWriter.delete(storage, w.file.path))
        throw e
    }
  }

  /** One fragment's file: a row per physical row; the source's value where
    * it gives one for a live row, else NULL. Consumes `rows` while they name
    * fragment `frag`. */
  private def writeFragment(storage: DatasetStorage, frag: Long, rows: BufferedIterator[InternalRow]): WrittenFragment = {
    val state = plan.fragment(frag)
    val deleted = plan.deletedRows(storage, frag)
    val allocator: BufferAllocator =
      ArrowAllocators.root.newChildAllocator(s"lance-addcol-$frag-${UUID.randomUUID()}", 0, Long.MaxValue)
    try {
      val root = VectorSchemaRoot.create(plan.columns.toArrow, allocator)
      try {
        val writers = root.getFieldVectors.asScala.zip(sparkSchema.fields).map { case (v, f) =>
          ArrowFieldWriter(v, f.dataType, f.name)
        }.toArray
        val nulls = new GenericInternalRow(writers.length + 1)
        val forDeleted = deletedRow.getOrElse(nulls)
        val file = new FragmentWriter(storage, plan.columns, plan.fileVersion, maxRowsPerPage, filePrefix)
        try {
          var offset = 0L
          var inBatch = 0
          def flush(): Unit = if (inBatch > 0) {
            writers.foreach(_.finish(inBatch))
            root.setRowCount(inBatch)
            file.write(root.getFieldVectors.asScala.toSeq)
            root.clear()
            inBatch = 0
          }
          def mine: Boolean = rows.hasNext && (AddColumnsTask.address(uri, rows.head) >>> 32) == frag
          // the rows are sorted: one before `offset` repeats an address already written
          def duplicate(offset: Long): Unit = {
            val addr = rows.head.getLong(0)
            if ((addr & 0xffffffffL) < offset)
              throw new IllegalArgumentException(
                s"$uri: the source has more than one row for _rowaddr $addr (fragment $frag, offset " +
                  s"${addr & 0xffffffffL}); each row may get one value")
          }
          while (offset < state.physicalRows) {
            if (inBatch == 0) root.allocateNew()
            // (rows are reused by the iterator: a row is written before the next is looked at)
            if (mine) duplicate(offset)
            val row: InternalRow =
              if (mine && (rows.head.getLong(0) & 0xffffffffL) == offset) {
                val r = rows.next()
                if (deleted.contains(offset.toInt)) forDeleted else r
              } else if (deleted.contains(offset.toInt)) forDeleted else nulls
            var i = 0
            try while (i < writers.length) { writers(i).write(row, i + 1, inBatch); i += 1 }
            catch { case e: LanceFormatException => throw new LanceFormatException(s"$uri: ${e.getMessage}", e) }
            inBatch += 1
            offset += 1
            if (inBatch >= LanceDataWriter.BatchRows) flush()
          }
          flush()
          if (mine) duplicate(state.physicalRows)
          if (mine) {
            val addr = rows.head.getLong(0)
            throw new IllegalArgumentException(
              s"$uri: the source's _rowaddr $addr names offset ${addr & 0xffffffffL} of fragment $frag, which has " +
                s"${state.physicalRows} rows at version ${plan.readVersion}")
          }
          file.finish()
        } catch {
          case e: Throwable =>
            file.abort()
            throw e
        }
      } finally root.close()
    } finally allocator.close()
  }
}

object AddColumnsTask {
  /** The row's `_rowaddr` (ordinal 0); NULL is an error. */
  def address(uri: String, row: InternalRow): Long =
    if (row.isNullAt(0)) throw new IllegalArgumentException(s"$uri: the source has a row whose _rowaddr is NULL (or whose _rowid names no row of the version read)")
    else row.getLong(0)
}
