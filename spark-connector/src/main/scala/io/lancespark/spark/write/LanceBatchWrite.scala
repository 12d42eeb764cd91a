package io.lancespark.spark.write

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.write._

import io.lancespark.spark.SerializableHadoopConf
import io.lancespark.spark.options.{OptionSource, WriteOptions}
import io.lancespark.schema.LanceSchema
import io.lancespark.table.commit.{AppendFragments, AppendWithSchema, CommitSettings, Commits, OverwriteDataset}
import io.lancespark.table.model.WrittenFragment
import io.lancespark.table.storage.Snapshot

/** What one task reports: the data files it wrote (not yet visible). */
final case class LanceCommitMessage(files: Seq[WrittenFragment]) extends WriterCommitMessage

/** DataSourceV2 writes into an existing table (catalog INSERT INTO / INSERT
  * OVERWRITE / CTAS): the same task writer as DataFrameWriter saves, and one
  * commit of an Append or Overwrite transaction read at `snapshot`'s version.
  * `evolved`: the schema of a mergeSchema write that adds columns or struct
  * fields (see CatalogWriteSchema), committed with its rows in one version. */
final class LanceWriteBuilder(snapshot: () => Snapshot, uri: String, info: LogicalWriteInfo,
    hadoopConf: SerializableHadoopConf, evolved: Option[LanceSchema] = None)
    extends WriteBuilder with SupportsTruncate {

  private var overwrite = false

  override def truncate(): WriteBuilder = { overwrite = true; this }

  override def build(): Write = new Write {
    override def toBatch: BatchWrite = new LanceBatchWrite(snapshot(), info, hadoopConf, overwrite, evolved)
    /** A streaming query's sink: append mode appends each micro-batch, complete
      * mode (which truncates) overwrites the dataset with each. */
    override def toStreaming: org.apache.spark.sql.connector.write.streaming.StreamingWrite =
      new io.lancespark.spark.streaming.LanceStreamingWrite(uri, hadoopConf, info, complete = overwrite)
    override def description(): String = s"LanceWrite($uri, ${if (overwrite) "overwrite" else "append"})"
  }
}

final class LanceBatchWrite(snapshot: Snapshot, info: LogicalWriteInfo, hadoopConf: SerializableHadoopConf,
    overwrite: Boolean, evolved: Option[LanceSchema]) extends BatchWrite {

  private val schema: LanceSchema = evolved.getOrElse(snapshot.schema)

  private val opts = WriteOptions.conf(
    info.options().asCaseSensitiveMap().asScala.toMap,
    OptionSource.activeSession, snapshot.config)

  override def createBatchWriterFactory(physical: PhysicalWriteInfo): DataWriterFactory =
    LanceDataWriterFactory(task)

  override def useCommitCoordinator(): Boolean = false

  override def commit(messages: Array[WriterCommitMessage]): Unit = {
    val files = messages.toSeq.collect { case LanceCommitMessage(f) => f }.flatten
    val op =
      if (overwrite) OverwriteDataset(files, schema, version)
      else if (evolved.isDefined) AppendWithSchema(files, schema)
      else AppendFragments(files)
    Commits.commitOrDiscard(snapshot.storage, Some(snapshot.version), op, CommitSettings())
  }

  private val version = opts.versionFor(Some(snapshot), overwrite)
  private val task = WriteTask(snapshot.storage.uri, hadoopConf, schema, info.schema(),
    opts.maxRowsPerFile, opts.maxRowsPerPage, version, opts.disabledCodecs)

  override def abort(messages: Array[WriterCommitMessage]): Unit = {
    Commits.discardFiles(snapshot.storage,
      Option(messages).toSeq.flatten.collect { case LanceCommitMessage(f) => f }.flatten)
    Commits.sweep(snapshot.storage, task.filePrefix)
  }
}

final case class LanceDataWriterFactory(task: WriteTask) extends DataWriterFactory {
  override def createWriter(partitionId: Int, taskId: Long): DataWriter[InternalRow] =
    new DataWriter[InternalRow] {
      private val writer = new LanceDataWriter(task)
      override def write(record: InternalRow): Unit = writer.write(record)
      override def commit(): WriterCommitMessage = LanceCommitMessage(writer.commit())
      override def abort(): Unit = writer.abort()
      override def close(): Unit = writer.close()
    }
}
