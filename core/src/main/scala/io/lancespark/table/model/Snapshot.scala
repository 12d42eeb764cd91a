package io.lancespark.table.model

import java.time.Instant

import scala.jdk.CollectionConverters._

import io.lancespark.schema.{LanceField, LanceFormatException, LanceSchema}
import io.lancespark.proto.table.{DataFile, DataFragment, Manifest}
import io.lancespark.table.storage.{DatasetStorage, ManifestMigration, ManifestNaming}

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
  def relativePath: String = s"${DatasetStorage.DataDir}/$path"

  /** Whether this file stores (part of) a field: its id, or, as 2.1+ files
    * list only leaf fields, the id of a field below it. */
  def stores(field: LanceField): Boolean = fieldIds.contains(field.id) || field.children.exists(stores)
}

object DataFileRef {
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
    private[table] val deletion: Option[io.lancespark.proto.table.DeletionFile],
    physicalRows: Long,
    private[table] val proto: DataFragment) {
  def deletedRows: Long = deletion.map(_.getNumDeletedRows).getOrElse(0L)
  def numRows: Long = physicalRows - deletedRows
  /** The deletion file's path relative to the dataset root, if rows were deleted. */
  def deletionFile: Option[String] = deletion.map(d => io.lancespark.table.storage.DeletionVector.relativePath(id, d))
}

/** One version of a dataset: the manifest and what it says, checked. A
  * manifest of an old release is read as the reference reads it
  * ([[io.lancespark.table.storage.ManifestMigration]]): `manifest` is then the migrated one. */
final class Snapshot(val storage: DatasetStorage, stored: Manifest, val naming: ManifestNaming) {

  val version: Long = stored.getVersion
  private def where: String = s"${storage.uri} (version $version)"

  FeatureFlags.checkReadable(stored.getReaderFeatureFlags, storage.uri, version)
  if (stored.getBasePathsCount > 0)
    throw new LanceFormatException(
      s"$where: data files under other base paths (shallow clones, imported files) are not supported yet")

  private[table] val manifest: Manifest =
    ManifestMigration(storage, stored, s"${storage.uri}/${ManifestNaming.Dir}/${naming.fileName(version)}")

  val schema: LanceSchema =
    LanceSchema.fromProto(manifest.getFieldsList.asScala.toSeq,
      manifest.getSchemaMetadataMap.asScala.map { case (k, v) => k -> v.toByteArray }.toMap, where)

  val fragments: Vector[FragmentInfo] = manifest.getFragmentsList.asScala.toVector.map { f =>
    // the reference refuses to read or count such a fragment; its columns would read as nulls
    if (f.getFilesCount == 0)
      throw new LanceFormatException(s"$where: fragment ${f.getId} has no data files")
    FragmentInfo(
      id = f.getId,
      files = f.getFilesList.asScala.toVector.map(dataFile),
      deletion = if (f.hasDeletionFile) Some(f.getDeletionFile) else None,
      physicalRows = f.getPhysicalRows,
      proto = f)
  }

  def hasStableRowIds: Boolean = (manifest.getReaderFeatureFlags & FeatureFlags.StableRowIds) != 0

  def countRows: Long = fragments.map(_.numRows).sum

  def timestamp: Option[Instant] =
    if (manifest.hasTimestamp)
      Some(Instant.ofEpochSecond(manifest.getTimestamp.getSeconds, manifest.getTimestamp.getNanos.toLong))
    else None

  def fileVersion: String = manifest.getDataFormat.getVersion

  /** The dataset's configuration (manifest `config`): table properties. */
  def config: Map[String, String] = manifest.getConfigMap.asScala.toMap

  private def dataFile(d: DataFile): DataFileRef = {
    storage.checkRelative(s"${DatasetStorage.DataDir}/${d.getPath}", "data file")  // refuses escapes early
    DataFileRef.of(d)
  }
}
