package io.lancespark.spark.streaming

import org.apache.spark.sql.connector.read.{InputPartition, PartitionReaderFactory}
import org.apache.spark.sql.connector.read.streaming.{Offset, ReadAllAvailable, ReadLimit}
import org.apache.spark.sql.types.StructType

import io.lancespark.schema.LanceFormatException
import io.lancespark.spark.options.{ChangeFeedOptions, OptionSource, ReadConf, StreamConf, StreamOptions, StreamStart}
import io.lancespark.spark.read.{ChangeFeedPlanning, LanceScan}
import io.lancespark.table.storage.Snapshot
import io.lancespark.table.stream.{ChangeFeed, CommitChanges, VersionAdmission, VersionSize}

/** `spark.readStream.format("lance").option("readChangeFeed", "true")`: each
  * micro-batch the row changes ([[ChangeFeed]]: inserts, deletes, update pre-
  * and post-images; nothing for a compaction) of the versions in its offset
  * range, as the batch change feed read returns them. Offsets are versions
  * ([[LanceStreamOffset]] with index 0: a version is never split); the
  * stream's first offset may be a snapshot (`snapshot` true: the first
  * version's rows, all of them, as inserts, as Delta's streaming change feed
  * starts without startingVersion). Admission control (maxRowsPerTrigger,
  * maxFilesPerTrigger) takes whole versions ([[VersionAdmission]]). */
final class LanceChangeFeedStream(start: Snapshot, dataSchema: StructType, read: ReadConf, conf: StreamConf)
    extends VersionStream {

  override protected def streamConf: StreamConf = conf

  private val storage = start.storage
  private val uri = storage.uri
  private val feed = new ChangeFeed(storage)
  /** Trigger.AvailableNow: the latest version when the query started; nothing after it. */
  /** The changes of the last versions planned: admission control and planning read them once. */
  private val cache = scala.collection.mutable.LinkedHashMap.empty[(Long, Boolean), CommitChanges]

  override protected def latestVersion: Long = feed.latestNow.getOrElse(start.version)

  private def startOption: String = conf.start match {
    case StreamStart.AtVersion(v) => s"startingVersion $v"
    case StreamStart.AtTime(t) => s"startingTimestamp $t"
    case StreamStart.Latest => "startingVersion latest"
    case StreamStart.Snapshot => "no startingVersion (the snapshot of the version the stream started at)"
  }

  /** What version `v` changed (its whole content when `snapshot`). */
  private def changes(v: Long, snapshot: Boolean): CommitChanges = cache.synchronized {
    cache.getOrElse(v -> snapshot, {
      val c = try if (snapshot) feed.snapshotOf(v) else feed.of(v) catch {
        case e: LanceFormatException => throw new LanceFormatException(s"$uri: the streaming change feed cannot " +
          s"read the changes of version $v, where the stream is (its $startOption, or its checkpoint): " +
          e.getMessage + "; start a new stream (a new checkpoint) with a later startingVersion", e)
      }
      cache.put(v -> snapshot, c)
      if (cache.size > 32) cache.remove(cache.head._1)
      c
    })
  }

  private def size(c: CommitChanges): VersionSize = VersionSize(
    c.rows.map { r =>
      if (r.ranges == Vector(0L -> r.fragment.physicalRows)) r.fragment.numRows else r.ranges.map(x => x._2 - x._1).sum
    }.sum,
    c.rows.map(r => r.readVersion -> r.fragment.id).distinct.size)

  /** A start version given as an option: still readable, else an error naming the option and the version. */
  private def readableStart(v: Long): Long = {
    val first = math.max(v, 1L)
    if (first <= latestVersion && !feed.exists(first)) {
      val oldest = feed.earliest.fold("")(e => s"; the oldest version still readable is $e")
      throw new IllegalArgumentException(s"$uri: the stream's $startOption: version $first no longer exists " +
        s"(removed by a cleanup/vacuum of old versions)$oldest: give a later startingVersion or startingTimestamp")
    }
    first
  }

  override lazy val initialOffset: Offset = conf.start match {
    case StreamStart.Snapshot => LanceStreamOffset(start.version, 0, snapshot = true)
    case StreamStart.Latest => LanceStreamOffset(latestVersion + 1, 0, snapshot = false)
    case StreamStart.AtVersion(v) =>
      val latest = latestVersion
      if (v > latest + 1)
        throw new IllegalArgumentException(s"$uri: the stream's startingVersion $v is after the latest version $latest")
      LanceStreamOffset(readableStart(v), 0, snapshot = false)
    case StreamStart.AtTime(t) =>
      LanceStreamOffset(feed.firstAtOrAfter(t).map(readableStart).getOrElse(latestVersion + 1), 0, snapshot = false)
  }

  override def latestOffset(startOffset: Offset, limit: ReadLimit): Offset = {
    val from = LanceStreamOffset.parse(startOffset.json())
    val last = lastReadable
    val unlimited = limit.isInstanceOf[ReadAllAvailable]
    val end = VersionAdmission.end(from.version, last,
      if (unlimited) None else conf.maxRowsPerTrigger, if (unlimited) None else conf.maxFilesPerTrigger,
      v => size(changes(v, from.snapshot && v == from.version)))
    if (end == from.version) from else LanceStreamOffset(end, 0, snapshot = false)
  }

  override def planInputPartitions(startOffset: Offset, endOffset: Offset): Array[InputPartition] = {
    val from = LanceStreamOffset.parse(startOffset.json())
    val to = LanceStreamOffset.parse(endOffset.json())
    if (to.index != 0 || (to.snapshot && to.version != from.version))
      throw new IllegalStateException(s"$uri: the offset ${to.json()} is not one of a change feed stream's (a " +
        "checkpoint of a stream without readChangeFeed? a stream's checkpoint belongs to one kind of read)")
    val commits = (from.version until to.version).iterator
      .map(v => changes(v, from.snapshot && v == from.version)).toVector
    ChangeFeedPlanning.partitions(commits, read.splitRows.getOrElse(LanceScan.defaultSplit(start, dataSchema)))
  }

  override def createReaderFactory(): PartitionReaderFactory = ChangeFeedPlanning.readerFactory(start, dataSchema, read)

  override def commit(end: Offset): Unit = {
    val done = LanceStreamOffset.parse(end.json()).version
    cache.synchronized { cache.keys.filter(_._1 < done).toVector.foreach(cache.remove) }
  }

  override def stop(): Unit = ()

  override def toString: String = s"LanceChangeFeedStream($uri)"
}

object LanceChangeFeedStream {
  /** A change feed stream's settings from the read's options: the stream options (start, admission control);
    * a batch read's end options and skipChangeCommits do not apply. */
  def conf(options: Map[String, String], uri: String): StreamConf = {
    val own = new OptionSource(options, _ => None, Map.empty, ChangeFeedOptions.Extra ++ StreamOptions.All,
      "change feed stream")
    Seq(ChangeFeedOptions.EndingVersion, ChangeFeedOptions.EndingTimestamp).foreach { o =>
      if (own.get(o).isDefined) throw new IllegalArgumentException(s"$uri: the option ${o.name} is a batch change " +
        "feed read's; a stream (readStream with readChangeFeed) reads every version from its start on")
    }
    if (own.get(StreamOptions.SkipChangeCommits).isDefined) throw new IllegalArgumentException(s"$uri: the option " +
      "skipChangeCommits is for streams of appended rows; a change feed stream (readChangeFeed) delivers the " +
      "changes of every version (deletes, updates, merges)")
    StreamOptions.conf(options)
  }
}
