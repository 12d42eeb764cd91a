package io.lancespark.table.storage

import scala.util.Random

import org.roaringbitmap.RoaringBitmap

import io.lancespark.proto.table.DeletionFile
import io.lancespark.table.model.FragmentInfo

/** One fragment's deletions as a writer prepared them against the version it
  * read: `base` is the deletion file the fragment had then (merged in), and
  * `result` the new deletion file, or None when every row is now deleted and
  * the fragment leaves the manifest. Executors prepare these; the commit uses
  * them as they are unless another writer changed the fragment meanwhile. */
final case class FragmentDeletion(
    fragmentId: Long,
    physicalRows: Long,
    base: Option[DeletionFile],
    result: Option[DeletionFile]) {
  def removesFragment: Boolean = result.isEmpty
}

/** A fragment as a row-level change's scan read it: what a task merges its
  * deletions into. */
final case class FragmentState(physicalRows: Long, deletion: Option[DeletionFile])

object FragmentState {
  def apply(f: FragmentInfo): FragmentState = FragmentState(f.physicalRows, f.deletion)
}

/** Deletion files for row-level changes. */
object RowDeletions {

  /** Above this many deleted rows a fragment's deletion file is a roaring
    * bitmap (.bin), else an Arrow array (.arrow): the reference's threshold. */
  val BitmapThreshold: Int = 5000

  /** Merges `offsets` with the fragment's deletion file `base` and writes the
    * result (nothing is written when every row ends up deleted). */
  def prepare(storage: DatasetStorage, fragmentId: Long, physicalRows: Long, base: Option[DeletionFile],
      offsets: RoaringBitmap, readVersion: Long): FragmentDeletion = {
    val merged = offsets.clone()
    base.foreach(b => merged.or(DeletionVector.read(storage, fragmentId, b, physicalRows)))
    FragmentDeletion(fragmentId, physicalRows, base, store(storage, fragmentId, physicalRows, merged, readVersion))
  }

  /** Every row `d` deletes (its base included). */
  def rows(storage: DatasetStorage, d: FragmentDeletion): RoaringBitmap = d.result match {
    case Some(f) => DeletionVector.read(storage, d.fragmentId, f, d.physicalRows)
    case None => all(d.physicalRows)
  }

  /** One deletion holding the rows of both (prepared from the same base, e.g.
    * by two tasks); the files of `a` and `b` are deleted, being superseded and
    * never committed. */
  def combine(storage: DatasetStorage, a: FragmentDeletion, b: FragmentDeletion, readVersion: Long): FragmentDeletion = {
    require(a.fragmentId == b.fragmentId, s"combining deletions of fragments ${a.fragmentId} and ${b.fragmentId}")
    val merged = rows(storage, a)
    merged.or(rows(storage, b))
    val out = FragmentDeletion(a.fragmentId, a.physicalRows, a.base,
      store(storage, a.fragmentId, a.physicalRows, merged, readVersion))
    discard(storage, a)
    discard(storage, b)
    out
  }

  /** Deletes the file `d` wrote; for files no manifest references. Best effort. */
  def discard(storage: DatasetStorage, d: FragmentDeletion): Unit =
    d.result.foreach { f =>
      try storage.fs.delete(storage.resolve(DeletionVector.relativePath(d.fragmentId, f), "deletion file"), false)
      catch { case _: Exception => () }
    }

  /** Whether two manifest entries name the same deletion file. */
  def sameFile(a: Option[DeletionFile], b: Option[DeletionFile]): Boolean = (a, b) match {
    case (None, None) => true
    case (Some(x), Some(y)) => x.getId == y.getId && x.getReadVersion == y.getReadVersion && x.getFileType == y.getFileType
    case _ => false
  }

  def baseRows(storage: DatasetStorage, fragmentId: Long, physicalRows: Long, base: Option[DeletionFile]): RoaringBitmap =
    base.map(DeletionVector.read(storage, fragmentId, _, physicalRows)).getOrElse(new RoaringBitmap())

  def all(physicalRows: Long): RoaringBitmap = {
    val b = new RoaringBitmap()
    b.add(0L, physicalRows)
    b
  }

  /** The deletion file for `rows`, or None when they are all of the fragment's rows. */
  def store(storage: DatasetStorage, fragmentId: Long, physicalRows: Long, rows: RoaringBitmap,
      readVersion: Long): Option[DeletionFile] = {
    val last = if (rows.isEmpty) -1L else rows.last().toLong & 0xffffffffL
    if (last >= physicalRows)
      throw new IllegalStateException(
        s"${storage.uri}: row offset $last is outside fragment $fragmentId ($physicalRows rows)")
    if (rows.getLongCardinality == physicalRows) None else Some(write(storage, fragmentId, readVersion, rows))
  }

  /** Writes `_deletions/{fragment}-{readVersion}-{random}.{arrow|bin}`. */
  private def write(storage: DatasetStorage, fragmentId: Long, readVersion: Long, rows: RoaringBitmap): DeletionFile = {
    val bitmap = rows.getLongCardinality > BitmapThreshold
    val d = DeletionFile.newBuilder()
      .setFileType(if (bitmap) DeletionFile.DeletionFileType.BITMAP else DeletionFile.DeletionFileType.ARROW_ARRAY)
      .setReadVersion(readVersion)
      .setId(Random.nextLong() & Long.MaxValue)
      .setNumDeletedRows(rows.getLongCardinality)
      .build()
    val path = storage.resolve(DeletionVector.relativePath(fragmentId, d), "deletion file")
    val bytes = if (bitmap) DeletionVector.toRoaringBytes(rows) else DeletionVector.toArrowBytes(rows)
    val out = storage.fs.create(path, false)
    try out.write(bytes) finally out.close()
    d
  }
}
