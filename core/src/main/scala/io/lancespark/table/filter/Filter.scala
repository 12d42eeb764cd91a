package io.lancespark.table.filter

import java.nio.charset.StandardCharsets

/** A literal, as Spark sees values (see docs/type-mapping.md): integers,
  * dates (days), timestamps (microseconds), times (nanoseconds of day) and
  * durations (microseconds) as [[Lit.LongLit]]; float and double values as
  * [[Lit.DoubleLit]]; decimals (and uint64, DECIMAL(20,0)) as
  * [[Lit.DecimalLit]] or [[Lit.LongLit]], compared by value; strings (UTF-8)
  * and binaries as [[Lit.BytesLit]], compared as unsigned bytes. */
sealed trait Lit {
  def isNull: Boolean = this eq Lit.NullLit
}

object Lit {
  case object NullLit extends Lit { override def toString = "NULL" }
  final case class LongLit(value: Long) extends Lit { override def toString = value.toString }
  final case class DoubleLit(value: Double) extends Lit {
    override def toString: String =
      if (value.isNaN) "NaN" else if (value.isInfinite) (if (value > 0) "Infinity" else "-Infinity") else value.toString
    // NaN equals NaN, -0.0 differs from 0.0 (as java.lang.Double.equals)
    override def equals(o: Any): Boolean = o match {
      case DoubleLit(v) => java.lang.Double.doubleToLongBits(v) == java.lang.Double.doubleToLongBits(value)
      case _ => false
    }
    override def hashCode: Int = java.lang.Double.hashCode(value)
  }
  final case class DecimalLit(value: java.math.BigDecimal) extends Lit {
    require(value != null, "DecimalLit(null): use NullLit")
    override def toString: String = value.toPlainString + "BD"
  }
  /** A string (`utf8`, its UTF-8 bytes) or binary value. */
  final case class BytesLit(value: Array[Byte], utf8: Boolean) extends Lit {
    require(value != null, "BytesLit(null): use NullLit")
    override def equals(o: Any): Boolean = o match {
      case BytesLit(v, u) => u == utf8 && java.util.Arrays.equals(v, value)
      case _ => false
    }
    override def hashCode: Int = java.util.Arrays.hashCode(value) * 31 + utf8.hashCode
    override def toString: String =
      if (utf8) "'" + new String(value, StandardCharsets.UTF_8).replace("'", "\\'") + "'"
      else "X'" + value.map(b => f"${b & 0xff}%02X").mkString + "'"
  }
  final case class BoolLit(value: Boolean) extends Lit { override def toString: String = value.toString.toUpperCase }

  def string(s: String): BytesLit = BytesLit(s.getBytes(StandardCharsets.UTF_8), utf8 = true)
  def binary(b: Array[Byte]): BytesLit = BytesLit(b, utf8 = false)
}

sealed abstract class CompareOp(val symbol: String) extends Serializable  // Serializable: Scala 2.12 case objects need it to deserialize

object CompareOp {
  case object Eq extends CompareOp("=")
  case object NotEq extends CompareOp("<>")
  case object Lt extends CompareOp("<")
  case object LtEq extends CompareOp("<=")
  case object Gt extends CompareOp(">")
  case object GtEq extends CompareOp(">=")
  /** `<=>`: never NULL; NULL <=> NULL is TRUE. */
  case object EqNullSafe extends CompareOp("<=>")
  val all: Vector[CompareOp] = Vector(Eq, NotEq, Lt, LtEq, Gt, GtEq, EqNullSafe)
}

/** A predicate over the rows of a Lance table, evaluated with Spark SQL's
  * semantics on the values Spark sees (three-valued logic: comparisons with
  * NULL are NULL; AND/OR/NOT are Kleene's; a row is selected when the filter
  * is TRUE). Columns are paths: `Vector("a", "b")` is field `b` of struct `a`. */
sealed trait Filter {
  /** Column paths the filter reads. */
  def columns: Set[Vector[String]]
}

object Filter {
  type Column = Vector[String]

  /** `column op literal`. */
  final case class Compare(column: Column, op: CompareOp, literal: Lit) extends Filter {
    def columns: Set[Column] = Set(column)
    override def toString: String = s"${name(column)} ${op.symbol} $literal"
  }
  /** `column IN (values)`: NULL if the column is NULL, TRUE if it equals a
    * value, else NULL if a value is NULL, else FALSE. An empty list is FALSE
    * (also for NULL rows, as Spark 4 evaluates `IN ()`). */
  final case class In(column: Column, values: Vector[Lit]) extends Filter {
    def columns: Set[Column] = Set(column)
    override def toString: String = s"${name(column)} IN (${values.mkString(", ")})"

    /** The values as a test of integer keys (integers, dates, timestamps)
      * when every one is an integer literal: made once per filter and shared
      * by every binding of it (the scan's planning, each fragment's, each
      * task's), as IN lists of join keys run to hundreds of thousands. */
    @transient lazy val keyTest: Option[ValueTest.KeyIn] =
      if (values.isEmpty || !values.forall(_.isInstanceOf[Lit.LongLit])) None
      else Some(ValueTest.KeyIn(sortedDistinct(values.iterator.map(_.asInstanceOf[Lit.LongLit].value).toArray)))
  }

  /** `keys` sorted, without repeats (sorted in place). */
  private[lancespark] def sortedDistinct(keys: Array[Long]): Array[Long] = {
    java.util.Arrays.sort(keys)
    var distinct = 0
    var i = 0
    while (i < keys.length) { if (distinct == 0 || keys(i) != keys(distinct - 1)) { keys(distinct) = keys(i); distinct += 1 }; i += 1 }
    if (distinct == keys.length) keys else java.util.Arrays.copyOf(keys, distinct)
  }
  final case class IsNull(column: Column) extends Filter {
    def columns: Set[Column] = Set(column)
    override def toString: String = s"${name(column)} IS NULL"
  }
  final case class IsNotNull(column: Column) extends Filter {
    def columns: Set[Column] = Set(column)
    override def toString: String = s"${name(column)} IS NOT NULL"
  }
  /** The column's value (UTF-8 bytes of a string, or a binary) begins with
    * `prefix`; NULL on NULL. */
  final case class StartsWith(column: Column, prefix: Array[Byte]) extends Filter {
    def columns: Set[Column] = Set(column)
    override def equals(o: Any): Boolean = o match {
      case StartsWith(c, p) => c == column && java.util.Arrays.equals(p, prefix)
      case _ => false
    }
    override def hashCode: Int = column.hashCode * 31 + java.util.Arrays.hashCode(prefix)
    override def toString: String = s"${name(column)} STARTS_WITH ${Lit.BytesLit(prefix, utf8 = true)}"
  }
  final case class And(left: Filter, right: Filter) extends Filter {
    def columns: Set[Column] = left.columns ++ right.columns
    override def toString: String = s"${paren(left, this)} AND ${paren(right, this)}"
  }
  final case class Or(left: Filter, right: Filter) extends Filter {
    def columns: Set[Column] = left.columns ++ right.columns
    override def toString: String = s"${paren(left, this)} OR ${paren(right, this)}"
  }
  final case class Not(child: Filter) extends Filter {
    def columns: Set[Column] = child.columns
    override def toString: String = child match {
      case _: And | _: Or | _: Not => s"NOT ($child)"
      case _ => s"NOT $child"
    }
  }
  case object AlwaysTrue extends Filter {
    def columns: Set[Column] = Set.empty
    override def toString = "TRUE"
  }
  case object AlwaysFalse extends Filter {
    def columns: Set[Column] = Set.empty
    override def toString = "FALSE"
  }

  /** AND of all filters (TRUE when empty). */
  def and(filters: Seq[Filter]): Filter = filters.reduceOption(And(_, _)).getOrElse(AlwaysTrue)

  /** The same predicate with the operands of each AND and OR chain, and the
    * values of each IN list, in one order (by their text) and without repeats:
    * filters that differ only in the order they were written compare equal. */
  def normalized(f: Filter): Filter = {
    def chain(g: Filter, split: PartialFunction[Filter, Seq[Filter]], join: (Filter, Filter) => Filter): Filter = {
      def flat(h: Filter): Seq[Filter] = split.lift(h).fold(Seq(h))(_.flatMap(flat))
      flat(g).map(normalized).distinct.sortBy(_.toString).reduce(join)
    }
    f match {
      case _: And => chain(f, { case And(l, r) => Seq(l, r) }, And(_, _))
      case _: Or => chain(f, { case Or(l, r) => Seq(l, r) }, Or(_, _))
      case Not(c) => Not(normalized(c))
      case In(c, values) => In(c, values.distinct.sortBy(_.toString))
      case other => other
    }
  }

  /** A column path for display: dotted, names quoted with backticks when needed. */
  def name(column: Column): String = column.map { n =>
    if (n.nonEmpty && n.forall(c => c.isLetterOrDigit || c == '_') && !n.head.isDigit) n
    else "`" + n.replace("`", "``") + "`"
  }.mkString(".")

  private def paren(f: Filter, parent: Filter): String = (f, parent) match {
    case (_: And, _: And) | (_: Or, _: Or) => f.toString
    case (_: And | _: Or, _) => s"($f)"
    case _ => f.toString
  }
}
