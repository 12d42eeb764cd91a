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
  final case class KeyIn(keys: Array[Long]) extends ValueTest
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
        val ps = values.flatMap(keyPos(k, _))
        if (ps.size != values.size) mismatch(c, domain, values.find(keyPos(k, _).isEmpty).get)
        else {
          val keys = ps.collect { case At(key) => key }.distinct.sorted.toArray
          Right(if (keys.isEmpty) Const(false) else KeyIn(keys))
        }
    }
  }

  private def decimalOf(lit: Lit): Option[JBigDecimal] = lit match {
    case Lit.LongLit(v) => Some(JBigDecimal.valueOf(v))
    case Lit.DecimalLit(v) => Some(v)
    case _ => None
  }

  /** Where a non-null literal falls among a keyed domain's keys; None if it does not fit. */
  def keyPos(d: Keyed, lit: Lit): Option[KeyPos] = (d, lit) match {
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
