package io.lancespark.spark.streaming

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReaderFactory}
import org.apache.spark.sql.connector.read.streaming.{Offset, ReadAllAvailable, ReadLimit}
import org.apache.spark.sql.types.StructType

import io.lancespark.schema.LanceField
import io.lancespark.spark.ConfSource
import io.lancespark.spark.options.{ReadConf, StreamConf, StreamStart}
import io.lancespark.spark.read.{LanceInputPartition, LanceReaderFactory, LanceScan}
import io.lancespark.table.model.FragmentInfo
import io.lancespark.table.stream.{VersionChange, VersionChanges}
import io.lancespark.table.storage.Snapshot
import io.lancespark.table.plan.PartitionPlanner
import io.lancespark.table.plan.ScanPlanner
import io.lancespark.table.plan.RowRestriction

/** How far a stream has read: every version before `version`, and the first
  * `index` fragments (in id order) of `version`'s units: its appended
  * fragments, or all its fragments when `snapshot` (the stream's first
  * version, read whole). At a version's end the offset is the next version's start. */
final case class LanceStreamOffset(version: Long, index: Int, snapshot: Boolean) extends Offset {
  override def json(): String = s"""{"version":$version,"index":$index,"snapshot":$snapshot}"""
}

object LanceStreamOffset {
  private val Pattern = """\{"version":(\d+),"index":(\d+),"snapshot":(true|false)\}""".r

  def parse(json: String): LanceStreamOffset = json.replaceAll("\\s", "") match {
    case Pattern(v, i, s) => LanceStreamOffset(v.toLong, i.toInt, s.toBoolean)
    case other => throw new IllegalArgumentException(s"not a Lance stream offset: $other")
  }
}

/** `spark.readStream.format("lance")`: micro-batches of the rows each new
  * version appends (the fragments it adds), read with the batch scan's
  * planning and readers restricted to those fragments; offsets are versions
  * (see [[LanceStreamOffset]]). Versions that change no row (compaction,
  * index, configuration) pass; versions that delete, update or replace rows
  * stop the stream unless `skipChangeCommits`. */
final class LanceMicroBatchStream(start: Snapshot, tableSchema: StructType, fields: Seq[LanceField],
    dataSchema: StructType, outputSchema: StructType, read: ReadConf, conf: StreamConf)
    extends VersionStream {

  override protected def streamConf: StreamConf = conf

  private val storage = start.storage
  private val uri = storage.uri
  private val changes = new VersionChanges(storage)
  /** Trigger.AvailableNow: the latest version when the query started; nothing after it. */

  override protected def latestVersion: Long = changes.latest.getOrElse(start.version)

  /** The fragments version `v` contributes, in id order. */
  private def units(v: Long, snapshot: Boolean): Vector[FragmentInfo] =
    if (snapshot) changes.snapshot(v).fragments.sortBy(_.id)
    else changes.of(v) match {
      case VersionChange.Appended(f) => f
      case VersionChange.NoRowChange(_) => Vector.empty
      case VersionChange.Changed(what) =>
        if (conf.skipChangeCommits) Vector.empty
        else throw new IllegalStateException(s"$uri: $what; a stream reads appended rows only. Set the stream " +
          "option skipChangeCommits=true to skip versions that delete, update or replace rows (their rows are " +
          "then not delivered), or restart the stream with startingVersion after this version")
    }

  override lazy val initialOffset: Offset = conf.start match {
    case StreamStart.Snapshot => LanceStreamOffset(start.version, 0, snapshot = true)
    case StreamStart.Latest => LanceStreamOffset(latestVersion + 1, 0, snapshot = false)
    case StreamStart.AtVersion(v) =>
      val latest = latestVersion
      if (v > latest + 1)
        throw new IllegalArgumentException(s"$uri: startingVersion $v is after the latest version $latest")
      LanceStreamOffset(math.max(v, 1L), 0, snapshot = false)
    case StreamStart.AtTime(t) =>
      LanceStreamOffset(changes.firstAtOrAfter(t).getOrElse(latestVersion + 1), 0, snapshot = false)
  }

  override def latestOffset(startOffset: Offset, limit: ReadLimit): Offset = {
    val from = startOffset match {
      case o: LanceStreamOffset => o
      case other => LanceStreamOffset.parse(other.json())
    }
    val end = lastReadable
    val unlimited = limit.isInstanceOf[ReadAllAvailable]
    val maxRows = if (unlimited) None else conf.maxRowsPerTrigger
    val maxFiles = if (unlimited) None else conf.maxFilesPerTrigger
    var rows = 0L
    var files = 0
    def full: Boolean = maxRows.exists(rows >= _) || maxFiles.exists(files >= _)
    var cur = from
    while (cur.version <= end && !full) {
      val u = units(cur.version, cur.snapshot)
      var i = cur.index
      // a batch takes at least one fragment, however large
      while (i < u.size && !(files > 0 && maxRows.exists(rows + u(i).numRows > _)) && !full) {
        rows += u(i).numRows; files += 1; i += 1
      }
      cur = if (i >= u.size) LanceStreamOffset(cur.version + 1, 0, snapshot = false)
        else LanceStreamOffset(cur.version, i, cur.snapshot)
      if (i < u.size) rows = Long.MaxValue // the limit stopped inside this version
    }
    cur
  }

  override def planInputPartitions(startOffset: Offset, endOffset: Offset): Array[InputPartition] = {
    val from = LanceStreamOffset.parse(startOffset.json())
    val to = LanceStreamOffset.parse(endOffset.json())
    val parts = (from.version to math.min(to.version, Long.MaxValue - 1)).iterator.flatMap { v =>
      if (v == to.version && to.index == 0) Iterator.empty
      else {
        val snapshot = v == from.version && from.snapshot
        val u = units(v, snapshot)
        val lo = if (v == from.version) from.index else 0
        val hi = if (v == to.version) math.min(to.index, u.size) else u.size
        val take = u.slice(lo, hi)
        if (take.isEmpty) Iterator.empty else partitions(v, take.map(_.id).toSet).iterator
      }
    }
    parts.map(p => LanceInputPartition(p): InputPartition).toArray
  }

  /** Version `v`'s fragments `ids`, planned as a batch scan of them plans its partitions. */
  private def partitions(v: Long, ids: Set[Long]) = {
    val s = changes.snapshot(v)
    val planner = ScanPlanner(s, None, false, Some(RowRestriction.ofFragments(ids)))
    PartitionPlanner.partitions(planner.plans, read.splitRows.getOrElse(LanceScan.defaultSplit(s, tableSchema)))
  }

  override def createReaderFactory(): PartitionReaderFactory =
    LanceReaderFactory(uri, start.version, start.schema, fields, dataSchema, Nil, outputSchema,
      start.hasStableRowIds, read, ConfSource.broadcast(SparkSession.active))

  override def commit(end: Offset): Unit = ()

  override def stop(): Unit = ()

  override def toString: String = s"LanceStream($uri)"
}
