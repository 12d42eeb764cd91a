package io.lancespark.table.storage

import io.lancespark.table.model.{FragmentInfo, RowIdSequence}

/** A fragment's stable row ids: inline in the manifest or in a row id file. */
object RowIdFiles {

  /** The fragment's row ids; None when the manifest holds none for it. */
  def load(storage: DatasetStorage, fragment: FragmentInfo): Option[RowIdSequence] =
    if (fragment.proto.hasInlineRowIds)
      Some(RowIdSequence.parse(fragment.proto.getInlineRowIds.toByteArray, s"${storage.uri} fragment ${fragment.id}"))
    else if (fragment.proto.hasExternalRowIds) {
      val ext = fragment.proto.getExternalRowIds
      val path = storage.resolve(ext.getPath, "row id file")
      val src = storage.open(path)
      try {
        val b = src.read(ext.getOffset, ext.getSize)
        val bytes = new Array[Byte](b.remaining()); b.get(bytes)
        Some(RowIdSequence.parse(bytes, path.toString))
      } finally src.close()
    } else None
}
