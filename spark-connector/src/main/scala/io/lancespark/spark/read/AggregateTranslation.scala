package io.lancespark.spark.read

import java.math.{BigDecimal => JBigDecimal}

import org.apache.arrow.vector.types.DateUnit
import org.apache.arrow.vector.types.TimeUnit
import org.apache.arrow.vector.types.pojo.ArrowType
import org.apache.spark.sql.catalyst.expressions.{Add, BoundReference, Multiply, Subtract}
import org.apache.spark.sql.connector.expressions.{Cast, Expression, GeneralScalarExpression, Literal, NamedReference}
import org.apache.spark.sql.connector.expressions.aggregate.{AggregateFunc, Aggregation => SparkAggregation, Count, CountStar, Max, Min, Sum}
import org.apache.spark.sql.types._

import io.lancespark.schema.LanceSchema
import io.lancespark.table.aggregate.{AggFn, Aggregation, Expr, NumType}

/** Spark's pushed aggregation as one the scan computes, or None when the scan
  * cannot compute it exactly as Spark would: only SUM, COUNT, MIN and MAX
  * (Spark splits AVG into SUM and COUNT), none DISTINCT; grouping by
  * top-level columns of strings, integers, dates, timestamps, booleans or
  * decimals of at most 18 digits; inputs of integer or decimal columns,
  * literals, + - * and widening casts. Each arithmetic node takes the type
  * Spark's own expression gives it (its decimal precision rules and
  * settings), and is declined where that type would round the exact result. */
object AggregateTranslation {

  /** The aggregation and the Spark types of its output (grouping columns, then aggregates). */
  final case class Translated(aggregation: Aggregation, output: StructType)

  def apply(agg: SparkAggregation, tableSchema: StructType, lance: LanceSchema): Option[Translated] = {
    def column(name: String): Option[(DataType, ArrowType)] =
      for {
        sf <- tableSchema.fields.find(_.name == name)
        lf <- lance.field(name)
      } yield sf.dataType -> lf.arrowType

    val groups: Option[Vector[(String, DataType)]] = sequence(agg.groupByExpressions().toVector.map {
      case r: NamedReference if r.fieldNames().length == 1 =>
        val name = r.fieldNames().head
        column(name).filter { case (_, a) => groupable(a) }.map { case (t, _) => name -> t }
      case _ => None
    })

    def expr(e: Expression): Option[(Expr, DataType)] = e match {
      case r: NamedReference if r.fieldNames().length == 1 =>
        val name = r.fieldNames().head
        column(name).flatMap { case (t, a) => if (numericColumn(a)) numType(t).map(n => Expr.Col(name, n) -> t) else None }
      case l: Literal[_] =>
        numType(l.dataType()).flatMap(n => literal(l.value()).map(v => Expr.Lit(v, n) -> l.dataType()))
          .filter { case (Expr.Lit(v, n), _) => fits(v, n); case _ => false }
      case c: Cast =>
        for {
          (child, from) <- expr(c.expression())
          to <- numType(c.dataType())
          if widens(child.tpe, to)
        } yield Expr.Widen(child, to) -> c.dataType()
      case g: GeneralScalarExpression if g.children().length == 2 && Set("+", "-", "*").contains(g.name()) =>
        for {
          (l, lt) <- expr(g.children()(0))
          (r, rt) <- expr(g.children()(1))
          t <- arithmeticType(g.name(), lt, rt)
          n <- numType(t)
          if exact(g.name(), l.tpe, r.tpe, n)
        } yield Expr.Arith(op(g.name()), l, r, n) -> t
      case _ => None
    }

    def fn(f: AggregateFunc): Option[(AggFn, DataType)] = f match {
      case _: CountStar => Some(AggFn.CountStar -> LongType)
      case c: Count if !c.isDistinct =>
        c.column() match {
          case r: NamedReference if r.fieldNames().length == 1 && column(r.fieldNames().head).isDefined =>
            Some(AggFn.Count(Left(r.fieldNames().head)) -> LongType)
          case other => expr(other).map { case (e, _) => AggFn.Count(Right(e)) -> LongType }
        }
      case s: Sum if !s.isDistinct =>
        expr(s.column()).map { case (e, t) =>
          AggFn.Sum(e) -> (t match {
            // Spark's SUM of a decimal: 10 more digits, at most 38
            case d: DecimalType => DecimalType(math.min(DecimalType.MAX_PRECISION, d.precision + 10), d.scale)
            case _ => LongType
          })
        }
      case m: Min => expr(m.column()).map { case (e, t) => AggFn.Min(e) -> t }
      case m: Max => expr(m.column()).map { case (e, t) => AggFn.Max(e) -> t }
      case _ => None
    }

    for {
      gs <- groups
      fs <- sequence(agg.aggregateExpressions().toVector.map(fn))
    } yield Translated(
      Aggregation(gs.map(_._1), fs.map(_._1)),
      StructType(gs.map { case (n, t) => StructField(n, t) } ++
        fs.zipWithIndex.map { case ((_, t), i) => StructField(s"agg_$i", t) }))
  }

  private def sequence[A](xs: Vector[Option[A]]): Option[Vector[A]] =
    if (xs.forall(_.isDefined)) Some(xs.map(_.get)) else None

  private def numType(t: DataType): Option[NumType] = t match {
    case ByteType => Some(NumType.Integral(8))
    case ShortType => Some(NumType.Integral(16))
    case IntegerType => Some(NumType.Integral(32))
    case LongType => Some(NumType.Integral(64))
    case d: DecimalType => Some(NumType.Dec(d.precision, d.scale))
    case _ => None
  }

  /** Columns the evaluator reads as integers or decimals (signed Arrow integers, 128-bit decimals). */
  private def numericColumn(a: ArrowType): Boolean = a match {
    case i: ArrowType.Int => i.getIsSigned
    case d: ArrowType.Decimal => d.getBitWidth == 128
    case _ => false
  }

  private def groupable(a: ArrowType): Boolean = a match {
    case _: ArrowType.Utf8 | _: ArrowType.Bool => true
    case i: ArrowType.Int => i.getIsSigned
    case d: ArrowType.Date => d.getUnit == DateUnit.DAY
    case t: ArrowType.Timestamp => t.getUnit == TimeUnit.MICROSECOND
    case d: ArrowType.Decimal => d.getBitWidth == 128 && d.getPrecision <= 18
    case _ => false
  }

  private def literal(v: Any): Option[JBigDecimal] = v match {
    case d: Decimal => Some(d.toJavaBigDecimal)
    case i: java.lang.Integer => Some(JBigDecimal.valueOf(i.longValue))
    case l: java.lang.Long => Some(JBigDecimal.valueOf(l))
    case s: java.lang.Short => Some(JBigDecimal.valueOf(s.longValue))
    case b: java.lang.Byte => Some(JBigDecimal.valueOf(b.longValue))
    case _ => None
  }

  private def fits(v: JBigDecimal, t: NumType): Boolean = t match {
    case i: NumType.Integral => v.scale <= 0 && v.compareTo(JBigDecimal.valueOf(i.min)) >= 0 && v.compareTo(JBigDecimal.valueOf(i.max)) <= 0
    case NumType.Dec(p, s) => v.scale <= s && v.precision - v.scale <= p - s
  }

  /** Casts that never round: to a wider integer, or to a decimal of at least the scale. */
  private def widens(from: NumType, to: NumType): Boolean = (from, to) match {
    case (a: NumType.Integral, b: NumType.Integral) => b.bits >= a.bits
    case (_: NumType.Integral, NumType.Dec(_, _)) => true
    case (NumType.Dec(_, s1), NumType.Dec(_, s2)) => s2 >= s1
    case _ => false
  }

  /** The type Spark gives `l op r` (its own expression's, with the session's settings). */
  private def arithmeticType(name: String, l: DataType, r: DataType): Option[DataType] =
    if (l != r && !(l.isInstanceOf[DecimalType] && r.isInstanceOf[DecimalType])) None
    else {
      val (a, b) = (BoundReference(0, l, nullable = true), BoundReference(1, r, nullable = true))
      Some(name match {
        case "+" => Add(a, b).dataType
        case "-" => Subtract(a, b).dataType
        case "*" => Multiply(a, b).dataType
      })
    }

  /** Whether the result type holds the exact result's scale (no rounding). */
  private def exact(name: String, l: NumType, r: NumType, t: NumType): Boolean = t match {
    case _: NumType.Integral => l == t && r == t
    case NumType.Dec(_, s) => name match {
      case "*" => s == l.scale + r.scale
      case _ => s == math.max(l.scale, r.scale)
    }
  }

  private def op(name: String): Expr.Op = name match {
    case "+" => Expr.Plus
    case "-" => Expr.Minus
    case "*" => Expr.Times
  }
}
