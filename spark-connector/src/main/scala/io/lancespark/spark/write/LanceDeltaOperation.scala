package io.lancespark.spark.write

import java.io.{ByteArrayOutputStream, DataOutputStream}
import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.expressions.{Expressions, NamedReference}
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.connector.write._
import org.apache.spark.sql.util.CaseInsensitiveStringMap
import org.roaringbitmap.RoaringBitmap

import io.lancespark.spark.{LanceTable, MetadataColumns, SerializableHadoopConf}
import io.lancespark.spark.read.LanceScanBuilder
import io.lancespark.table._

/** DELETE / UPDATE / MERGE as merge-on-read (SupportsDelta): the row id is
  * `_rowaddr`; tasks collect deleted offsets per fragment and write updated
  * and inserted rows to new fragments; the driver merges every task's
  * deletions with the fragments' deletion files and commits one Delete or
  * Update transaction read at the version the scan read. */
final class LanceDeltaOperation(table: LanceTable, cmd: RowLevelOperation.Command, conf: SerializableHadoopConf)
    extends SupportsDelta {

  private val snapshot: Snapshot = table.snapshot

  override def command(): RowLevelOperation.Command = cmd

  override def description(): String = s"Lance merge-on-read $cmd read at version ${snapshot.version}"

  override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder =
    new LanceScanBuilder(snapshot, table.schema, table.options)

  override def rowId(): Array[NamedReference] = Array(Expressions.column(MetadataColumns.RowAddr))

  /** `_fragid` is offered so conditions may name it (whole-fragment deletes). */
  override def requiredMetadataAttributes(): Array[NamedReference] =
    Array(Expressions.column(MetadataColumns.FragId))

  override def representUpdateAsDeleteAndInsert(): Boolean = true

  override def newWriteBuilder(info: LogicalWriteInfo): DeltaWriteBuilder = new DeltaWriteBuilder {
    override def build(): DeltaWrite = new DeltaWrite {
      override def toBatch: DeltaBatchWrite = new LanceDeltaBatchWrite(snapshot, info, conf, cmd)
      override def description(): String = LanceDeltaOperation.this.description()
    }
  }
}

/** One task's changes: serialized deleted offsets per fragment, new files. */
final case class LanceDeltaMessage(deleted: Map[Long, Array[Byte]], files: Seq[WrittenFragment])
    extends WriterCommitMessage

final class LanceDeltaBatchWrite(snapshot: Snapshot, info: LogicalWriteInfo, conf: SerializableHadoopConf,
    cmd: RowLevelOperation.Command) extends DeltaBatchWrite {

  private val opts = LanceWriteOptions(Map("path" -> snapshot.storage.uri))
  private val task = WriteTask(snapshot.storage.uri, conf, snapshot.schema, info.schema(),
    opts.maxRowsPerFile, opts.maxRowsPerPage)

  override def createBatchWriterFactory(physical: PhysicalWriteInfo): DeltaWriterFactory =
    LanceDeltaWriterFactory(task)

  override def useCommitCoordinator(): Boolean = false

  override def commit(messages: Array[WriterCommitMessage]): Unit = {
    val ms = messages.toSeq.collect { case m: LanceDeltaMessage => m }
    val deleted = mutable.Map.empty[Long, RoaringBitmap]
    ms.foreach(_.deleted.foreach { case (frag, bytes) =>
      deleted.getOrElseUpdate(frag, new RoaringBitmap()).or(LanceDeltaBatchWrite.bitmap(bytes))
    })
    val files = ms.flatMap(_.files)
    if (deleted.isEmpty && files.isEmpty) return  // nothing matched: no new version
    try Committer.commit(snapshot.storage, Some(snapshot.version),
      RowLevelChange(deleted.toMap, files, cmd.toString), CommitSettings())
    catch {
      case e: Throwable =>
        LanceBatchWrite.delete(snapshot.storage, files)
        throw e
    }
  }

  override def abort(messages: Array[WriterCommitMessage]): Unit = {
    LanceBatchWrite.delete(snapshot.storage,
      Option(messages).toSeq.flatten.collect { case m: LanceDeltaMessage => m.files }.flatten)
    LanceBatchWrite.sweep(snapshot.storage, task.filePrefix)
  }
}

object LanceDeltaBatchWrite {
  def bitmap(bytes: Array[Byte]): RoaringBitmap = {
    val b = new RoaringBitmap()
    b.deserialize(ByteBuffer.wrap(bytes))
    b
  }

  def bytes(b: RoaringBitmap): Array[Byte] = {
    b.runOptimize()
    val out = new ByteArrayOutputStream()
    b.serialize(new DataOutputStream(out))
    out.toByteArray
  }
}

final case class LanceDeltaWriterFactory(task: WriteTask) extends DeltaWriterFactory {
  override def createWriter(partitionId: Int, taskId: Long): DeltaWriter[InternalRow] = new DeltaWriter[InternalRow] {
    private var data: Option[LanceDataWriter] = None
    private val deleted = mutable.Map.empty[Long, RoaringBitmap]

    private def writer: LanceDataWriter = data.getOrElse {
      val w = new LanceDataWriter(task)
      data = Some(w)
      w
    }

    override def delete(metadata: InternalRow, id: InternalRow): Unit = {
      val addr = id.getLong(0)
      deleted.getOrElseUpdate(addr >>> 32, new RoaringBitmap()).add((addr & 0xffffffffL).toInt)
    }

    override def update(metadata: InternalRow, id: InternalRow, row: InternalRow): Unit = {
      delete(metadata, id)
      insert(row)
    }

    override def reinsert(metadata: InternalRow, row: InternalRow): Unit = insert(row)

    override def insert(row: InternalRow): Unit = writer.write(row)

    override def commit(): WriterCommitMessage =
      LanceDeltaMessage(deleted.map { case (k, v) => k -> LanceDeltaBatchWrite.bytes(v) }.toMap,
        data.map(_.commit()).getOrElse(Nil))

    override def abort(): Unit = data.foreach(_.abort())

    override def close(): Unit = data.foreach(_.close())
  }
}
