package io.lancespark.table.storage

import scala.jdk.CollectionConverters._

import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.proto.table.{DataFragment, Manifest}
import io.lancespark.table.model.{DataFileRef, DataFileVersion, FeatureFlags}

/** Manifests written by old Lance releases, brought up to date the way the
  * reference does when it loads them (its `FileFragment::physical_rows`,
  * `migrate_fragments`, `check_storage_version` and manifest decoding):
  *
  *  - a fragment's `physical_rows` of 0 is unknown (releases before row counts
  *    were recorded), and a manifest without a `writer_version` has untrusted
  *    counts (early releases recorded rows minus deletions): the count is then
  *    the row count of the fragment's first data file;
  *  - a deletion file's `num_deleted_rows` of 0 (or any, without a writer
  *    version) is unknown: it is the number of offsets the deletion file lists;
  *  - a manifest without `data_format` has the version of its data files (all
  *    alike, or it is refused), or legacy if it has none; a manifest that says
  *    legacy over 2.0 files (a bug of Lance 0.16) says their version.
  *
  * A modern manifest is returned as it is, without any I/O. The result is
  * what the reference writes when it next commits on such a manifest, so the
  * committer builds on it too. */
object ManifestMigration {

  val LegacyVersion: String = "0.1"

  /** Whether `m` lacks something the reference fills in. */
  def needed(m: Manifest): Boolean =
    !m.hasWriterVersion || !m.hasDataFormat || legacyOverNewerFiles(m).isDefined ||
      m.getFragmentsList.asScala.exists(f =>
        f.getPhysicalRows == 0 || (f.hasDeletionFile && f.getDeletionFile.getNumDeletedRows == 0))

  /** `m` with its fragments' counts and its data format filled in (reads data
    * file footers and deletion files only where a count is missing). */
  def apply(storage: DatasetStorage, m: Manifest, where: String): Manifest =
    if (!needed(m)) m
    else {
      val schema = LanceSchema.fromProto(m.getFieldsList.asScala.toSeq,
        m.getSchemaMetadataMap.asScala.map { case (k, v) => k -> v.toByteArray }.toMap, where)
      val trustCounts = m.hasWriterVersion
      // fragments left without rows are dropped, as the reference drops them
      val fragments = m.getFragmentsList.asScala.toVector.map(f => fragment(storage, schema, f, trustCounts, where))
        .filter(f => f.getPhysicalRows > (if (f.hasDeletionFile) f.getDeletionFile.getNumDeletedRows else 0L))
      val b = m.toBuilder.clearFragments().addAllFragments(fragments.asJava)
      dataFormat(m, where).foreach { v =>
        b.setDataFormat(Manifest.DataStorageFormat.newBuilder().setFileFormat("lance").setVersion(v))
      }
      b.build()
    }

  private def fragment(storage: DatasetStorage, schema: LanceSchema, f: DataFragment, trustCounts: Boolean,
      where: String): DataFragment = {
    val physical =
      if (trustCounts && f.getPhysicalRows > 0) f.getPhysicalRows
      else {
        val first = f.getFilesList.asScala.headOption.getOrElse(throw new LanceFormatException(
          s"$where: fragment ${f.getId} records no row count and has no data file to count its rows from"))
        val reader = DataFiles.open(storage, schema, DataFileRef.of(first))
        try reader.numRows
        finally reader.close()
      }
    val b = f.toBuilder.setPhysicalRows(physical)
    // without a writer version the recorded deletion counts are not trusted either
    if (f.hasDeletionFile && (!trustCounts || f.getDeletionFile.getNumDeletedRows == 0)) {
      val deleted = DeletionVector.read(storage, f.getId, f.getDeletionFile, physical).getLongCardinality
      b.setDeletionFile(f.getDeletionFile.toBuilder.setNumDeletedRows(deleted))
    }
    b.build()
  }

  /** The data format version `m` should say, where it says none or too old a one. */
  private def dataFormat(m: Manifest, where: String): Option[String] =
    if (!m.hasDataFormat) Some(inferredVersion(m, where).getOrElse {
      if ((m.getWriterFeatureFlags & FeatureFlags.UseV2Format) != 0) DataFileVersion.Stable.name else LegacyVersion
    })
    else legacyOverNewerFiles(m)

  /** The version of every data file of `m` (None without files); files of
    * different versions are refused, as the reference refuses them. */
  def inferredVersion(m: Manifest, where: String): Option[String] = {
    val versions = fileVersions(m)
    if (versions.size > 1)
      throw new LanceFormatException(
        s"$where: the manifest names no data format and its data files have different versions " +
          s"(${versions.toSeq.sorted.mkString(", ")}); the reference refuses such a dataset too")
    versions.headOption
  }

  /** The version of the data files of a manifest that says legacy over
    * files of one newer version. */
  private def legacyOverNewerFiles(m: Manifest): Option[String] =
    if (!m.hasDataFormat || !isLegacyName(m.getDataFormat.getVersion)) None
    else {
      val versions = fileVersions(m)
      if (versions.size == 1 && versions.head != LegacyVersion) versions.headOption else None
    }

  /** The versions of `m`'s data files, as users name them ("0.1", "2.0", ...). */
  private def fileVersions(m: Manifest): Set[String] =
    m.getFragmentsList.asScala.iterator.flatMap(_.getFilesList.asScala).map(d => DataFileRef.of(d).versionName).toSet

  def isLegacyName(v: String): Boolean = v == LegacyVersion || v.equalsIgnoreCase("legacy") || v == "0.2"
}
