package io.lancespark.table.stream

import java.time.Instant

import scala.jdk.CollectionConverters._

import org.roaringbitmap.RoaringBitmap

import io.lancespark.proto.table.Transaction.OperationCase
import io.lancespark.schema.LanceFormatException
import io.lancespark.table.commit.{CommittedTransactions, ConflictChecker}
import io.lancespark.table.maintenance.History
import io.lancespark.table.model.FragmentInfo
import io.lancespark.table.storage.{Dataset, DatasetStorage, DeletionVector, RowIdFiles, Snapshot, VersionLookup}

/** A row-level change, as Delta's change data feed names it (`_change_type`). */
sealed abstract class ChangeType(val name: String)
object ChangeType {
  case object Insert extends ChangeType("insert")
  case object Delete extends ChangeType("delete")
  case object UpdatePreimage extends ChangeType("update_preimage")
  case object UpdatePostimage extends ChangeType("update_postimage")
  val all: Seq[ChangeType] = Seq(Insert, Delete, UpdatePreimage, UpdatePostimage)
}

/** Rows of one fragment as version `readVersion` has them (`fragment` is its
  * entry in that version, deletion file included: the reader skips the rows
  * deleted there), physical row ranges [from, until), all of one change type. */
final case class ChangedRows(readVersion: Long, fragment: FragmentInfo, ranges: Vector[(Long, Long)],
    changeType: ChangeType)

/** The row changes of one version: its commit time and what it did. */
final case class CommitChanges(version: Long, timestamp: Option[Instant], operation: String, rows: Vector[ChangedRows])

/** The change data feed of a dataset: per version v, the rows v inserted,
  * deleted or updated, found by comparing v's fragments with v-1's:
  *  - new fragments: their rows were inserted (or are updated rows);
  *  - fragments gone, or rows newly deleted (deletion files): those rows, as
  *    v-1 has them, were deleted (or are the rows before an update);
  *  - rows deleted in v-1 but not in v (a restore): inserted.
  * An Update transaction (UPDATE, MERGE) tells deleted rows from updated ones
  * by the [[ChangeRecord]] lance-spark writes with it; without one, by stable
  * row ids kept across the update, else (other writers) as an UPDATE when as
  * many rows were removed as added, else as deletes and inserts. A compaction
  * (Rewrite) changes no row: nothing. */
final class ChangeFeed(val storage: DatasetStorage) {
  private val transactions = new CommittedTransactions(storage)
  private lazy val latestSeen: VersionLookup.Latest =
    Dataset.latest(storage).getOrElse(throw new LanceFormatException(s"${storage.uri}: not a Lance dataset"))

  def latest: Long = latestSeen.version

  /** The latest version now (a stream asks again at every trigger). */
  def latestNow: Option[Long] = Dataset.latest(storage).map(_.version)

  /** Whether version `v`'s manifest still exists (not removed by a cleanup). */
  def exists(v: Long): Boolean = VersionLookup.namingOf(storage, v).isDefined

  /** The oldest version still readable. */
  def earliest: Option[Long] = History.list(storage).map(_.version).sorted.headOption

  /** Version `v`'s rows, all of them, as inserts: a stream's first snapshot. */
  def snapshotOf(v: Long): CommitChanges = {
    val s = open(v, "the stream's first snapshot")
    CommitChanges(v, s.timestamp, "snapshot",
      s.fragments.filter(_.numRows > 0).sortBy(_.id).map(f => all(v, f, ChangeType.Insert)))
  }

  private def missing(v: Long, why: String): LanceFormatException =
    new LanceFormatException(s"${storage.uri}: version $v, which the change feed needs ($why), " +
      "no longer exists (removed by a cleanup/vacuum of old versions); read the changes of later versions only")

  private def open(v: Long, why: String): Snapshot =
    if (!exists(v)) throw missing(v, why) else Dataset.open(storage, Some(v))

  /** The versions of [start, end] (end: the latest), each with its changes.
    * Checks the range first; errors name the options. */
  def between(start: Long, end: Option[Long]): Vector[CommitChanges] = {
    val (from, to) = ChangeFeed.checkRange(storage.uri, start, end, latest)
    (from to to).iterator.map(of).toVector
  }

  /** The first version committed at or after `t`. */
  def firstAtOrAfter(t: Instant): Option[Long] = History.firstAtOrAfter(storage, t)

  /** The last version committed at or before `t`. */
  def lastAtOrBefore(t: Instant): Option[Long] = History.lastAtOrBefore(storage, t)

  /** What version `v` changed. */
  def of(v: Long): CommitChanges = {
    val cur = open(v, s"its changes")
    val txn = transactions(cur.naming, v).flatten
    val op = txn.map(_.getOperationCase)
    val kind = op.map(ConflictChecker.name).getOrElse("unknown operation")
    def done(rows: Vector[ChangedRows]): CommitChanges =
      CommitChanges(v, cur.timestamp, kind, rows.filter(_.ranges.nonEmpty))
    if (op.contains(OperationCase.REWRITE)) done(Vector.empty)  // a compaction: the same rows
    else if (v <= 1) done(cur.fragments.sortBy(_.id).map(f => all(v, f, ChangeType.Insert)))
    else if (!exists(v - 1)) {
      if (op.contains(OperationCase.APPEND)) {
        // the transaction names the appended fragments' files (their ids may not be assigned there yet)
        val files = txn.toSeq.flatMap(_.getAppend.getFragmentsList.asScala.flatMap(_.getFilesList.asScala.map(_.getPath)))
          .toSet
        done(cur.fragments.filter(f => f.files.exists(d => files.contains(d.path))).sortBy(_.id)
          .map(f => all(v, f, ChangeType.Insert)))
      } else throw missing(v - 1, s"to tell what version $v ($kind) changed")
    } else {
      val prev = Dataset.open(storage, Some(v - 1))
      val props = txn.map(_.getTransactionPropertiesMap.asScala.toMap).getOrElse(Map.empty[String, String])
      done(diff(prev, cur, op.contains(OperationCase.UPDATE), props))
    }
  }

  private def all(version: Long, f: FragmentInfo, t: ChangeType): ChangedRows =
    ChangedRows(version, f, Vector(0L -> f.physicalRows), t)

  private def deleted(f: FragmentInfo): RoaringBitmap =
    f.deletion.map(d => DeletionVector.read(storage, f.id, d, f.physicalRows)).getOrElse(new RoaringBitmap())

  private def live(f: FragmentInfo): RoaringBitmap = {
    val bm = new RoaringBitmap()
    bm.add(0L, f.physicalRows)
    bm.andNot(deleted(f))
    bm
  }

  /** Rows removed by `cur` from `prev` (each with its fragment in `prev`),
    * rows `cur` added (new fragments), rows `cur` no longer deletes. */
  private def diff(prev: Snapshot, cur: Snapshot, update: Boolean, props: Map[String, String]): Vector[ChangedRows] = {
    val before = prev.fragments.map(f => f.id -> f).toMap
    val after = cur.fragments.map(f => f.id -> f).toMap
    val added = cur.fragments.filterNot(f => before.contains(f.id)).sortBy(_.id)
    val gone = prev.fragments.filterNot(f => after.contains(f.id)).sortBy(_.id)
    val modified = cur.fragments.filter(f => before.get(f.id).exists(_.deletion != f.deletion)).sortBy(_.id)
    // removed rows: (fragment in prev, its rows removed; None = all its live rows)
    val removed: Vector[(FragmentInfo, Option[RoaringBitmap])] = gone.map(f => f -> None) ++ modified.map { f =>
      val p = before(f.id)
      val now = deleted(f)
      now.andNot(deleted(p))
      p -> Some(now)
    }
    val restored: Vector[ChangedRows] = modified.map { f =>
      val back = deleted(before(f.id))
      back.andNot(deleted(f))
      ChangedRows(cur.version, f, ChangeFeed.ranges(back), ChangeType.Insert)
    }
    def removedAs(t: ChangeType) = removed.map {
      case (f, None) => all(prev.version, f, t)
      case (f, Some(bm)) => ChangedRows(prev.version, f, ChangeFeed.ranges(bm), t)
    }
    def rowsOf(f: FragmentInfo, bm: Option[RoaringBitmap]): RoaringBitmap = bm.getOrElse(live(f))
    if (!update) removedAs(ChangeType.Delete) ++ added.map(f => all(cur.version, f, ChangeType.Insert)) ++ restored
    else ChangeRecord.of(props, s"${storage.uri} (version ${cur.version})") match {
      case Some(rec) if rec.command.equalsIgnoreCase("MERGE") =>
        val out = removed.flatMap { case (f, bm) =>
          val rows = rowsOf(f, bm)
          val del = rec.deletedRows.get(f.id).map(d => RoaringBitmap.and(rows, d)).getOrElse(new RoaringBitmap())
          val upd = RoaringBitmap.andNot(rows, del)
          Vector(ChangedRows(prev.version, f, ChangeFeed.ranges(del), ChangeType.Delete),
            ChangedRows(prev.version, f, ChangeFeed.ranges(upd), ChangeType.UpdatePreimage))
        } ++ added.map { f =>
          all(cur.version, f, if (f.files.exists(d => rec.isInsertFile(d.path))) ChangeType.Insert
            else ChangeType.UpdatePostimage)
        }
        out ++ restored
      case Some(_) =>  // UPDATE: every removed row was updated
        removedAs(ChangeType.UpdatePreimage) ++ added.map(f => all(cur.version, f, ChangeType.UpdatePostimage)) ++ restored
      case None =>
        byRowIds(prev, cur, removed.map { case (f, bm) => f -> rowsOf(f, bm) }, added).getOrElse {
          val removedRows = removed.map { case (f, bm) => bm.fold(f.numRows)(_.getLongCardinality) }.sum
          val addedRows = added.map(_.numRows).sum
          if (removedRows == addedRows)
            removedAs(ChangeType.UpdatePreimage) ++ added.map(f => all(cur.version, f, ChangeType.UpdatePostimage))
          else removedAs(ChangeType.Delete) ++ added.map(f => all(cur.version, f, ChangeType.Insert))
        } ++ restored
    }
  }

  /** With stable row ids that the update kept (some new row carries the id of
    * a removed one): a removed row whose id is in a new fragment was updated,
    * else deleted; a new row whose id was removed is its update, else an insert.
    * None without stable row ids, or when no id was kept. */
  private def byRowIds(prev: Snapshot, cur: Snapshot, removed: Vector[(FragmentInfo, RoaringBitmap)],
      added: Vector[FragmentInfo]): Option[Vector[ChangedRows]] =
    if (!prev.hasStableRowIds || !cur.hasStableRowIds) None
    else {
      def ids(f: FragmentInfo): Option[Array[Long]] = RowIdFiles.load(storage, f).map(_.slice(0, f.physicalRows))
      val removedIds = removed.map { case (f, rows) => (f, rows, ids(f)) }
      val addedIds = added.map(f => (f, live(f), ids(f)))
      if ((removedIds ++ addedIds).exists(_._3.isEmpty)) None
      else {
        def idSet(xs: Vector[(FragmentInfo, RoaringBitmap, Option[Array[Long]])]): Set[Long] =
          xs.flatMap { case (_, rows, Some(a)) => rows.toArray.iterator.map(o => a(o)); case _ => Iterator.empty }.toSet
        val before = idSet(removedIds)
        val now = idSet(addedIds)
        if (!before.exists(now.contains)) None
        else {
          def split(version: Long, xs: Vector[(FragmentInfo, RoaringBitmap, Option[Array[Long]])], other: Set[Long],
              kept: ChangeType, alone: ChangeType): Vector[ChangedRows] = xs.flatMap { case (f, rows, a) =>
            val in = new RoaringBitmap()
            val out = new RoaringBitmap()
            val it = rows.getIntIterator
            while (it.hasNext) { val o = it.next(); if (other.contains(a.get(o))) in.add(o) else out.add(o) }
            Vector(ChangedRows(version, f, ChangeFeed.ranges(in), kept), ChangedRows(version, f, ChangeFeed.ranges(out), alone))
          }
          Some(split(prev.version, removedIds, now, ChangeType.UpdatePreimage, ChangeType.Delete) ++
            split(cur.version, addedIds, before, ChangeType.UpdatePostimage, ChangeType.Insert))
        }
      }
    }
}

object ChangeFeed {
  /** [start, end] checked against the dataset's `latest` version; versions
    * start at 1 (a startingVersion of 0 is version 1, Delta's first). */
  def checkRange(uri: String, start: Long, end: Option[Long], latest: Long): (Long, Long) = {
    if (start < 0) throw new IllegalArgumentException(s"$uri: startingVersion must not be negative, got $start")
    end.foreach { e =>
      if (e < start) throw new IllegalArgumentException(
        s"$uri: the change feed's startingVersion $start is after its endingVersion $e")
      if (e > latest) throw new IllegalArgumentException(
        s"$uri: the change feed's endingVersion $e is after the latest version $latest")
    }
    if (start > latest) throw new IllegalArgumentException(
      s"$uri: the change feed's startingVersion $start is after the latest version $latest")
    (math.max(start, 1L), end.getOrElse(latest))
  }

  /** The runs of consecutive offsets of `rows`, as [from, until) ranges. */
  def ranges(rows: RoaringBitmap): Vector[(Long, Long)] = {
    val out = Vector.newBuilder[(Long, Long)]
    val it = rows.getIntIterator
    var from = -1L
    var until = -1L
    while (it.hasNext) {
      val o = it.next().toLong & 0xffffffffL
      if (o == until) until += 1
      else {
        if (from >= 0) out += (from -> until)
        from = o; until = o + 1
      }
    }
    if (from >= 0) out += (from -> until)
    out.result()
  }
}
