package io.lancespark.table.filter

import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.format.v2.PageStat
import io.lancespark.table.{FragmentInfo, Snapshot}

/** Which whole fragments a filter selects, from statistics alone. */
object FragmentPruner {

  /** The fragments every row of which `filter` matches, if statistics decide
    * every fragment (all of its rows match, or none); None otherwise. A column
    * named `fragIdColumn` (a single-part name) stands for the fragment's id. */
  def wholeFragments(snapshot: Snapshot, filter: Filter, fragIdColumn: String): Option[Seq[FragmentInfo]] = {
    val decided = snapshot.fragments.map { frag =>
      val stats = FragmentStats.columnStats(filter.columns.filterNot(_.head == fragIdColumn),
        snapshot.schema, frag, ref => FragmentStats.read(snapshot.storage, ref)) ++ fragIdStats(fragIdColumn, frag)
      val (may, all) = StatsPruner.candidateRanges(filter, stats, frag.physicalRows)
      if (may != all) None
      else if (all.isEmpty) Some(None)
      else if (all.count == frag.physicalRows) Some(Some(frag))
      else None
    }
    if (decided.exists(_.isEmpty)) None else Some(decided.flatMap(_.flatten))
  }

  /** The fragment id as a column of one page holding that value in every row. */
  private def fragIdStats(column: String, frag: FragmentInfo): Map[Filter.Column, ColumnStats] = Map(
    Vector(column) -> ColumnStats.Pages(new ArrowType.Int(32, true), IndexedSeq(
      PageStat(-1, -1, 0, 0L, frag.physicalRows, 0L, Some(java.lang.Long.valueOf(frag.id)),
        Some(java.lang.Long.valueOf(frag.id))))))
}
