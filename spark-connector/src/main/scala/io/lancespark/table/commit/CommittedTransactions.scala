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
  private val byVersion = mutable.Map.empty[Long, Option[Transaction]]

  /** Version `v`'s transaction (None: its manifest names none, or the file is missing or unreadable). */
  def apply(scheme: ManifestNaming, v: Long): Option[Transaction] =
    byVersion.getOrElseUpdate(v, TransactionFile.read(storage,
      ManifestFile.transactionFileOf(storage, Dataset.manifestPath(storage, scheme, v))))

  /** The versions committed after `readVersion`, each with its transaction. */
  def since(readVersion: Long): Seq[(Long, Option[Transaction])] = {
    val (scheme, versions) = Dataset.versions(storage)
    versions.filter(_ > readVersion).map(v => v -> apply(scheme, v))
  }
}
