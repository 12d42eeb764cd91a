package io.lancespark.table.plan

import io.lancespark.table.filter.{ColumnStats, FragmentStats, PageBounds}
import io.lancespark.table.filter.Filter.Column
import io.lancespark.table.storage.Snapshot

/** Where the rows of a scan may be cut so that no value of one column has rows
  * on both sides: physical rows of each planned fragment (fragment id to
  * sorted positions, 0 to the fragment's rows) at which every row read before
  * (fragments in plan order, rows in order) holds a smaller value than every
  * row read after.
  *
  * A GROUP BY that includes the column then has each group within one stretch
  * between two cuts: a task whose rows start and end at cuts can finish its
  * groups, and may hand out the groups it holds at any cut. */
final class Clustering private (cuts: Map[Long, Array[Long]]) {

  /** The cut positions of `fragment` in [from, until], in order. */
  def within(fragment: Long, from: Long, until: Long): Vector[Long] =
    cuts.get(fragment).fold(Vector.empty[Long])(_.iterator.filter(p => p >= from && p <= until).toVector)
}

object Clustering {

  /** The cuts of `column` over `plans`, from the page statistics of the data
    * files only: None unless every page of the column in the planned
    * fragments has statistics, no null, bounds of an exactly ordered type
    * (integers, dates, timestamps, decimals of at most 18 digits, booleans),
    * pages that cover their fragment's rows, and each page's lower bound at
    * least the upper bound of the page before (so the column never decreases
    * from page to page, in the order the scan reads). A page starts a cut when
    * its lower bound is above the previous page's upper bound; the first
    * planned fragment's first row and the last one's end are cuts. */
  def of(snapshot: Snapshot, plans: Vector[FragmentPlan], column: Column): Option[Clustering] = {
    if (plans.isEmpty) return None
    val columns = Set(column)
    FragmentStats.prefetch(snapshot.storage, columns, snapshot.schema, plans.map(_.fragment))
    var previousHigh: Option[Long] = None
    val cuts = Map.newBuilder[Long, Array[Long]]
    val ok = plans.forall { plan =>
      val frag = plan.fragment
      FragmentStats.columnStats(columns, snapshot.schema, frag, ref => FragmentStats.read(snapshot.storage, ref))
        .get(column) match {
        case Some(ColumnStats.Pages(arrowType, pages0, _)) =>
          val pages = pages0.sortBy(_.firstRow)
          val contiguous = pages.nonEmpty && pages.head.firstRow == 0 &&
            pages.zip(pages.tail).forall { case (a, b) => a.firstRow + a.numRows == b.firstRow } &&
            pages.last.firstRow + pages.last.numRows == frag.physicalRows
          val bounds = pages.map(p => if (p.nullCount == 0) PageBounds.of(arrowType, p.min, p.max) else PageBounds.Unknown)
          val keys = bounds.collect { case PageBounds.Keys(lo, hi) if lo != Long.MinValue && hi != Long.MaxValue => (lo, hi) }
          if (!contiguous || keys.size != pages.size) false
          else {
            val at = Array.newBuilder[Long]
            var ordered = true
            pages.indices.foreach { i =>
              val (lo, hi) = keys(i)
              previousHigh match {
                case Some(h) if lo < h => ordered = false
                case Some(h) if lo == h => ()
                case _ => at += pages(i).firstRow
              }
              previousHigh = Some(hi)
            }
            at += frag.physicalRows
            cuts += frag.id -> at.result()
            ordered
          }
        case _ => false
      }
    }
    // a fragment's end is a cut only when the next fragment's start is
    if (!ok) None
    else {
      val built = cuts.result()
      val fixed = plans.zip(plans.drop(1).map(Some(_)) :+ None).map { case (p, next) =>
        val own = built(p.fragment.id)
        val endIsCut = next.forall(n => built(n.fragment.id).headOption.contains(0L))
        p.fragment.id -> (if (endIsCut) own else own.dropRight(1))
      }.toMap
      Some(new Clustering(fixed))
    }
  }
}
