package io.lancespark.table.maintenance

import java.time.Instant

import io.lancespark.schema.LanceFormatException
import io.lancespark.table.commit.{CommitSettings, Committer, RestoreVersion}
import io.lancespark.table.storage.{Dataset, DatasetStorage, VersionLookup}
import io.lancespark.table.storage.Snapshot

/** What a restore committed. */
final case class RestoreResult(restoredVersion: Long, previousVersion: Long, newVersion: Long, rows: Long, fragments: Int)

/** Restores an old version: a new version, committed with the format's
  * Restore transaction, whose content equals the old one. */
object Restore {

  def toVersion(storage: DatasetStorage, version: Long, settings: CommitSettings = CommitSettings()): RestoreResult = {
    val latest = Dataset.latest(storage).map(_.version).getOrElse(
      throw new LanceFormatException(s"${storage.uri}: not a Lance dataset (no manifests under _versions/)"))
    val s: Snapshot = Committer.commit(storage, Some(latest), RestoreVersion(version), settings)
    RestoreResult(version, latest, s.version, s.countRows, s.fragments.size)
  }

  def toTimestamp(storage: DatasetStorage, at: Instant, settings: CommitSettings = CommitSettings()): RestoreResult =
    toVersion(storage, versionAt(storage, at), settings)

  def toTag(storage: DatasetStorage, tag: String, settings: CommitSettings = CommitSettings()): RestoreResult =
    toVersion(storage, Tags.versionOf(storage, tag), settings)

  /** The newest version committed at or before `at` (a bisection by manifest
    * time: [[VersionLookup.versionAt]]). */
  def versionAt(storage: DatasetStorage, at: Instant): Long =
    VersionLookup.versionAt(storage, at, History.committedAtOrBefore(_, at))
      .getOrElse(throw new LanceFormatException(s"${storage.uri}: no version was committed at or before $at"))
}
