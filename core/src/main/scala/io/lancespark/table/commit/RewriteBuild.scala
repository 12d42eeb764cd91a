package io.lancespark.table.commit

import scala.jdk.CollectionConverters._

import com.google.protobuf.ByteString

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.{DataFragment, Transaction}
import io.lancespark.table.model.FeatureFlags
import io.lancespark.table.storage.{DatasetStorage, RowDeletions}

/** The manifest of a compaction (Rewrite), built on the latest version: each
  * group's old fragments are removed and its new fragments, with fresh ids,
  * appended (fragments stay in id order, as pylance 14 requires).
  *
  * Indices keep their metadata as it is: pylance 14's indices address rows by
  * fragment and offset (its scalar indices too, even with stable row ids), so
  * moving an index's coverage to the new fragments would need its files
  * remapped, which this connector cannot do. The index still names the old
  * fragments, now gone, whose entries readers drop (missing fragments are
  * masked out), and the new fragments are outside every index and scanned
  * unindexed: what the reference commits for a rewrite with no rewritten
  * indices. (The reference's rule of moving bitmaps to the new fragments with
  * stable row ids makes pylance 14 find no rows.) */
private[commit] object RewriteBuild {

  def apply(storage: DatasetStorage, base: Option[Committer.Base], op: RewriteFragments, readVersion: Long,
      version: Long, settings: CommitSettings): Committer.Built = {
    val prev = base.map(_.manifest).getOrElse(
      throw new LanceFormatException(s"${storage.uri}: not a Lance dataset; nothing to compact"))
    Committer.requireSameFileFormat(storage, Some(prev), op.fragments)
    val stable = (prev.getReaderFeatureFlags & FeatureFlags.StableRowIds) != 0
    val current = prev.getFragmentsList.asScala.toVector
    requireUnchanged(storage, readVersion, current, op)

    val firstId = Committer.nextFragmentId(prev)
    val ids = Iterator.from(0).map(firstId + _)
    val groups: Seq[(RewriteGroupResult, Vector[DataFragment])] =
      op.groups.map(g => g -> g.added.toVector.map(r => fragment(storage, ids.next(), r, stable)))
    val fragments = groups.foldLeft(current) { case (frags, (g, added)) => replace(frags, g.old.map(_.getId), added) }
    val lastId = groups.flatMap(_._2).map(_.getId).reduceOption(_ max _)

    val b = Committer.stamp(prev.toBuilder, version, settings).clearFragments().addAllFragments(fragments.asJava)
    lastId.foreach(id => b.setMaxFragmentId(id.toInt))
    val indexSection = base.flatMap(_.indexSection)  // unchanged: see above
    val txn = io.lancespark.table.storage.TransactionFile.newTransaction(readVersion)
      .setRewrite(Transaction.Rewrite.newBuilder().addAllGroups(groups.map { case (g, added) =>
        Transaction.Rewrite.RewriteGroup.newBuilder().addAllOldFragments(g.old.asJava).addAllNewFragments(added.asJava)
          .build()
      }.asJava))
    Committer.Built(b.build(), indexSection, txn.build())
  }

  /** Every old fragment must be in the latest version as the compaction read
    * it (same data files, same deletion file): a commit since then that
    * deleted rows there would otherwise be lost. The transaction checks catch
    * this first; this holds even where a transaction file is unreadable. */
  private def requireUnchanged(storage: DatasetStorage, readVersion: Long, current: Vector[DataFragment],
      op: RewriteFragments): Unit = {
    val byId = current.map(f => f.getId -> f).toMap
    op.groups.flatMap(_.old).foreach { old =>
      def conflict(what: String) = new CommitConflictException(
        s"${storage.uri}: cannot commit a compaction read at version $readVersion: fragment ${old.getId} $what " +
          "since; run the compaction again")
      byId.get(old.getId) match {
        case None => throw conflict("was removed")
        case Some(now) =>
          val deletion = (f: DataFragment) => if (f.hasDeletionFile) Some(f.getDeletionFile) else None
          if (now.getFilesList.asScala.map(_.getPath) != old.getFilesList.asScala.map(_.getPath))
            throw conflict("had its data files changed")
          if (!RowDeletions.sameFile(deletion(now), deletion(old))) throw conflict("had rows deleted")
      }
    }
  }

  private def fragment(storage: DatasetStorage, id: Long, r: RewrittenFragment, stable: Boolean): DataFragment = {
    val f = DataFragment.newBuilder().setId(id).setPhysicalRows(r.file.physicalRows).addFiles(Committer.dataFile(r.file))
    if (stable) {
      val rowIds = r.rowIds.getOrElse(throw new IllegalStateException(
        s"${storage.uri}: rewritten file ${r.file.path} carries no row ids, and the dataset has stable row ids"))
      f.setInlineRowIds(ByteString.copyFrom(rowIds))
      r.createdAtVersions.foreach(v => f.setInlineCreatedAtVersions(ByteString.copyFrom(v)))
      r.lastUpdatedAtVersions.foreach(v => f.setInlineLastUpdatedAtVersions(ByteString.copyFrom(v)))
    }
    f.build()
  }

  /** `frags` without the fragments `old`, with `added` at the end: a
    * manifest lists fragments in increasing id order (pylance 14 refuses
    * others), and new ids are the highest. */
  private def replace(frags: Vector[DataFragment], old: Seq[Long], added: Vector[DataFragment]): Vector[DataFragment] = {
    val gone = old.toSet
    frags.filterNot(f => gone.contains(f.getId)) ++ added
  }
}
