package io.lancespark.table.filter

import java.math.{BigDecimal => JBigDecimal}

import io.lancespark.table.filter.Filter._

/** A test of one non-null value of a column, in the column's [[Domain]]. */
sealed trait ValueTest

object ValueTest {
  final case class Const(result: Boolean) extends ValueTest
  /** `value op key` on keys; op is one of = <> < <= > >=. */
  final case class KeyCmp(op: CompareOp, key: Long) extends ValueTest
  /** Sorted, distinct keys. */
  final case class KeyIn(keys: Array[Long]) extends ValueTest {
    /** Membership in O(1), built on first use (IN lists of thousands of ids
      * are common in queries): a bit per key of the set's range when that
      * range is at most 2^23 keys or 64 times the set (ids, dates), else an
      * open-addressing hash set. */
    @transient lazy val contains: Long => Boolean = {
      val lo = keys.head
      val span = BigInt(keys.last) - BigInt(lo) + 1
      if (span <= math.max(64L * keys.length, 1L << 23) && span <= (1L << 31)) {
        val width = span.toLong
        val bits = new Array[Long](((width + 63) >>> 6).toInt)
        keys.foreach { k => val o = k - lo; bits((o >>> 6).toInt) |= 1L << o }
        (k: Long) => { val o = k - lo; o >= 0 && o < width && (bits((o >>> 6).toInt) & (1L << o)) != 0 }
      } else {
        val set = new LongHashSet(keys)
        (k: Long) => set.contains(k)
      }
    }
  }

  /** A set of longs, open addressing with linear probing, at most half full. */
  final class LongHashSet(values: Array[Long]) {
    private val mask: Int = Integer.highestOneBit(math.max(4, values.length * 2 + 1)) * 2 - 1
    private val slots: Array[Long] = new Array[Long](mask + 1)
    private val used: Array[Boolean] = new Array[Boolean](mask + 1)
    values.foreach { v =>
      var i = slot(v)
      while (used(i) && slots(i) != v) i = (i + 1) & mask
      used(i) = true; slots(i) = v
    }
    private def slot(v: Long): Int = { val h = v * 0x9E3779B97F4A7C15L; (h ^ (h >>> 32)).toInt & mask }
    def contains(v: Long): Boolean = {
      var i = slot(v)
      while (used(i)) { if (slots(i) == v) return true; i = (i + 1) & mask }
      false
    }
  }

  final case class DecCmp(op: CompareOp, value: JBigDecimal) extends ValueTest
  final case class DecIn(values: Vector[JBigDecimal]) extends ValueTest
  final case class BytesCmp(op: CompareOp, value: Array[Byte]) extends ValueTest
  /** Sorted (unsigned), distinct values. */
  final case class BytesIn(values: Vector[Array[Byte]]) extends ValueTest
  final case class BytesPrefix(prefix: Array[Byte]) extends ValueTest

  def holds(op: CompareOp, c: Int): Boolean = op match {
    case CompareOp.Eq | CompareOp.EqNullSafe => c == 0
    case CompareOp.NotEq => c != 0
    case CompareOp.Lt => c < 0
    case CompareOp.LtEq => c <= 0
    case CompareOp.Gt => c > 0
    case CompareOp.GtEq => c >= 0
  }
}

/** A leaf predicate bound to the domain of its column: the outcome on NULL
  * rows, and on non-null rows `onPass` or `onFail` as `test` holds. */
final case class BoundLeaf(column: Column, domain: Domain, onNull: Outcomes, test: ValueTest,
                           onPass: Outcomes, onFail: Outcomes)

object BoundLeaf {
  import Domain._
  import ValueTest._
  import Outcomes.{False => F, Null => N, True => T}

  def isLeaf(f: Filter): Boolean = f match {
    case _: Compare | _: In | _: IsNull | _: IsNotNull | _: StartsWith => true
    case _ => false
  }

  /** Binds a leaf (Compare, In, IsNull, IsNotNull, StartsWith) to `domain`;
    * Left(reason) when the literal does not fit the column's type. */
  def bind(f: Filter, domain: Domain): Either[String, BoundLeaf] = f match {
    case IsNull(c) => Right(BoundLeaf(c, domain, T, Const(false), T, F))
    case IsNotNull(c) => Right(BoundLeaf(c, domain, F, Const(true), T, F))
    case Compare(c, CompareOp.EqNullSafe, Lit.NullLit) => Right(BoundLeaf(c, domain, T, Const(false), T, F))
    case Compare(c, _, Lit.NullLit) => Right(BoundLeaf(c, domain, N, Const(false), N, N))
    case Compare(c, CompareOp.EqNullSafe, lit) => cmp(c, domain, CompareOp.Eq, lit).map(t => BoundLeaf(c, domain, F, t, T, F))
    case Compare(c, op, lit) => cmp(c, domain, op, lit).map(t => BoundLeaf(c, domain, N, t, T, F))
    case In(c, values) if values.isEmpty => Right(BoundLeaf(c, domain, F, Const(false), T, F))
    case in @ In(c, _) if domain == Exact(0, false) && in.keyTest.isDefined =>
      // integer literals on integer keys (no NULL among them): the filter's own sorted keys
      Right(BoundLeaf(c, domain, N, in.keyTest.get, T, F))
    case In(c, values) =>
      val hasNull = values.exists(_.isNull)
      inTest(c, domain, values.filterNot(_.isNull)).map(t => BoundLeaf(c, domain, N, t, T, if (hasNull) N else F))
    case StartsWith(c, p) => domain match {
      case Bytes => Right(BoundLeaf(c, domain, N, BytesPrefix(p), T, F))
      case AllNull => Right(BoundLeaf(c, domain, N, Const(false), T, F))
      case d => Left(s"STARTS_WITH on column ${name(c)} whose values are not strings or binaries ($d)")
    }
    case other => Left(s"not a leaf predicate: $other")
  }

  private def mismatch(c: Column, d: Domain, lit: Lit): Left[String, Nothing] =
    Left(s"literal $lit (${lit.getClass.getSimpleName}) does not fit column ${name(c)} ($d)")

  private def cmp(c: Column, domain: Domain, op: CompareOp, lit: Lit): Either[String, ValueTest] =
    domain match {
      case AllNull => Right(Const(false))
      case Bytes => lit match {
        case Lit.BytesLit(b, _) => Right(BytesCmp(op, b))
        case _ => mismatch(c, domain, lit)
      }
      case BigDec(_) => decimalOf(lit).map(v => DecCmp(op, v)).toRight(mismatch(c, domain, lit).value)
      case k: Keyed => keyPos(k, lit).map(pos => keyTest(op, pos)).toRight(mismatch(c, domain, lit).value)
    }

  private def inTest(c: Column, domain: Domain, values: Vector[Lit]): Either[String, ValueTest] = {
    if (values.isEmpty) return Right(Const(false))
    domain match {
      case AllNull => Right(Const(false))
      case Bytes =>
        val bs = values.collect { case Lit.BytesLit(b, _) => b }
        if (bs.size != values.size) mismatch(c, domain, values.find(!_.isInstanceOf[Lit.BytesLit]).get)
        else {
          val sorted = bs.sortWith((a, b) => java.util.Arrays.compareUnsigned(a, b) < 0)
          val distinct = sorted.headOption.toVector ++ sorted.sliding(2).collect {
            case Seq(a, b) if !java.util.Arrays.equals(a, b) => b
          }
          Right(BytesIn(distinct))
        }
      case BigDec(_) =>
        val ds = values.flatMap(decimalOf)
        if (ds.size != values.size) mismatch(c, domain, values.find(decimalOf(_).isEmpty).get)
        else Right(DecIn(ds.sortWith(_.compareTo(_) < 0)))
      case k: Keyed =>
        // primitive keys, sorted and deduplicated in place (lists of thousands of values)
        val keys = new Array[Long](values.size)
        var n = 0
        val it = values.iterator
        while (it.hasNext) {
          val lit = it.next()
          keyPos(k, lit) match {
            case Some(At(key)) => keys(n) = key; n += 1
            case Some(_) => () // between two keys or beyond them: matches no value
            case None => return mismatch(c, domain, lit)
          }
        }
        Right(if (n == 0) Const(false) else KeyIn(Filter.sortedDistinct(java.util.Arrays.copyOf(keys, n))))
    }
  }

  private def decimalOf(lit: Lit): Option[JBigDecimal] = lit match {
    case Lit.LongLit(v) => Some(JBigDecimal.valueOf(v))
    case Lit.DecimalLit(v) => Some(v)
    case _ => None
  }

  /** Where a non-null literal falls among a keyed domain's keys; None if it does not fit. */
  def keyPos(d: Keyed, lit: Lit): Option[KeyPos] = (d, lit) match {
    case (Exact(0, false), Lit.LongLit(v)) => Some(At(v)) // integers, dates, timestamps: no BigDecimal
    case (e: Exact, _) => decimalOf(lit).map(exactKey(e, _))
    case (Floating, Lit.DoubleLit(v)) => Some(At(doubleKey(v)))
    case (Floating, Lit.LongLit(v)) => Some(At(doubleKey(v.toDouble)))
    case (Floating, Lit.DecimalLit(v)) => Some(At(doubleKey(v.doubleValue)))
    case (Bool, Lit.BoolLit(b)) => Some(At(if (b) 1L else 0L))
    case _ => None
  }

  private def keyTest(op: CompareOp, pos: KeyPos): ValueTest = {
    import CompareOp._
    (pos, op) match {
      case (At(k), _) => KeyCmp(if (op == EqNullSafe) Eq else op, k)
      case (_, Eq | EqNullSafe) => Const(false)
      case (_, NotEq) => Const(true)
      case (Between(f), Lt | LtEq) => KeyCmp(LtEq, f)
      case (Between(f), Gt | GtEq) => KeyCmp(Gt, f)
      case (BelowAll, Lt | LtEq) => Const(false)
      case (BelowAll, Gt | GtEq) => Const(true)
      case (AboveAll, Lt | LtEq) => Const(true)
      case (AboveAll, Gt | GtEq) => Const(false)
    }
  }
}
