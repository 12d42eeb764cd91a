package io.lancespark.table

import scala.util.Random

import org.roaringbitmap.RoaringBitmap

import io.lancespark.proto.table.{DataFragment, DeletionFile}

/** Deletion files for row-level changes. */
object RowDeletions {

  /** Above this many deleted rows a fragment's deletion file is a roaring
    * bitmap (.bin), else an Arrow array (.arrow): the reference's threshold. */
  val BitmapThreshold: Int = 5000

  /** New deletion files for the fragments in `deleted` (merged with their
    * current ones): (updated fragments by id, ids of fragments now fully deleted).
    * Fragments no longer in `current` (removed concurrently by a delete) are skipped. */
  def applyDeletions(storage: DatasetStorage, current: Vector[DataFragment], deleted: Map[Long, RoaringBitmap],
      readVersion: Long): (Map[Long, DataFragment], Set[Long]) = {
    val byId = current.map(f => f.getId -> f).toMap
    val results = deleted.toSeq.flatMap { case (id, offsets) =>
      byId.get(id).map { frag =>
        val merged = offsets.clone()
        if (frag.hasDeletionFile)
          merged.or(DeletionVector.read(storage, id, frag.getDeletionFile, frag.getPhysicalRows))
        val last = if (merged.isEmpty) -1L else merged.last().toLong & 0xffffffffL
        if (last >= frag.getPhysicalRows)
          throw new IllegalStateException(s"${storage.uri}: row offset $last is outside fragment $id")
        if (merged.getLongCardinality == frag.getPhysicalRows) Left(id)
        else Right(id -> frag.toBuilder.setDeletionFile(write(storage, id, readVersion, merged)).build())
      }
    }
    (results.collect { case Right(kv) => kv }.toMap, results.collect { case Left(id) => id }.toSet)
  }

  /** Writes `_deletions/{fragment}-{readVersion}-{random}.{arrow|bin}`. */
  def write(storage: DatasetStorage, fragmentId: Long, readVersion: Long, rows: RoaringBitmap): DeletionFile = {
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
