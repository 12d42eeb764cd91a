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
        written += FragmentColumns(frag, writeFragment(storage, frag, in, 0L, Some(plan.fragment(frag).physicalRows))._2)
      }
      alsoEmpty.foreach(f => written += FragmentColumns(f,
        writeFragment(storage, f, Iterator.empty.buffered, 0L, Some(plan.fragment(f).physicalRows))._2))
      written.toVector
    } catch {
      case e: Throwable =>
        written.foreach(w => FragmentWriter.delete(storage, w.file.path))
        throw e
    }
  }

  /** Writes, for each run of rows of one fragment in ascending address
    * order in `rows` (skipping fewer than [[AddColumnsTask.PieceGap]] rows at
    * a time), a piece of the fragment's file: its rows from the run's
    * first address to its last (NULL where none is given), to be joined with
    * the other pieces of the fragment, this task's or others'
    * ([[joinPieces]]). A task reading several files in address order (small
    * files packed into one split) writes a few pieces; None (and nothing
    * left written) past [[AddColumnsTask.MaxPiecesPerTask]]: the rows are
    * not in address order, and the caller shuffles the source instead. */
  def writePieces(rows: Iterator[InternalRow]): Option[Seq[AddColumnsTask.Piece]] = {
    val storage = DatasetStorage(uri, hadoopConf.value)
    val written = scala.collection.mutable.ArrayBuffer.empty[AddColumnsTask.Piece]
    val in = rows.buffered
    try {
      while (in.hasNext) {
        if (written.size >= AddColumnsTask.MaxPiecesPerTask) throw AddColumnsTask.NotInOrder
        val frag = AddColumnsTask.address(uri, in.head) >>> 32
        val lo = in.head.getLong(0) & 0xffffffffL
        val (hi, file) = writeFragment(storage, frag, in, lo, None)
        written += AddColumnsTask.Piece(frag, lo, hi, file)
      }
      Some(written.toVector)
    } catch {
      case AddColumnsTask.NotInOrder =>
        written.foreach(w => FragmentWriter.delete(storage, w.file.path))
        None
      case e: Throwable =>
        written.foreach(w => FragmentWriter.delete(storage, w.file.path))
        throw e
    }
  }

  /** Fragment `frag`'s file from its pieces (by first row, not overlapping):
    * the rows no piece holds written as NULL (or deleted rows' value), all
    * joined without decoding; the pieces are deleted. */
  def joinPieces(frag: Long, pieces: Seq[AddColumnsTask.Piece]): FragmentColumns = {
    val storage = DatasetStorage(uri, hadoopConf.value)
    val n = plan.fragment(frag).physicalRows
    val made = scala.collection.mutable.ArrayBuffer.empty[String]
    try {
      var cursor = 0L
      val names = Vector.newBuilder[String]
      def gap(until: Long): Unit = if (until > cursor) {
        val (_, f) = writeFragment(storage, frag, Iterator.empty.buffered, cursor, Some(until))
        made += f.path
        names += f.path
      }
      pieces.sortBy(_.lo).foreach { p =>
        gap(p.lo)
        names += p.file.path
        cursor = p.hi
      }
      gap(n)
      val joined = FragmentWriter.join(storage, names.result(), filePrefix, pieces.head.file)
      FragmentColumns(frag, joined)
    } catch {
      case e: Throwable =>
        made.foreach(FragmentWriter.delete(storage, _))
        throw e
    }
  }

  /** Rows [from, until) of fragment `frag`'s file (until None: to the last
    * row of `frag` that `rows` gives), one per physical row: the source's
    * value where it gives one for a live row, else NULL. Consumes `rows`
    * while they name fragment `frag`; returns where the file ends. */
  private def writeFragment(storage: DatasetStorage, frag: Long, rows: BufferedIterator[InternalRow], from: Long,
      until: Option[Long]): (Long, WrittenFragment) = {
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
          var offset = from
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
            if ((addr & 0xffffffffL) < offset) {
              throw new IllegalArgumentException(
                s"$uri: the source has more than one row for _rowaddr $addr (fragment $frag, offset " +
                  s"${addr & 0xffffffffL}); each row may get one value")
            }
          }
          val end = until.getOrElse(state.physicalRows)
          // a piece ends where its fragment's rows do, go back, or skip at least PieceGap rows (a
          // new piece starts there: rows skipped in a run of files read out of order are another
          // task's, or another piece of this task's)
          def continues: Boolean = mine && {
            val at = rows.head.getLong(0) & 0xffffffffL
            at >= offset && at - offset < AddColumnsTask.PieceGap
          }
          while (offset < end && (until.isDefined || continues)) {
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
          if (mine && until.forall(_ >= state.physicalRows) && (until.isDefined || continues)) {
            duplicate(state.physicalRows)
            val addr = rows.head.getLong(0)
            throw new IllegalArgumentException(
              s"$uri: the source's _rowaddr $addr names offset ${addr & 0xffffffffL} of fragment $frag, which has " +
                s"${state.physicalRows} rows at version ${plan.readVersion}")
          }
          (offset, file.finish())
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
  /** A piece of a fragment's new file: its rows [lo, hi), written by one task. */
  final case class Piece(fragmentId: Long, lo: Long, hi: Long, file: WrittenFragment)

  /** Rows a piece may skip (NULL) before it ends and a new piece begins. */
  val PieceGap: Long = 1024

  /** The pieces a task may write before its rows count as not in address order. */
  val MaxPiecesPerTask: Int = 64

  /** A task's rows are not in the order pieces need (see `writePieces`). */
  private[write] object NotInOrder extends RuntimeException("rows not in address order", null, false, false)

  /** The row's `_rowaddr` (ordinal 0); NULL is an error. */
  def address(uri: String, row: InternalRow): Long =
    if (row.isNullAt(0)) throw new IllegalArgumentException(s"$uri: the source has a row whose _rowaddr is NULL (or whose _rowid names no row of the version read)")
    else row.getLong(0)
}
