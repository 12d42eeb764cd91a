package io.lancespark.table.index.vector

import io.lancespark.proto.table.IndexMetadata
import io.lancespark.schema.LanceField
import io.lancespark.table.storage.Indices
import io.lancespark.table.storage.Snapshot

/** A vector index the manifest lists on a column (what the manifest says of
  * it; its files under `_indices/<uuid>/` are not read yet). */
final case class VectorIndexEntry(name: String, uuid: String, datasetVersion: Long) {
  def describe: String = s"uuid $uuid, built at version $datasetVersion"
}

object VectorIndexes {
  /** The indices of `snapshot` on `field` (a vector column: any index on it
    * is a vector index). */
  def on(snapshot: Snapshot, field: LanceField): Seq[VectorIndexEntry] =
    Indices.of(snapshot).filter(_.getFieldsList.contains(Integer.valueOf(field.id))).map { ix =>
      VectorIndexEntry(ix.getName, uuid(ix), ix.getDatasetVersion)
    }

  private def uuid(ix: IndexMetadata): String = {
    val b = ix.getUuid.getUuid.toByteArray
    if (b.length != 16) b.map(x => f"${x & 0xff}%02x").mkString
    else {
      val bb = java.nio.ByteBuffer.wrap(b)
      new java.util.UUID(bb.getLong, bb.getLong).toString
    }
  }
}
