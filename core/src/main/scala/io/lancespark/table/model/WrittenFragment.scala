package io.lancespark.table.model

/** A data file a task wrote, before the commit gives it a fragment id. */
final case class WrittenFragment(
    path: String,
    fieldIds: Vector[Int],
    columnIndices: Vector[Int],
    physicalRows: Long,
    sizeBytes: Long,
    version: DataFileVersion)
