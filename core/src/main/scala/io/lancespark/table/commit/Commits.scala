package io.lancespark.table.commit

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.roaringbitmap.RoaringBitmap

import io.lancespark.table.model.FragmentInfo
import io.lancespark.table.storage.{DatasetStorage, FragmentDeletion, FragmentState, FragmentWriter, RowDeletions}
import io.lancespark.table.model.WrittenFragment
import io.lancespark.table.storage.Snapshot

/** A change's files are written before its commit and are invisible until a
  * manifest names them: a commit either makes them part of the table or,
  * failing, removes them. The one way writers commit what they wrote. */
object Commits {

  /** Commits `op` read at `readVersion` (None: the dataset is being created);
    * on any failure, removes the data and deletion files `op` wrote and rethrows. */
  def commitOrDiscard(storage: DatasetStorage, readVersion: Option[Long], op: PendingOperation,
      settings: CommitSettings): Snapshot =
    try Committer.commit(storage, readVersion, op, settings)
    catch {
      case e: Throwable =>
        discard(storage, op)
        throw e
    }

  /** Removes the files `op` wrote and no manifest names: its new data files and
    * the deletion files of a row-level change (never the bases they merged). Best effort. */
  def discard(storage: DatasetStorage, op: PendingOperation): Unit = {
    discardFiles(storage, op.fragments)
    op match {
      case RowLevelChange(deletions, _, _) => deletions.foreach(RowDeletions.discard(storage, _))
      case _ => ()
    }
  }

  /** Removes data files written and never committed. Best effort. */
  def discardFiles(storage: DatasetStorage, files: Seq[WrittenFragment]): Unit =
    files.foreach(f => FragmentWriter.delete(storage, f.path))

  /** Removes the data files of a failed write whose names start with `prefix`,
    * including those of tasks whose results never arrived. */
  def sweep(storage: DatasetStorage, prefix: String): Unit = FragmentWriter.sweep(storage, prefix)
}

/** The version a row-level change (DELETE / UPDATE / MERGE) read, as its tasks
  * need it: each fragment's rows and deletion file. Built on the driver,
  * shipped to the tasks. */
final case class RowLevelRead(uri: String, readVersion: Long, fragments: Map[Long, FragmentState])

object RowLevelRead {
  def apply(snapshot: Snapshot): RowLevelRead =
    RowLevelRead(snapshot.storage.uri, snapshot.version, snapshot.fragments.map(f => f.id -> FragmentState(f)).toMap)
}

/** What one task of a row-level change hands the driver: the deletion files it
  * prepared and the data files it wrote, none yet visible. For the change
  * feed (a MERGE's [[io.lancespark.table.stream.ChangeRecord]]): the paths of
  * those files that hold inserted (not updated) rows, and the rows deleted
  * by a DELETE action (not updated), by fragment id. */
final case class RowLevelPart(deletions: Seq[FragmentDeletion], files: Seq[WrittenFragment],
    insertFiles: Seq[String] = Nil, deletedOnly: Map[Long, RoaringBitmap] = Map.empty)

/** One task's deleted rows: collected by row address (fragment id in the high
  * 32 bits, offset in the low), then `prepare` writes each touched fragment's
  * new deletion file (merged with the one it had at the read version).
  * `storage` is opened only when a file is written or removed. */
final class TaskDeletions(read: RowLevelRead, storage: () => DatasetStorage) {
  private val deleted = mutable.Map.empty[Long, RoaringBitmap]
  private val written = mutable.ArrayBuffer.empty[FragmentDeletion]
  private lazy val store: DatasetStorage = storage()

  def delete(rowAddr: Long): Unit =
    deleted.getOrElseUpdate(rowAddr >>> 32, new RoaringBitmap()).add((rowAddr & 0xffffffffL).toInt)

  /** Writes the deletion files; with `files`, the task's part of the change. */
  def prepare(files: => Seq[WrittenFragment]): RowLevelPart = {
    deleted.toSeq.sortBy(_._1).foreach { case (frag, offsets) =>
      val state = read.fragments.getOrElse(frag, throw new IllegalStateException(
        s"${read.uri}: row address names fragment $frag, which version ${read.readVersion} does not have"))
      written += RowDeletions.prepare(store, frag, state.physicalRows, state.deletion, offsets, read.readVersion)
    }
    RowLevelPart(written.toSeq, files)
  }

  /** Removes the deletion files `prepare` wrote (a failed or cancelled task). */
  def discard(): Unit = if (written.nonEmpty) written.foreach(RowDeletions.discard(store, _))
}

/** The driver's side of a row-level change: one commit of what its tasks prepared. */
object RowLevelWrites {

  /** Commits the tasks' `parts` as one Delete or Update read at `readVersion`
    * (None when nothing changed: no new version). A fragment whose deletions
    * came from several tasks gets their files combined first. On any failure
    * every file the parts name is removed. */
  def commitOrDiscard(storage: DatasetStorage, readVersion: Long, parts: Seq[RowLevelPart], predicate: String,
      settings: CommitSettings): Option[Snapshot] = {
    val files = parts.flatMap(_.files)
    val deletions =
      try parts.flatMap(_.deletions).groupBy(_.fragmentId).values.map(_.reduce((a, b) =>
        RowDeletions.combine(storage, a, b, readVersion))).toSeq.sortBy(_.fragmentId)
      catch {
        case e: Throwable =>
          discard(storage, parts)
          throw e
      }
    if (deletions.isEmpty && files.isEmpty) None
    else {
      // a MERGE records which rows it inserted and deleted (the rest it updated), for the change feed
      val recorded = if (!predicate.equalsIgnoreCase("MERGE")) settings else {
        val deletedOnly = parts.flatMap(_.deletedOnly).groupBy(_._1).map { case (id, bms) =>
          id -> RoaringBitmap.or(bms.map(_._2).iterator.asJava)
        }
        val record = io.lancespark.table.stream.ChangeRecord(predicate.toUpperCase(java.util.Locale.ROOT),
          parts.flatMap(_.insertFiles).toSet, deletedOnly)
        settings.copy(transactionProperties = settings.transactionProperties ++ record.properties)
      }
      Some(Commits.commitOrDiscard(storage, Some(readVersion), RowLevelChange(deletions, files, predicate), recorded))
    }
  }

  /** Drops whole fragments of `snapshot` (every row deleted) without writing a file. */
  def dropFragments(snapshot: Snapshot, drop: Seq[FragmentInfo], predicate: String,
      settings: CommitSettings): Snapshot = {
    val deletions = drop.map(f => FragmentDeletion(f.id, f.physicalRows, f.deletion, None))
    Commits.commitOrDiscard(snapshot.storage, Some(snapshot.version), RowLevelChange(deletions, Nil, predicate), settings)
  }

  /** Removes every file the parts name (an aborted change). Best effort. */
  def discard(storage: DatasetStorage, parts: Seq[RowLevelPart]): Unit = {
    Commits.discardFiles(storage, parts.flatMap(_.files))
    parts.flatMap(_.deletions).foreach(RowDeletions.discard(storage, _))
  }
}
