package io.lancespark.spark.write

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.distributions.{Distribution, Distributions}
import org.apache.spark.sql.connector.expressions.{Expression, Expressions, NamedReference, SortOrder}
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.connector.write._
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import io.lancespark.spark.{LanceTable, MetadataColumns, SerializableHadoopConf}
import io.lancespark.spark.options.{OptionSource, WriteOptions}
import io.lancespark.spark.read.LanceScanBuilder
import io.lancespark.spark.shim.DeltaWriterShim
import io.lancespark.table.commit.{CommitSettings, Commits, RowLevelPart, RowLevelRead, RowLevelWrites, TaskDeletions}
import io.lancespark.table.storage.DatasetStorage
import io.lancespark.table.storage.Snapshot

/** DELETE / UPDATE / MERGE as merge-on-read (SupportsDelta): the row id is
  * `_rowaddr`. The write asks Spark to cluster rows by `_fragid`, so each
  * fragment's deleted offsets reach one task, which merges them with the
  * fragment's deletion file and writes the new one; updated and inserted rows
  * go to new fragments. The driver commits one Delete or Update transaction
  * read at the version the scan read. */
final class LanceDeltaOperation(table: LanceTable, cmd: RowLevelOperation.Command, conf: SerializableHadoopConf)
    extends SupportsDelta {

  private val snapshot: Snapshot = table.snapshot

  override def command(): RowLevelOperation.Command = cmd

  override def description(): String = s"Lance merge-on-read $cmd read at version ${snapshot.version}"

  override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder =
    new LanceScanBuilder(snapshot, table.schema, table.readConf(options.asCaseSensitiveMap().asScala.toMap))

  override def rowId(): Array[NamedReference] = Array(Expressions.column(MetadataColumns.RowAddr))

  /** `_fragid` routes deletions to the task owning the fragment, and lets
    * conditions name it (whole-fragment deletes). */
  override def requiredMetadataAttributes(): Array[NamedReference] =
    Array(Expressions.column(MetadataColumns.FragId))

  /** Updates keep `_fragid`, so an updated row travels with its fragment's deletions. */
  override def representUpdateAsDeleteAndInsert(): Boolean = false

  override def newWriteBuilder(info: LogicalWriteInfo): DeltaWriteBuilder = new DeltaWriteBuilder {
    override def build(): DeltaWrite = new DeltaWrite with RequiresDistributionAndOrdering {
      override def toBatch: DeltaBatchWrite = new LanceDeltaBatchWrite(snapshot, info, conf, cmd)
      override def description(): String = LanceDeltaOperation.this.description()
      override def requiredDistribution(): Distribution =
        Distributions.clustered(Array[Expression](Expressions.column(MetadataColumns.FragId)))
      /** A wish, not a must: Spark then rebalances by `_fragid` and AQE may
        * split a partition larger than its advisory size. Inserted rows have
        * no fragment (a null `_fragid`, one partition): a large MERGE's
        * inserts are written by several tasks instead of one. A fragment whose
        * deletions end up in several tasks gets their deletion files combined
        * by the driver at commit. */
      override def distributionStrictlyRequired(): Boolean = false
      override def requiredOrdering(): Array[SortOrder] = Array.empty
    }
  }
}

/** One task's changes: the deletion files it prepared, and new data files. */
final case class LanceDeltaMessage(part: RowLevelPart) extends WriterCommitMessage

final class LanceDeltaBatchWrite(snapshot: Snapshot, info: LogicalWriteInfo, conf: SerializableHadoopConf,
    cmd: RowLevelOperation.Command) extends DeltaBatchWrite {

  private val opts = WriteOptions.conf(Map.empty, OptionSource.activeSession, snapshot.config)
  private val task = WriteTask(snapshot.storage.uri, conf, snapshot.schema, info.schema(),
    opts.maxRowsPerFile, opts.maxRowsPerPage, opts.versionFor(Some(snapshot), overwrite = false), opts.disabledCodecs)

  override def createBatchWriterFactory(physical: PhysicalWriteInfo): DeltaWriterFactory =
    LanceDeltaWriterFactory(task, RowLevelRead(snapshot), record = cmd == RowLevelOperation.Command.MERGE)

  override def useCommitCoordinator(): Boolean = false

  // Spark clusters by _fragid, so a fragment normally comes from one task;
  // should it come from several, their files are combined at commit.
  override def commit(messages: Array[WriterCommitMessage]): Unit =
    RowLevelWrites.commitOrDiscard(snapshot.storage, snapshot.version,
      messages.toSeq.collect { case LanceDeltaMessage(p) => p }, cmd.toString, CommitSettings())

  override def abort(messages: Array[WriterCommitMessage]): Unit = {
    RowLevelWrites.discard(snapshot.storage, Option(messages).toSeq.flatten.collect { case LanceDeltaMessage(p) => p })
    Commits.sweep(snapshot.storage, task.filePrefix)
  }
}

/** `record`: a MERGE writes its inserted rows to files of their own and keeps
  * the rows it deletes apart from those it updates, for the change feed (see
  * [[io.lancespark.table.stream.ChangeRecord]]). */
final case class LanceDeltaWriterFactory(task: WriteTask, read: RowLevelRead, record: Boolean = false)
    extends DeltaWriterFactory {
  override def createWriter(partitionId: Int, taskId: Long): DeltaWriter[InternalRow] = new DeltaWriterShim {
    private var data: Option[LanceDataWriter] = None
    private var inserts: Option[LanceDataWriter] = None
    private val deletedOnly = scala.collection.mutable.Map.empty[Long, org.roaringbitmap.RoaringBitmap]
    private val deletions = new TaskDeletions(read, () => DatasetStorage(task.uri, task.hadoopConf.value))

    private def writer: LanceDataWriter = data.getOrElse {
      val w = new LanceDataWriter(task)
      data = Some(w)
      w
    }

    private def insertWriter: LanceDataWriter = if (!record) writer else inserts.getOrElse {
      val w = new LanceDataWriter(task)
      inserts = Some(w)
      w
    }

    override def delete(metadata: InternalRow, id: InternalRow): Unit = {
      val addr = id.getLong(0)
      deletions.delete(addr)
      if (record) deletedOnly.getOrElseUpdate(addr >>> 32, new org.roaringbitmap.RoaringBitmap())
        .add((addr & 0xffffffffL).toInt)
    }

    override def update(metadata: InternalRow, id: InternalRow, row: InternalRow): Unit = {
      deletions.delete(id.getLong(0))
      writer.write(row)
    }

    override def insert(row: InternalRow): Unit = insertWriter.write(row)

    /** Writes each touched fragment's merged deletion file, then closes the data files. */
    override def commit(): WriterCommitMessage = {
      val inserted = inserts.map(_.commit()).getOrElse(Nil)
      val part = deletions.prepare(data.map(_.commit()).getOrElse(Nil) ++ inserted)
      LanceDeltaMessage(part.copy(insertFiles = inserted.map(_.path), deletedOnly = deletedOnly.toMap))
    }

    override def abort(): Unit = {
      deletions.discard()
      data.foreach(_.abort())
      inserts.foreach(_.abort())
    }

    override def close(): Unit = {
      data.foreach(_.close())
      inserts.foreach(_.close())
    }
  }
}
