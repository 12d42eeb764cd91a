package io.lancespark.table.scan

import io.lancespark.format.v21.V21FileReader
import io.lancespark.schema.LanceField

/** Blob columns (docs/blobs.md) in a scan's projection. */
object BlobColumns {

  /** Rows per batch of a scan that reads blob values, unless a batch size is
    * given: a batch's values share one buffer (at most 2 GiB), so 16 values
    * of up to 100 MiB fit. */
  val BatchRows: Int = 16

  /** The field metadata key (value `true`) of a blob v1 column (file versions 2.0, 2.1). */
  val MetadataKey: String = "lance-encoding:blob"

  /** A blob column: blob v1 (`lance-encoding:blob`) or v2 (`lance.blob.v2`). */
  def isBlob(f: LanceField): Boolean =
    f.metadata.get(MetadataKey).contains("true") || V21FileReader.isBlobV2(f)

  /** A blob column of file version 2.2 (`lance.blob.v2`: a struct of `data` and `uri`). */
  def isBlobV2(f: LanceField): Boolean = V21FileReader.isBlobV2(f)

  /** Whether reading `fields` reads blob values' bytes (a 2.2 blob column
    * projected to its position, size or uri reads none). */
  def readsBytes(fields: Seq[LanceField]): Boolean = fields.exists { f =>
    if (V21FileReader.isBlobV2(f)) f.children.exists(_.name == "data")
    else isBlob(f) || readsBytes(f.children)
  }
}
