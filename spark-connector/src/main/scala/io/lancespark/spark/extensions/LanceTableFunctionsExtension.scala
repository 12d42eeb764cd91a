package io.lancespark.spark.extensions

import java.util.Locale

import org.apache.spark.sql.{DataFrame, SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Cast, Expression, ExpressionInfo, NamedArgumentExpression}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.{ArrayType, FloatType, StringType}
import org.apache.spark.unsafe.types.UTF8String

import io.lancespark.spark.LanceTable
import io.lancespark.spark.options.NearestOptions
import io.lancespark.spark.read.LanceKnnScan
import io.lancespark.table.index.vector.DistanceMetric

/** Installs the connector's SQL table functions (`spark.sql.extensions`):
  * `lance_vector_search('<table or path>', '<column>', <query ARRAY<FLOAT>>, <k>
  * [, nprobes => n, refine_factor => r, filter => '<SQL predicate>',
  * prefilter => true|false, metric => 'l2'|'cosine'|'dot', use_index => true|false])`.
  * The optional arguments may also be given by position, in that order. */
final class LanceTableFunctionsExtension extends (SparkSessionExtensions => Unit) {
  override def apply(ext: SparkSessionExtensions): Unit = {
    ext.injectTableFunction((FunctionIdentifier(VectorSearchFunction.Name), VectorSearchFunction.info,
      (args: Seq[Expression]) => VectorSearchFunction.plan(args)))
    ext.injectFunction((FunctionIdentifier(KnnFunction.Name), KnnFunction.info,
      (args: Seq[Expression]) => KnnFunction.build(args)))
    ext.injectTableFunction((FunctionIdentifier(TableChangesFunction.Name), TableChangesFunction.info,
      (args: Seq[Expression]) => TableChangesFunction.plan(args)))
    // LABEL_LIST indices for array_contains / arrays_overlap (see LabelListScans)
    ext.injectPlannerStrategy(_ => LabelListScans)
    // small scans read on the driver, no job (see LocalScans)
    ext.injectPlannerStrategy(_ => LocalScans)
    // scalar subqueries over one Lance table with one filter: one scan, which Spark merges (see SharedSubqueryScans)
    ext.injectPostHocResolutionRule(_ => SharedSubqueryReads)
    // predicates Spark inferred above built Lance scans go into them (see ResidualScanFilters); first, so
    // that subqueries' scans are alike for SharedSubqueryScans
    ext.injectPreCBORule(_ => ResidualScanFilters)
    ext.injectPreCBORule(_ => SharedSubqueryScans)
    // the filters of small Lance scans shown to Spark's dynamic pruning (see VisibleScanFilters); last
    ext.injectPreCBORule(_ => VisibleScanFilters)
    // mergeSchema for catalog writes (see CatalogWriteSchema)
    ext.injectResolutionRule(session => CatalogWriteSchema(session))
  }
}

/** `lance_table_changes('<table or path>', <start> [, <end>])`: the change
  * feed of the versions from start to end (both included; end: the latest),
  * as `spark.read.format("lance").option("readChangeFeed", "true")` reads it.
  * A bound is a version number or a timestamp string (as Delta's table_changes). */
object TableChangesFunction {
  val Name: String = "lance_table_changes"

  private val Usage: String = s"$Name('<table or path>', <starting version or timestamp> [, <ending version or timestamp>])"

  val info: ExpressionInfo = new ExpressionInfo(classOf[LanceTableFunctionsExtension].getName, null, Name,
    s"$Usage - the row changes (_change_type, _commit_version, _commit_timestamp) of a Lance table's versions.",
    "", "", "", "table_funcs", "", "", "scala_udf")

  private def fail(problem: String): Nothing = throw new IllegalArgumentException(s"$Name: $problem; usage: $Usage")

  def plan(args: Seq[Expression]): LogicalPlan = dataFrame(SparkSession.active, args).queryExecution.analyzed

  private def constant(e: Expression, name: String): Option[Any] = {
    if (e.isInstanceOf[NamedArgumentExpression]) fail("arguments are given by position")
    if (!e.foldable) fail(s"argument '$name' must be a constant")
    Option(e.eval())
  }

  /** (option name suffix, value): a version number or a timestamp. */
  private def bound(e: Expression, name: String, prefix: String): Option[(String, String)] = constant(e, name).map {
    case i: Int => s"${prefix}Version" -> i.toString
    case l: Long => s"${prefix}Version" -> l.toString
    case s: UTF8String =>
      val t = s.toString.trim
      if (t.nonEmpty && t.forall(_.isDigit)) s"${prefix}Version" -> t else s"${prefix}Timestamp" -> t
    case other => e.dataType match {
      case org.apache.spark.sql.types.TimestampType | org.apache.spark.sql.types.DateType =>
        s"${prefix}Timestamp" -> Cast(e, StringType, Some("UTC")).eval().toString
      case dt => fail(s"argument '$name' must be a version number or a timestamp, got ${dt.simpleString} $other")
    }
  }

  def dataFrame(session: SparkSession, args: Seq[Expression]): DataFrame = {
    if (args.size < 2 || args.size > 3) fail(s"2 or 3 arguments, got ${args.size}")
    val table = constant(args.head, "table") match {
      case Some(s: UTF8String) => s.toString
      case _ => fail("argument 'table' must be a table name or path string")
    }
    val start = bound(args(1), "start", "starting").getOrElse(fail("argument 'start' is NULL"))
    val end = args.lift(2).flatMap(bound(_, "end", "ending"))
    session.read.format("lance").option("readChangeFeed", "true").options((Seq(start) ++ end).toMap)
      .load(VectorSearchFunction.location(session, table))
  }
}

object VectorSearchFunction {
  val Name: String = "lance_vector_search"

  private val Positional: Seq[String] = Seq("table", "column", "query", "k", "nprobes", "refine_factor", "filter",
    "prefilter", "metric", "use_index")

  private val Usage: String = s"$Name('<table or path>', '<column>', <query ARRAY<FLOAT>>, <k> [, nprobes => n, " +
    "refine_factor => r, filter => '<SQL predicate>', prefilter => true|false, metric => 'l2'|'cosine'|'dot', " +
    "use_index => true|false])"

  val info: ExpressionInfo = new ExpressionInfo(classOf[LanceTableFunctionsExtension].getName, null, Name,
    s"$Usage - the k rows of a Lance table nearest to the query vector, with their _distance, nearest first.",
    "", "", "", "table_funcs", "", "", "scala_udf")

  private def fail(problem: String): Nothing = throw new IllegalArgumentException(s"$Name: $problem; usage: $Usage")

  /** The arguments by name: positional ones first, then named ones. */
  def arguments(args: Seq[Expression]): Map[String, Expression] = {
    val (named, positional) = args.partition(_.isInstanceOf[NamedArgumentExpression])
    if (positional.size > Positional.size) fail(s"at most ${Positional.size} arguments, got ${positional.size}")
    val byName = named.map { case NamedArgumentExpression(k, v) => k.toLowerCase(Locale.ROOT) -> v }
    byName.foreach { case (k, _) =>
      if (!Positional.drop(4).contains(k)) fail(s"unknown argument '$k'")
    }
    val pos = Positional.zip(positional).toMap
    byName.foreach { case (k, _) => if (pos.contains(k)) fail(s"argument '$k' given twice") }
    pos ++ byName
  }

  /** The constant value of an argument; NULL is "not given" for the optional
    * arguments (those after `k`), an error for the others. */
  private def value(args: Map[String, Expression], name: String): Option[Any] = args.get(name).flatMap { e =>
    if (!e.foldable) fail(s"argument '$name' must be a constant")
    val v = Option(e.eval())
    if (v.isEmpty && Positional.take(4).contains(name)) fail(s"argument '$name' is NULL")
    v
  }

  private def string(args: Map[String, Expression], name: String): Option[String] =
    value(args, name).map(ConstantArguments.string(name, _, fail))

  private def int(args: Map[String, Expression], name: String): Option[Int] =
    value(args, name).map(ConstantArguments.int(name, _, fail))

  private def boolean(args: Map[String, Expression], name: String): Option[Boolean] =
    value(args, name).map(ConstantArguments.boolean(name, _, fail))

  private def vector(args: Map[String, Expression]): Vector[Float] = {
    val e = args.getOrElse("query", fail("argument 'query' (the query vector) is required"))
    e.dataType match {
      case ArrayType(_, _) =>
        if (!e.foldable) fail("argument 'query' must be a constant array")
        val data = Option(Cast(e, ArrayType(FloatType)).eval().asInstanceOf[ArrayData]).getOrElse(fail("argument 'query' is NULL"))
        (0 until data.numElements()).map { i =>
          if (data.isNullAt(i)) fail(s"argument 'query' has a NULL at position $i")
          data.getFloat(i)
        }.toVector
      case StringType =>
        val raw = string(args, "query").get
        NearestOptions.parseVector(raw).getOrElse(fail(s"argument 'query' is not a list of numbers: '$raw'"))
      case other => fail(s"argument 'query' must be an ARRAY<FLOAT>, got ${other.simpleString}")
    }
  }

  /** The Lance dataset path of `table`: a path as is (it has '/' or ':' and
    * no backquote), else the location of the catalog table it names
    * (`lance.db.t`, lance.`/abs/path`). */
  def location(session: SparkSession, table: String): String =
    if ((table.contains("/") || table.contains(":")) && !table.contains("`")) table
    else session.table(table).queryExecution.analyzed.collectFirst {
      case r: DataSourceV2Relation if r.table.isInstanceOf[LanceTable] => r.table.asInstanceOf[LanceTable].target.path
    }.getOrElse(fail(s"'$table' is not a Lance table"))

  def plan(args: Seq[Expression]): LogicalPlan = dataFrame(SparkSession.active, arguments(args)).queryExecution.analyzed

  def dataFrame(session: SparkSession, args: Map[String, Expression]): DataFrame = {
    val table = string(args, "table").getOrElse(fail("argument 'table' is required"))
    val column = string(args, "column").getOrElse(fail("argument 'column' is required"))
    val query = vector(args)
    val k = int(args, "k").getOrElse(fail("argument 'k' is required"))
    if (k <= 0) fail(s"argument 'k' must be positive, got $k")
    val nprobes = int(args, "nprobes")
    nprobes.foreach(n => if (n <= 0) fail(s"argument 'nprobes' must be positive, got $n"))
    val refine = int(args, "refine_factor")
    refine.foreach(n => if (n <= 0) fail(s"argument 'refine_factor' must be positive, got $n"))
    val metric = string(args, "metric").map(m => DistanceMetric.parse(m).getOrElse(
      fail(s"argument 'metric' must be one of l2, cosine, dot, got '$m'")))
    val filter = string(args, "filter")
    val prefilter = boolean(args, "prefilter").getOrElse(false)
    val useIndex = boolean(args, "use_index")
    val options = Map(
      NearestOptions.Column.name -> column,
      NearestOptions.QueryVector.name -> NearestOptions.format(query),
      NearestOptions.K.name -> k.toString,
      NearestOptions.Prefilter.name -> prefilter.toString) ++
      nprobes.map(NearestOptions.Nprobes.name -> _.toString) ++
      refine.map(NearestOptions.RefineFactor.name -> _.toString) ++
      metric.map(NearestOptions.Metric.name -> _.name) ++
      useIndex.map(NearestOptions.UseIndex.name -> _.toString)
    val found = session.read.format("lance").options(options).load(location(session, table))
    filter.fold(found)(f => found.where(f)).orderBy(col(LanceKnnScan.Distance))
  }
}
