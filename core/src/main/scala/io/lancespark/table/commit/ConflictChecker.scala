package io.lancespark.table.commit

import scala.jdk.CollectionConverters._

import io.lancespark.proto.table.Transaction
import io.lancespark.proto.table.Transaction.OperationCase

/** Whether a transaction may still commit after others committed since its
  * read version. Conservative, as the spec asks: a missing or unknown
  * transaction conflicts. */
object ConflictChecker {

  sealed trait Verdict
  case object Compatible extends Verdict
  /** Both changed rows of these fragments and one was an update: compatible
    * only if they deleted (or rewrote) disjoint rows there, which the commit
    * checks against the deletion files. */
  final case class CompatibleIfRowsDisjoint(fragments: Set[Long]) extends Verdict
  final case class Conflict(reason: String) extends Verdict

  def check(ours: Transaction, theirs: Option[Transaction]): Verdict = theirs match {
    case None => Conflict("its transaction file is missing or unreadable")
    case Some(t) => check(ours, t)
  }

  private def check(ours: Transaction, theirs: Transaction): Verdict = {
    import OperationCase._
    val their = theirs.getOperationCase
    if (isColumnUpdate(ours)) return columnUpdate(ours, theirs)
    ours.getOperationCase match {
      case APPEND =>
        their match {
          // new fragments do not touch what these change
          case APPEND | DELETE | UPDATE | CREATE_INDEX | REWRITE | RESERVE_FRAGMENTS | UPDATE_CONFIG => Compatible
          // new values in existing fragments' files: appended fragments keep theirs
          case DATA_REPLACEMENT => Compatible
          case OVERWRITE | RESTORE => Conflict(s"it replaced the dataset (${name(their)})")
          case MERGE | PROJECT =>
            Conflict(s"it changed the schema or the data files (${name(their)}), which appended fragments would miss")
          case other => Conflict(s"it is an operation this connector does not know how to reconcile (${name(other)})")
        }
      case DELETE | UPDATE =>
        their match {
          case APPEND | CREATE_INDEX | RESERVE_FRAGMENTS | UPDATE_CONFIG => Compatible
          case REWRITE =>
            // as the reference: a compaction of other fragments does not touch these rows
            val overlap = rewrittenFragments(theirs).intersect(touchedFragments(ours))
            if (overlap.isEmpty) Compatible
            else Conflict(s"it compacted (rewrote) fragment${plural(overlap)} this change also modifies")
          case UPDATE | DATA_REPLACEMENT if isColumnUpdate(theirs) =>
            // a delete keeps the fragments' files as they are now (with the new
            // values); an update's rewritten rows carry the values it read
            if (ours.getOperationCase == DELETE) Compatible
            else {
              val overlap = columnUpdateFragments(theirs).intersect(touchedFragments(ours))
              if (overlap.isEmpty) Compatible
              else Conflict(s"it replaced column values in fragment${plural(overlap)}, whose rows this update " +
                "rewrote with the values it read (they would be lost); run the update again")
            }
          case DELETE | UPDATE =>
            val touched = touchedFragments(ours)
            val overlap = touchedFragments(theirs).intersect(touched)
            if (overlap.isEmpty) Compatible
            // two pure deletes commute: the commit merges both deletion sets
            else if (ours.getOperationCase == DELETE && their == DELETE) Compatible
            else CompatibleIfRowsDisjoint(overlap)
          case other => Conflict(s"it ${name(other)} the dataset, which row-level changes cannot be rebased onto")
        }
      case REWRITE =>
        // the reference's rules for a compaction: compatible with what does not
        // touch the fragments it rewrote; a conflict otherwise
        val ourOld = rewrittenFragments(ours)
        their match {
          case APPEND | RESERVE_FRAGMENTS | PROJECT | UPDATE_CONFIG => Compatible
          case DELETE | UPDATE | REWRITE =>
            val overlap = (if (their == REWRITE) rewrittenFragments(theirs) else touchedFragments(theirs)).intersect(ourOld)
            if (overlap.isEmpty) Compatible
            else Conflict(s"it ${if (their == REWRITE) "compacted" else "deleted or updated rows of"} " +
              s"fragment${plural(overlap)}, which this compaction rewrote")
          case DATA_REPLACEMENT =>
            val overlap = theirs.getDataReplacement.getReplacementsList.asScala.map(_.getFragmentId).toSet.intersect(ourOld)
            if (overlap.isEmpty) Compatible else Conflict(s"it replaced data files of fragment${plural(overlap)}")
          case CREATE_INDEX =>
            val indices = theirs.getCreateIndex.getNewIndicesList.asScala.toSeq
            val covered = indices.map(i => io.lancespark.table.storage.Indices.fragments(i))
            if (covered.exists(_.isEmpty)) Conflict("it built an index over fragments it does not list")
            else {
              val overlap = ourOld.filter(id => covered.flatten.exists(_.contains(id.toInt)))
              if (overlap.isEmpty) Compatible
              else Conflict(s"it built an index over fragment${plural(overlap)}, which this compaction rewrote")
            }
          case OVERWRITE | RESTORE => Conflict(s"it replaced the dataset (${name(their)})")
          case other => Conflict(s"it is an operation a compaction cannot be rebased onto (${name(other)})")
        }
      case CREATE_INDEX =>
        // the reference's rules: indices are told apart by uuid; deleted or
        // updated rows keep their addresses; a compaction moves the rows of
        // the fragments it rewrote, so those must not be covered
        their match {
          case UPDATE if isColumnUpdate(theirs) =>
            val indexed = ours.getCreateIndex.getNewIndicesList.asScala.flatMap(_.getFieldsList.asScala).toSet
            val replaced = theirs.getUpdate.getFieldsModifiedList.asScala.toSet
            if (indexed.intersect(replaced).isEmpty) Compatible
            else Conflict("it replaced the values of the indexed column (update_columns); build the index again")
          case APPEND | CREATE_INDEX | DELETE | UPDATE | MERGE | RESERVE_FRAGMENTS | PROJECT | UPDATE_CONFIG |
               CLONE | UPDATE_BASES => Compatible
          case REWRITE =>
            val covered = ours.getCreateIndex.getNewIndicesList.asScala.toSeq.map(io.lancespark.table.storage.Indices.fragments)
            if (covered.exists(_.isEmpty)) Conflict("it compacted fragments and this index lists no fragments it covers")
            else {
              val overlap = rewrittenFragments(theirs).filter(id => covered.flatten.exists(_.contains(id.toInt)))
              if (overlap.isEmpty) Compatible
              else Conflict(s"it compacted (rewrote) fragment${plural(overlap)}, which this index covers: " +
                "its row addresses moved; build the index again")
            }
          case DATA_REPLACEMENT =>
            val indexed = ours.getCreateIndex.getNewIndicesList.asScala.flatMap(_.getFieldsList.asScala).toSet
            val replaced = theirs.getDataReplacement.getReplacementsList.asScala
              .flatMap(_.getNewFile.getFieldsList.asScala).toSet
            if (indexed.intersect(replaced).isEmpty) Compatible
            else Conflict("it replaced the data of the indexed column")
          case OVERWRITE | RESTORE => Conflict(s"it replaced the dataset (${name(their)})")
          case other => Conflict(s"it is an operation an index build cannot be rebased onto (${name(other)})")
        }
      case MERGE =>
        // adding columns (new data files beside every fragment's): the
        // reference's rules (compatible only with index builds, reserved ids and
        // config changes; a retryable conflict with anything that changes
        // fragments), except that a concurrent delete is rebased onto: the new
        // files cover every physical row, so the delete's deletion files hide
        // the same rows in them (fragments it removed whole are left out)
        their match {
          case CREATE_INDEX | RESERVE_FRAGMENTS | UPDATE_CONFIG | DELETE => Compatible
          case APPEND =>
            Conflict("it appended fragments, which would have no values for the added columns; " +
              "run add_columns again on the new version")
          case UPDATE =>
            Conflict("it updated rows (rewritten into new fragments, which would lose the added columns' values); " +
              "run add_columns again on the new version")
          case REWRITE =>
            Conflict("it compacted fragments (their rows moved to new fragments without the added columns); " +
              "run add_columns again on the new version")
          case MERGE | PROJECT | DATA_REPLACEMENT =>
            Conflict(s"it changed the schema or the data files (${name(their)}); run add_columns again on the new version")
          case OVERWRITE | RESTORE => Conflict(s"it replaced the dataset (${name(their)})")
          case other => Conflict(s"it is an operation this connector does not know how to reconcile (${name(other)})")
        }
      case RESTORE =>
        // as the reference: a restore rebuilds from the old version whatever
        // was committed since (it replaces it), except state it cannot know
        their match {
          case OPERATION_NOT_SET => Conflict("it is an operation this connector does not know how to reconcile")
          case _ => Compatible
        }
      case _ =>
        // overwrite, schema changes and everything else: any concurrent commit conflicts
        Conflict(s"a concurrent ${name(their)} was committed and a ${name(ours.getOperationCase)} cannot be rebased onto it")
    }
  }

  /** Whether `t` replaces the values of columns in place (update_columns:
    * pylance's `Update` with `fields_modified` and no rewritten rows, or a
    * `DataReplacement`): fragments keep their rows and gain new files. */
  def isColumnUpdate(t: Transaction): Boolean = t.getOperationCase match {
    case OperationCase.DATA_REPLACEMENT => true
    case OperationCase.UPDATE =>
      val u = t.getUpdate
      u.getUpdateMode == Transaction.UpdateMode.REWRITE_COLUMNS ||
        (u.getFieldsModifiedCount > 0 && u.getNewFragmentsCount == 0 && u.getRemovedFragmentIdsCount == 0)
    case _ => false
  }

  private def columnUpdateFragments(t: Transaction): Set[Long] =
    if (t.getOperationCase == OperationCase.DATA_REPLACEMENT)
      t.getDataReplacement.getReplacementsList.asScala.map(_.getFragmentId).toSet
    else t.getUpdate.getUpdatedFragmentsList.asScala.map(_.getId).toSet

  /** Rules for replacing columns' values in place (update_columns): the
    * fragments keep their rows, so rows appended since keep the values they
    * were written with and a concurrent delete is rebased onto (its deletion
    * files hide the same rows in the new files). Anything that moved rows
    * (an update's rewrite, a compaction), changed the files or the schema, or
    * built an index over a replaced column conflicts: the update would lose
    * values or leave them stale. */
  private def columnUpdate(ours: Transaction, theirs: Transaction): Verdict = {
    import OperationCase._
    val their = theirs.getOperationCase
    val again = "; run update_columns again on the new version"
    their match {
      case APPEND | DELETE | RESERVE_FRAGMENTS | UPDATE_CONFIG => Compatible
      case CREATE_INDEX =>
        val replaced = ours.getUpdate.getFieldsModifiedList.asScala.toSet
        val indexed = theirs.getCreateIndex.getNewIndicesList.asScala.flatMap(_.getFieldsList.asScala).toSet
        if (indexed.intersect(replaced).isEmpty) Compatible
        else Conflict(s"it built an index over a column this update replaces (it would index the old values)$again")
      case UPDATE if isColumnUpdate(theirs) => Conflict(s"it replaced column values too$again")
      case UPDATE => Conflict(s"it updated rows (rewritten into new fragments with the old values of the " +
        s"replaced columns)$again")
      case REWRITE => Conflict(s"it compacted fragments (their rows moved to new fragments)$again")
      case MERGE | PROJECT | DATA_REPLACEMENT =>
        Conflict(s"it changed the schema or the data files (${name(their)})$again")
      case OVERWRITE | RESTORE => Conflict(s"it replaced the dataset (${name(their)})")
      case other => Conflict(s"it is an operation this connector does not know how to reconcile (${name(other)})")
    }
  }

  /** Fragments a delete/update modified or removed. */
  def touchedFragments(t: Transaction): Set[Long] = t.getOperationCase match {
    case OperationCase.DELETE =>
      val d = t.getDelete
      d.getUpdatedFragmentsList.asScala.map(_.getId).toSet ++ d.getDeletedFragmentIdsList.asScala.map(_.longValue)
    case OperationCase.UPDATE =>
      val u = t.getUpdate
      u.getUpdatedFragmentsList.asScala.map(_.getId).toSet ++ u.getRemovedFragmentIdsList.asScala.map(_.longValue)
    case _ => Set.empty
  }

  /** Fragments a rewrite (compaction) replaced. */
  def rewrittenFragments(t: Transaction): Set[Long] =
    if (t.getOperationCase != OperationCase.REWRITE) Set.empty
    else {
      val r = t.getRewrite
      (r.getOldFragmentsList.asScala ++ r.getGroupsList.asScala.flatMap(_.getOldFragmentsList.asScala)).map(_.getId).toSet
    }

  private def plural(ids: Set[Long]): String =
    (if (ids.size == 1) " " else "s ") + ids.toSeq.sorted.mkString(", ")

  def name(op: OperationCase): String =
    if (op == OperationCase.OPERATION_NOT_SET) "unknown operation" else op.name().toLowerCase.replace('_', ' ')
}
