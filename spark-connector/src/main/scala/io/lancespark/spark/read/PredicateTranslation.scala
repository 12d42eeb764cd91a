package io.lancespark.spark.read

import org.apache.spark.sql.connector.expressions.{Expression, Literal, NamedReference}
import org.apache.spark.sql.connector.expressions.filter.Predicate
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import io.lancespark.spark.MetadataColumns
import io.lancespark.spark.shim.TimeTypes
import io.lancespark.table.filter.{CompareOp, Filter, Lit}

/** Spark's V2 predicates as the connector's [[Filter]]s; None for anything
  * not expressible (it then stays with Spark). Literals arrive as Spark's
  * internal values: days for dates, microseconds for timestamps, UTF8String. */
object PredicateTranslation {

  def apply(p: Predicate): Option[Filter] = translate(p, Set.empty)

  /** As `apply`, also accepting the metadata columns in `metadata` (e.g. `_fragid`). */
  def translate(p: Predicate, metadata: Set[String]): Option[Filter] = {
    def apply(q: Predicate): Option[Filter] = translate(q, metadata)
    def column(e: Expression): Option[Filter.Column] = columnOf(e, metadata)
    def both(kids: Seq[Expression]): Option[(Filter, Filter)] = kids match {
      case Seq(l: Predicate, r: Predicate) => for (a <- apply(l); b <- apply(r)) yield (a, b)
      case _ => None
    }
    val kids = p.children().toSeq
    p.name() match {
      case "ALWAYS_TRUE" => Some(Filter.AlwaysTrue)
      case "ALWAYS_FALSE" => Some(Filter.AlwaysFalse)
      case "AND" => both(kids).map { case (l, r) => Filter.And(l, r) }
      case "OR" => both(kids).map { case (l, r) => Filter.Or(l, r) }
      case "NOT" => kids.headOption.collect { case q: Predicate => q }.flatMap(apply).map(Filter.Not)
      case "IS_NULL" => kids.headOption.flatMap(column).map(Filter.IsNull)
      case "IS_NOT_NULL" => kids.headOption.flatMap(column).map(Filter.IsNotNull)
      case "IN" =>
        for {
          c <- kids.headOption.flatMap(column)
          values <- sequence(kids.tail.map(literal))
        } yield Filter.In(c, values.toVector)
      case "STARTS_WITH" =>
        (kids.headOption.flatMap(column), kids.lift(1).flatMap(literal)) match {
          case (Some(c), Some(Lit.BytesLit(prefix, _))) => Some(Filter.StartsWith(c, prefix))
          case _ => None
        }
      case op @ ("=" | "<>" | "<" | "<=" | ">" | ">=" | "<=>") if kids.size == 2 =>
        (column(kids(0)), literal(kids(1)), column(kids(1)), literal(kids(0))) match {
          case (Some(c), Some(v), _, _) => Some(Filter.Compare(c, compareOp(op), v))
          case (_, _, Some(c), Some(v)) => Some(Filter.Compare(c, compareOp(flip(op)), v))
          case _ => None
        }
      case _ => None
    }
  }

  private def sequence[A](xs: Seq[Option[A]]): Option[Seq[A]] =
    if (xs.forall(_.isDefined)) Some(xs.map(_.get)) else None

  private def columnOf(e: Expression, metadata: Set[String]): Option[Filter.Column] = e match {
    case r: NamedReference
        if !MetadataColumns.names.contains(r.fieldNames().head) || metadata.contains(r.fieldNames().head) =>
      Some(r.fieldNames().toVector)
    case _ => None
  }

  private def compareOp(op: String): CompareOp = op match {
    case "=" => CompareOp.Eq
    case "<>" => CompareOp.NotEq
    case "<" => CompareOp.Lt
    case "<=" => CompareOp.LtEq
    case ">" => CompareOp.Gt
    case ">=" => CompareOp.GtEq
    case "<=>" => CompareOp.EqNullSafe
  }

  private def flip(op: String): String = op match {
    case "<" => ">"
    case "<=" => ">="
    case ">" => "<"
    case ">=" => "<="
    case other => other
  }

  private def literal(e: Expression): Option[Lit] = e match {
    case l: Literal[_] => literalValue(l.value(), l.dataType())
    case _ => None
  }

  /** A Spark value of type `t` (Spark's internal representation) as a filter literal. */
  def literalValue(v: Any, t: DataType): Option[Lit] =
    if (v == null) Some(Lit.NullLit)
    else t match {
      case ByteType | ShortType | IntegerType | LongType | DateType | TimestampType | TimestampNTZType =>
        Some(Lit.LongLit(v.asInstanceOf[Number].longValue()))
      case t if TimeTypes.isTime(t) || t.isInstanceOf[DayTimeIntervalType] => Some(Lit.LongLit(v.asInstanceOf[Number].longValue()))
      case FloatType | DoubleType => Some(Lit.DoubleLit(v.asInstanceOf[Number].doubleValue()))
      case _: DecimalType => Some(Lit.DecimalLit(v.asInstanceOf[Decimal].toJavaBigDecimal))
      case _: StringType => Some(Lit.BytesLit(v.asInstanceOf[UTF8String].getBytes, utf8 = true))
      case BinaryType => Some(Lit.binary(v.asInstanceOf[Array[Byte]]))
      case BooleanType => Some(Lit.BoolLit(v.asInstanceOf[Boolean]))
      case _ => None
    }
}
