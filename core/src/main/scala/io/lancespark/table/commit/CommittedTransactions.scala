package io.lancespark.table.commit

import scala.collection.mutable

import io.lancespark.proto.table.Transaction
import io.lancespark.table.storage.{Dataset, DatasetStorage, ManifestFile, ManifestNaming, TransactionFile}

/** The transactions of a dataset's committed versions, each read once: a
  * committed version never changes, so a writer that checks the versions
  * committed since it read again (after losing a race, or a compaction that
  * checks before it commits) reads only the versions that are new since. Of
  * each manifest only the transaction file's name is decoded. One instance per
  * commit: a dataset replaced at the same path is seen afresh by the next. */
final class CommittedTransactions(storage: DatasetStorage) {

  // Some(None): the manifest names no transaction (or its file is unreadable); None: the manifest is absent
  private val byVersion = mutable.Map.empty[Long, Option[Option[Transaction]]]

  /** Version `v`'s transaction: None if its manifest is absent (a cleanup
    * removed it), Some(None) if it names none or the file is missing or
    * unreadable. */
  def apply(scheme: ManifestNaming, v: Long): Option[Option[Transaction]] =
    byVersion.getOrElseUpdate(v, {
      val path = Dataset.manifestPath(storage, scheme, v)
      storage.readIfPresent(path).map(b => TransactionFile.read(storage, ManifestFile.transactionFileOf(b, path.toString)))
    })

  /** The versions after `readVersion` up to `latest` whose manifests exist,
    * each with its transaction, read by name (no listing of `_versions/`). */
  def between(scheme: ManifestNaming, readVersion: Long, latest: Long): Seq[(Long, Option[Transaction])] =
    ((readVersion + 1) to latest).flatMap(v => apply(scheme, v).map(v -> _))

  /** The versions committed after `readVersion`, each with its transaction. */
  def since(readVersion: Long): Seq[(Long, Option[Transaction])] =
    Dataset.latest(storage) match {
      case Some(l) => between(l.naming, readVersion, l.version)
      case None => Nil
    }
}
