package io.lancespark.spark.extensions

import org.apache.arrow.memory.BufferAllocator
import org.apache.hadoop.conf.Configuration
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Cast, Expression, ExpressionInfo, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.catalyst.util.{ArrayData, GenericArrayData}
import org.apache.spark.sql.types.{ArrayType, DataType, FloatType, LongType, StructField, StructType}

import io.lancespark.spark.{HadoopConfs, SerializableHadoopConf}
import io.lancespark.spark.read.ArrowAllocators
import io.lancespark.schema.LogicalType
import io.lancespark.table.index.vector.{DistanceMetric, VectorColumn, VectorQuery, VectorSearch}
import io.lancespark.table.storage.{Dataset, Snapshot}

/** `lance_knn('<table or path>', '<column>', <query ARRAY<FLOAT>>, <k> [, nprobes, refine_factor,
  * metric, use_index])`: the `k` rows of a Lance table nearest to each row's query vector, as an
  * `ARRAY<STRUCT<_rowaddr: BIGINT, _distance: FLOAT>>`, nearest first (NULL for a NULL query).
  * The query may be any column or expression; the other arguments are constants (NULL: not
  * given). The table's version is fixed when the statement is analysed. Evaluated where the
  * rows are (on executors): each executor opens the dataset once and keeps the vector index's
  * partitions it reads in its index cache, so a batch of queries (`lance_spark.knn_join`)
  * reads each index partition once per executor, not once per query. */
object KnnFunction {
  val Name: String = "lance_knn"

  private val Positional: Seq[String] =
    Seq("table", "column", "query", "k", "nprobes", "refine_factor", "metric", "use_index")

  private val Usage: String = s"$Name('<table or path>', '<column>', <query ARRAY<FLOAT>>, <k> [, nprobes, " +
    "refine_factor, metric ('l2'|'cosine'|'dot'), use_index])"

  val info: ExpressionInfo = new ExpressionInfo(classOf[LanceKnnExpression].getName, null, Name,
    s"$Usage - the k nearest rows of a Lance table to the query vector: an array of (_rowaddr, _distance), " +
      "nearest first.", "", "", "", "misc_funcs", "", "", "scala_udf")

  private def fail(problem: String): Nothing = throw new IllegalArgumentException(s"$Name: $problem; usage: $Usage")

  private def constant(args: Map[String, Expression], name: String): Option[Any] = args.get(name).flatMap { e =>
    if (!e.foldable) fail(s"argument '$name' must be a constant")
    Option(e.eval())
  }

  private def string(args: Map[String, Expression], name: String): Option[String] =
    constant(args, name).map(ConstantArguments.string(name, _, fail))

  private def int(args: Map[String, Expression], name: String): Option[Int] =
    constant(args, name).map(ConstantArguments.int(name, _, fail))

  def build(args: Seq[Expression]): Expression = {
    if (args.size < 4 || args.size > Positional.size)
      fail(s"${args.size} arguments given, 4 to ${Positional.size} expected")
    val a = Positional.zip(args).toMap
    val table = string(a, "table").getOrElse(fail("argument 'table' is NULL"))
    val column = string(a, "column").getOrElse(fail("argument 'column' is NULL"))
    val k = int(a, "k").getOrElse(fail("argument 'k' is NULL"))
    if (k <= 0) fail(s"argument 'k' must be positive, got $k")
    val nprobes = int(a, "nprobes")
    nprobes.foreach(n => if (n <= 0) fail(s"argument 'nprobes' must be positive, got $n"))
    val refine = int(a, "refine_factor")
    refine.foreach(n => if (n <= 0) fail(s"argument 'refine_factor' must be positive, got $n"))
    val metric = string(a, "metric").map(m => DistanceMetric.parse(m).getOrElse(
      fail(s"argument 'metric' must be one of l2, cosine, dot, got '$m'"))).getOrElse(DistanceMetric.L2)
    val useIndex = constant(a, "use_index").map(ConstantArguments.boolean("use_index", _, fail)).getOrElse(true)
    val query = a("query")
    query.dataType match {
      case ArrayType(_, _) =>
      case other => fail(s"argument 'query' must be an ARRAY<FLOAT>, got ${other.simpleString}")
    }
    val session = SparkSession.active
    val uri = VectorSearchFunction.location(session, table)
    val snapshot = Dataset.open(uri, None, HadoopConfs.of(session))
    val field = snapshot.schema.field(column).getOrElse(
      fail(s"table $table has no column '$column' (columns: ${snapshot.schema.fields.map(_.name).mkString(", ")})"))
    if (!field.isFixedSizeList || !VectorColumn.FloatItems.contains(LogicalType.fixedSizeListItem(field.logicalType)))
      fail(s"column '$column' of table $table is not a vector column (a fixed-size list of floats), " +
        s"it is ${field.logicalType}")
    val spec = KnnSpec(uri, snapshot.version, column, k, metric, nprobes, refine, useIndex)
    LanceKnnExpression(Cast(query, ArrayType(FloatType)), spec, SerializableHadoopConf.broadcast(session))
  }

  /** Datasets opened on this JVM, by (uri, version): each is opened once. */
  private val snapshots = new java.util.LinkedHashMap[(String, Long), Snapshot](16, 0.75f, true) {
    override def removeEldestEntry(e: java.util.Map.Entry[(String, Long), Snapshot]): Boolean = size() > 16
  }

  private[extensions] def snapshot(uri: String, version: Long, conf: => Configuration): Snapshot = {
    val key = (uri, version)
    snapshots.synchronized(Option(snapshots.get(key))).getOrElse {
      val s = Dataset.open(uri, Some(version), conf)
      snapshots.synchronized(snapshots.put(key, s))
      s
    }
  }

  private[extensions] lazy val allocator: BufferAllocator =
    ArrowAllocators.root.newChildAllocator("lance-knn-function", 0, Long.MaxValue)

  val ResultType: ArrayType = ArrayType(StructType(Seq(
    StructField("_rowaddr", LongType, nullable = false),
    StructField("_distance", FloatType, nullable = false))), containsNull = false)
}

/** What a [[LanceKnnExpression]] searches: a version of a dataset, a column, the parameters. */
final case class KnnSpec(uri: String, version: Long, column: String, k: Int, metric: DistanceMetric,
    nprobes: Option[Int], refineFactor: Option[Int], useIndex: Boolean) {
  override def toString: String = s"$uri@$version, $column, k=$k, ${metric.name}" +
    nprobes.fold("")(n => s", nprobes=$n") + refineFactor.fold("")(r => s", refine_factor=$r") +
    (if (useIndex) "" else ", use_index=false")
}

/** `lance_knn(...)` for one row: see [[KnnFunction]]. */
final case class LanceKnnExpression(query: Expression, spec: KnnSpec, conf: Broadcast[SerializableHadoopConf])
    extends UnaryExpression with CodegenFallback {

  override def child: Expression = query
  override def dataType: DataType = KnnFunction.ResultType
  override def nullable: Boolean = true
  override def prettyName: String = KnnFunction.Name
  override def toString: String = s"${KnnFunction.Name}($spec, $query)"

  override def eval(input: InternalRow): Any = query.eval(input) match {
    case null => null
    case data: ArrayData =>
      val v = new Array[Float](data.numElements())
      var i = 0
      while (i < v.length) {
        if (data.isNullAt(i)) throw new IllegalArgumentException(
          s"${KnnFunction.Name}: a query vector has a NULL at position $i (table ${spec.uri}, column ${spec.column})")
        v(i) = data.getFloat(i)
        i += 1
      }
      val snapshot = KnnFunction.snapshot(spec.uri, spec.version, conf.value.value)
      val q = VectorQuery(spec.column, v, spec.k, spec.metric, spec.nprobes, spec.refineFactor, spec.useIndex)
      val found = VectorSearch.search(snapshot, q, KnnFunction.allocator)
      new GenericArrayData(found.map(n => InternalRow(n.rowAddress, n.distance)).toArray[Any])
  }

  override protected def withNewChildInternal(newChild: Expression): LanceKnnExpression = copy(query = newChild)
}
