package io.lancespark.table.storage

import java.time.Instant

import scala.jdk.CollectionConverters._

import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.proto.table.{DataFile, IndexMetadata, Manifest}
import io.lancespark.table.model.{DataFileRef, FeatureFlags, FragmentInfo}

/** One version of a dataset: the manifest and what it says, checked. A
  * manifest of an old release is read as the reference reads it
  * ([[io.lancespark.table.storage.ManifestMigration]]): `manifest` is then the migrated one.
  * `indexSection`: the manifest's index section when the file was read to open this version
  * (its indices are then parsed from it, not read again: one request less per query on an
  * object store). */
final class Snapshot(val storage: DatasetStorage, stored: Manifest, val naming: ManifestNaming,
    indexSection: Option[Array[Byte]] = None) {

  val version: Long = stored.getVersion
  private def where: String = s"${storage.uri} (version $version)"
  /** The manifest file, as errors name it. */
  private def manifestFile: String = s"${storage.uri}/${ManifestNaming.Dir}/${naming.fileName(version)}"

  FeatureFlags.checkReadable(stored.getReaderFeatureFlags, storage.uri, version)
  if (stored.getBasePathsCount > 0)
    throw new LanceFormatException(
      s"$where: data files under other base paths (shallow clones, imported files) are not supported yet")

  private[table] val manifest: Manifest =
    ManifestMigration(storage, stored, manifestFile)

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

  /** The index metadata of this version (its manifest's index section; empty without one),
    * read once: planning asks for it per scan. */
  lazy val indices: Seq[IndexMetadata] = indexSection match {
    case Some(section) => Indices.parse(section, manifestFile)
    case None => Indices.read(this)
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
