package io.lancespark.table.maintenance

import java.time.Instant
import java.time.temporal.ChronoUnit

import scala.jdk.CollectionConverters._

import io.lancespark.proto.table.{DataFragment, Manifest, Transaction}
import io.lancespark.proto.table.Transaction.OperationCase
import io.lancespark.table.storage.{Dataset, DatasetStorage, ManifestFile, TransactionFile}

/** One version of a dataset as history shows it. Row and fragment changes
  * compare the version with the one before it (None when that one is gone,
  * e.g. vacuumed); `operation` and its details come from the transaction file
  * (None when it is missing). */
final case class VersionEntry(
    version: Long,
    timestamp: Option[Instant],
    operation: Option[String],
    readVersion: Option[Long],
    rowsAdded: Option[Long],
    rowsDeleted: Option[Long],
    fragmentsAdded: Option[Int],
    fragmentsRemoved: Option[Int],
    totalRows: Long,
    totalFragments: Int,
    dataFiles: Int,
    deletionFiles: Int,
    dataBytes: Long,
    details: Map[String, String],
    transactionProperties: Map[String, String],
    writer: String,
    tags: Seq[String])

/** Every version of a dataset, oldest first. */
object History {

  /** The first version committed at or after `t`. Commit times have
    * nanoseconds, a timestamp given back (by Spark, by pylance) has at most
    * microseconds, truncated or rounded: a commit counts as at or after `t`
    * when its time rounded up to the microsecond is. */
  def firstAtOrAfter(storage: DatasetStorage, t: Instant): Option[Long] =
    list(storage).filter(_.timestamp.exists(committedAtOrAfter(_, t))).map(_.version).sorted.headOption

  /** The last version committed at or before `t` (its time rounded down to the microsecond). */
  def lastAtOrBefore(storage: DatasetStorage, t: Instant): Option[Long] =
    list(storage).filter(_.timestamp.exists(committedAtOrBefore(_, t))).map(_.version).sorted.lastOption

  /** A commit at `ts` is at or before `t` when its time rounded down to the microsecond is. */
  def committedAtOrBefore(ts: Instant, t: Instant): Boolean = !ts.truncatedTo(ChronoUnit.MICROS).isAfter(t)

  /** A commit at `ts` is at or after `t` when its time rounded up to the microsecond is. */
  def committedAtOrAfter(ts: Instant, t: Instant): Boolean = {
    val down = ts.truncatedTo(ChronoUnit.MICROS)
    !(if (down == ts) ts else down.plusNanos(1000)).isBefore(t)
  }

  def list(storage: DatasetStorage): Vector[VersionEntry] = {
    val (naming, versions) = Dataset.versions(storage)
    val tags = Tags.list(storage).groupBy(_.version).map { case (v, ts) => v -> ts.map(_.name).sorted }
    val manifests = versions.map(v => v -> ManifestFile.read(storage, Dataset.manifestPath(storage, naming, v)))
    manifests.zipWithIndex.map { case ((v, m), i) =>
      val prev: Option[Manifest] =
        if (i > 0 && manifests(i - 1)._1 == v - 1) Some(manifests(i - 1)._2)
        else if (v <= 1) Some(Manifest.getDefaultInstance)
        else None
      entry(storage, m, prev, tags.getOrElse(v, Nil))
    }.toVector
  }

  /** A fragment's identity across versions: its id and first data file (ids
    * can repeat after a restore by another writer). */
  private def key(f: DataFragment): (Long, String) = (f.getId, f.getFilesList.asScala.headOption.map(_.getPath).getOrElse(""))
  private def live(f: DataFragment): Long =
    f.getPhysicalRows - (if (f.hasDeletionFile) f.getDeletionFile.getNumDeletedRows else 0L)
  private def deleted(f: DataFragment): Long = if (f.hasDeletionFile) f.getDeletionFile.getNumDeletedRows else 0L

  private def entry(storage: DatasetStorage, m: Manifest, prev: Option[Manifest], tags: Seq[String]): VersionEntry = {
    val frags = m.getFragmentsList.asScala.toVector
    val now = frags.map(f => key(f) -> f).toMap
    val diff = prev.map { p =>
      val before = p.getFragmentsList.asScala.map(f => key(f) -> f).toMap
      val added = frags.filterNot(f => before.contains(key(f)))
      val removed = before.values.filterNot(f => now.contains(key(f)))
      val newlyDeleted = frags.flatMap(f => before.get(key(f)).map(b => math.max(0L, deleted(f) - deleted(b)))).sum
      (added.map(live).sum, removed.map(live).sum + newlyDeleted, added.size, removed.size)
    }
    val txn: Option[Transaction] = TransactionFile.read(storage, m.getTransactionFile)
    VersionEntry(
      version = m.getVersion,
      timestamp = if (m.hasTimestamp) Some(Instant.ofEpochSecond(m.getTimestamp.getSeconds, m.getTimestamp.getNanos.toLong)) else None,
      operation = txn.map(t => operationName(t.getOperationCase)),
      readVersion = txn.map(_.getReadVersion),
      rowsAdded = diff.map(_._1),
      rowsDeleted = diff.map(_._2),
      fragmentsAdded = diff.map(_._3),
      fragmentsRemoved = diff.map(_._4),
      totalRows = frags.map(live).sum,
      totalFragments = frags.size,
      dataFiles = frags.map(_.getFilesCount).sum,
      deletionFiles = frags.count(_.hasDeletionFile),
      dataBytes = frags.flatMap(_.getFilesList.asScala).map(_.getFileSizeBytes).sum,
      details = txn.map(details).getOrElse(Map.empty),
      transactionProperties = txn.map(_.getTransactionPropertiesMap.asScala.toMap).getOrElse(Map.empty),
      writer = if (m.hasWriterVersion) s"${m.getWriterVersion.getLibrary} ${m.getWriterVersion.getVersion}".trim else "",
      tags = tags)
  }

  /** The reference's name of an operation: "Append", "Delete", "CreateIndex", ... */
  def operationName(op: OperationCase): String =
    if (op == OperationCase.OPERATION_NOT_SET) "Unknown"
    else op.name().toLowerCase.split('_').map(_.capitalize).mkString

  private def details(t: Transaction): Map[String, String] = t.getOperationCase match {
    case OperationCase.RESTORE => Map("restored_version" -> t.getRestore.getVersion.toString)
    case OperationCase.DELETE if !t.getDelete.getPredicate.isEmpty => Map("predicate" -> t.getDelete.getPredicate)
    case OperationCase.UPDATE => Map("update_mode" -> t.getUpdate.getUpdateMode.name().toLowerCase)
    case OperationCase.REWRITE =>
      val r = t.getRewrite
      val groups = r.getGroupsList.asScala
      Map("old_fragments" -> (r.getOldFragmentsCount + groups.map(_.getOldFragmentsCount).sum).toString,
        "new_fragments" -> (r.getNewFragmentsCount + groups.map(_.getNewFragmentsCount).sum).toString)
    case _ => Map.empty
  }
}
