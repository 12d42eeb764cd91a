package io.lancespark.spark.write

import org.apache.spark.sql.connector.expressions.filter.Predicate

import io.lancespark.spark.MetadataColumns
import io.lancespark.spark.read.PredicateTranslation
import io.lancespark.table.filter.{Filter, FragmentPruner}
import io.lancespark.table.commit.{CommitSettings, RowLevelWrites}
import io.lancespark.table.model.FragmentInfo
import io.lancespark.table.storage.Snapshot

/** DELETE whose condition statistics or `_fragid` prove to cover whole
  * fragments: the fragments are dropped from the manifest, no job runs. */
object MetadataDelete {

  /** The fragments to drop, if every fragment is decided (all rows or none match). */
  def fragmentsToDrop(snapshot: Snapshot, predicates: Array[Predicate]): Option[Seq[FragmentInfo]] = {
    val translated = predicates.toSeq.map(p => PredicateTranslation.translate(p, Set(MetadataColumns.FragId)))
    if (translated.exists(_.isEmpty)) None
    else FragmentPruner.wholeFragments(snapshot, Filter.and(translated.flatten), MetadataColumns.FragId)
  }

  def commit(snapshot: Snapshot, drop: Seq[FragmentInfo]): Unit = if (drop.nonEmpty) {
    RowLevelWrites.dropFragments(snapshot, drop, "DELETE (whole fragments)", CommitSettings())
  }
}
