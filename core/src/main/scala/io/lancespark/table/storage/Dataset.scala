package io.lancespark.table.storage

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import io.lancespark.schema.LanceFormatException

/** Opens versions of a Lance dataset directory. The latest version and a
  * version by number are found without listing `_versions/` (see
  * [[VersionLookup]]); only what needs every version lists it. */
object Dataset {

  /** The naming scheme and every version present under `_versions/`, sorted:
    * a listing of the whole directory, for what needs all versions (history,
    * cleanup). An interrupted commit through an external manifest store is
    * finished first. */
  def versions(storage: DatasetStorage): (ManifestNaming, Seq[Long]) = {
    storage.manifestStore.foreach(ExternalManifestCommit.finishLatest(storage, _))  // an interrupted commit
    listAll(storage)
  }

  /** [[versions]] without consulting an external manifest store. */
  private[storage] def listAll(storage: DatasetStorage): (ManifestNaming, Seq[Long]) =
    ManifestNaming.scan(storage.uri, storage.list(ManifestNaming.Dir).map(_.getPath.getName))

  /** The newest version and its naming scheme; None if there is no manifest. */
  def latest(storage: DatasetStorage): Option[VersionLookup.Latest] = VersionLookup.latest(storage)

  def open(uri: String, version: Option[Long], conf: Configuration): Snapshot =
    open(DatasetStorage(uri, conf), version)

  /** The latest version, or None where there is no dataset yet (a stream's
    * sink may create it). One lookup, as [[open]]. */
  def openLatestIfExists(storage: DatasetStorage): Option[Snapshot] =
    latest(storage).map(l => at(storage, l.naming, l.version, storage.readFully(manifestPath(storage, l.naming, l.version))))

  def open(storage: DatasetStorage, version: Option[Long]): Snapshot = {
    val (naming, v, bytes) = version match {
      case None =>
        val l = latest(storage).getOrElse(throw notADataset(storage))
        (l.naming, l.version, storage.readFully(manifestPath(storage, l.naming, l.version)))
      case Some(v) =>
        storage.manifestStore.foreach(ExternalManifestCommit.finishLatest(storage, _))  // an interrupted commit
        Iterator(ManifestNaming.V2, ManifestNaming.V1)
          .map(n => n -> storage.readIfPresent(manifestPath(storage, n, v)))
          .collectFirst { case (n, Some(b)) => (n, v, b) }
          .getOrElse(throw missing(storage, v))
    }
    at(storage, naming, v, bytes)
  }

  private def at(storage: DatasetStorage, naming: ManifestNaming, v: Long, bytes: Array[Byte]): Snapshot = {
    val path = manifestPath(storage, naming, v)
    val manifest = ManifestFile.parse(bytes, path.toString)
    if (manifest.getVersion != v)
      throw new LanceFormatException(s"$path: manifest says version ${manifest.getVersion}, its name says $v")
    new Snapshot(storage, manifest, naming, ManifestFile.indexSection(bytes, manifest, path.toString))
  }

  /** The naming scheme of version `v`'s manifest; an error naming the versions present if it does not exist. */
  def namingOf(storage: DatasetStorage, v: Long): ManifestNaming =
    VersionLookup.namingOf(storage, v).getOrElse(throw missing(storage, v))

  /** The error for a version that does not exist (listing the directory: only on this path). */
  def missing(storage: DatasetStorage, v: Long): LanceFormatException = {
    val (_, all) = listAll(storage)
    if (all.isEmpty) notADataset(storage)
    else new LanceFormatException(
      s"${storage.uri}: version $v does not exist (versions ${all.head} to ${all.last} are present)")
  }

  private def notADataset(storage: DatasetStorage): LanceFormatException =
    new LanceFormatException(s"${storage.uri}: not a Lance dataset (no manifests under _versions/)")

  def manifestPath(storage: DatasetStorage, naming: ManifestNaming, version: Long): Path =
    new Path(new Path(storage.root, ManifestNaming.Dir), naming.fileName(version))

  /** Whether `uri` holds a dataset: a manifest under `_versions/` (the
    * hint's, else the first of a lazy listing). */
  def isDataset(uri: String, conf: Configuration): Boolean = VersionLookup.anyManifest(DatasetStorage(uri, conf))
}
