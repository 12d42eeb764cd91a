package io.lancespark.table.storage

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

import io.lancespark.schema.LanceFormatException
import io.lancespark.table.model.Snapshot

/** Opens versions of a Lance dataset directory. */
object Dataset {

  /** The naming scheme and the sorted versions present under `_versions/`. */
  def versions(storage: DatasetStorage): (ManifestNaming, Seq[Long]) = {
    storage.manifestStore.foreach(ExternalManifestCommit.finishLatest(storage, _))  // an interrupted commit
    ManifestNaming.scan(storage.uri, storage.list(ManifestNaming.Dir).map(_.getPath.getName))
  }

  def open(uri: String, version: Option[Long], conf: Configuration): Snapshot =
    open(DatasetStorage(uri, conf), version)

  def open(storage: DatasetStorage, version: Option[Long]): Snapshot = {
    val (naming, all) = versions(storage)
    if (all.isEmpty)
      throw new LanceFormatException(s"${storage.uri}: not a Lance dataset (no manifests under _versions/)")
    val v = version.getOrElse(all.last)
    if (!all.contains(v))
      throw new LanceFormatException(
        s"${storage.uri}: version $v does not exist (versions ${all.head} to ${all.last} are present)")
    val path = manifestPath(storage, naming, v)
    val manifest = ManifestFile.read(storage, path)
    if (manifest.getVersion != v)
      throw new LanceFormatException(s"$path: manifest says version ${manifest.getVersion}, its name says $v")
    new Snapshot(storage, manifest, naming)
  }

  def manifestPath(storage: DatasetStorage, naming: ManifestNaming, version: Long): Path =
    new Path(new Path(storage.root, ManifestNaming.Dir), naming.fileName(version))

  def isDataset(uri: String, conf: Configuration): Boolean = {
    val storage = DatasetStorage(uri, conf)
    storage.list(ManifestNaming.Dir).exists(s => ManifestNaming.parse(s.getPath.getName).isDefined)
  }
}
