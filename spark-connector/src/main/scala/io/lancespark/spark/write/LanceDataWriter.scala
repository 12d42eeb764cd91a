package io.lancespark.spark.write

import java.util.UUID

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{LargeVarBinaryVector, VectorSchemaRoot}
import org.apache.arrow.vector.complex.StructVector
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.StructType

import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.spark.SerializableHadoopConf
import io.lancespark.spark.read.ArrowAllocators
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.{DatasetStorage, FragmentWriter}
import io.lancespark.table.model.WrittenFragment
import io.lancespark.table.scan.BlobColumns

/** What every task of one write needs; serialized to executors. `schema`
  * carries the field ids the files are written with, `sparkSchema` the
  * incoming rows' types in the same top-level order. */
final case class WriteTask(
    uri: String,
    hadoopConf: SerializableHadoopConf,
    schema: LanceSchema,
    sparkSchema: StructType,
    maxRowsPerFile: Long,
    maxRowsPerPage: Option[Int],
    version: DataFileVersion,
    disabledCodecs: Set[String],
    filePrefix: String = UUID.randomUUID().toString.take(8))

/** Writes one task's rows into one or more data files (one fragment each).
  * `commit` returns them; `abort` deletes them. Nothing is visible until the
  * driver commits a manifest that references the files. */
final class LanceDataWriter(task: WriteTask) extends AutoCloseable {
  import LanceDataWriter.BatchRows

  private val storage = DatasetStorage(task.uri, task.hadoopConf.value)
  private val allocator: BufferAllocator =
    ArrowAllocators.root.newChildAllocator(s"lance-write-${UUID.randomUUID()}", 0, Long.MaxValue)
  private val root = VectorSchemaRoot.create(task.schema.toArrow, allocator)
  private val writers = root.getFieldVectors.asScala.zip(task.sparkSchema.fields).map { case (v, f) =>
    ArrowFieldWriter(v, f.dataType, f.name)
  }.toArray

  /** Blob columns' vectors: a batch is handed to the file writer once their
    * values reach [[LanceDataWriter.BatchBlobBytes]] (the file writer streams
    * each value out of the vector; a batch never holds more than that plus one value). */
  private val blobVectors: Array[LargeVarBinaryVector] =
    task.schema.fields.zip(root.getFieldVectors.asScala).collect {
      case (f, v: LargeVarBinaryVector) if BlobColumns.isBlob(f) => v
      case (f, v: StructVector) if BlobColumns.isBlob(f) && v.getChild("data").isInstanceOf[LargeVarBinaryVector] =>
        v.getChild("data").asInstanceOf[LargeVarBinaryVector]  // 2.2 (lance.blob.v2): the values' bytes
    }.toArray

  /** The blob bytes buffered: the end of each blob vector's last value set. */
  private def blobBytes: Long = {
    var total = 0L
    var i = 0
    while (i < blobVectors.length) {
      val last = blobVectors(i).getLastSet
      if (last >= 0) total += blobVectors(i).getOffsetBuffer.getLong(8L * (last + 1))
      i += 1
    }
    total
  }

  private final class OpenFile(val writer: FragmentWriter, var rows: Long)
  private var current: Option[OpenFile] = None
  private val written = ArrayBuffer.empty[WrittenFragment]
  private var inBatch = 0
  private var batchLimit = 0

  def write(row: InternalRow): Unit = {
    if (inBatch == 0) startBatch()
    var i = 0
    try while (i < writers.length) { writers(i).write(row, i, inBatch); i += 1 }
    catch {  // a value the dataset cannot take: name the dataset too
      case e: LanceFormatException => throw new LanceFormatException(s"${task.uri}: ${e.getMessage}", e)
    }
    inBatch += 1
    if (inBatch >= batchLimit || (blobVectors.nonEmpty && blobBytes >= LanceDataWriter.BatchBlobBytes)) flush()
  }

  /** Closes the open file; returns every file this task wrote. */
  def commit(): Seq[WrittenFragment] = {
    flush()
    closeFile()
    written.toSeq
  }

  /** Removes every file this task wrote (used when the task or the job fails). */
  def abort(): Unit = {
    current.foreach(_.writer.abort())
    written.foreach(f => FragmentWriter.delete(storage, f.path))
    current = None
    written.clear()
  }

  override def close(): Unit = {
    root.close()
    allocator.close()
  }

  private def startBatch(): Unit = {
    val roomInFile = task.maxRowsPerFile - current.map(_.rows).getOrElse(0L)
    batchLimit = math.min(BatchRows.toLong, roomInFile).toInt
    root.allocateNew()
  }

  private def flush(): Unit = if (inBatch > 0) {
    writers.foreach(_.finish(inBatch))
    root.setRowCount(inBatch)
    val f = current.getOrElse(openFile())
    f.writer.write(root.getFieldVectors.asScala.toSeq)
    f.rows += inBatch
    inBatch = 0
    root.clear()
    if (f.rows >= task.maxRowsPerFile) closeFile()
  }

  private def openFile(): OpenFile = {
    val f = new OpenFile(new FragmentWriter(storage, task.schema, task.version, task.maxRowsPerPage, task.filePrefix,
      task.disabledCodecs), 0L)
    current = Some(f)
    f
  }

  private def closeFile(): Unit = current.foreach { f =>
    written += f.writer.finish()
    current = None
  }
}

object LanceDataWriter {
  /** Rows buffered in Arrow vectors before they are handed to the file writer. */
  val BatchRows: Int = 8192

  /** Blob bytes buffered in a batch before it is written. */
  val BatchBlobBytes: Long = 64L * 1024 * 1024
}
