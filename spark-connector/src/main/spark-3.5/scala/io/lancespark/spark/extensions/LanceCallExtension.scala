package io.lancespark.spark.extensions

import java.util.Locale

import org.apache.spark.sql.{Row, SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.{CatalystTypeConverters, FunctionIdentifier, InternalRow, TableIdentifier}
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference, Cast, Expression}
import org.apache.spark.sql.catalyst.parser.ParserInterface
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.connector.catalog.Identifier
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.lancespark.CatalogAccess
import org.apache.spark.sql.types.{DataType, StructType}

import io.lancespark.spark.procedures.{LanceProcedure, ProcParam}
import io.lancespark.spark.shim.ProcedureCatalogShim

/** `CALL lance.system.<procedure>(name => value, ...)` on Spark 3.5, whose SQL
  * has no CALL for DSv2 catalogs: installed by `spark.sql.extensions`
  * (lance_spark.configure does it on 3.5). A CALL whose catalog is not a Lance
  * catalog, and every other statement, goes to Spark's parser unchanged. */
final class LanceCallExtension extends (SparkSessionExtensions => Unit) {
  override def apply(e: SparkSessionExtensions): Unit =
    e.injectParser((session, delegate) => new LanceCallParser(session, delegate))
}

/** A parsed CALL: the procedure's name parts and its arguments (SQL text of
  * constants, by name or by position). */
final case class CallStatement(name: String, positional: Seq[String], named: Seq[(String, String)])

object CallStatement {
  private val Head = "(?is)^\\s*CALL\\s+(.*)$".r
  private val Named = "(?s)^\\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\\s*=>(.*)$".r

  /** The statement if `sql` is a CALL (comments before it allowed); None otherwise. */
  def parse(sql: String): Option[CallStatement] = stripComments(sql) match {
    case Head(rest) =>
      val open = topLevel(rest, '(').getOrElse(throw new IllegalArgumentException(s"CALL without '(': $sql"))
      val name = rest.substring(0, open).trim
      val body = rest.substring(open + 1)
      val close = topLevel(body, ')').getOrElse(throw new IllegalArgumentException(s"CALL without ')': $sql"))
      val tail = body.substring(close + 1).trim
      if (tail.nonEmpty && tail != ";") throw new IllegalArgumentException(s"unexpected text after CALL (...): $tail")
      val args = split(body.substring(0, close)).map(_.trim).filter(_.nonEmpty)
      def isNamed(a: String): Boolean = Named.pattern.matcher(a).matches()
      val (named, positional) = args.partition(isNamed)
      if (args.dropWhile(a => !isNamed(a)).exists(a => !isNamed(a)))
        throw new IllegalArgumentException(s"CALL: positional arguments must come before named ones: $sql")
      Some(CallStatement(name, positional.toVector,
        named.map { case Named(n, v) => n.toLowerCase(Locale.ROOT) -> v.trim }.toVector))
    case _ => None
  }

  private def stripComments(sql: String): String = {
    var s = sql.trim
    var changed = true
    while (changed) {
      changed = false
      if (s.startsWith("--")) { val nl = s.indexOf('\n'); s = if (nl < 0) "" else s.substring(nl + 1).trim; changed = true }
      else if (s.startsWith("/*")) { val e = s.indexOf("*/"); s = if (e < 0) "" else s.substring(e + 2).trim; changed = true }
    }
    s
  }

  /** The index of the first `c` outside quotes and parentheses. */
  private def topLevel(s: String, c: Char): Option[Int] = {
    var depth = 0
    var quote: Char = 0
    var i = 0
    while (i < s.length) {
      val ch = s.charAt(i)
      if (quote != 0) {
        if (ch == '\\' && quote != '`') i += 1
        else if (ch == quote) quote = 0
      } else if (ch == c && depth == 0) return Some(i)
      else if (ch == '\'' || ch == '"' || ch == '`') quote = ch
      else if (ch == '(') depth += 1
      else if (ch == ')') depth -= 1
      i += 1
    }
    None
  }

  /** `s` split at commas outside quotes and parentheses. */
  private def split(s: String): Vector[String] = topLevel(s, ',') match {
    case Some(i) => s.substring(0, i) +: split(s.substring(i + 1))
    case None => Vector(s)
  }
}

/** Spark's parser, plus CALL of a Lance catalog's procedures. */
final class LanceCallParser(session: SparkSession, delegate: ParserInterface) extends ParserInterface {

  override def parsePlan(sqlText: String): LogicalPlan =
    CallStatement.parse(sqlText).flatMap(plan).getOrElse(delegate.parsePlan(sqlText))

  /** The command for a CALL of a Lance catalog's procedure; None for any other catalog. */
  private def plan(call: CallStatement): Option[LogicalPlan] = {
    val parts = delegate.parseMultipartIdentifier(call.name)
    val (catalogName, rest) =
      if (parts.size >= 3) (parts.head, parts.tail)
      else (CatalogAccess.currentCatalog(session), parts)
    if (parts.size < 2) None
    else CatalogAccess.catalog(session, catalogName) match {
      case Some(c: ProcedureCatalogShim) =>
        val p = c.procedure(Identifier.of(rest.init.toArray, rest.last))
        Some(LanceCallCommand(p, bind(p, call)))
      case _ => None
    }
  }

  /** One constant per parameter, in the order of `p.params`: the arguments by
    * position, then by name, then the parameters' defaults. */
  private def bind(p: LanceProcedure, call: CallStatement): Seq[Expression] = {
    val params = p.params
    def fail(msg: String): Nothing = throw new IllegalArgumentException(s"CALL ${p.name()}: $msg")
    if (call.positional.size > params.size)
      fail(s"${call.positional.size} arguments given, the procedure takes at most ${params.size}")
    val dup = call.named.groupBy(_._1).collect { case (n, xs) if xs.size > 1 => n }
    if (dup.nonEmpty) fail(s"argument ${dup.mkString(", ")} given more than once")
    call.named.foreach { case (n, _) =>
      val i = params.indexWhere(_.name == n)
      if (i < 0) fail(s"no parameter $n; the parameters are ${params.map(_.name).mkString(", ")}")
      if (i < call.positional.size) fail(s"argument $n given both by position and by name")
    }
    params.zipWithIndex.map { case (q, i) =>
      val text =
        if (i < call.positional.size) Some(call.positional(i))
        else call.named.collectFirst { case (n, v) if n == q.name => v }.orElse(q.default)
      constant(p, q, text.getOrElse(fail(s"the argument ${q.name} is required")))
    }
  }

  private def constant(p: LanceProcedure, q: ProcParam, text: String): Expression = {
    val parsed = delegate.parseExpression(text)
    // function calls (map('c2', 'a * 2'), array(...)) resolve against the session's functions
    val e = if (parsed.resolved) parsed else resolved(parsed)
    if (!e.resolved || !e.foldable)
      throw new IllegalArgumentException(s"CALL ${p.name()}: the argument ${q.name} must be a constant, got $text")
    Cast(e, q.dataType, Option(session.sessionState.conf.sessionLocalTimeZone))
  }

  private def resolved(e: Expression): Expression = {
    val plan = org.apache.spark.sql.catalyst.plans.logical.Project(
      Seq(org.apache.spark.sql.catalyst.expressions.Alias(e, "v")()),
      org.apache.spark.sql.catalyst.plans.logical.OneRowRelation())
    scala.util.Try(session.sessionState.analyzer.execute(plan)).toOption.collect {
      case org.apache.spark.sql.catalyst.plans.logical.Project(
        Seq(org.apache.spark.sql.catalyst.expressions.Alias(r, _)), _) => r
    }.getOrElse(e)
  }

  override def parseExpression(sqlText: String): Expression = delegate.parseExpression(sqlText)
  override def parseTableIdentifier(sqlText: String): TableIdentifier = delegate.parseTableIdentifier(sqlText)
  override def parseFunctionIdentifier(sqlText: String): FunctionIdentifier = delegate.parseFunctionIdentifier(sqlText)
  override def parseMultipartIdentifier(sqlText: String): Seq[String] = delegate.parseMultipartIdentifier(sqlText)
  override def parseTableSchema(sqlText: String): StructType = delegate.parseTableSchema(sqlText)
  override def parseDataType(sqlText: String): DataType = delegate.parseDataType(sqlText)
  override def parseQuery(sqlText: String): LogicalPlan = delegate.parseQuery(sqlText)
}

/** Runs a Lance procedure on the driver; its one result row is the command's output. */
final case class LanceCallCommand(procedure: LanceProcedure, args: Seq[Expression]) extends LeafRunnableCommand {
  override val output: Seq[Attribute] =
    procedure.outputType.fields.map(f => AttributeReference(f.name, f.dataType, f.nullable)()).toSeq

  override def run(sparkSession: SparkSession): Seq[Row] = {
    val input = InternalRow.fromSeq(args.map(_.eval()))
    val out = procedure.invoke(input)
    val toRow = CatalystTypeConverters.createToScalaConverter(procedure.outputType)
    Seq(toRow(out).asInstanceOf[Row])
  }

  override def simpleString(maxFields: Int): String = s"LanceCall ${procedure.name()}"
}
