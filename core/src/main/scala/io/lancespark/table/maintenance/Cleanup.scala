package io.lancespark.table.maintenance

import java.nio.ByteBuffer
import java.time.{Duration, Instant}
import java.util.UUID

import scala.jdk.CollectionConverters._

import org.apache.hadoop.fs.{FileStatus, Path}

import io.lancespark.proto.table.{IndexSection, Manifest}
import io.lancespark.table.storage.{Dataset, DatasetStorage, DeletionVector, ExternalManifestCommit, ManifestFile, ManifestNaming, TransactionFile, VersionLookup}

/** What a cleanup removes: versions committed before `olderThan` (never the
  * latest, never a tagged one) and the files only they reference.
  *
  *  - `deleteUnverified`: files no manifest references (left by failed or
  *    killed writes, or by a commit in progress) are removed only when older
  *    than [[Cleanup.UnverifiedAge]]; true removes them at any age (only safe
  *    when nothing else writes to the dataset).
  *  - `errorIfTaggedOldVersions`: a tagged version that would otherwise be old
  *    fails the cleanup (as the reference's default); false keeps it silently.
  *  - `dryRun`: list what would go, delete nothing. */
final case class CleanupPolicy(
    olderThan: Instant,
    deleteUnverified: Boolean = false,
    errorIfTaggedOldVersions: Boolean = true,
    dryRun: Boolean = false)

object CleanupPolicy {
  /** Versions older than `retention` before now (the reference's default: 14 days). */
  def retaining(retention: Duration = Cleanup.DefaultRetention, now: Instant = Instant.now()): CleanupPolicy =
    CleanupPolicy(now.minus(retention))
}

/** A file a cleanup removed (or would remove): path relative to the dataset,
  * kind (manifest, data, deletion, transaction, index, temporary), size. */
final case class RemovedFile(path: String, kind: String, sizeBytes: Long)

final case class CleanupResult(
    removedVersions: Seq[Long],
    files: Seq[RemovedFile],
    keptTaggedVersions: Seq[Long],
    dryRun: Boolean) {
  def bytesRemoved: Long = files.map(_.sizeBytes).sum
  def count(kind: String): Int = files.count(_.kind == kind)
}

/** A cleanup that cannot run (a tagged version is old and the policy says to fail). */
final class CleanupException(message: String) extends RuntimeException(message)

/** The reference's `cleanup_old_versions`: every manifest is read; the
  * latest, tagged and recent versions form the working set, whose files stay.
  * A file only old versions reference is "verified" garbage and goes; a file
  * no manifest references may belong to a commit in progress and goes only
  * when older than [[UnverifiedAge]] (or `deleteUnverified`). The reference's
  * source also skips files modified after the earliest kept version was
  * committed, but pylance 14 does not on local files (its explain lists them);
  * we follow what pylance does, so the two agree on what a cleanup removes.
  * Manifests go first, so no remaining version ever lists a removed file. */
object Cleanup {
  val DefaultRetention: Duration = Duration.ofDays(14)
  val UnverifiedAge: Duration = Duration.ofDays(7)

  private final case class Referenced(data: Set[String], deletions: Set[String], transactions: Set[String],
      indices: Set[String]) {
    def ++(o: Referenced): Referenced = Referenced(data ++ o.data, deletions ++ o.deletions,
      transactions ++ o.transactions, indices ++ o.indices)
  }
  private val NoFiles = Referenced(Set.empty, Set.empty, Set.empty, Set.empty)

  private final case class Inspected(version: Long, status: FileStatus, manifest: Manifest, files: Referenced)

  def run(storage: DatasetStorage, policy: CleanupPolicy, now: Instant = Instant.now()): CleanupResult = {
    val (naming, versions) = Dataset.versions(storage)
    val latest = versions.lastOption.getOrElse(
      throw new CleanupException(s"${storage.uri}: not a Lance dataset (no manifests under _versions/)"))
    if (!policy.dryRun) storage.requireSafeCommit()
    val tags = Tags.list(storage)
    val tagged = tags.map(_.version).toSet
    val inspected = storage.list(ManifestNaming.Dir).flatMap { st =>
      ManifestNaming.parse(st.getPath.getName).collect { case (`naming`, v) =>
        val bytes = storage.readFully(st.getPath)
        val m = ManifestFile.parse(bytes, st.getPath.toString)
        Inspected(v, st, m, referenced(storage, m, ManifestFile.indexSection(bytes, m, st.getPath.toString)))
      }
    }.sortBy(_.version)
    def old(i: Inspected): Boolean = i.version < latest && timestamp(i.manifest).isBefore(policy.olderThan)
    val taggedOld = inspected.filter(i => old(i) && tagged.contains(i.version)).map(_.version)
    if (policy.errorIfTaggedOldVersions && taggedOld.nonEmpty) {
      val names = tags.filter(t => taggedOld.contains(t.version)).map(t => s"${t.name} (version ${t.version})")
      throw new CleanupException(
        s"${storage.uri}: ${names.size} tagged version(s) would be cleaned up: ${names.mkString(", ")}; " +
          "delete the tags or set error_if_tagged_old_versions => false to keep them and clean up the rest")
    }
    val (removed, kept) = inspected.partition(i => old(i) && !tagged.contains(i.version))
    val working = kept.map(_.files).foldLeft(NoFiles)(_ ++ _)
    val verified = removed.map(_.files).foldLeft(NoFiles)(_ ++ _)
    val unverifiedBefore = now.minus(UnverifiedAge)

    val root = storage.root.toUri.getPath.stripSuffix("/") + "/"
    val garbage = listAll(storage).flatMap { st =>
      val rel = st.getPath.toUri.getPath.stripPrefix(root)
      val modified = Instant.ofEpochMilli(st.getModificationTime)
      val maybeInProgress = !policy.deleteUnverified && !modified.isBefore(unverifiedBefore)
      classify(rel, working, verified, maybeInProgress, latest).map(kind => RemovedFile(rel, kind, st.getLen))
    }
    val manifests = removed.map(i => RemovedFile(s"${ManifestNaming.Dir}/${i.status.getPath.getName}", "manifest",
      i.status.getLen))
    if (!policy.dryRun) {
      (manifests ++ garbage).foreach { f =>
        val p = storage.resolve(f.path, f.kind + " file")
        if (!storage.fs.delete(p, false) && storage.fs.exists(p))
          throw new java.io.IOException(s"${storage.uri}: could not delete $p")
      }
      pruneEmptyDirs(storage, garbage.filter(_.kind == "index").map(_.path))
      // a stale hint (a writer that writes none committed since) would start the
      // latest-version probes at a version kept below removed ones: point it at the latest
      if (removed.nonEmpty && VersionLookup.readHint(storage).forall(_ < latest))
        VersionLookup.writeHint(storage, latest)
    }
    CleanupResult(removed.map(_.version), manifests ++ garbage,
      kept.filter(i => old(i) && tagged.contains(i.version)).map(_.version), policy.dryRun)
  }

  private def timestamp(m: Manifest): Instant =
    if (m.hasTimestamp) Instant.ofEpochSecond(m.getTimestamp.getSeconds, m.getTimestamp.getNanos.toLong)
    else Instant.EPOCH

  /** The kind of file `rel` is if it is garbage, None if it stays. */
  private def classify(rel: String, working: Referenced, verified: Referenced, maybeInProgress: Boolean,
      latest: Long): Option[String] = {
    def decide(kind: String, inWorking: Boolean, inVerified: Boolean): Option[String] =
      if (inWorking) None
      else if (!maybeInProgress || inVerified) Some(kind)
      else None
    val ext = rel.substring(rel.lastIndexOf('.') + 1)
    if (rel.startsWith(s"${ManifestNaming.Dir}/.tmp")) (if (maybeInProgress) None else Some("temporary"))
    else if (rel.startsWith(s"${ManifestNaming.Dir}/") && ExternalManifestCommit.stagedFinalName(rel).isDefined) {
      // a staged manifest (external store) left by a writer that lost or was killed; the
      // latest version's own was finished when the versions were listed
      val version = ExternalManifestCommit.stagedFinalName(rel).flatMap(n => ManifestNaming.parse(n.split('/').last))
      if (version.exists(_._2 <= latest) || !maybeInProgress) Some("staged manifest") else None
    }
    else if (rel.startsWith("_indices/")) {
      rel.split('/').lift(1).filter(_ => rel.count(_ == '/') >= 2)
        .flatMap(uuid => decide("index", working.indices(uuid), verified.indices(uuid)))
    }
    else if (ext == "lance" && rel.startsWith("data/")) decide("data", working.data(rel), verified.data(rel))
    else if ((ext == "arrow" || ext == "bin") && rel.startsWith("_deletions/"))
      decide("deletion", working.deletions(rel), verified.deletions(rel))
    else if (ext == "txn" && rel.startsWith(s"${TransactionFile.Dir}/"))
      decide("transaction", working.transactions(rel), verified.transactions(rel))
    else None
  }

  private def referenced(storage: DatasetStorage, m: Manifest, indexSection: Option[Array[Byte]]): Referenced = {
    val frags = m.getFragmentsList.asScala
    val indices = indexSection.map(b => IndexSection.parseFrom(b).getIndicesList.asScala.map(i => uuid(i.getUuid.getUuid.toByteArray)).toSet)
      .getOrElse(Set.empty)
    Referenced(
      data = frags.flatMap(_.getFilesList.asScala.map(f => s"data/${f.getPath}")).toSet,
      deletions = frags.filter(_.hasDeletionFile).map(f => DeletionVector.relativePath(f.getId, f.getDeletionFile)).toSet,
      transactions = Option(m.getTransactionFile).filter(_.nonEmpty).map(t => s"${TransactionFile.Dir}/$t").toSet,
      indices = indices)
  }

  private def uuid(bytes: Array[Byte]): String =
    if (bytes.length != 16) bytes.map("%02x".format(_)).mkString
    else {
      val bb = ByteBuffer.wrap(bytes)
      new UUID(bb.getLong, bb.getLong).toString
    }

  private def listAll(storage: DatasetStorage): Seq[FileStatus] = {
    val it = storage.fs.listFiles(storage.root, true)
    val out = Seq.newBuilder[FileStatus]
    while (it.hasNext) out += it.next()
    out.result()
  }

  /** Index directories left empty by the removal of their files. */
  private def pruneEmptyDirs(storage: DatasetStorage, removed: Seq[String]): Unit =
    removed.flatMap(_.split('/').take(2) match {
      case Array(a, b) => Some(new Path(storage.root, s"$a/$b"))
      case _ => None
    }).distinct.foreach { d =>
      if (storage.fs.exists(d) && storage.fs.listStatus(d).isEmpty) storage.fs.delete(d, true)
    }
}
