package io.lancespark.spark.read

import java.util.{Optional, OptionalLong}

import org.apache.spark.sql.connector.expressions.{Expressions, NamedReference}
import org.apache.spark.sql.connector.read.colstats.ColumnStatistics
import org.apache.spark.sql.types._

import io.lancespark.table.filter.PageBounds
import io.lancespark.table.plan.ColumnSummary

/** Column statistics for Spark's cost-based optimizer from a scan's
  * [[ColumnSummary]]s: null count, distinct estimate, and min/max as the
  * Catalyst values of the column's Spark type (integers, dates, timestamps,
  * decimals, booleans; none for floats, whose page bounds leave NaN out, nor
  * for strings and binaries, whose bounds the optimizer does not use), and
  * the mean length of strings and binaries (the optimizer's row sizes). */
object CboStatistics {

  def of(fields: Seq[StructField], summaries: Map[Vector[String], ColumnSummary]): java.util.Map[NamedReference, ColumnStatistics] = {
    val out = new java.util.HashMap[NamedReference, ColumnStatistics]()
    fields.foreach { f =>
      summaries.get(Vector(f.name)).foreach(s => out.put(Expressions.column(f.name), statistics(f.dataType, s)))
    }
    out
  }

  private def optional(o: Option[Long]): OptionalLong = o.fold(OptionalLong.empty())(OptionalLong.of)

  def statistics(dataType: DataType, s: ColumnSummary): ColumnStatistics = {
    val (lo, hi) = bounds(dataType, s).getOrElse((None, None))
    new ColumnStatistics {
      override def distinctCount(): OptionalLong = optional(s.distinct)
      override def nullCount(): OptionalLong = optional(s.nullCount)
      override def min(): Optional[Object] = Optional.ofNullable(lo.orNull)
      override def max(): Optional[Object] = Optional.ofNullable(hi.orNull)
      override def avgLen(): OptionalLong = optional(s.avgLen)
    }
  }

  /** Both bounds as Catalyst values of `dataType`, or None. */
  private def bounds(dataType: DataType, s: ColumnSummary): Option[(Option[AnyRef], Option[AnyRef])] = {
    if (s.min.isEmpty || s.max.isEmpty) return None
    def integral(convert: Long => Option[AnyRef]): Option[(Option[AnyRef], Option[AnyRef])] =
      PageBounds.of(s.arrowType, s.min, s.max) match {
        case PageBounds.Keys(l, h) if l != Long.MinValue && h != Long.MaxValue => Some((convert(l), convert(h)))
        case _ => None
      }
    def within(lo: Long, hi: Long)(f: Long => AnyRef)(v: Long): Option[AnyRef] = if (v >= lo && v <= hi) Some(f(v)) else None
    val out = dataType match {
      case ByteType => integral(within(Byte.MinValue, Byte.MaxValue)(v => java.lang.Byte.valueOf(v.toByte)))
      case ShortType => integral(within(Short.MinValue, Short.MaxValue)(v => java.lang.Short.valueOf(v.toShort)))
      case IntegerType | DateType => integral(within(Int.MinValue, Int.MaxValue)(v => Integer.valueOf(v.toInt)))
      case LongType | TimestampType | TimestampNTZType => integral(v => Some(java.lang.Long.valueOf(v)))
      case BooleanType => (s.min, s.max) match {
        case (Some(a: java.lang.Boolean), Some(b: java.lang.Boolean)) => Some((Some(a), Some(b)))
        case _ => None
      }
      case d: DecimalType =>
        def dec(o: Option[Any]): Option[AnyRef] = o.collect { case b: java.math.BigDecimal => b }.flatMap { b =>
          val v = Decimal(b)
          if (v.changePrecision(d.precision, d.scale)) Some(v) else None
        }
        Some((dec(s.min), dec(s.max)))
      case _ => None
    }
    out.filter { case (a, b) => a.isDefined && b.isDefined }
  }
}
