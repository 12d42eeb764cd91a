package io.lancespark.table.plan

import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.format.stats.DistinctSketch
import io.lancespark.table.filter.{ColumnStats, FragmentStats, RowRanges}
import io.lancespark.table.filter.Filter.Column
import io.lancespark.table.storage.Snapshot

/** What the statistics already kept in a scan's data files say about one
  * column over the rows the scan plans to read, for a query planner's cost
  * estimates (not for pruning, not exact):
  *  - `nullCount`: nulls of the pages that overlap the planned row ranges
  *    (deleted rows included), None when some page has no count;
  *  - `min`/`max`: bounds over those pages' non-null values (as [[PageStat]]
  *    holds them: java.lang.Long for integers, dates and timestamps in the
  *    file's unit, java.lang.Double for floats (NaN excluded),
  *    java.math.BigDecimal, java.lang.Boolean); None for other types, for
  *    unsigned 64-bit integers and when some page has rows but no bound;
  *  - `distinct`: the estimate of the merged distinct-value sketches of the
  *    data files (whole files, so at most an over-estimate for pruned ones),
  *    at most the non-null rows; None when a file has no sketch;
  *  - `rows`: the planned rows;
  *  - `avgLen`: strings and binaries, the mean bytes of a non-null value of
  *    the pages that overlap the planned rows, rounded up; None when some
  *    page does not record its values' bytes (files of earlier writers). */
final case class ColumnSummary(arrowType: ArrowType, rows: Long, nullCount: Option[Long], min: Option[Any],
                               max: Option[Any], distinct: Option[Long], avgLen: Option[Long] = None) {

  /** The summary of the share `share` (0 to 1) of the rows a filter is
    * estimated to keep: rows, nulls and distinct values scaled by it (each
    * rounded up), bounds unchanged, as a cost-based optimizer carries a
    * column's statistics through a filter (Spark's `FilterEstimation`). */
  def filtered(share: Double): ColumnSummary =
    if (share >= 1.0) this
    else {
      val s = math.max(0.0, share)
      def scale(n: Long): Long = math.ceil(n * s).toLong
      copy(rows = scale(rows), nullCount = nullCount.map(scale), distinct = distinct.map(scale))
    }
}

object ColumnSummaries {

  /** Summaries of `columns` over `plans`; a column some planned fragment has
    * no statistics for is left out. */
  def of(snapshot: Snapshot, plans: Vector[FragmentPlan], columns: Set[Column]): Map[Column, ColumnSummary] = {
    if (columns.isEmpty || plans.isEmpty) return Map.empty
    FragmentStats.prefetch(snapshot.storage, columns, snapshot.schema, plans.map(_.fragment))
    val perFragment = plans.map(p => p -> FragmentStats.columnStats(columns, snapshot.schema, p.fragment,
      ref => FragmentStats.read(snapshot.storage, ref)))
    columns.iterator.flatMap { c =>
      val parts = perFragment.map { case (p, stats) => (p.mayMatch, stats.get(c)) }
      if (parts.exists(_._2.isEmpty)) None
      else FragmentStats.field(snapshot.schema, c).map(f => c -> summarize(f.arrowType, parts.map(x => x._1 -> x._2.get)))
    }.toMap
  }

  private def summarize(t: ArrowType, parts: Vector[(RowRanges, ColumnStats)]): ColumnSummary = {
    var rows = 0L
    var nulls: Option[Long] = Some(0L)
    var bounds: Option[(Option[Any], Option[Any])] = if (ordered(t)) Some((None, None)) else None
    var sketch: Option[Option[DistinctSketch]] = Some(None)
    // (value bytes, non-null values) of the pages read, None once a page has no byte count
    var lengths: Option[(Long, Long)] = if (variableWidth(t)) Some((0L, 0L)) else None
    parts.foreach { case (ranges, stats) =>
      rows += ranges.count
      stats match {
        case ColumnStats.Absent => nulls = nulls.map(_ + ranges.count)
        case ColumnStats.Pages(_, pages, sk) =>
          val read = pages.filter(p => ranges.intersect(RowRanges(p.firstRow, p.firstRow + p.numRows)).nonEmpty)
          nulls = nulls.flatMap(n => if (read.exists(_.nullCount < 0)) None else Some(n + read.map(_.nullCount).sum))
          read.filter(p => p.nullCount != p.numRows).foreach { p =>
            bounds = bounds.flatMap { case (lo, hi) =>
              for (a <- p.min; b <- p.max) yield (Some(lo.fold(a)(least(_, a))), Some(hi.fold(b)(greatest(_, b))))
            }
          }
          sketch = for (acc <- sketch; s <- sk) yield Some(acc.fold(s)(_.merge(s)))
          lengths = lengths.flatMap { case (bytes, values) =>
            if (read.exists(p => p.valueBytes < 0 || p.nullCount < 0)) None
            else Some((bytes + read.map(_.valueBytes).sum, values + read.map(p => p.numRows - p.nullCount).sum))
          }
      }
    }
    val nonNull = nulls.map(rows - _)
    val distinct = sketch.map { s =>
      val est = s.fold(0L)(_.estimate)
      nonNull.fold(est)(n => if (n > 0) math.min(math.max(est, 1L), n) else 0L)
    }
    val avgLen = lengths.collect { case (bytes, values) if values > 0 => (bytes + values - 1) / values }
    ColumnSummary(t, rows, nulls, bounds.flatMap(_._1), bounds.flatMap(_._2), distinct, avgLen)
  }

  private def variableWidth(t: ArrowType): Boolean = t match {
    case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 | _: ArrowType.Binary | _: ArrowType.LargeBinary => true
    case _ => false
  }

  /** Types whose page bounds are ordered values this summary compares. */
  private def ordered(t: ArrowType): Boolean = t match {
    case i: ArrowType.Int => i.getIsSigned || i.getBitWidth < 64
    case _: ArrowType.FloatingPoint | _: ArrowType.Decimal | _: ArrowType.Bool | _: ArrowType.Date |
         _: ArrowType.Timestamp | _: ArrowType.Time => true
    case _ => false
  }

  private def compare(a: Any, b: Any): Int = (a, b) match {
    case (x: java.lang.Long, y: java.lang.Long) => java.lang.Long.compare(x, y)
    case (x: java.lang.Double, y: java.lang.Double) => java.lang.Double.compare(x, y)
    case (x: java.math.BigDecimal, y: java.math.BigDecimal) => x.compareTo(y)
    case (x: java.lang.Boolean, y: java.lang.Boolean) => java.lang.Boolean.compare(x, y)
    case _ => throw new IllegalArgumentException(s"bounds $a and $b of different kinds")
  }

  private def least(a: Any, b: Any): Any = if (compare(a, b) <= 0) a else b
  private def greatest(a: Any, b: Any): Any = if (compare(a, b) >= 0) a else b
}
