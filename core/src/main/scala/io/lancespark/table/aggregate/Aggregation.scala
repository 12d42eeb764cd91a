package io.lancespark.table.aggregate

import java.math.{BigDecimal => JBigDecimal}

/** An aggregation a scan computes over the rows it keeps (after deletions
  * and its filter): per group of the `groupBy` columns, the partial results
  * of `aggregates`, which the engine above merges (sums of partial sums and
  * counts, minimum of minimums...). Expressions are exact integer and
  * decimal arithmetic, with the result type of each node given by the
  * caller (the engine's typing rules), and checked: a value that does not
  * fit its type is an error, as under ANSI SQL. */
final case class Aggregation(groupBy: Vector[String], aggregates: Vector[AggFn]) {
  /** The top-level columns read: grouping columns and the aggregates' inputs. */
  def columns: Vector[String] = (groupBy ++ aggregates.flatMap(_.columns)).distinct
  /** The top-level columns the SUMs read. */
  def summedColumns: Set[String] = aggregates.collect { case AggFn.Sum(e) => e.columns }.flatten.toSet

  override def toString: String =
    s"[${aggregates.mkString(", ")}]" + (if (groupBy.isEmpty) "" else s" GROUP BY [${groupBy.mkString(", ")}]")
}

/** A numeric type of an expression's values. */
sealed trait NumType { def scale: Int }
object NumType {
  /** Two's-complement integers of `bits` (8, 16, 32 or 64). */
  final case class Integral(bits: Int) extends NumType {
    require(bits == 8 || bits == 16 || bits == 32 || bits == 64, s"integers of $bits bits")
    def scale: Int = 0
    val min: Long = if (bits == 64) Long.MinValue else -(1L << (bits - 1))
    val max: Long = if (bits == 64) Long.MaxValue else (1L << (bits - 1)) - 1
    override def toString: String = s"int$bits"
  }
  /** Decimals of at most `precision` digits, `scale` of them after the point. */
  final case class Dec(precision: Int, scale: Int) extends NumType {
    require(precision >= 1 && precision <= 38 && scale >= 0 && scale <= precision, s"decimal($precision,$scale)")
    override def toString: String = s"decimal($precision,$scale)"
  }
}

/** An expression over one row's columns. */
sealed trait Expr {
  def tpe: NumType
  def columns: Vector[String]
}
object Expr {
  final case class Col(name: String, tpe: NumType) extends Expr {
    def columns: Vector[String] = Vector(name)
    override def toString: String = name
  }
  final case class Lit(value: JBigDecimal, tpe: NumType) extends Expr {
    def columns: Vector[String] = Vector.empty
    override def toString: String = value.toPlainString
  }
  sealed abstract class Op(val symbol: String) extends Serializable  // Scala 2.12 case objects need it to deserialize
  case object Plus extends Op("+")
  case object Minus extends Op("-")
  case object Times extends Op("*")
  /** `l op r` of result type `tpe`, which must hold the exact result's scale
    * (the caller declines arithmetic that would round). */
  final case class Arith(op: Op, l: Expr, r: Expr, tpe: NumType) extends Expr {
    def columns: Vector[String] = (l.columns ++ r.columns).distinct
    override def toString: String = s"($l ${op.symbol} $r)"
  }
  /** A widening cast (integer to a wider integer or a decimal; decimal to a
    * decimal of at least its scale): exact, checked against `tpe`'s range. */
  final case class Widen(child: Expr, tpe: NumType) extends Expr {
    def columns: Vector[String] = child.columns
    override def toString: String = s"CAST($child AS $tpe)"
  }
}

/** An aggregate function and its partial result. */
sealed trait AggFn { def columns: Vector[String] }
object AggFn {
  case object CountStar extends AggFn {
    def columns: Vector[String] = Vector.empty
    override def toString: String = "COUNT(*)"
  }
  /** Non-null values of `input` (any column type when `input` is a column). */
  final case class Count(input: Either[String, Expr]) extends AggFn {
    def columns: Vector[String] = input.fold(Vector(_), _.columns)
    override def toString: String = s"COUNT(${input.fold(identity, _.toString)})"
  }
  /** Partial sums, each within the range of `input.tpe` (a group may have
    * several: their sum is the group's). */
  final case class Sum(input: Expr) extends AggFn {
    def columns: Vector[String] = input.columns
    override def toString: String = s"SUM($input)"
  }
  final case class Min(input: Expr) extends AggFn {
    def columns: Vector[String] = input.columns
    override def toString: String = s"MIN($input)"
  }
  final case class Max(input: Expr) extends AggFn {
    def columns: Vector[String] = input.columns
    override def toString: String = s"MAX($input)"
  }
}
