package io.lancespark.table.aggregate

import java.math.{BigDecimal => JBigDecimal, BigInteger}

import org.apache.arrow.memory.util.MemoryUtil
import org.apache.arrow.vector._

import io.lancespark.format.arrow.NullCounts

import io.lancespark.table.aggregate.Expr._
import io.lancespark.table.aggregate.NumType._

/** Evaluates [[Expr]]s over chosen rows of a batch of Arrow vectors.
  *
  * The fast path works on unscaled longs, a column at a time; when a value
  * or an intermediate result does not fit a long, the batch is evaluated
  * again value by value with java.math.BigDecimal ([[ExprEval.exact]]). Both
  * check each node's result against its type: out of range is an
  * ArithmeticException (SQL's overflow error), never a wrapped or rounded value. */
object ExprEval {

  /** Values of the rows, unscaled at the expression's scale; `nulls` is
    * empty when no row is null. */
  final class Longs(val values: Array[Long], val nulls: Array[Boolean]) {
    def isNull(j: Int): Boolean = nulls.length > 0 && nulls(j)
  }

  /** Some value or intermediate of the batch does not fit a long. */
  final class NotLong extends RuntimeException(null, null, false, false)

  private val notLong = new NotLong

  /** The rows `rows` (positions in the vectors) of `e`, as longs. Throws
    * [[NotLong]] when they do not fit. */
  def longs(e: Expr, vectors: String => ValueVector, rows: Array[Int]): Longs =
    longs(e, vectors, rows, longs(_, vectors, rows))

  /** As above, each operand's values from `operand` (a cache of them, say). */
  def longs(e: Expr, vectors: String => ValueVector, rows: Array[Int], operand: Expr => Longs): Longs = e match {
    case Col(name, t) => column(vectors(name), t, rows)
    case Lit(v, t) =>
      val u = unscaled(v, t)
      if (u.bitLength > 63) throw notLong
      new Longs(Array.fill(rows.length)(u.longValue), Array.empty)
    case Widen(c, t) =>
      val in = operand(c)
      val f = factor(t.scale - c.tpe.scale)
      val out = new Array[Long](rows.length)
      var j = 0
      while (j < out.length) {
        if (!in.isNull(j)) out(j) = check(times(in.values(j), f), e)
        j += 1
      }
      new Longs(out, in.nulls)
    case Arith(op, l, r, t) =>
      val a = operand(l)
      val b = operand(r)
      val nulls = orNulls(a.nulls, b.nulls)
      val out = new Array[Long](rows.length)
      val fa = if (op == Times) 1L else factor(t.scale - l.tpe.scale)
      val fb = if (op == Times) 1L else factor(t.scale - r.tpe.scale)
      var j = 0
      while (j < out.length) {
        if (nulls.length == 0 || !nulls(j)) {
          val x = times(a.values(j), fa)
          val y = times(b.values(j), fb)
          // (a long overflow: the exact path decides whether the type holds the value)
          val z = try op match {
            case Plus => Math.addExact(x, y)
            case Minus => Math.subtractExact(x, y)
            case Times => Math.multiplyExact(x, y)
          } catch { case _: ArithmeticException => throw notLong }
          out(j) = check(z, e)
        }
        j += 1
      }
      new Longs(out, nulls)
  }

  /** Row `row` (a position in the vectors) of `e`, exactly; None for NULL. */
  def exact(e: Expr, vectors: String => ValueVector, row: Int): Option[JBigDecimal] = e match {
    case Col(name, _) => columnValue(vectors(name), row)
    case Lit(v, _) => Some(v)
    case Widen(c, t) => exact(c, vectors, row).map(v => checkExact(v.setScale(t.scale), e))
    case Arith(op, l, r, t) =>
      for (a <- exact(l, vectors, row); b <- exact(r, vectors, row)) yield {
        val z = op match {
          case Plus => a.add(b)
          case Minus => a.subtract(b)
          case Times => a.multiply(b)
        }
        checkExact(z.setScale(t.scale), e)
      }
  }

  private def column(v: ValueVector, t: NumType, rows: Array[Int]): Longs = {
    val n = rows.length
    val out = new Array[Long](n)
    val nulls = if (!NullCounts.any(v)) Array.empty[Boolean] else NullCounts.nullsAt(v, rows)
    var j = 0
    v match {
      case d: DecimalVector =>
        val buf = d.getDataBuffer
        val wide = t match { case Dec(p, _) => p > 18; case _ => true }
        if (!wide) { val a = addressOf(v, rows, 16); while (j < n) { out(j) = MemoryUtil.getLong(a + 16L * rows(j)); j += 1 } }
        else while (j < n) {
          val at = 16L * rows(j)
          val lo = buf.getLong(at)
          if (buf.getLong(at + 8) != (lo >> 63) && !(nulls.length > 0 && nulls(j))) throw notLong
          out(j) = lo
          j += 1
        }
      // read by address, bounds checked once: ArrowBuf's getters check them on every call
      case _: BigIntVector => val a = addressOf(v, rows, 8); while (j < n) { out(j) = MemoryUtil.getLong(a + 8L * rows(j)); j += 1 }
      case _: IntVector => val a = addressOf(v, rows, 4); while (j < n) { out(j) = MemoryUtil.getInt(a + 4L * rows(j)).toLong; j += 1 }
      case _: SmallIntVector => val a = addressOf(v, rows, 2); while (j < n) { out(j) = MemoryUtil.getShort(a + 2L * rows(j)).toLong; j += 1 }
      case _: TinyIntVector => val a = addressOf(v, rows, 1); while (j < n) { out(j) = MemoryUtil.getByte(a + rows(j)).toLong; j += 1 }
      case other => throw new IllegalArgumentException(
        s"column '${other.getField.getName}' (${other.getClass.getSimpleName}) is not an integer or decimal column")
    }
    new Longs(out, nulls)
  }

  /** The address of `v`'s values, its buffer checked once to hold the largest of `rows` at `width` bytes a value. */
  private def addressOf(v: ValueVector, rows: Array[Int], width: Int): Long = {
    val d = v.getDataBuffer
    var max = -1
    var j = 0
    while (j < rows.length) { if (rows(j) > max) max = rows(j); j += 1 }
    if (max >= 0) d.checkBytes(0L, width.toLong * (max + 1L))
    d.memoryAddress()
  }

  private def columnValue(v: ValueVector, row: Int): Option[JBigDecimal] =
    if (v.isNull(row)) None
    else Some(v match {
      case d: DecimalVector => d.getObject(row)
      case x: BigIntVector => JBigDecimal.valueOf(x.get(row))
      case x: IntVector => JBigDecimal.valueOf(x.get(row).toLong)
      case x: SmallIntVector => JBigDecimal.valueOf(x.get(row).toLong)
      case x: TinyIntVector => JBigDecimal.valueOf(x.get(row).toLong)
      case other => throw new IllegalArgumentException(
        s"column '${other.getField.getName}' (${other.getClass.getSimpleName}) is not an integer or decimal column")
    })

  private def orNulls(a: Array[Boolean], b: Array[Boolean]): Array[Boolean] =
    if (a.length == 0) b else if (b.length == 0) a else Array.tabulate(a.length)(j => a(j) || b(j))

  private def times(x: Long, f: Long): Long =
    if (f == 1L) x else try Math.multiplyExact(x, f) catch { case _: ArithmeticException => throw notLong }

  /** `z` (unscaled) if it fits the type of `e`, else the overflow error. */
  private def check(z: Long, e: Expr): Long = e.tpe match {
    case i: Integral => if (z < i.min || z > i.max) throw overflow(BigInteger.valueOf(z), e) else z
    case Dec(p, _) =>
      if (p <= 18 && (z >= Powers(p) || z <= -Powers(p))) throw overflow(BigInteger.valueOf(z), e)
      z
  }

  private def checkExact(v: JBigDecimal, e: Expr): JBigDecimal = e.tpe match {
    case i: Integral =>
      val u = v.unscaledValue
      if (u.bitLength > 63 || u.longValue < i.min || u.longValue > i.max) throw overflow(u, e) else v
    case Dec(p, _) =>
      if (v.unscaledValue.abs.compareTo(BigPowers(p)) >= 0) throw overflow(v.unscaledValue, e) else v
  }

  /** `v` unscaled at `t`'s scale (the literal's value is exact at it). */
  def unscaled(v: JBigDecimal, t: NumType): BigInteger = v.setScale(t.scale).unscaledValue

  /** The overflow error of a value of `e` (unscaled at its type's scale). */
  private def overflow(unscaled: BigInteger, e: Expr): ArithmeticException =
    new ArithmeticException(
      s"[NUMERIC_VALUE_OUT_OF_RANGE] ${new JBigDecimal(unscaled, e.tpe.scale).toPlainString} cannot be represented as " +
        s"${e.tpe.toString.toUpperCase} in $e, in an aggregate computed by the Lance scan (ANSI mode). If necessary set " +
        "\"spark.sql.ansi.enabled\" to \"false\" to bypass this error (the aggregate is then computed by Spark).")

  private val Powers: Array[Long] = Array.iterate(1L, 19)(_ * 10L)
  private val BigPowers: Array[BigInteger] = Array.iterate(BigInteger.ONE, 39)(_.multiply(BigInteger.TEN))

  /** 10^k where a long holds it, else [[NotLong]]. */
  private def factor(k: Int): Long = if (k >= 0 && k <= 18) Powers(k) else throw notLong

  /** 10^k as a BigInteger, 0 <= k <= 38. */
  def bigTenTo(k: Int): BigInteger = BigPowers(k)
}
