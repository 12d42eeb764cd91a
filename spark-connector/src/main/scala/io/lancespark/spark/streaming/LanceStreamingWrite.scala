package io.lancespark.spark.streaming

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection}
import org.apache.spark.sql.connector.write.{DataWriter, LogicalWriteInfo, PhysicalWriteInfo, WriterCommitMessage}
import org.apache.spark.sql.connector.write.streaming.{StreamingDataWriterFactory, StreamingWrite}
import org.apache.spark.sql.types.StructType

import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.spark.{SerializableHadoopConf, TypeMapping}
import io.lancespark.spark.options.{OptionSource, WriteOptions}
import io.lancespark.spark.write.{LanceCommitMessage, LanceDataWriter, LanceWriteJob, SparkToArrow, WriteTask}
import io.lancespark.table.commit.{AppendFragments, CommitSettings, Commits, OverwriteDataset, StreamingCommits}
import io.lancespark.table.storage.{Dataset, DatasetStorage}
import io.lancespark.table.storage.Snapshot

/** The streaming sink (`writeStream.format("lance")`, `toTable`): each
  * micro-batch is one commit, an Append (append mode) or an Overwrite
  * (complete mode; also the first batch of a dataset that does not exist yet).
  * Exactly once: the commit records the query id and batch id (see
  * [[StreamingCommits]]); a batch the query already committed (replayed after
  * a crash between the commit and the checkpoint) commits nothing and its
  * files are removed.
  *
  * Each batch writes onto the dataset's latest version when the batch starts
  * (read again per batch: other writers may commit between batches). */
final class LanceStreamingWrite(uri: String, hadoopConf: SerializableHadoopConf, info: LogicalWriteInfo,
    complete: Boolean) extends StreamingWrite {

  private val log = org.slf4j.LoggerFactory.getLogger(getClass)
  private val queryId: String = info.queryId()
  private val explicit: Map[String, String] = info.options().asCaseSensitiveMap().asScala.toMap

  private def storage: DatasetStorage = DatasetStorage(uri, hadoopConf.value)

  import LanceStreamingWrite.Prepared

  @volatile private var prepared: Option[Prepared] = None

  override def createStreamingWriterFactory(physical: PhysicalWriteInfo): StreamingDataWriterFactory = {
    val store = storage
    store.requireSafeCommit()
    val base = if (Dataset.isDataset(uri, hadoopConf.value)) Some(Dataset.open(store, None)) else None
    val opts = WriteOptions.conf(explicit, OptionSource.activeSession, base.map(_.config).getOrElse(Map.empty))
    val overwrite = complete || base.isEmpty
    val version = opts.versionFor(base, overwrite)
    val incoming: StructType = info.schema()
    val (schema, order) = base.filter(_ => !overwrite) match {
      case Some(s) => (s.schema, LanceStreamingWrite.columnOrder(s, incoming))
      case None => (LanceSchema.fromArrow(SparkToArrow.schema(incoming, opts.vectorColumns, version, opts.blobColumns)),
        incoming.fields.indices.toVector)
    }
    val sparkSchema = StructType(order.map(incoming.fields(_)))
    val task = WriteTask(store.uri, hadoopConf, schema, sparkSchema, opts.maxRowsPerFile, opts.maxRowsPerPage,
      version, opts.disabledCodecs)
    prepared = Some(Prepared(base, schema, task,
      CommitSettings(stableRowIds = opts.enableStableRowIds, v2ManifestNaming = opts.v2ManifestPaths)))
    LanceStreamingWriterFactory(task, incoming, if (order == incoming.fields.indices.toVector) None else Some(order))
  }

  override def useCommitCoordinator(): Boolean = false

  override def commit(epochId: Long, messages: Array[WriterCommitMessage]): Unit = {
    val p = prepared.getOrElse(throw new IllegalStateException(s"$uri: batch $epochId commits before it was written"))
    val files = messages.toSeq.collect { case LanceCommitMessage(f) => f }.flatten
    val store = storage
    val key = (store.uri, queryId)
    lazy val done = {
      val found = StreamingCommits.lastCommitted(store, queryId,
        Option(LanceStreamingWrite.known.get(key)).map(_.longValue).getOrElse(1L))
      found.foreach(c => LanceStreamingWrite.known.put(key, Long.box(c.version)))
      found
    }
    if (files.isEmpty && !complete && p.base.isDefined) {
      ()  // an empty micro-batch appends nothing: no new version
    } else if (done.exists(_.batchId >= epochId)) {
      log.info(s"$uri: streaming query $queryId batch $epochId was already committed " +
        s"(version ${done.map(_.version).getOrElse(0L)} holds batch ${done.map(_.batchId).getOrElse(0L)}); skipping it")
      Commits.discardFiles(store, files)
    } else {
      val op =
        if (complete || p.base.isEmpty) OverwriteDataset(files, p.schema, p.task.version)
        else AppendFragments(files)
      val settings = p.settings.copy(transactionProperties = StreamingCommits.properties(queryId, epochId))
      val committed = Commits.commitOrDiscard(store, p.base.map(_.version), op, settings)
      LanceStreamingWrite.known.put(key, Long.box(committed.version))
    }
    prepared = None
  }

  override def abort(epochId: Long, messages: Array[WriterCommitMessage]): Unit = {
    val store = storage
    Commits.discardFiles(store, Option(messages).toSeq.flatten.collect { case LanceCommitMessage(f) => f }.flatten)
    prepared.foreach(p => Commits.sweep(store, p.task.filePrefix))
    prepared = None
  }

  override def toString: String = s"LanceStreamingWrite($uri, ${if (complete) "complete" else "append"})"
}

object LanceStreamingWrite {
  /** One batch's write: the version it read, the schema its files have, the tasks' settings. */
  private final case class Prepared(base: Option[Snapshot], schema: LanceSchema, task: WriteTask,
      settings: CommitSettings)

  /** Per dataset and query, the newest version known to hold one of the
    * query's commits: where the next batch's look for its last commit stops. */
  private[streaming] val known = new ConcurrentHashMap[(String, String), java.lang.Long]()

  /** For each of the dataset's columns, the position of the stream's column of
    * that name (the stream's columns may come in another order); the stream must
    * have exactly the dataset's columns, of the same types. */
  def columnOrder(s: Snapshot, incoming: StructType): Vector[Int] = {
    val target = TypeMapping.forActiveSession().toSpark(s.schema)
    val byName = incoming.fieldNames.zipWithIndex.toMap
    val missing = target.fieldNames.filterNot(byName.contains)
    val extra = incoming.fieldNames.filterNot(target.fieldNames.contains)
    if (missing.nonEmpty || extra.nonEmpty)
      throw new LanceFormatException(
        s"${s.storage.uri}: cannot append the stream: its columns differ from the dataset's (version ${s.version}); " +
          s"missing ${missing.sorted.mkString("[", ", ", "]")}, unexpected ${extra.sorted.mkString("[", ", ", "]")}")
    target.fields.toVector.map { f =>
      val i = byName(f.name)
      if (!LanceWriteJob.sameShape(incoming.fields(i).dataType, f.dataType))
        throw new LanceFormatException(s"${s.storage.uri}: cannot append the stream: column '${f.name}' is " +
          s"${incoming.fields(i).dataType.simpleString} but the dataset stores ${f.dataType.simpleString}")
      i
    }
  }
}

/** The tasks' writer: rows (reordered to the dataset's columns when `order` is
  * set) into data files, as a batch write's tasks do. */
final case class LanceStreamingWriterFactory(task: WriteTask, incoming: StructType, order: Option[Vector[Int]])
    extends StreamingDataWriterFactory {
  override def createWriter(partitionId: Int, taskId: Long, epochId: Long): DataWriter[InternalRow] =
    new DataWriter[InternalRow] {
      private val writer = new LanceDataWriter(task)
      private val project: Option[UnsafeProjection] = order.map(o => UnsafeProjection.create(
        o.map(i => BoundReference(i, incoming.fields(i).dataType, incoming.fields(i).nullable)).toList))
      override def write(record: InternalRow): Unit = writer.write(project.fold(record)(_.apply(record)))
      override def commit(): WriterCommitMessage = LanceCommitMessage(writer.commit())
      override def abort(): Unit = writer.abort()
      override def close(): Unit = writer.close()
    }
}
