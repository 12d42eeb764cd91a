package io.lancespark.spark.write

import org.apache.arrow.vector.types.pojo.ArrowType
import org.apache.spark.sql.connector.expressions.filter.Predicate

import io.lancespark.format.v2.PageStat
import io.lancespark.spark.MetadataColumns
import io.lancespark.spark.read.PredicateTranslation
import io.lancespark.table._
import io.lancespark.table.filter.{ColumnStats, Filter, FragmentStats, StatsPruner}

/** DELETE whose condition statistics or `_fragid` prove to cover whole
  * fragments: the fragments are dropped from the manifest, no job runs. */
object MetadataDelete {

  /** The fragments to drop, if every fragment is decided (all rows or none match). */
  def plan(snapshot: Snapshot, predicates: Array[Predicate]): Option[Seq[FragmentInfo]] = {
    val translated = predicates.toSeq.map(p => PredicateTranslation.translate(p, Set(MetadataColumns.FragId)))
    if (translated.exists(_.isEmpty)) return None
    val filter = Filter.and(translated.flatten)
    val decided = snapshot.fragments.map { frag =>
      val stats = FragmentStats.columnStats(filter.columns.filterNot(_.head == MetadataColumns.FragId),
        snapshot.schema, frag, ref => FragmentStats.read(snapshot.storage, ref)) ++ fragIdStats(frag)
      val (may, all) = StatsPruner.candidateRanges(filter, stats, frag.physicalRows)
      if (may != all) None
      else if (all.isEmpty) Some(None)
      else if (all.count == frag.physicalRows) Some(Some(frag))
      else None
    }
    if (decided.exists(_.isEmpty)) None else Some(decided.flatMap(_.flatten))
  }

  def commit(snapshot: Snapshot, drop: Seq[FragmentInfo]): Unit = if (drop.nonEmpty) {
    val deletions = drop.map(f => FragmentDeletion(f.id, f.physicalRows, f.deletion, None))
    Committer.commit(snapshot.storage, Some(snapshot.version),
      RowLevelChange(deletions, Nil, "DELETE (whole fragments)"), CommitSettings())
  }

  private def fragIdStats(frag: FragmentInfo): Map[Filter.Column, ColumnStats] = Map(
    Vector(MetadataColumns.FragId) -> ColumnStats.Pages(new ArrowType.Int(32, true), IndexedSeq(
      PageStat(-1, -1, 0, 0L, frag.physicalRows, 0L, Some(java.lang.Long.valueOf(frag.id)),
        Some(java.lang.Long.valueOf(frag.id))))))
}
