package io.lancespark.table.model

import scala.jdk.CollectionConverters._

import io.lancespark.proto.table.{DataFile, DataFragment, DeletionFile}
import io.lancespark.schema.LanceField

/** A data file of a fragment, as the manifest lists it. */
final case class DataFileRef(
    path: String,
    fieldIds: Vector[Int],
    columnIndices: Vector[Int],
    majorVersion: Int,
    minorVersion: Int,
    sizeBytes: Long) {
  // 0.0 (old writers), 0.1 and 0.2 (what pylance records for legacy files) are all file format 0.1
  def isLegacy: Boolean = majorVersion == 0 && minorVersion <= 2
  /** The file version as users name it: "0.1" (legacy), "2.0" (also for the
    * 0.3 that Lance 0.15-0.16 recorded for it), "2.1", ... */
  def versionName: String =
    if (isLegacy) "0.1" else if (majorVersion == 0 && minorVersion == 3) "2.0" else s"$majorVersion.$minorVersion"
  def relativePath: String = s"${DataFileRef.Dir}/$path"

  /** Whether this file stores (part of) a field: its id, or, as 2.1+ files
    * list only leaf fields, the id of a field below it. */
  def stores(field: LanceField): Boolean = fieldIds.contains(field.id) || field.children.exists(stores)
}

object DataFileRef {
  /** The directory of data files under the dataset root. */
  val Dir: String = "data"

  def of(d: DataFile): DataFileRef =
    DataFileRef(d.getPath, d.getFieldsList.asScala.map(_.toInt).toVector,
      d.getColumnIndicesList.asScala.map(_.toInt).toVector, d.getFileMajorVersion, d.getFileMinorVersion,
      d.getFileSizeBytes)
}

/** A fragment of one version: its data files, deletions and row ids. The
  * manifest's protobuf entries stay inside the table layer (`deletion`,
  * `proto`); what lies outside sees the native members. */
final case class FragmentInfo(
    id: Long,
    files: Vector[DataFileRef],
    private[table] val deletion: Option[DeletionFile],
    physicalRows: Long,
    private[table] val proto: DataFragment) {
  def deletedRows: Long = deletion.map(_.getNumDeletedRows).getOrElse(0L)
  def numRows: Long = physicalRows - deletedRows
  /** The deletion file's path relative to the dataset root, if rows were deleted. */
  def deletionFile: Option[String] = deletion.map(FragmentInfo.deletionPath(id, _))
}

object FragmentInfo {
  /** A deletion file's path relative to the dataset root, as the reference names it. */
  def deletionPath(fragmentId: Long, d: DeletionFile): String = {
    val ext = if (d.getFileType == DeletionFile.DeletionFileType.BITMAP) "bin" else "arrow"
    // ids are u64 on the wire: print them unsigned
    s"_deletions/$fragmentId-${java.lang.Long.toUnsignedString(d.getReadVersion)}-${java.lang.Long.toUnsignedString(d.getId)}.$ext"
  }
}
