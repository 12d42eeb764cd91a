package io.lancespark.table.maintenance

import scala.annotation.tailrec
import scala.jdk.CollectionConverters._
import scala.util.{Failure, Success, Try}

import org.apache.arrow.memory.BufferAllocator

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.{DataFragment, Transaction}
import io.lancespark.table.commit.{CommitConflictException, CommitSettings, CommittedTransactions, Committer, ConflictChecker,
  RewriteFragments, RewriteGroupResult}
import io.lancespark.table.model.{DataFileVersion, FragmentInfo}
import io.lancespark.table.storage.{Dataset, DatasetStorage, FragmentWriter, Indices, TransactionFile}
import io.lancespark.table.storage.Snapshot

/** How a compaction chooses and rewrites fragments; the reference's options
  * (pylance's `compact_files`) and defaults. `maxRowsPerGroup`: rows per batch
  * read from the old fragments and handed to the file writer. */
final case class CompactionOptions(
    targetRowsPerFragment: Long = 1024L * 1024L,
    maxRowsPerGroup: Int = 1024,
    materializeDeletions: Boolean = true,
    materializeDeletionsThreshold: Double = 0.1) {
  require(targetRowsPerFragment > 0, s"target_rows_per_fragment must be positive, got $targetRowsPerFragment")
  require(maxRowsPerGroup > 0, s"max_rows_per_group must be positive, got $maxRowsPerGroup")
  require(!materializeDeletionsThreshold.isNaN, "materialize_deletions_threshold must be a number")

  /** As the reference: a threshold of 100% or more materializes nothing. */
  def materializes: Boolean = materializeDeletions && materializeDeletionsThreshold < 1.0
}

/** What the planner knows of a fragment: its rows and the indices covering it. */
final case class FragmentStat(id: Long, physicalRows: Long, deletedRows: Long, indices: Set[Int]) {
  def liveRows: Long = physicalRows - deletedRows
  def deletedShare: Double = if (physicalRows > 0) deletedRows.toDouble / physicalRows else 0.0
}

/** One task of a compaction: adjacent fragments rewritten together. */
final case class CompactionGroup(fragmentIds: Vector[Long], liveRows: Long, deletedRows: Long)

/** The groups to rewrite, planned on `readVersion`. */
final case class CompactionPlan(uri: String, readVersion: Long, fileVersion: DataFileVersion,
    groups: Vector[CompactionGroup], options: CompactionOptions)

/** What one compaction did (all zero when there was nothing to compact, and
  * then nothing was committed). */
final case class CompactionMetrics(
    readVersion: Long,
    newVersion: Option[Long],
    groups: Int,
    fragmentsRemoved: Int,
    fragmentsAdded: Int,
    filesRemoved: Int,
    filesAdded: Int,
    rowsRewritten: Long,
    deletionsMaterialized: Long,
    groupsSkipped: Int)

/** Compaction, as the reference's `compact_files`: small fragments are merged
  * into fragments of about `targetRowsPerFragment` rows, and fragments whose
  * deleted share passes the threshold are rewritten without their deleted
  * rows, all committed as one Rewrite transaction. Plan on the driver,
  * `CompactionRewrite.rewrite` each group (anywhere: an executor), `commit`
  * on the driver; `run` does all three here. */
object Compaction {

  /** Groups of adjacent fragments worth rewriting, as the reference plans them:
    * a fragment is a candidate when its deleted share passes the threshold
    * (rewritten even alone) or when it has fewer physical rows than the target
    * (rewritten only with candidate neighbours); runs of adjacent candidates
    * covered by the same indices form bins, a bin of one small fragment is
    * left alone, and bins are cut where they reach the target's live rows
    * (a remainder below it stays with the last cut). */
  def planGroups(fragments: Seq[FragmentStat], options: CompactionOptions): Vector[Vector[FragmentStat]] = {
    def rewritesItself(f: FragmentStat): Boolean =
      options.materializes && f.deletedShare > options.materializeDeletionsThreshold
    def candidate(f: FragmentStat): Boolean = rewritesItself(f) || f.physicalRows < options.targetRowsPerFragment
    val bins = fragments.foldLeft(Vector.empty[Vector[FragmentStat]] -> Vector.empty[FragmentStat]) {
      case ((done, open), f) =>
        if (!candidate(f)) (if (open.isEmpty) done else done :+ open) -> Vector.empty
        else if (open.isEmpty || open.head.indices == f.indices) done -> (open :+ f)
        else (done :+ open) -> Vector(f)
    } match { case (done, open) => if (open.isEmpty) done else done :+ open }
    bins.filterNot(b => b.size == 1 && !rewritesItself(b.head)).flatMap(split(_, options.targetRowsPerFragment))
  }

  private def split(bin: Vector[FragmentStat], target: Long): Vector[Vector[FragmentStat]] = {
    val sums = bin.scanLeft(0L)(_ + _.liveRows)
    val cut = sums.indexWhere(_ >= target) match { case -1 => bin.size; case i => i }
    if (cut < bin.size && sums.last - sums(cut) >= target) bin.take(cut) +: split(bin.drop(cut), target)
    else Vector(bin)
  }

  /** The plan for the latest version (or `version`) of a dataset. */
  def plan(snapshot: Snapshot, options: CompactionOptions): CompactionPlan = {
    val where = s"${snapshot.storage.uri} (version ${snapshot.version})"
    val fileVersion = DataFileVersion.ofDataset(snapshot.fileVersion).getOrElse(throw new LanceFormatException(
      s"$where: cannot compact a dataset of file version ${snapshot.fileVersion}: this connector writes only " +
        s"${DataFileVersion.Accepted}"))
    snapshot.schema.allFields.find(f => f.metadata.contains("lance-encoding:blob") ||
        f.metadata.get("ARROW:extension:name").contains("lance.blob.v2")).foreach { f =>
      throw new LanceFormatException(s"$where: cannot compact: column '${f.name}' is a blob column, which this " +
        "connector does not write")
    }
    val coverage = indexCoverage(snapshot)
    val stats = snapshot.fragments.map(f => FragmentStat(f.id, f.physicalRows, f.deletedRows,
      coverage.zipWithIndex.collect { case (covers, i) if covers(f.id) => i }.toSet))
    val groups = planGroups(stats, options).map(g =>
      CompactionGroup(g.map(_.id), g.map(_.liveRows).sum, g.map(_.deletedRows).sum))
    CompactionPlan(snapshot.storage.uri, snapshot.version, fileVersion, groups, options)
  }

  /** For each index: whether it covers a fragment id. An index without a
    * fragment bitmap covers what its version had, as the reference assumes. */
  private def indexCoverage(snapshot: Snapshot): Seq[Long => Boolean] =
    Indices.of(snapshot).map { index =>
      Indices.fragments(index) match {
        case Some(bitmap) => (id: Long) => bitmap.contains(id.toInt)
        case None =>
          val max = scala.util.Try(Dataset.open(snapshot.storage, Some(index.getDatasetVersion)))
            .map(s => s.fragments.map(_.id).reduceOption(_ max _).getOrElse(-1L)).getOrElse(Long.MaxValue)
          (id: Long) => id <= max
      }
    }

  /** Commits the rewritten groups as one Rewrite read at the plan's version.
    * Concurrent appends are rebased onto. A group whose fragments another
    * writer changed since (a delete, update or compaction there) is left out
    * and its files removed, so no committed change is lost and the other
    * groups still land (the reference allows committing a subset of the
    * tasks); when every group conflicts, or the dataset was replaced, the
    * compaction fails, naming the other version and the fragments. */
  def commit(storage: DatasetStorage, plan: CompactionPlan, snapshot: Snapshot, results: Seq[RewrittenGroup],
      settings: CommitSettings = CommitSettings()): CompactionMetrics = {
    val byId: Map[Long, FragmentInfo] = snapshot.fragments.map(f => f.id -> f).toMap
    def discard(rs: Seq[RewrittenGroup]): Unit = rs.flatMap(_.added).foreach(a => FragmentWriter.delete(storage, a.file.path))

    val known = new CommittedTransactions(storage)

    @tailrec
    def attempt(pending: Seq[RewrittenGroup], skipped: Int, n: Int): CompactionMetrics = {
      val since = known.since(plan.readVersion)
      val reasons = pending.map(r => r -> conflict(plan.readVersion, r.group, since)).toMap
      val (kept, dropped) = pending.partition(r => reasons(r).isEmpty)
      discard(dropped)
      if (kept.isEmpty)
        throw new CommitConflictException(s"${storage.uri}: cannot commit a compaction read at version " +
          s"${plan.readVersion}: ${dropped.flatMap(reasons(_)).distinct.mkString("; ")}; run the compaction again")
      val op = RewriteFragments(kept.map(r => RewriteGroupResult(r.group.fragmentIds.map(byId(_).proto), r.added)))
      Try(Committer.commit(storage, Some(plan.readVersion), op, settings, known)) match {
        case Success(committed) => metrics(plan, byId, kept, committed.version, skipped + dropped.size)
        case Failure(_: CommitConflictException) if n < 3 => attempt(kept, skipped + dropped.size, n + 1)
        case Failure(e) => discard(kept); throw e
      }
    }
    if (results.isEmpty) empty(plan.readVersion) else attempt(results, 0, 1)
  }

  /** Why a group cannot be committed on the latest version, if it cannot: a
    * transaction committed since the read version that conflicts with it. */
  private def conflict(readVersion: Long, group: CompactionGroup, since: Seq[(Long, Option[Transaction])]): Option[String] = {
    val probe = TransactionFile.newTransaction(readVersion).setRewrite(Transaction.Rewrite.newBuilder().addGroups(
      Transaction.Rewrite.RewriteGroup.newBuilder().addAllOldFragments(group.fragmentIds.map(id =>
        DataFragment.newBuilder().setId(id).build()).asJava))).build()
    since.iterator.flatMap { case (v, theirs) =>
      ConflictChecker.check(probe, theirs) match {
        case ConflictChecker.Conflict(reason) => Some(s"version $v was committed concurrently and $reason")
        case _ => None
      }
    }.find(_ => true)
  }

  private def metrics(plan: CompactionPlan, byId: Map[Long, FragmentInfo], results: Seq[RewrittenGroup],
      version: Long, skipped: Int): CompactionMetrics = {
    val old = results.flatMap(_.group.fragmentIds).map(byId)
    CompactionMetrics(plan.readVersion, Some(version), results.size,
      fragmentsRemoved = old.size,
      fragmentsAdded = results.map(_.added.size).sum,
      filesRemoved = old.map(f => f.files.size + f.deletion.size).sum,
      filesAdded = results.map(_.added.size).sum,
      rowsRewritten = results.map(_.rowsWritten).sum,
      deletionsMaterialized = results.map(_.group.deletedRows).sum,
      groupsSkipped = skipped)
  }

  def empty(readVersion: Long): CompactionMetrics = CompactionMetrics(readVersion, None, 0, 0, 0, 0, 0, 0L, 0L, 0)

  /** Plans, rewrites every group here, one after the other, and commits. */
  def run(storage: DatasetStorage, options: CompactionOptions, allocator: BufferAllocator,
      settings: CommitSettings = CommitSettings()): CompactionMetrics = {
    val snapshot = Dataset.open(storage, None)
    val p = plan(snapshot, options)
    val prefix = CompactionRewrite.newPrefix()
    val results =
      try p.groups.map(g => CompactionRewrite.rewrite(storage, snapshot, g, options, allocator, prefix))
      catch { case e: Throwable => FragmentWriter.sweep(storage, prefix); throw e }
    commit(storage, p, snapshot, results, settings)
  }
}
