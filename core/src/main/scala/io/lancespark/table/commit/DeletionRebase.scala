package io.lancespark.table.commit

import org.roaringbitmap.RoaringBitmap

import io.lancespark.proto.table.{DataFragment, DeletionFile}
import io.lancespark.table.storage.{DatasetStorage, FragmentDeletion, RowDeletions}

/** What becomes of a prepared deletion when the commit builds on a version
  * other writers changed since the read version. */
sealed trait DeletionRebase {
  /** The deletion to commit (writing a merged file if needed), or None to drop it. */
  def write(storage: DatasetStorage, readVersion: Long): Option[FragmentDeletion]
}

object DeletionRebase {

  /** The fragment is as the writer read it: commit the prepared file. */
  final case class AsPrepared(d: FragmentDeletion) extends DeletionRebase {
    override def write(storage: DatasetStorage, readVersion: Long): Option[FragmentDeletion] = Some(d)
  }

  /** Another delete removed the whole fragment: nothing is left to delete. */
  final case class AlreadyRemoved(d: FragmentDeletion) extends DeletionRebase {
    override def write(storage: DatasetStorage, readVersion: Long): Option[FragmentDeletion] = None
  }

  /** Another writer changed the fragment's deletion file: commit the union. */
  final case class Merged(d: FragmentDeletion, current: Option[DeletionFile], rows: RoaringBitmap) extends DeletionRebase {
    override def write(storage: DatasetStorage, readVersion: Long): Option[FragmentDeletion] =
      Some(FragmentDeletion(d.fragmentId, d.physicalRows, current,
        RowDeletions.store(storage, d.fragmentId, d.physicalRows, rows, readVersion)))
  }

  /** Decides, without writing anything, how each deletion of `change` lands on
    * `current` (the fragments of the version being built). `disjoint` holds
    * the fragments where a concurrent update was involved, with its version:
    * there the rows this change deletes must not overlap the rows deleted
    * since the read version, or the commit is a conflict (an updated row would
    * be resurrected or updated twice). Between pure deletes, overlap is fine. */
  def plan(storage: DatasetStorage, change: RowLevelChange, current: Vector[DataFragment],
      disjoint: Map[Long, Long], readVersion: Long): Seq[DeletionRebase] = {
    val byId = current.map(f => f.getId -> f).toMap
    change.deletions.map { d =>
      byId.get(d.fragmentId) match {
        case None =>
          disjoint.get(d.fragmentId).foreach(v => throw conflict(storage, readVersion, v, d.fragmentId,
            "removed every row of it"))
          AlreadyRemoved(d)
        case Some(frag) =>
          val now = if (frag.hasDeletionFile) Some(frag.getDeletionFile) else None
          if (RowDeletions.sameFile(now, d.base)) AsPrepared(d)
          else {
            val theirs = RowDeletions.baseRows(storage, d.fragmentId, d.physicalRows, now)
            val ours = RowDeletions.rows(storage, d)
            disjoint.get(d.fragmentId).foreach { v =>
              val before = RowDeletions.baseRows(storage, d.fragmentId, d.physicalRows, d.base)
              if (RoaringBitmap.intersects(RoaringBitmap.andNot(theirs, before), RoaringBitmap.andNot(ours, before)))
                throw conflict(storage, readVersion, v, d.fragmentId, "deleted or updated some of the same rows")
            }
            Merged(d, now, RoaringBitmap.or(ours, theirs))
          }
      }
    }
  }

  private def conflict(storage: DatasetStorage, readVersion: Long, version: Long, fragment: Long,
      what: String): CommitConflictException =
    new CommitConflictException(
      s"${storage.uri}: cannot commit a row-level change read at version $readVersion: version $version was " +
        s"committed concurrently and $what in fragment $fragment, which this change also modifies")
}
