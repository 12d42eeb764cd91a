package io.lancespark.table.filter

import java.math.{BigDecimal => JBigDecimal}

import io.lancespark.format.stats.PageStat
import io.lancespark.table.filter.Filter._

/** Statistics-based pruning: which rows of a fragment may satisfy a filter
  * and which certainly do, from page statistics (a sound over-approximation
  * of the filter's possible outcomes, Spark semantics, see [[Filter]]). */
object StatsPruner {
  import ValueTest._

  /** Possible outcomes of a leaf over rows whose column has `nullCount` nulls
    * among `numRows` (nullCount < 0: unknown) and non-null values within `b`. */
  def leafOutcomes(leaf: BoundLeaf, nullCount: Long, numRows: Long, b: PageBounds): Outcomes = {
    val nullsPossible = nullCount != 0
    val valuesPossible = nullCount < 0 || nullCount < numRows
    var out = if (nullsPossible) leaf.onNull else Outcomes.None
    if (valuesPossible) {
      val (pass, fail) = testRange(leaf.test, b)
      if (pass) out = out | leaf.onPass
      if (fail) out = out | leaf.onFail
    }
    out
  }

  /** Outcomes of a leaf when nothing is known about the column. */
  def unknownOutcomes(leaf: BoundLeaf): Outcomes = leafOutcomes(leaf, -1, 1, PageBounds.Unknown)

  /** Whether the test can pass / can fail for some value within the bounds. */
  def testRange(test: ValueTest, b: PageBounds): (Boolean, Boolean) = (test, b) match {
    case (Const(r), _) => (r, !r)
    case (_, PageBounds.Unknown) => (true, true)
    case (KeyCmp(op, k), PageBounds.Keys(lo, hi)) => cmpRange[Long](op, k, Some(lo), Some(hi))
    case (KeyIn(keys), PageBounds.Keys(lo, hi)) =>
      val i = java.util.Arrays.binarySearch(keys, lo)
      val first = if (i >= 0) i else -i - 1
      (first < keys.length && keys(first) <= hi, !(lo == hi && i >= 0))
    case (DecCmp(op, v), PageBounds.Decimals(lo, hi)) => cmpRange[JBigDecimal](op, v, lo, hi)
    case (DecIn(vs), PageBounds.Decimals(lo, hi)) => inRange[JBigDecimal](vs, lo, hi)
    case (BytesCmp(op, v), PageBounds.ByteBounds(lo, hi)) => cmpRange[Array[Byte]](op, v, Some(lo), hi)(BytesOrdering)
    case (BytesIn(vs), PageBounds.ByteBounds(lo, hi)) => inRange[Array[Byte]](vs, Some(lo), hi)(BytesOrdering)
    case (BytesPrefix(p), PageBounds.ByteBounds(lo, hi)) =>
      // v starts with p  <=>  p <= v < succ(p) (no upper limit when succ is None)
      val succ = successor(p)
      val o = BytesOrdering
      val pass = hi.forall(o.gteq(_, p)) && succ.forall(s => o.lt(lo, s))
      val fail = o.lt(lo, p) || succ.exists(s => hi.forall(o.gteq(_, s)))
      (pass, fail)
    case _ => (true, true) // bounds of another domain: know nothing
  }

  implicit private val DecOrdering: Ordering[JBigDecimal] = (a: JBigDecimal, b: JBigDecimal) => a.compareTo(b)

  object BytesOrdering extends Ordering[Array[Byte]] {
    def compare(a: Array[Byte], b: Array[Byte]): Int = java.util.Arrays.compareUnsigned(a, b)
  }

  /** The smallest byte string greater than every string starting with `p`:
    * `p` with its last byte that is not 0xFF incremented and the rest
    * dropped; None if there is none (empty or all 0xFF). */
  def successor(p: Array[Byte]): Option[Array[Byte]] = {
    var k = p.length - 1
    while (k >= 0 && p(k) == -1) k -= 1
    if (k < 0) None
    else {
      val out = java.util.Arrays.copyOf(p, k + 1)
      out(k) = (out(k) + 1).toByte
      Some(out)
    }
  }

  /** (some value in [lo, hi] satisfies `v op c`, some does not); None = unbounded. */
  private def cmpRange[T](op: CompareOp, c: T, lo: Option[T], hi: Option[T])(implicit o: Ordering[T]): (Boolean, Boolean) = {
    def loLt = lo.forall(o.lt(_, c)); def loLe = lo.forall(o.lteq(_, c))
    def hiGt = hi.forall(o.gt(_, c)); def hiGe = hi.forall(o.gteq(_, c))
    def allEq = lo.exists(o.equiv(_, c)) && hi.exists(o.equiv(_, c))
    op match {
      case CompareOp.Eq | CompareOp.EqNullSafe => (loLe && hiGe, !allEq)
      case CompareOp.NotEq => (!allEq, loLe && hiGe)
      case CompareOp.Lt => (loLt, hiGe)
      case CompareOp.LtEq => (loLe, hiGt)
      case CompareOp.Gt => (hiGt, loLe)
      case CompareOp.GtEq => (hiGe, loLt)
    }
  }

  private def inRange[T](vs: Seq[T], lo: Option[T], hi: Option[T])(implicit o: Ordering[T]): (Boolean, Boolean) = {
    val pass = vs.exists(v => lo.forall(o.lteq(_, v)) && hi.forall(o.gteq(_, v)))
    val allOne = (lo, hi) match {
      case (Some(l), Some(h)) => o.equiv(l, h) && vs.exists(o.equiv(_, l))
      case _ => false
    }
    (pass, !allOne)
  }

  // ------------------------------------------------------------ compiling

  /** One column's pages, sorted, with bounds converted once. */
  private[filter] final class ColumnPages(val starts: Array[Long], val ends: Array[Long], val nulls: Array[Long],
                                  val rows: Array[Long], val bounds: Array[PageBounds]) {
    /** Every page start and end, sorted, distinct. */
    val cuts: Array[Long] = (starts ++ ends).distinct.sorted

    /** The page covering `row`, or -1. */
    def pageAt(row: Long): Int = {
      var lo = 0; var hi = starts.length - 1; var found = -1
      while (lo <= hi) {
        val mid = (lo + hi) >>> 1
        if (starts(mid) <= row) { found = mid; lo = mid + 1 } else hi = mid - 1
      }
      if (found >= 0 && row < ends(found)) found else -1
    }
  }

  private def columnPages(p: ColumnStats.Pages): ColumnPages = p.prepared

  private[filter] def prepare(p: ColumnStats.Pages): ColumnPages = {
    val ps: IndexedSeq[PageStat] = p.pages.filter(_.numRows > 0).sortBy(_.firstRow)
    new ColumnPages(ps.map(_.firstRow).toArray, ps.map(s => s.firstRow + s.numRows).toArray,
      ps.map(_.nullCount).toArray, ps.map(_.numRows).toArray, ps.map(s => PageBounds.of(p.arrowType, s.min, s.max)).toArray)
  }

  /** A filter compiled against the statistics of one fragment: evaluates the
    * possible outcomes over a segment lying within one page of each column. */
  private sealed trait Node { def eval(seg: Long): Outcomes }
  private final case class Fixed(o: Outcomes) extends Node { def eval(seg: Long): Outcomes = o }
  private final class PagedLeaf(leaf: BoundLeaf, cp: ColumnPages) extends Node {
    private val unknown = unknownOutcomes(leaf)
    private val perPage = Array.tabulate(cp.starts.length)(i => leafOutcomes(leaf, cp.nulls(i), cp.rows(i), cp.bounds(i)))
    def eval(seg: Long): Outcomes = { val p = cp.pageAt(seg); if (p < 0) unknown else perPage(p) }
  }
  private final case class AndNode(l: Node, r: Node) extends Node {
    def eval(seg: Long): Outcomes = { val a = l.eval(seg); if (a == Outcomes.False) a else a.and(r.eval(seg)) }
  }
  private final case class OrNode(l: Node, r: Node) extends Node {
    def eval(seg: Long): Outcomes = { val a = l.eval(seg); if (a == Outcomes.True) a else a.or(r.eval(seg)) }
  }
  private final case class NotNode(c: Node) extends Node { def eval(seg: Long): Outcomes = !c.eval(seg) }

  private def compile(f: Filter, stats: Map[Column, ColumnStats], pages: Column => Option[ColumnPages]): Node = f match {
    case AlwaysTrue => Fixed(Outcomes.True)
    case AlwaysFalse => Fixed(Outcomes.False)
    case And(l, r) => AndNode(compile(l, stats, pages), compile(r, stats, pages))
    case Or(l, r) => OrNode(compile(l, stats, pages), compile(r, stats, pages))
    case Not(c) => NotNode(compile(c, stats, pages))
    case leaf =>
      val col = leaf.columns.head
      stats.get(col) match {
        case Some(ColumnStats.Absent) =>
          BoundLeaf.bind(leaf, Domain.AllNull).fold(_ => Fixed(Outcomes.All), b => Fixed(b.onNull))
        case Some(p: ColumnStats.Pages) =>
          Domain.of(p.arrowType).flatMap(d => BoundLeaf.bind(leaf, d).toOption) match {
            case Some(b) => new PagedLeaf(b, pages(col).get)
            case None => Fixed(Outcomes.All)
          }
        case None => Fixed(unknownColumn(leaf))
      }
  }

  /** Outcomes of a leaf on a column of unknown type and values. */
  private def unknownColumn(leaf: Filter): Outcomes = leaf match {
    case _: IsNull | _: IsNotNull | Compare(_, CompareOp.EqNullSafe, _) => Outcomes(true, true, false)
    case Compare(_, _, Lit.NullLit) => Outcomes.Null
    case In(_, vs) if vs.isEmpty => Outcomes.False
    case In(_, vs) if vs.forall(_.isNull) => Outcomes.Null
    case _ => Outcomes.All
  }

  /** Splits [0, numRows) at every page boundary of the filter's columns and
    * evaluates each piece: (rows that may satisfy the filter, rows that all
    * satisfy it). `stats` maps column paths to their statistics; a column
    * missing from it is unknown. */
  def candidateRanges(filter: Filter, stats: Map[Column, ColumnStats], numRows: Long): (RowRanges, RowRanges) = {
    val may = new RowRanges.Builder
    val all = new RowRanges.Builder
    segments(filter, stats, numRows) { (s, e, o) =>
      if (o.canBeTrue) may.add(s, e)
      if (o.allTrue) all.add(s, e)
    }
    (may.result(), all.result())
  }

  /** The possible outcomes of the filter over the rows [0, numRows). */
  def outcomes(filter: Filter, stats: Map[Column, ColumnStats], numRows: Long): Outcomes = {
    var out = Outcomes.None
    segments(filter, stats, numRows)((_, _, o) => out = out | o)
    out
  }

  private def segments(filter: Filter, stats: Map[Column, ColumnStats], numRows: Long)(
      f: (Long, Long, Outcomes) => Unit): Unit = {
    val cols: Map[Column, ColumnPages] = filter.columns.iterator.flatMap(c => stats.get(c) match {
      case Some(p: ColumnStats.Pages) => Some(c -> columnPages(p))
      case _ => None
    }).toMap
    val root = compile(filter, stats, cols.get)
    val cuts = cols.values.toList match {
      case cp :: Nil if cp.cuts.nonEmpty && cp.cuts.head >= 0 && cp.cuts.last <= numRows =>
        // one column's pages (a lookup's usual case): their cuts, prepared once, with 0 and numRows
        val head = if (cp.cuts.head == 0L) Array.emptyLongArray else Array(0L)
        val tail = if (cp.cuts.last == numRows) Array.emptyLongArray else Array(numRows)
        head ++ cp.cuts ++ tail
      case _ =>
        val b = Array.newBuilder[Long]
        b += 0L; b += numRows
        cols.values.foreach { cp => b ++= cp.starts; b ++= cp.ends }
        b.result().filter(x => x >= 0 && x <= numRows).distinct.sorted
    }
    var i = 0
    while (i + 1 < cuts.length) {
      f(cuts(i), cuts(i + 1), root.eval(cuts(i)))
      i += 1
    }
  }
}
