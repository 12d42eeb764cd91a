package io.lancespark.table.storage

import java.io.FileNotFoundException
import java.util.UUID

import org.apache.hadoop.fs.Path

import io.lancespark.schema.LanceFormatException

/** The table format's commit protocol through an external manifest store:
  *  1. write the manifest under a staged name (`<final name>-<uuid>`);
  *  2. insert (dataset, version) -> staged path into the store, only if absent:
  *     the commit point; a writer whose insert fails lost the race;
  *  3. copy the staged manifest to its final name, point the record at it and
  *     delete the staged file.
  * A writer that dies after step 2 leaves a committed version whose manifest
  * may only be staged: readers and writers finish it (step 3) before they list
  * versions, so nothing committed is lost and nothing half-done is visible. */
object ExternalManifestCommit {

  /** The dataset's key in the store: its path without scheme and bucket, as the reference keys it. */
  def baseUri(storage: DatasetStorage): String = storage.root.toUri.getPath.stripPrefix("/").stripSuffix("/")

  /** Creates `finalPath` (the manifest of `version`) through the store; true
    * if this writer committed `version`, false if another writer had. */
  def publish(storage: DatasetStorage, store: ExternalManifestStore, version: Long, finalPath: Path,
      bytes: Array[Byte]): Boolean = {
    val base = baseUri(storage)
    if (storage.fs.exists(finalPath)) {  // taken: by a store writer (it has a record), else by one without the store
      if (store.get(base, version).isDefined) return false
      throw new IllegalStateException(
        s"${storage.uri}: version $version was created at $finalPath by a writer that does not use the " +
          s"${store.description}; every writer of this dataset must use the same external manifest store " +
          s"(spark.hadoop.${ExternalManifestStore.KindKey}), or commits can be lost")
    }
    val staged = new Path(finalPath.getParent, s"${finalPath.getName}-${UUID.randomUUID()}")
    write(storage, staged, bytes, overwrite = false)
    CommitFaults.reached(CommitFaults.StagedManifest)
    val record = ManifestRecord(version, keyOf(storage, staged), Some(bytes.length.toLong))
    val won = try store.putIfAbsent(base, record)
      catch {
        case e: Exception =>  // did the insert land before the error? the record says
          val there = try store.get(base, version) catch { case _: Exception => throw e }
          if (there.isEmpty) { deleteQuietly(storage, staged); throw e }
          there.exists(_.path == record.path)
      }
    if (!won) {
      deleteQuietly(storage, staged)
      false
    } else {
      CommitFaults.reached(CommitFaults.ExternalRecord)
      finish(storage, store, base, record, staged, finalPath, Some(bytes))
      true
    }
  }

  /** The newest version the store records, its manifest finished if its
    * writer was interrupted; None if the store has no record of the dataset. */
  def finishLatest(storage: DatasetStorage, store: ExternalManifestStore): Option[Long] = {
    val base = baseUri(storage)
    store.latest(base).map { record =>
      val path = pathOf(storage, record.path)
      stagedFinalName(path.getName).foreach { finalName =>
        finish(storage, store, base, record, path, new Path(path.getParent, finalName), None)
      }
      record.version
    }
  }

  private def finish(storage: DatasetStorage, store: ExternalManifestStore, base: String, record: ManifestRecord,
      staged: Path, finalPath: Path, known: Option[Array[Byte]]): Unit = {
    val bytes = known.orElse(readStaged(storage, staged))
    bytes.foreach { b =>
      writeVisibleWhole(storage, finalPath, b)  // a concurrent finisher writes the same bytes
      CommitFaults.reached(CommitFaults.FinalManifest)
      store.replace(base, record.copy(path = keyOf(storage, finalPath), size = Some(b.length.toLong)))
      deleteQuietly(storage, staged)
    }
    if (bytes.isEmpty && !storage.fs.exists(finalPath))
      throw new LanceFormatException(
        s"${storage.uri}: the ${store.description} records version ${record.version} at $staged, which is missing, " +
          s"and $finalPath does not exist either")
  }

  /** The staged manifest's bytes; None if another finisher removed it (before or while it was read). */
  private def readStaged(storage: DatasetStorage, staged: Path): Option[Array[Byte]] =
    try Some(storage.readFully(staged))
    catch {
      case _: FileNotFoundException => None
      case e: Exception if (e.isInstanceOf[java.io.IOException] || e.isInstanceOf[LanceFormatException]) &&
          !storage.fs.exists(staged) => None
    }

  /** `<final name>` of a staged manifest name `<final name>-<uuid>`. */
  def stagedFinalName(name: String): Option[String] = {
    val at = name.lastIndexOf(".manifest-")
    if (at < 0) None else Some(name.substring(0, at + ".manifest".length))
  }

  private def keyOf(storage: DatasetStorage, path: Path): String = {
    val base = baseUri(storage)
    s"$base/${ManifestNaming.Dir}/${path.getName}"
  }

  private def pathOf(storage: DatasetStorage, key: String): Path = {
    val base = baseUri(storage) + "/"
    if (!key.startsWith(base))
      throw new LanceFormatException(s"${storage.uri}: the external manifest store names '$key', outside the dataset")
    storage.resolve(key.substring(base.length), "manifest")
  }

  private def write(storage: DatasetStorage, path: Path, bytes: Array[Byte], overwrite: Boolean): Unit = {
    val out = storage.fs.create(path, overwrite)
    try out.write(bytes) finally out.close()
  }

  /** Schemes whose objects appear whole when their writer closes them (a PUT). */
  private val WholeOnClose: Set[String] = Set("s3a", "s3", "gs", "abfs", "abfss", "wasb", "wasbs", "oss", "cos", "obs")

  /** Writes `path` so that no reader ever sees part of it: directly on object
    * stores, else through a temporary file renamed into place (a rename onto an
    * existing file fails: a concurrent finisher put the same bytes there). */
  private def writeVisibleWhole(storage: DatasetStorage, path: Path, bytes: Array[Byte]): Unit = {
    val scheme = Option(storage.root.toUri.getScheme).getOrElse(storage.fs.getUri.getScheme)
    if (WholeOnClose.contains(scheme)) write(storage, path, bytes, overwrite = true)
    else {
      val tmp = new Path(path.getParent, s".tmp-${UUID.randomUUID()}")
      write(storage, tmp, bytes, overwrite = false)
      val moved = try storage.fs.rename(tmp, path) catch { case _: java.io.IOException => false }
      if (!moved) {
        deleteQuietly(storage, tmp)
        if (!storage.fs.exists(path)) throw new java.io.IOException(s"${storage.uri}: could not move $tmp to $path")
      }
    }
  }

  private def deleteQuietly(storage: DatasetStorage, path: Path): Unit =
    try storage.fs.delete(path, false) catch { case _: java.io.IOException => () }
}
