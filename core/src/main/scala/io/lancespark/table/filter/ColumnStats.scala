package io.lancespark.table.filter

import java.math.{BigDecimal => JBigDecimal}
import java.nio.charset.StandardCharsets

import org.apache.arrow.vector.types.{DateUnit, TimeUnit}
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.format.stats.{DistinctSketch, PageStat}

/** What is known about one column of a fragment, for pruning. A column
  * missing from the map given to [[StatsPruner]] is unknown. */
sealed trait ColumnStats

object ColumnStats {
  /** Page statistics of the column (in the shape [[PageStat]] documents),
    * `arrowType` the column's Arrow type in the data file. Rows no page
    * covers are unknown. `sketch`: the distinct values of the column in the
  * whole data file, when its writer left one. */
  final case class Pages(arrowType: ArrowType, pages: IndexedSeq[PageStat],
                         sketch: Option[DistinctSketch] = None) extends ColumnStats {
    /** The pages as the pruner evaluates them, prepared once for every
      * filter on these statistics (they are cached and reused across queries). */
    private[filter] lazy val prepared: StatsPruner.ColumnPages = StatsPruner.prepare(this)
  }
  /** The column is in no data file of the fragment: every row reads as NULL. */
  case object Absent extends ColumnStats

  /** Every one of the fragment's `rows` rows holds the integer `value` (e.g.
    * the `_fragid` metadata column): one page spanning them, min = max = value. */
  def constant(value: Long, rows: Long): ColumnStats =
    Pages(new ArrowType.Int(64, true), IndexedSeq(PageStat(-1, -1, 0, 0L, rows, 0L,
      Some(java.lang.Long.valueOf(value)), Some(java.lang.Long.valueOf(value)))))
}

/** Bounds of the non-null values of one page in the Spark-visible domain. */
sealed trait PageBounds

object PageBounds {
  /** Inclusive key bounds; Long.MinValue / Long.MaxValue are no bound. */
  final case class Keys(lo: Long, hi: Long) extends PageBounds
  final case class Decimals(lo: Option[JBigDecimal], hi: Option[JBigDecimal]) extends PageBounds
  /** `lo` empty is no bound; `hi` None is no bound. */
  final case class ByteBounds(lo: Array[Byte], hi: Option[Array[Byte]]) extends PageBounds
  case object Unknown extends PageBounds

  val NoKeys: Keys = Keys(Long.MinValue, Long.MaxValue)

  /** Converts a page's min/max (as [[PageStat]] holds them, in the file's
    * type) to bounds of the values Spark sees (the read mapping of
    * docs/type-mapping.md). */
  def of(t: ArrowType, min: Option[Any], max: Option[Any]): PageBounds =
    try convert(t, min, max) catch { case _: ArithmeticException | _: ClassCastException => Unknown }

  private def long(o: Option[Any]): Option[Long] = o.collect { case l: java.lang.Long => l.longValue }

  private def keys(lo: Option[Long], hi: Option[Long]): Keys = Keys(lo.getOrElse(Long.MinValue), hi.getOrElse(Long.MaxValue))

  /** Bounds through a monotone conversion that may overflow (then: no bounds
    * at all, as the reader's values wrap around). */
  private def scaled(min: Option[Any], max: Option[Any], f: Long => Long): PageBounds =
    try keys(long(min).map(f), long(max).map(f))
    catch { case _: ArithmeticException => NoKeys }

  private def convert(t: ArrowType, min: Option[Any], max: Option[Any]): PageBounds = Domain.of(t) match {
    case None | Some(Domain.AllNull) => Unknown
    case Some(Domain.Bytes) =>
      def bytes(o: Option[Any]): Option[Array[Byte]] = o.collect {
        case s: String => s.getBytes(StandardCharsets.UTF_8)
        case b: Array[Byte] => b
      }
      ByteBounds(bytes(min).getOrElse(Array.emptyByteArray), bytes(max))
    case Some(Domain.BigDec(_)) =>
      def dec(o: Option[Any]): Option[JBigDecimal] = o.collect { case d: JBigDecimal => d }
      Decimals(dec(min), dec(max))
    case Some(Domain.Bool) =>
      def b(o: Option[Any]): Option[Long] = o.collect { case b: java.lang.Boolean => if (b) 1L else 0L }
      keys(b(min), b(max))
    case Some(Domain.Floating) =>
      // NaN is not in min/max but is Spark's greatest value: no upper bound
      val lo = min.collect { case d: java.lang.Double if !d.isNaN => Domain.doubleKey(d) }
      Keys(lo.getOrElse(Long.MinValue), Long.MaxValue)
    case Some(e: Domain.Exact) => t match {
      case d: ArrowType.Decimal =>
        def pos(o: Option[Any]): Option[Domain.KeyPos] = o.collect { case v: JBigDecimal => Domain.exactKey(e, v) }
        val lo = pos(min).map {
          case Domain.At(k) => k
          case Domain.Between(f) => f + 1
          case Domain.BelowAll => Long.MinValue
          case Domain.AboveAll => Long.MaxValue
        }
        val hi = pos(max).map {
          case Domain.At(k) => k
          case Domain.Between(f) => f
          case Domain.BelowAll => Long.MinValue
          case Domain.AboveAll => Long.MaxValue
        }
        val _ = d
        keys(lo, hi)
      case i: ArrowType.Int if e.unsigned64 => keys(long(min).map(Domain.unsignedKey), long(max).map(Domain.unsignedKey))
      case _: ArrowType.Int => keys(long(min), long(max))
      case d: ArrowType.Date =>
        if (d.getUnit == DateUnit.DAY) keys(long(min), long(max))
        else keys(long(min).map(Math.floorDiv(_, 86400000L)), long(max).map(Math.floorDiv(_, 86400000L)))
      case tm: ArrowType.Time => tm.getUnit match {
        case TimeUnit.SECOND => scaled(min, max, Math.multiplyExact(_, 1000000000L))
        case TimeUnit.MILLISECOND => scaled(min, max, Math.multiplyExact(_, 1000000L))
        case TimeUnit.MICROSECOND => scaled(min, max, Math.multiplyExact(_, 1000L))
        case TimeUnit.NANOSECOND => keys(long(min), long(max))
      }
      case ts: ArrowType.Timestamp => micros(ts.getUnit, min, max)
      case du: ArrowType.Duration => micros(du.getUnit, min, max)
      case _ => Unknown
    }
  }

  private def micros(u: TimeUnit, min: Option[Any], max: Option[Any]): PageBounds = u match {
    case TimeUnit.SECOND => scaled(min, max, Math.multiplyExact(_, 1000000L))
    case TimeUnit.MILLISECOND => scaled(min, max, Math.multiplyExact(_, 1000L))
    case TimeUnit.MICROSECOND => keys(long(min), long(max))
    case TimeUnit.NANOSECOND => keys(long(min).map(Math.floorDiv(_, 1000L)), long(max).map(Math.floorDiv(_, 1000L)))
  }
}
