package io.lancespark.table.filter

import io.lancespark.table.model.FragmentInfo
import io.lancespark.table.storage.Snapshot

/** Which whole fragments a filter selects, from statistics alone. */
object FragmentPruner {

  /** The fragments every row of which `filter` matches, if statistics decide
    * every fragment (all of its rows match, or none); None otherwise. A column
    * named `fragIdColumn` (a single-part name) stands for the fragment's id. */
  def wholeFragments(snapshot: Snapshot, filter: Filter, fragIdColumn: String): Option[Seq[FragmentInfo]] = {
    val columns = filter.columns.filterNot(_.head == fragIdColumn)
    FragmentStats.prefetch(snapshot.storage, columns, snapshot.schema, snapshot.fragments)
    val decided = snapshot.fragments.map { frag =>
      val stats = FragmentStats.columnStats(columns, snapshot.schema, frag,
        ref => FragmentStats.read(snapshot.storage, ref)) +
        (Vector(fragIdColumn) -> ColumnStats.constant(frag.id, frag.physicalRows))
      val (may, all) = StatsPruner.candidateRanges(filter, stats, frag.physicalRows)
      if (may != all) None
      else if (all.isEmpty) Some(None)
      else if (all.count == frag.physicalRows) Some(Some(frag))
      else None
    }
    if (decided.exists(_.isEmpty)) None else Some(decided.flatMap(_.flatten.toList))
  }
}
