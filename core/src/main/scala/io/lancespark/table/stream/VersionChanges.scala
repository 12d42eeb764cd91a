package io.lancespark.table.stream

import java.time.Instant

import scala.jdk.CollectionConverters._

import io.lancespark.proto.table.Transaction.OperationCase
import io.lancespark.schema.LanceFormatException
import io.lancespark.table.commit.CommittedTransactions
import io.lancespark.table.maintenance.History
import io.lancespark.table.model.FragmentInfo
import io.lancespark.table.storage.{Dataset, DatasetStorage, VersionLookup}
import io.lancespark.table.storage.Snapshot

/** What one version did to a dataset's rows, as a stream reading the dataset
  * sees it. */
sealed trait VersionChange
object VersionChange {
  /** Only new fragments (appends; the first version's content): `fragments`
    * as they are in the version, in id order. */
  final case class Appended(fragments: Vector[FragmentInfo]) extends VersionChange
  /** Rows deleted, updated or replaced (DELETE, UPDATE, MERGE, overwrite, restore). */
  final case class Changed(description: String) extends VersionChange
  /** No row changed (compaction, index, configuration, added columns). */
  final case class NoRowChange(description: String) extends VersionChange
}

/** The versions of a dataset seen as a sequence of changes: each version
  * compared with the one before it (fragments added, removed, or with other
  * deletion files), its transaction telling compactions (rows rewritten, none
  * changed) from real changes. */
final class VersionChanges(storage: DatasetStorage) {
  private val transactions = new CommittedTransactions(storage)
  private val cache = scala.collection.mutable.LinkedHashMap.empty[Long, Snapshot]

  /** Version `v` (opened once; the last few are kept). */
  def snapshot(v: Long): Snapshot = cache.getOrElse(v, {
    val s = try Dataset.open(storage, Some(v)) catch {
      case e: LanceFormatException => throw new LanceFormatException(
        s"${storage.uri}: the stream needs version $v, which cannot be read (removed by a cleanup?): ${e.getMessage}", e)
    }
    cache.put(v, s)
    if (cache.size > 8) cache.remove(cache.head._1)
    s
  })

  def latest: Option[Long] = Dataset.latest(storage).map(_.version)

  /** What version `v` changed. */
  def of(v: Long): VersionChange = {
    val cur = snapshot(v)
    val txn = transactions(cur.naming, v).flatten
    val op = txn.map(_.getOperationCase)
    val kind = op.map(o => io.lancespark.table.commit.ConflictChecker.name(o)).getOrElse("unknown operation")
    val prevExists = v > 1 && VersionLookup.exists(storage, cur.naming, v - 1)
    if (!prevExists) {
      if (v <= 1) appended(cur, op, v, None)
      else if (op.contains(OperationCase.APPEND)) {
        // the transaction names the appended fragments' files (pylance records them before ids are assigned)
        val files = txn.toSeq.flatMap(_.getAppend.getFragmentsList.asScala.flatMap(_.getFilesList.asScala.map(_.getPath)))
          .toSet
        VersionChange.Appended(cur.fragments.filter(f => f.files.exists(d => files.contains(d.path))).sortBy(_.id))
      } else throw new LanceFormatException(s"${storage.uri}: version ${v - 1} was removed (cleanup), so what " +
        s"version $v ($kind) changed cannot be told; start the stream at a later version")
    } else {
      val prev = snapshot(v - 1)
      appended(cur, op, v, Some(prev))
    }
  }

  private def appended(cur: Snapshot, op: Option[OperationCase], v: Long, prev: Option[Snapshot]): VersionChange = {
    val kind = op.map(o => io.lancespark.table.commit.ConflictChecker.name(o)).getOrElse("unknown operation")
    val before = prev.map(_.fragments.map(f => f.id -> f).toMap).getOrElse(Map.empty[Long, FragmentInfo])
    val added = cur.fragments.filterNot(f => before.contains(f.id)).sortBy(_.id)
    val removed = before.keySet -- cur.fragments.map(_.id)
    val deletionsChanged = cur.fragments.count(f => before.get(f.id).exists(p => p.deletion != f.deletion))
    if (op.contains(OperationCase.REWRITE)) VersionChange.NoRowChange(s"version $v: a compaction (rewrite)")
    else if (removed.isEmpty && deletionsChanged == 0)
      if (added.nonEmpty) VersionChange.Appended(added) else VersionChange.NoRowChange(s"version $v: $kind")
    else VersionChange.Changed(s"version $v ($kind) removed ${removed.size} fragment(s) and deleted rows of " +
      s"$deletionsChanged fragment(s)")
  }

  /** The first version committed at or after `t`; None if every version is older. */
  def firstAtOrAfter(t: Instant): Option[Long] = History.firstAtOrAfter(storage, t)
}
