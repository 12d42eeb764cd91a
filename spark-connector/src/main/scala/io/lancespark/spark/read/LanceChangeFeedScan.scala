package io.lancespark.spark.read

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.read.{Batch, InputPartition, PartitionReader, PartitionReaderFactory, Scan, ScanBuilder,
  Statistics, SupportsReportStatistics}
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector
import org.apache.spark.sql.types.{LongType, StringType, StructField, StructType, TimestampType}
import org.apache.spark.sql.vectorized.{ColumnVector, ColumnarBatch}
import org.apache.spark.unsafe.types.UTF8String

import io.lancespark.schema.LanceFormatException
import io.lancespark.spark.ConfSource
import io.lancespark.spark.options.{ChangeFeedBound, ChangeFeedOptions, ReadConf}
import io.lancespark.table.plan.{FragmentPiece, PartitionPlanner}
import io.lancespark.table.storage.Snapshot
import io.lancespark.table.stream.{ChangeFeed, CommitChanges}

/** The columns a change feed read adds to the table's, as Delta names them. */
object ChangeFeedColumns {
  val ChangeType = "_change_type"
  val CommitVersion = "_commit_version"
  val CommitTimestamp = "_commit_timestamp"

  val fields: Seq[StructField] = Seq(
    StructField(ChangeType, StringType, nullable = false),
    StructField(CommitVersion, LongType, nullable = false),
    StructField(CommitTimestamp, TimestampType, nullable = true))

  /** `data` plus the change columns; a table column of the same name is refused. */
  def schema(data: StructType, uri: String): StructType = {
    fields.foreach { f =>
      if (data.fieldNames.contains(f.name)) throw new IllegalArgumentException(
        s"$uri: the table has a column named ${f.name}, which a change feed read adds")
    }
    StructType(data.fields ++ fields)
  }
}

/** `option("readChangeFeed", "true")`: the row changes of a range of versions
  * (see [[ChangeFeed]]), as the table's columns (of `snapshot`, the version
  * the read opened) plus `_change_type`, `_commit_version` and
  * `_commit_timestamp`. The rows are read with the batch scan's fragment
  * readers, restricted to the changed rows of each version read.
  *
  * `options`: the read's options. A batch read takes its range from them
  * (startingVersion/startingTimestamp, endingVersion/endingTimestamp); a
  * stream (`spark.readStream`) its start and admission control (see
  * [[io.lancespark.spark.streaming.LanceChangeFeedStream]]). */
final class LanceChangeFeedScanBuilder(snapshot: Snapshot, dataSchema: StructType, options: Map[String, String],
    read: ReadConf) extends ScanBuilder {
  override def build(): Scan = new LanceChangeFeedScan(snapshot, dataSchema, options, read)
}

final class LanceChangeFeedScan(snapshot: Snapshot, dataSchema: StructType, options: Map[String, String],
    read: ReadConf) extends Scan with Batch with SupportsReportStatistics {

  private val uri = snapshot.storage.uri

  /** The versions a batch read returns, each with its changes (checked and computed on first use: a stream's
    * options need not name a start). */
  private lazy val commits: Vector[CommitChanges] = {
    val conf = ChangeFeedOptions.parse(options).getOrElse(
      throw new IllegalStateException(s"$uri: not a change feed read"))
    val feed = new ChangeFeed(snapshot.storage)
    val start = conf.start match {
      case ChangeFeedBound.AtVersion(v) => v
      case ChangeFeedBound.AtTime(t) => feed.firstAtOrAfter(t).getOrElse(throw new IllegalArgumentException(
        s"$uri: the change feed's startingTimestamp $t is after the last commit (version ${feed.latest})"))
    }
    val end = conf.end.map {
      case ChangeFeedBound.AtVersion(v) => v
      case ChangeFeedBound.AtTime(t) => feed.lastAtOrBefore(t).getOrElse(throw new IllegalArgumentException(
        s"$uri: the change feed's endingTimestamp $t is before the first commit"))
    }
    feed.between(start, end)
  }

  override def readSchema(): StructType = ChangeFeedColumns.schema(dataSchema, uri)

  override def description(): String = scala.util.Try(commits).toOption.fold(s"LanceChangeFeed($uri)") { cs =>
    s"LanceChangeFeed($uri, versions=${cs.headOption.map(_.version).getOrElse("-")}.." +
      s"${cs.lastOption.map(_.version).getOrElse("-")}, parts=${cs.map(_.rows.size).sum})"
  }

  override def toBatch: Batch = this

  /** The changed rows of the versions read, each as wide as Spark's default sizes of the columns (so that a
    * feed of a few changes joined to a table is the broadcast side, as Spark plans a small table); nothing
    * known when the range is not (a stream that names no start, a start after the last commit): Spark then
    * takes its default size. A stream's micro-batches each read a part of this range. */
  override def estimateStatistics(): Statistics = scala.util.Try(commits).toOption.fold(ChangeFeedPlanning.unknown) { cs =>
    val rows = cs.iterator.flatMap(_.rows).flatMap(_.ranges).map { case (from, until) => until - from }.sum
    LanceScan.statistics(rows, math.ceil(rows * LanceScan.rowSize(readSchema())).toLong)
  }

  override def supportedCustomMetrics(): Array[org.apache.spark.sql.connector.metric.CustomMetric] = ScanMetrics.all

  /** `spark.readStream.format("lance").option("readChangeFeed", "true")`: the changes of each new version. */
  override def toMicroBatchStream(checkpointLocation: String): org.apache.spark.sql.connector.read.streaming.MicroBatchStream =
    new io.lancespark.spark.streaming.LanceChangeFeedStream(snapshot, dataSchema, read,
      io.lancespark.spark.streaming.LanceChangeFeedStream.conf(options, uri))

  override def planInputPartitions(): Array[InputPartition] =
    ChangeFeedPlanning.partitions(commits, read.splitRows.getOrElse(LanceScan.defaultSplit(snapshot, dataSchema)))

  override def createReaderFactory(): PartitionReaderFactory = ChangeFeedPlanning.readerFactory(snapshot, dataSchema, read)
}

/** The input partitions and readers of change feed reads, batch and streaming. */
object ChangeFeedPlanning {
  /** Statistics of nothing known. */
  val unknown: Statistics = new Statistics {
    override def sizeInBytes(): java.util.OptionalLong = java.util.OptionalLong.empty()
    override def numRows(): java.util.OptionalLong = java.util.OptionalLong.empty()
  }

  /** Each version's changed rows, fragment by fragment, cut into partitions of at most `split` rows. */
  def partitions(commits: Vector[CommitChanges], split: Long): Array[InputPartition] =
    commits.flatMap { c =>
      val micros = c.timestamp.map(t => t.getEpochSecond * 1000000L + t.getNano / 1000L)
      c.rows.flatMap { r =>
        PartitionPlanner.chunks(r.ranges, split).map { ranges =>
          ChangeFeedPartition(LanceInputPartition(Vector(FragmentPiece(r.fragment, ranges, first = true))),
            r.changeType.name, c.version, micros, r.readVersion): InputPartition
        }
      }
    }.toArray

  /** Readers of the table's columns `dataSchema` (as `snapshot` names them) plus the change columns. */
  def readerFactory(snapshot: Snapshot, dataSchema: StructType, read: ReadConf): PartitionReaderFactory = {
    val uri = snapshot.storage.uri
    val fields = dataSchema.fields.toSeq.map(f => snapshot.schema.field(f.name).getOrElse(
      throw new LanceFormatException(s"$uri: no column '${f.name}'")))
    ChangeFeedReaderFactory(LanceReaderFactory(uri, snapshot.version, snapshot.schema, fields, dataSchema, Nil,
      dataSchema, snapshot.hasStableRowIds, read, ConfSource.broadcast(SparkSession.active)))
  }
}

/** Changed rows of one fragment, as version `readVersion` has them, with the
  * change columns' values. */
final case class ChangeFeedPartition(rows: LanceInputPartition, changeType: String, commitVersion: Long,
    commitMicros: Option[Long], readVersion: Long) extends InputPartition

final case class ChangeFeedReaderFactory(inner: LanceReaderFactory) extends PartitionReaderFactory {
  override def supportColumnarReads(partition: InputPartition): Boolean = true

  override def createReader(partition: InputPartition): PartitionReader[InternalRow] =
    throw new UnsupportedOperationException("Lance scans are columnar")

  override def createColumnarReader(partition: InputPartition): PartitionReader[ColumnarBatch] = {
    val p = partition.asInstanceOf[ChangeFeedPartition]
    new ChangeFeedReader(new LancePartitionReader(inner.copy(version = p.readVersion), p.rows), p)
  }
}

/** The table columns as the fragment reader reads them, then the change columns (constants). */
final class ChangeFeedReader(rows: LancePartitionReader, p: ChangeFeedPartition) extends PartitionReader[ColumnarBatch] {
  private val changeType = UTF8String.fromString(p.changeType)

  override def next(): Boolean = rows.next()

  override def get(): ColumnarBatch = {
    val b = rows.get()
    val n = b.numRows()
    val kind = new ConstantColumnVector(n, StringType)
    kind.setUtf8String(changeType)
    val version = new ConstantColumnVector(n, LongType)
    version.setLong(p.commitVersion)
    val time = new ConstantColumnVector(n, TimestampType)
    p.commitMicros match {
      case Some(us) => time.setLong(us)
      case None => time.setNull()
    }
    val cols: Array[ColumnVector] = (0 until b.numCols()).map(b.column).toArray ++ Array[ColumnVector](kind, version, time)
    new ColumnarBatch(cols, n)
  }

  override def currentMetricsValues(): Array[org.apache.spark.sql.connector.metric.CustomTaskMetric] =
    rows.currentMetricsValues()

  override def close(): Unit = rows.close()
}
