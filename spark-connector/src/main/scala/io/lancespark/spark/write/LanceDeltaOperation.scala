package io.lancespark.spark.write

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.distributions.{Distribution, Distributions}
import org.apache.spark.sql.connector.expressions.{Expression, Expressions, NamedReference, SortOrder}
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.connector.write._
import org.apache.spark.sql.util.CaseInsensitiveStringMap
import org.roaringbitmap.RoaringBitmap

import io.lancespark.spark.{LanceTable, MetadataColumns, SerializableHadoopConf}
import io.lancespark.spark.options.{OptionSource, WriteOptions}
import io.lancespark.spark.read.LanceScanBuilder
import io.lancespark.table.commit.{CommitSettings, Committer, RowLevelChange, WrittenFragment}
import io.lancespark.table.model.Snapshot
import io.lancespark.table.storage.{DatasetStorage, FragmentDeletion, FragmentState, RowDeletions}

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
final case class LanceDeltaMessage(deletions: Seq[FragmentDeletion], files: Seq[WrittenFragment])
    extends WriterCommitMessage

final class LanceDeltaBatchWrite(snapshot: Snapshot, info: LogicalWriteInfo, conf: SerializableHadoopConf,
    cmd: RowLevelOperation.Command) extends DeltaBatchWrite {

  private val opts = WriteOptions.conf(Map.empty, OptionSource.activeSession, snapshot.config)
  private val task = WriteTask(snapshot.storage.uri, conf, snapshot.schema, info.schema(),
    opts.maxRowsPerFile, opts.maxRowsPerPage, opts.versionFor(Some(snapshot), overwrite = false), opts.disabledCodecs)
  private val fragments: Map[Long, FragmentState] =
    snapshot.fragments.map(f => f.id -> FragmentState(f)).toMap

  override def createBatchWriterFactory(physical: PhysicalWriteInfo): DeltaWriterFactory =
    LanceDeltaWriterFactory(task, snapshot.version, fragments)

  override def useCommitCoordinator(): Boolean = false

  override def commit(messages: Array[WriterCommitMessage]): Unit = {
    val ms = messages.toSeq.collect { case m: LanceDeltaMessage => m }
    val files = ms.flatMap(_.files)
    val prepared = ms.flatMap(_.deletions)
    try {
      // Spark clusters by _fragid, so a fragment normally comes from one task;
      // should it come from several, their files are combined here.
      val deletions = prepared.groupBy(_.fragmentId).values.map(_.reduce((a, b) =>
        RowDeletions.combine(snapshot.storage, a, b, snapshot.version))).toSeq.sortBy(_.fragmentId)
      if (deletions.nonEmpty || files.nonEmpty)  // else nothing matched: no new version
        Committer.commit(snapshot.storage, Some(snapshot.version),
          RowLevelChange(deletions, files, cmd.toString), CommitSettings())
    } catch {
      case e: Throwable =>
        LanceBatchWrite.delete(snapshot.storage, files)
        prepared.foreach(RowDeletions.discard(snapshot.storage, _))
        throw e
    }
  }

  override def abort(messages: Array[WriterCommitMessage]): Unit = {
    val ms = Option(messages).toSeq.flatten.collect { case m: LanceDeltaMessage => m }
    LanceBatchWrite.delete(snapshot.storage, ms.flatMap(_.files))
    ms.flatMap(_.deletions).foreach(RowDeletions.discard(snapshot.storage, _))
    LanceBatchWrite.sweep(snapshot.storage, task.filePrefix)
  }
}

final case class LanceDeltaWriterFactory(task: WriteTask, readVersion: Long, fragments: Map[Long, FragmentState])
    extends DeltaWriterFactory {
  override def createWriter(partitionId: Int, taskId: Long): DeltaWriter[InternalRow] = new DeltaWriter[InternalRow] {
    private var data: Option[LanceDataWriter] = None
    private val deleted = mutable.Map.empty[Long, RoaringBitmap]
    private val written = mutable.ArrayBuffer.empty[FragmentDeletion]
    private lazy val storage: DatasetStorage = DatasetStorage(task.uri, task.hadoopConf.value)

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

    /** Writes each touched fragment's merged deletion file, then closes the data files. */
    override def commit(): WriterCommitMessage = {
      deleted.toSeq.sortBy(_._1).foreach { case (frag, offsets) =>
        val state = fragments.getOrElse(frag, throw new IllegalStateException(
          s"${task.uri}: row address names fragment $frag, which version $readVersion does not have"))
        written += RowDeletions.prepare(storage, frag, state.physicalRows, state.deletion, offsets, readVersion)
      }
      LanceDeltaMessage(written.toSeq, data.map(_.commit()).getOrElse(Nil))
    }

    override def abort(): Unit = {
      written.foreach(RowDeletions.discard(storage, _))
      data.foreach(_.abort())
    }

    override def close(): Unit = data.foreach(_.close())
  }
}
