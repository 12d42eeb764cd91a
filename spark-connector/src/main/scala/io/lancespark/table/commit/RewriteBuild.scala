package io.lancespark.table.commit

import scala.jdk.CollectionConverters._

import com.google.protobuf.ByteString

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.{DataFragment, IndexMetadata, Transaction}
import io.lancespark.table.model.FeatureFlags
import io.lancespark.table.storage.{DatasetStorage, Indices, RowDeletions}

/** The manifest of a compaction (Rewrite), built on the latest version as the
  * reference applies a Rewrite: each group's old fragments are replaced in
  * place (where they are still adjacent, else removed and the new ones
  * appended) by new fragments with fresh ids.
  *
  * Indices: with stable row ids the rows keep their ids, so an index that
  * covered a group's old fragments covers its new ones (the fragment bitmap is
  * recalculated, as the reference does). Without them an index addresses rows
  * by fragment and offset and this connector cannot remap index files: the
  * bitmaps stay as they are, so the index still names the old fragments, now
  * gone, whose entries readers drop, and the new fragments are outside every
  * index and scanned unindexed (what the reference commits for a rewrite with
  * no rewritten indices). */
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
    val lastId = groups.flatMap(_._2).map(_.getId).maxOption

    val b = Committer.stamp(prev.toBuilder, version, settings).clearFragments().addAllFragments(fragments.asJava)
    lastId.foreach(id => b.setMaxFragmentId(id.toInt))
    val indexSection = base.flatMap(_.indexSection).map { bytes =>
      if (!stable) bytes
      else Indices.serialize(Indices.parse(bytes, storage.uri).map(recalculate(storage, _, groups)))
    }
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

  /** `frags` with the fragments `old` replaced by `added`: at their place when
    * they are adjacent there in order, else removed and `added` appended. */
  private def replace(frags: Vector[DataFragment], old: Seq[Long], added: Vector[DataFragment]): Vector[DataFragment] = {
    val start = frags.indexWhere(_.getId == old.head)
    if (start >= 0 && frags.slice(start, start + old.size).map(_.getId) == old) frags.patch(start, added, old.size)
    else frags.filterNot(f => old.contains(f.getId)) ++ added
  }

  /** With stable row ids: an index covering a group's old fragments covers its
    * new ones instead. A group only partly covered cannot be (the plan keeps
    * indexed and unindexed fragments apart; a concurrent index build over
    * them is a conflict). */
  private def recalculate(storage: DatasetStorage, index: IndexMetadata,
      groups: Seq[(RewriteGroupResult, Vector[DataFragment])]): IndexMetadata =
    Indices.fragments(index) match {
      case None => index
      case Some(covered) =>
        val out = covered.clone()
        groups.foreach { case (g, added) =>
          val old = g.old.map(_.getId.toInt)
          val in = old.count(id => covered.contains(id))
          if (in == old.size) {
            old.foreach(id => out.remove(id))
            added.foreach(f => out.add(f.getId.toInt))
          } else if (in > 0)
            throw new CommitConflictException(
              s"${storage.uri}: index ${Indices.name(index)} covers only some of fragments ${old.mkString(", ")}, " +
                "which one compaction group rewrites; run the compaction again")
        }
        if (out == covered) index else Indices.withFragments(index, out)
    }
}
