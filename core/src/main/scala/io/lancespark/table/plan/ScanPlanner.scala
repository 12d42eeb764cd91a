package io.lancespark.table.plan

import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.format.stats.PageStat
import io.lancespark.schema.LanceField
import io.lancespark.table.filter.{ColumnStats, Filter, FragmentStats, PageBounds, RowRanges, StatsPruner}
import io.lancespark.table.index.{IndexSelection, LabelClause}
import io.lancespark.table.model.FragmentInfo
import io.lancespark.table.storage.DeletionVector
import io.lancespark.table.storage.Snapshot

/** A fragment to scan: the physical row ranges that may hold matching rows
  * (all rows without a filter) and those where statistics prove every row matches. */
final case class FragmentPlan(fragment: FragmentInfo, mayMatch: RowRanges, allMatch: RowRanges)

/** Planning-time pruning: for each fragment, the statistics of the filter's
  * columns (read from the tail of each data file, never the data) give the row
  * ranges worth reading; with `useIndex`, the dataset's scalar indices
  * ([[IndexSelection]]) narrow them to the rows they select; a
  * [[RowRestriction]] (rows named by address) to its rows, and fragments it
  * does not name are not looked at. Fragments with none are pruned. Rows
  * kept by the restriction are not all named ones (nearby rows are read
  * together): whoever restricts filters the rows again. */
final class ScanPlanner(snapshot: Snapshot, filter: Option[Filter], useIndex: Boolean = true,
    restriction: Option[RowRestriction] = None, val labels: Vector[LabelClause] = Vector.empty) {

  /** This plan narrowed by `clauses` too, where LABEL_LIST indices answer
    * them (see [[IndexSelection]]); the rows read are still filtered by
    * whoever set them. */
  def withLabels(clauses: Vector[LabelClause]): ScanPlanner =
    new ScanPlanner(snapshot, filter, useIndex, restriction, clauses)

  /** This plan with another filter, the same restriction and labels. */
  def withFilter(other: Option[Filter]): ScanPlanner =
    new ScanPlanner(snapshot, other, useIndex, restriction, labels)

  private final case class Planned(plan: FragmentPlan, statsPages: Long, prunedPages: Long,
                                   byIndex: Option[Long] = None, prunedByIndex: Boolean = false)

  /** What the scalar indices answer of the filter (read once, at planning). */
  lazy val indexSelection: Option[IndexSelection] =
    if (!useIndex || (filter.isEmpty && labels.isEmpty)) None else IndexSelection(snapshot, filter, labels)

  private lazy val planned: Vector[Planned] = {
    val fragments = snapshot.fragments.filter(f => f.numRows > 0 && restriction.forall(_.names(f.id)))
    // each fragment's index selection, converted to ranges once; a fragment where the indices
    // select few rows is planned from them alone: its page statistics could not narrow those
    // rows further worth reading them (a lookup's cost)
    val selections = fragments.map(f => f -> indexSelection.flatMap(_.ranges(f.id.toInt)))
    def few(f: FragmentInfo, selected: Option[RowRanges]): Boolean =
      selected.exists(_.count * ScanPlanner.FewShare <= f.physicalRows)
    filter.foreach(fl => FragmentStats.prefetch(snapshot.storage, fl.columns, snapshot.schema,
      selections.collect { case (f, sel) if !few(f, sel) => f }))
    selections.map {
      case (f, Some(selected)) if few(f, Some(selected)) =>
        val may = selected.intersect(RowRanges.all(f.physicalRows))
        Planned(FragmentPlan(f, may, RowRanges.of()), 0, 0, byIndex = Some(selected.count), prunedByIndex = may.isEmpty)
      case (f, selected) => narrow(plan(f), selected)
    }.map(restrict)
  }

  /** The planned ranges within the restriction's rows; nothing is then known
    * to match in full (the restriction is not part of the filter). */
  private def restrict(p: Planned): Planned = restriction match {
    case None => p
    case Some(r) =>
      val f = p.plan.fragment
      val named = r.ranges(f.id, f.physicalRows)
      val may = p.plan.mayMatch.intersect(if (named.isEmpty) named else ScanPlanner.coalesce(named, f.physicalRows))
      p.copy(plan = p.plan.copy(mayMatch = may, allMatch = RowRanges.of()))
  }

  /** The planned ranges less the rows the indices rule out (`selection`: what they select in this fragment). */
  private def narrow(p: Planned, selection: Option[RowRanges]): Planned =
    selection match {
      case None => p
      case Some(selected) =>
        // exactly the selected rows (a batch reads many ranges at once, each page or chunk
        // once), unless they are dense: then nearly every page or chunk holds some, and reading
        // the planned ranges whole (the filter evaluated on every row) costs less than reading
        // range by range
        val narrowed = p.plan.mayMatch.intersect(selected)
        val ranges = narrowed.ranges.size.toLong
        val dense = ranges >= ScanPlanner.DenseGap && ranges * ScanPlanner.DenseGap >= p.plan.mayMatch.count
        val may = if (dense) p.plan.mayMatch else narrowed
        p.copy(plan = p.plan.copy(mayMatch = may, allMatch = p.plan.allMatch.intersect(may)),
          byIndex = Some(selected.count), prunedByIndex = p.plan.mayMatch.nonEmpty && may.isEmpty)
    }

  private def plan(frag: FragmentInfo): Planned = {
    val rows = frag.physicalRows
    filter match {
      case None => Planned(FragmentPlan(frag, RowRanges.all(rows), RowRanges.all(rows)), 0, 0)
      case Some(f) =>
        val stats = FragmentStats.columnStats(f.columns, snapshot.schema, frag,
          ref => FragmentStats.read(snapshot.storage, ref))
        val (may, all) = StatsPruner.candidateRanges(f, stats, rows)
        val pages = stats.values.toSeq.collect { case ColumnStats.Pages(_, ps, _) => ps }.flatten
        val pruned = pages.count(p => may.intersect(RowRanges(p.firstRow, p.firstRow + p.numRows)).isEmpty)
        Planned(FragmentPlan(frag, may, all), pages.size.toLong, pruned.toLong)
    }
  }

  /** Fragments that may hold matching rows. */
  def plans: Vector[FragmentPlan] = planned.map(_.plan).filter(_.mayMatch.nonEmpty)

  def fragmentsPruned: Int = planned.count(_.plan.mayMatch.isEmpty)

  /** Fragments that statistics kept but the indices showed hold no matching row. */
  def fragmentsPrunedByIndex: Int = planned.count(_.prunedByIndex)

  /** Rows the indices selected in the fragments they decide (deleted ones included). */
  def rowsSelectedByIndex: Long = planned.flatMap(_.byIndex).sum

  /** Fragments whose rows the indices decided. */
  def fragmentsDecidedByIndex: Int = planned.count(_.byIndex.isDefined)

  /** Names of the indices that answered part of the filter. */
  def indicesUsed: Vector[String] = indexSelection.map(_.indicesUsed).getOrElse(Vector.empty)

  /** Pages of the filter's columns that no candidate range touches. */
  def pagesPruned: Long = planned.map(_.prunedPages).sum

  def rowsSkipped: Long = planned.map(p => p.plan.fragment.physicalRows - p.plan.mayMatch.count).sum

  /** The share of a fragment's data bytes that the top-level `fields` take,
    * from the column metadata of one planned fragment's files (the one with
    * the most rows: one file's metadata read, then kept, [[ColumnBytes]]);
    * None where those files do not say (0.1 files, no bytes). A decimal of at
    * most 18 digits counts at most 8 bytes a row, what Spark holds it in and
    * Parquet stores it in (INT32 or INT64): pylance stores such decimals in 16
    * bytes uncompressed, which made a projection of them weigh more than the
    * same projection of Parquet (TPC-DS q80 at scale factor 1: 287,514 rows of
    * `store_returns`, two keys and two `DECIMAL(7,2)`, weighed 10.7 MB, over
    * the 10 MB Spark broadcasts, where Parquet's weigh 4.4; their join was
    * sort-merged: 1.7x-1.9x Parquet's time). */
  def columnShare(fields: Seq[String]): Option[Double] =
    largestFragment.flatMap { frag =>
      ColumnBytes.of(snapshot.storage, snapshot.schema, frag).flatMap { bytes =>
        val total = bytes.values.sum
        val chosen = fields.flatMap(n => snapshot.schema.fields.find(_.name == n))
        def weight(f: LanceField): Long = {
          val b = bytes.getOrElse(f.id, 0L)
          f.arrowType match {
            case d: ArrowType.Decimal if d.getPrecision <= 18 => math.min(b, frag.physicalRows * 8L)
            case _ => b
          }
        }
        if (total <= 0) None else Some(chosen.map(weight).sum.toDouble / total)
      }
    }

  /** Whether this plan's rows may be narrowed by `column IN (keys)` for keys
    * known only while a query runs (the join keys of Spark's dynamic
    * pruning): a scalar index (not LABEL_LIST) on the top-level column, or
    * page statistics that show its integer values clustered, so that a set of
    * keys rules out pages: in the planned fragment with the most rows, at
    * least [[ScanPlanner.ClusteredPages]] pages whose median spans at most
    * half the range of the fragment's values (dates of a table appended day
    * after day; not keys in no order, where pruning would find nothing to
    * skip and the keys would cost the query more than they save). */
  def prunesBy(column: String): Boolean = {
    val path = Vector(column)
    def indexed = indexedColumns.contains(path)
    def clustered = largestFragment.exists { frag =>
      FragmentStats.columnStats(Set(path), snapshot.schema, frag, ref => FragmentStats.read(snapshot.storage, ref))
        .get(path).exists {
          case ColumnStats.Pages(t, pages, _) =>
            val bounds = pages.flatMap(p => ScanPlanner.finiteKeys(t, p))
            bounds.size >= ScanPlanner.ClusteredPages && bounds.size * 10 >= pages.size * 9 && {
              val range = BigInt(bounds.map(_._2).max) - BigInt(bounds.map(_._1).min)
              val widths = bounds.map { case (lo, hi) => BigInt(hi) - BigInt(lo) }.sorted
              range > 0 && widths(widths.size / 2) * 2 <= range
            }
          case _ => false
        }
    }
    indexed || clustered
  }

  /** How widely the values of the top-level integer `column` in the rows this
    * plan's filter may keep are spread over the column's range: the bounds of
    * the pages of `column` that overlap the planned row ranges, merged, as a
    * share of the range of all its pages (1.0: anywhere in it; `orders`
    * filtered by a date, whose keys bear no relation to its dates). From the
    * page statistics (and indices) only. None where they cannot tell: no
    * filter; a fragment whose statistics give no pages of `column` covering
    * its rows, or none for a filter column (unless the indices decided its
    * rows); bounds that are not integers; fewer than [[ScanPlanner.ClusteredPages]] pages. */
  def keyShare(column: String): Option[Double] = filter.flatMap { f =>
    val path = Vector(column)
    val spans = planned.map { p =>
      val frag = p.plan.fragment
      val stats = FragmentStats.columnStats(f.columns + path, snapshot.schema, frag,
        ref => FragmentStats.read(snapshot.storage, ref))
      val decided = p.byIndex.isDefined || f.columns.forall(c => stats.get(c).exists(_.isInstanceOf[ColumnStats.Pages]))
      stats.get(path) match {
        case Some(ColumnStats.Pages(t, pages, _)) if decided && pages.map(_.numRows).sum >= frag.physicalRows =>
          val bounds = pages.filter(pg => pg.nullCount < pg.numRows).map { pg =>
            val kept = p.plan.mayMatch.intersect(RowRanges(pg.firstRow, pg.firstRow + pg.numRows)).nonEmpty
            ScanPlanner.finiteKeys(t, pg).map { case (lo, hi) => (lo, hi, kept) }
          }
          if (bounds.forall(_.isDefined)) Some(bounds.flatten) else None
        case _ => None
      }
    }
    if (spans.exists(_.isEmpty)) None
    else {
      val all = spans.flatten.flatten
      val kept = all.collect { case (lo, hi, true) => (lo, hi) }.sortBy(_._1)
      if (all.size < ScanPlanner.ClusteredPages) None
      else {
        val range = BigInt(all.map(_._2).max) - BigInt(all.map(_._1).min) + 1
        // the kept pages' bounds merged into disjoint intervals, their widths summed
        val (covered, last) = kept.foldLeft((BigInt(0), Option.empty[(Long, Long)])) {
          case ((sum, None), b) => (sum, Some(b))
          case ((sum, Some((lo, hi))), (l, h)) =>
            if (l <= hi) (sum, Some((lo, math.max(hi, h)))) else (sum + (BigInt(hi) - lo + 1), Some((l, h)))
        }
        val total = covered + last.fold(BigInt(0)) { case (lo, hi) => BigInt(hi) - lo + 1 }
        Some((BigDecimal(total) / BigDecimal(range)).toDouble)
      }
    }
  }

  /** The planned fragment with the most rows (the one whose metadata stands for the plan's). */
  private def largestFragment: Option[FragmentInfo] =
    plans.map(_.fragment).reduceOption((a, b) => if (b.physicalRows > a.physicalRows) b else a)

  /** The columns a scalar index other than LABEL_LIST covers (alone). */
  private lazy val indexedColumns: Set[Vector[String]] = {
    import io.lancespark.table.index.{IndexCatalog, ScalarIndex}
    scala.util.Try(IndexCatalog.load(snapshot)).toOption.toVector.flatten.collect {
      case e if e.fields.size == 1 && e.kind != ScalarIndex.LabelList && ScalarIndex.Supported.contains(e.kind) => e.fields.head
    }.toSet
  }

  /** What the data files' statistics say about `columns` over the planned
    * rows (see [[ColumnSummaries]]): page statistics and sketches only, never the data. */
  def summaries(columns: Set[Vector[String]]): Map[Vector[String], ColumnSummary] =
    ColumnSummaries.of(snapshot, plans, columns)

  /** The largest absolute value each of the top-level numeric `columns`
    * takes over the planned rows, from their statistics (None where some
    * planned fragment has none; zero for every column when no row is planned). */
  def largestMagnitudes(columns: Set[String]): String => Option[java.math.BigDecimal] =
    if (plans.isEmpty) _ => Some(java.math.BigDecimal.ZERO)
    else {
      val found = summaries(columns.map(Vector(_)))
      def abs(v: Any): Option[java.math.BigDecimal] = v match {
        case d: java.math.BigDecimal => Some(d.abs)
        case l: java.lang.Long => Some(java.math.BigDecimal.valueOf(l.longValue).abs)
        case i: java.lang.Integer => Some(java.math.BigDecimal.valueOf(i.longValue).abs)
        case _ => None
      }
      name => found.get(Vector(name)).flatMap { s =>
        for (lo <- s.min.flatMap(abs); hi <- s.max.flatMap(abs)) yield lo.max(hi)
      }
    }

  /** What the statistics of the filter's columns estimate of the share of
    * the planned rows it keeps ([[Selectivity]]); 1 without a filter. */
  def selectivity: Double = filter.fold(1.0)(f => Selectivity.of(f, filterSummaries))

  /** The summaries of the filter's columns over the planned rows, computed once. */
  private lazy val filterSummaries: Map[Vector[String], ColumnSummary] =
    filter.fold(Map.empty[Vector[String], ColumnSummary])(f => summaries(f.columns.toSet))

  /** Whether some column of the filter has no statistics in some planned
    * fragment (files of other writers), so that [[selectivity]] counts its
    * conditions as keeping every row. */
  def filterLacksStatistics: Boolean =
    filter.exists(f => plans.nonEmpty && !f.columns.forall(filterSummaries.contains))

  /** The share of the planned rows the filter keeps in a sample of them, read
    * from the data ([[SampledShare]]: a few thousand rows of the filter's
    * columns, the filter evaluated exactly); 1 without a filter, None with no
    * planned row. Read when first asked for, once. */
  lazy val sampledSelectivity: Option[Double] = filter match {
    case None => Some(1.0)
    case Some(f) => if (plans.isEmpty) None else SampledShare.of(snapshot, plans, f)
  }

  /** The rows of the planned row ranges (each fragment's share of its rows,
    * less its deleted share) and the bytes of the same share of each
    * fragment's data files ([[PartitionPlanner.fragmentBytes]], `rowBytes` an
    * estimated row's where the manifest has no file sizes). From the manifest
    * and the statistics already read for pruning; never from the data. */
  def plannedSize(rowBytes: Double): (Double, Double) = {
    val shares = plans.map { p =>
      val f = p.fragment
      val share = if (f.physicalRows > 0) p.mayMatch.count.toDouble / f.physicalRows else 0.0
      val bytes = PartitionPlanner.fragmentBytes(f, rowBytes)
      val kept = if (f.physicalRows > 0) f.numRows.toDouble / f.physicalRows else 0.0
      (share * f.numRows, share * kept * bytes)
    }
    (shares.map(_._1).sum, shares.map(_._2).sum)
  }

  /** Whether a GROUP BY of the top-level `columns` over the planned rows
    * (after the filter, as [[selectivity]] estimates) has on average at least
    * `rowsPerGroup` rows a group, from the columns' distinct estimates (their
    * product, one more for a column with nulls); true when a column has no
    * estimate (files of other writers), or no row is planned. */
  def fewGroups(columns: Seq[String], rowsPerGroup: Long): Boolean = rowsPerGroup <= 0 || {
    val found = summaries(columns.map(Vector(_)).toSet)
    val perColumn = columns.map(c => found.get(Vector(c)).flatMap(s =>
      s.distinct.map(d => d.toDouble + (if (s.nullCount.exists(_ > 0)) 1.0 else 0.0))))
    if (perColumn.exists(_.isEmpty)) true
    else {
      val rows = plans.map(_.mayMatch.count).sum.toDouble * selectivity
      perColumn.flatten.product * rowsPerGroup <= rows || rows == 0.0
    }
  }

  /** The first of `columns` whose values the statistics show clustered over
    * the planned fragments (see [[Clustering]]). */
  def clustering(columns: Seq[String]): Option[Clustering] =
    columns.iterator.map(c => Clustering.of(snapshot, plans, Vector(c))).collectFirst { case Some(c) => c }

  /** COUNT(*) without the data: from the manifest without a filter, else
    * [[countIfDecided]]. */
  def countRows: Option[Long] = filter match {
    case None => Some(snapshot.countRows)
    case Some(_) => countIfDecided
  }

  /** COUNT(*) of the filter when statistics decide every row (each row is in a
    * no-match or an all-match range): all-match rows minus deleted ones. */
  def countIfDecided: Option[Long] =
    if (!planned.forall(p => p.plan.mayMatch == p.plan.allMatch)) None
    else Some(planned.map { p =>
      val frag = p.plan.fragment
      val deleted = frag.deletion.map(d => DeletionVector.read(snapshot.storage, frag.id, d, frag.physicalRows))
      p.plan.allMatch.ranges.map { case (s, e) =>
        (e - s) - deleted.map(_.rangeCardinality(s, e)).getOrElse(0L)
      }.sum
    }.sum)
}

object ScanPlanner {
  /** A page's integer key bounds, both finite (None: no bounds, or not integers). */
  private def finiteKeys(t: ArrowType, page: PageStat): Option[(Long, Long)] =
    PageBounds.of(t, page.min, page.max) match {
      case PageBounds.Keys(lo, hi) if lo != Long.MinValue && hi != Long.MaxValue && lo <= hi => Some((lo, hi))
      case _ => None
    }

  /** Pages a fragment needs before [[ScanPlanner.prunesBy]] judges its values clustered. */
  val ClusteredPages: Int = 4

  /** A fragment where the indices select at most 1/64 of its rows is planned
    * from the indices alone (no page statistics read). */
  val FewShare: Long = 64L

  def apply(snapshot: Snapshot, filter: Option[Filter]): ScanPlanner = new ScanPlanner(snapshot, filter)
  def apply(snapshot: Snapshot, filter: Option[Filter], useIndex: Boolean): ScanPlanner =
    new ScanPlanner(snapshot, filter, useIndex)
  def apply(snapshot: Snapshot, filter: Option[Filter], useIndex: Boolean,
      restriction: Option[RowRestriction]): ScanPlanner = new ScanPlanner(snapshot, filter, useIndex, restriction)

  /** Index-selected rows are read as the planned ranges whole when they make at
    * least this many ranges in a fragment and at least one range per this many
    * planned rows (about every page or chunk holds one; e.g. a BITMAP label on
    * 1% of shuffled rows). */
  val DenseGap: Long = 1024L

  /** Rows apart by at most this many are read as one range: reading a few
    * rows more costs less than another read request. */
  val CoalesceGap: Long = 32L

  /** `r` with gaps of at most [[CoalesceGap]] rows closed (within [0, rows)). */
  def coalesce(r: RowRanges, rows: Long): RowRanges = {
    val out = new RowRanges.Builder
    r.ranges.foreach { case (s, e) => out.add(s, math.min(rows, e + CoalesceGap)) }
    out.result().intersect(RowRanges.all(rows)).intersect(RowRanges(r.ranges.headOption.map(_._1).getOrElse(0L),
      r.ranges.lastOption.map(_._2).getOrElse(0L)))
  }
}
