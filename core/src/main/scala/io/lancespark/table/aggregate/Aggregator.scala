package io.lancespark.table.aggregate

import java.math.{BigDecimal => JBigDecimal, BigInteger}

import scala.collection.mutable

import org.apache.arrow.vector.ValueVector

import io.lancespark.format.arrow.NullCounts
import io.lancespark.table.scan.ColumnDictionary
import io.lancespark.table.aggregate.AggFn._

/** Partial results of an [[Aggregation]] over the batches given to [[add]].
  *
  * [[rows]] gives one row per group (the grouping values as
  * [[GroupKeys.write]] gives them, then each aggregate's partial result: a
  * count as a java.lang.Long, a sum, minimum or maximum as its unscaled
  * value at its input's scale, a java.lang.Long or a BigInteger; null for
  * SQL NULL, as for a sum or minimum of no value) and, for a sum that would
  * leave its input type's range, further rows of the same group holding the
  * sums set aside (the other aggregates neutral there: counts 0, the rest
  * null), so that each partial sum fits the type the engine above reads it as.
  *
  * `complete`: the rows given are all of their groups' rows, and [[rows]] are
  * the final results, one row per group: a sum is held within the range of
  * its SQL result type ([[Aggregator.resultType]]), and one that leaves it is
  * an ArithmeticException (a caller completes only sums that cannot, see
  * [[Aggregator.completable]]). */
final class Aggregator(spec: Aggregation, complete: Boolean = false) {

  private val keys = new GroupKeys(spec.groupBy)
  /** No GROUP BY: every row is in group 0, and counts and sums take a batch's values in one loop. */
  private val oneGroup: Boolean = spec.groupBy.isEmpty
  private val states: Vector[State] = spec.aggregates.map {
    case CountStar | Count(_) => new Counts
    case Sum(e) => new Sums(if (complete) Aggregator.resultType(e.tpe) else e.tpe)
    case Min(_) => new Extremes(-1)
    case Max(_) => new Extremes(1)
  }
  /** Partial sums set aside: (group, aggregate, unscaled sum). */
  private val asideSums = mutable.ArrayBuffer.empty[(Int, Int, BigInteger)]

  /** Sets aside a partial sum (see [[asideSums]]); in a complete aggregation, an overflow. */
  private def setAside(g: Int, a: Int, sum: BigInteger): Unit =
    if (complete) throw new ArithmeticException(s"${spec.aggregates(a)} overflows its result type")
    else asideSums += ((g, a, sum))

  /** Rows [[rows]] would return now, at least (the memory the aggregator holds grows with it). */
  def size: Int = keys.groupCount + asideSums.size

  /** Adds the rows `rows` (positions in the vectors) of one batch. */
  def add(vectors: String => ValueVector, dictionaries: String => Option[ColumnDictionary], rows: Array[Int]): Unit = {
    val groups = keys.groups(vectors, dictionaries, rows)
    val n = keys.groupCount
    // each expression (and shared subexpression) evaluated once per batch
    val evaluated = new java.util.HashMap[Expr, ExprEval.Longs]()
    def longs(e: Expr): ExprEval.Longs = {
      val hit = evaluated.get(e)
      if (hit != null) hit
      else { val l = ExprEval.longs(e, vectors, rows, longs); evaluated.put(e, l); l }
    }
    spec.aggregates.indices.foreach { a =>
      val state = states(a)
      state.ensure(n)
      spec.aggregates(a) match {
        case CountStar => state.asInstanceOf[Counts].all(groups)
        case Count(Left(c)) =>
          val v = vectors(c)
          if (!NullCounts.any(v)) state.asInstanceOf[Counts].all(groups)
          else state.asInstanceOf[Counts].nonNull(groups, j => v.isNull(rows(j)))
        case Count(Right(e)) => numbers(e, vectors, rows, groups, a, longs, (g, _) => state.asInstanceOf[Counts].one(g))
        case Sum(e) => numbers(e, vectors, rows, groups, a, longs, state.asInstanceOf[Sums].add(a))
        case Min(e) => numbers(e, vectors, rows, groups, a, longs, state.asInstanceOf[Extremes].add)
        case Max(e) => numbers(e, vectors, rows, groups, a, longs, state.asInstanceOf[Extremes].add)
      }
    }
  }

  /** Calls `f(group, value)` for each non-null value of `e`: a Long (the
    * unscaled value) from the fast path, a BigInteger from the exact one. */
  private def numbers(e: Expr, vectors: String => ValueVector, rows: Array[Int], groups: Array[Int], a: Int,
                      longs: Expr => ExprEval.Longs, f: (Int, Any) => Unit): Unit = {
    val fast: Option[ExprEval.Longs] =
      try Some(longs(e)) catch { case _: ExprEval.NotLong => None }
    fast match {
      case Some(l) =>
        states(a) match {
          case s: Sums if l.nulls.isEmpty && oneGroup => s.addLongsToGroup0(a, l.values, rows.length)
          case s: Sums if l.nulls.isEmpty => s.addLongs(a, groups, l.values)
          case s: Sums => s.addLongsSkippingNulls(a, groups, l)
          case x: Extremes => x.addLongs(groups, l)
          case c: Counts => c.nonNull(groups, l.isNull)
          case _ =>
            var j = 0
            while (j < rows.length) { if (!l.isNull(j)) f(groups(j), l.values(j)); j += 1 }
        }
      case None =>
        var j = 0
        while (j < rows.length) {
          ExprEval.exact(e, vectors, rows(j)).foreach(v => f(groups(j), ExprEval.unscaled(v, e.tpe)))
          j += 1
        }
    }
  }

  /** The partial rows, each an array of the grouping values then the partial
    * results (a fresh array per row). */
  def rows: Iterator[Array[Any]] = {
    val n = keys.groupCount
    val width = spec.groupBy.size + states.size
    val groupRows = (0 until n).iterator.filter(keys.present).map { g =>
      val out = new Array[Any](width)
      keys.write(g, out)
      var a = 0
      while (a < states.size) { out(spec.groupBy.size + a) = states(a).result(g); a += 1 }
      out
    }
    val extra = asideSums.iterator.map { case (g, a, sum) =>
      val out = new Array[Any](width)
      keys.write(g, out)
      states.indices.foreach { i =>
        out(spec.groupBy.size + i) =
          if (i == a) sum else states(i) match { case _: Counts => java.lang.Long.valueOf(0L); case _ => null }
      }
      out
    }
    groupRows ++ extra
  }

  private sealed trait State {
    def ensure(n: Int): Unit
    /** Group `g`'s partial result (null for NULL). */
    def result(g: Int): Any
  }

  private final class Counts extends State {
    var counts: Array[Long] = new Array[Long](16)
    def ensure(n: Int): Unit = if (counts.length < n) counts = java.util.Arrays.copyOf(counts, math.max(n, counts.length * 2))
    def all(groups: Array[Int]): Unit =
      if (oneGroup) counts(0) += groups.length
      else { var j = 0; while (j < groups.length) { counts(groups(j)) += 1; j += 1 } }
    def nonNull(groups: Array[Int], isNull: Int => Boolean): Unit = {
      var j = 0
      while (j < groups.length) { if (!isNull(j)) counts(groups(j)) += 1; j += 1 }
    }
    def one(g: Int): Unit = counts(g) += 1
    def result(g: Int): Any = java.lang.Long.valueOf(if (g < counts.length) counts(g) else 0L)
  }

  /** Per group: a long, the BigInteger that replaces it once a value
    * leaves the long path, and whether a value was seen (else NULL). */
  private abstract class Numbers extends State {
    var longs: Array[Long] = new Array[Long](16)
    var bigs: Array[BigInteger] = new Array[BigInteger](16)
    var has: Array[Boolean] = new Array[Boolean](16)
    def ensure(n: Int): Unit = if (has.length < n) {
      val size = math.max(n, has.length * 2)
      longs = java.util.Arrays.copyOf(longs, size)
      bigs = java.util.Arrays.copyOf(bigs, size)
      has = java.util.Arrays.copyOf(has, size)
    }
    def result(g: Int): Any =
      if (g >= has.length || !has(g)) null
      else if (bigs(g) != null) bigs(g) else java.lang.Long.valueOf(longs(g))
  }

  /** Sums kept within `t`'s range: a sum that would leave it is set aside
    * (see [[asideSums]]) and the group's sum starts again from the value. */
  private final class Sums(t: NumType) extends Numbers {
    private val limit: BigInteger = t match {
      case NumType.Dec(p, _) => ExprEval.bigTenTo(p).subtract(BigInteger.ONE)
      case i: NumType.Integral => BigInteger.valueOf(i.max)
    }
    private val longLimit: Long = if (limit.bitLength <= 63) limit.longValue else Long.MaxValue

    def addLongs(a: Int, groups: Array[Int], values: Array[Long]): Unit = {
      var j = 0
      while (j < groups.length) { addLong(a, groups(j), values(j)); j += 1 }
    }

    /** As [[addLongs]] with every row in group 0 (no GROUP BY): one loop over
      * the values while the sum stays a long within `t`'s range, then, from
      * the value that would leave it, value by value. */
    def addLongsToGroup0(a: Int, values: Array[Long], n: Int): Unit =
      if (n > 0 && bigs(0) == null) {
        var s = longs(0)
        var j = 0
        var inRange = true
        while (inRange && j < n) {
          val v = values(j)
          val r = s + v
          if (((s ^ r) & (v ^ r)) < 0 || r > longLimit || r < -longLimit) inRange = false
          else { s = r; j += 1 }
        }
        longs(0) = s
        if (j > 0) has(0) = true
        while (j < n) { addLong(a, 0, values(j)); j += 1 }
      } else { var j = 0; while (j < n) { addLong(a, 0, values(j)); j += 1 } }

    def addLongsSkippingNulls(a: Int, groups: Array[Int], l: ExprEval.Longs): Unit = {
      val values = l.values
      var j = 0
      while (j < groups.length) { if (!l.isNull(j)) addLong(a, groups(j), values(j)); j += 1 }
    }

    private def addLong(a: Int, g: Int, v: Long): Unit =
      if (bigs(g) == null) {
        val s = longs(g)
        val r = s + v
        if (((s ^ r) & (v ^ r)) < 0 || r > longLimit || r < -longLimit) {
          if (has(g)) setAside(g, a, BigInteger.valueOf(s))
          longs(g) = v
        } else longs(g) = r
        has(g) = true
      } else addBig(a, g, BigInteger.valueOf(v))

    def add(a: Int)(g: Int, v: Any): Unit = v match {
      case l: Long => addLong(a, g, l)
      case b: BigInteger => addBig(a, g, b)
    }

    private def addBig(a: Int, g: Int, v: BigInteger): Unit = {
      val current = if (bigs(g) != null) bigs(g) else BigInteger.valueOf(longs(g))
      val r = current.add(v)
      if (r.abs.compareTo(limit) > 0) { if (has(g)) setAside(g, a, current); bigs(g) = v }
      else bigs(g) = r
      longs(g) = 0L
      has(g) = true
    }
  }

  /** Minimum (`sign` -1) or maximum (1). */
  private final class Extremes(sign: Int) extends Numbers {
    /** [[addLong]] of each non-null value of `l`, without boxing them; with
      * no GROUP BY, one loop for the batch's extreme, then one [[addLong]]. */
    def addLongs(groups: Array[Int], l: ExprEval.Longs): Unit = {
      val values = l.values
      val n = groups.length
      if (oneGroup) {
        var best = 0L
        var seen = false
        var j = 0
        while (j < n) {
          if (!l.isNull(j)) {
            val v = values(j)
            if (!seen || (if (sign < 0) v < best else v > best)) best = v
            seen = true
          }
          j += 1
        }
        if (seen) addLong(0, best)
      } else {
        var j = 0
        while (j < n) { if (!l.isNull(j)) addLong(groups(j), values(j)); j += 1 }
      }
    }

    def add(g: Int, v: Any): Unit = v match {
      case l: Long => addLong(g, l)
      case b: BigInteger => addBig(g, b)
    }

    private def addLong(g: Int, l: Long): Unit =
      if (bigs(g) == null) {
        if (!has(g) || (if (sign < 0) l < longs(g) else l > longs(g))) longs(g) = l
        has(g) = true
      } else addBig(g, BigInteger.valueOf(l))

    private def addBig(g: Int, b: BigInteger): Unit = {
      val current = if (bigs(g) != null) bigs(g) else if (has(g)) BigInteger.valueOf(longs(g)) else null
      if (current == null || Integer.signum(b.compareTo(current)) == sign) bigs(g) = b
      else bigs(g) = current
      has(g) = true
    }
  }
}

object Aggregator {
  /** The SQL type of SUM over `t`: a 64-bit integer for integers, 10 more
    * digits (at most 38) for decimals. */
  def resultType(t: NumType): NumType = t match {
    case _: NumType.Integral => NumType.Integral(64)
    case NumType.Dec(p, s) => NumType.Dec(math.min(38, p + 10), s)
  }

  /** Whether a partial aggregation of `spec` sets few sums aside: a partial
    * sum stays within its input's type (see [[Aggregator]]), so a sum over
    * values near that type's range is set aside as a row of its own every
    * few rows (a SUM or AVG of DECIMAL(7,2) prices of a few thousand: one
    * row in 50 or so), and the scan would hand Spark more rows than it saves.
    * True when every SUM's input is bounded, by `maxAbs` (the largest
    * absolute value of a column, from its statistics) through the
    * arithmetic, by at most 1/1,024 of its type's largest value, or of a
    * type no realistic partial sum leaves (64-bit integers, decimals of 18 or
    * more digits). Where no statistics bound the input (files written by
    * pylance have none), a decimal of [[UnboundedDigits]] or more digits
    * counts as bounded: its sums are set aside only once its values come
    * within about a thousandth of its range (a DECIMAL(15,2) amount above
    * ten billion), while a DECIMAL(7,2) price of a few thousand would be set
    * aside every few dozen rows. Only the speed depends on this guess: the
    * sums set aside are exact whatever the values. */
  def fewSetAside(spec: Aggregation, maxAbs: String => Option[JBigDecimal]): Boolean = spec.aggregates.forall {
    case AggFn.Sum(e) =>
      val largest: JBigDecimal = e.tpe match {
        case i: NumType.Integral => JBigDecimal.valueOf(i.max)
        case NumType.Dec(p, sc) => new JBigDecimal(ExprEval.bigTenTo(p).subtract(BigInteger.ONE), sc)
      }
      val wide = e.tpe match {
        case i: NumType.Integral => i.bits == 64
        case NumType.Dec(p, _) => p >= 18
      }
      wide || (bound(e, maxAbs) match {
        case Some(b) => b.multiply(JBigDecimal.valueOf(1024L)).compareTo(largest) <= 0
        case None => e.tpe match {
          case NumType.Dec(p, _) => p >= UnboundedDigits
          case _: NumType.Integral => false
        }
      })
    case _ => true
  }

  /** The fewest digits of a decimal whose SUM [[fewSetAside]] pushes without statistics. */
  val UnboundedDigits: Int = 10

  /** The largest absolute value `e` takes, from its columns' (`maxAbs`). */
  private def bound(e: Expr, maxAbs: String => Option[JBigDecimal]): Option[JBigDecimal] = e match {
    case Expr.Col(name, _) => maxAbs(name)
    case Expr.Lit(v, _) => Some(v.abs)
    case Expr.Widen(c, _) => bound(c, maxAbs)
    case Expr.Arith(op, l, r, _) =>
      for (a <- bound(l, maxAbs); b <- bound(r, maxAbs))
        yield if (op == Expr.Times) a.multiply(b) else a.add(b)
  }

  /** Whether [[Aggregator]] can give `spec`'s final results (`complete`):
    * every sum's result type holds any sum of fewer than 2^31 of its inputs
    * (integers of at most 32 bits, decimals of at most 28 digits). */
  def completable(spec: Aggregation): Boolean = spec.aggregates.forall {
    case AggFn.Sum(e) => e.tpe match {
      case i: NumType.Integral => i.bits <= 32
      case NumType.Dec(p, _) => p <= 28
    }
    case _ => true
  }
}
