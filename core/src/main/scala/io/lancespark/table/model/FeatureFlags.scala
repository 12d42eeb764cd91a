package io.lancespark.table.model

import io.lancespark.schema.LanceFormatException

/** Manifest feature flags (reader_feature_flags / writer_feature_flags). */
object FeatureFlags {
  val DeletionFiles: Long = 1L
  val StableRowIds: Long = 2L
  val UseV2Format: Long = 4L  // deprecated, harmless
  val TableConfig: Long = 8L

  val KnownToReader: Long = DeletionFiles | StableRowIds | UseV2Format | TableConfig

  /** Refuses a version that needs a feature this reader does not know. */
  def checkReadable(flags: Long, datasetUri: String, version: Long): Unit = {
    val unknown = flags & ~KnownToReader
    if (unknown != 0)
      throw new LanceFormatException(
        s"$datasetUri: version $version needs reader features this connector does not support " +
          s"(unknown reader_feature_flags bits 0x${unknown.toHexString}); refusing to read it")
  }
}
