package io.lancespark.spark.procedures

import scala.collection.mutable

import org.apache.spark.TaskContext
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.functions.{col, expr, shiftrightunsigned}
import org.apache.spark.sql.types._

import io.lancespark.spark.{MetadataColumns, SerializableHadoopConf}
import io.lancespark.spark.options.WriteOptions
import io.lancespark.spark.procedures.LanceProcedure._
import io.lancespark.spark.write.{AddColumnsTask, SparkToArrow}
import io.lancespark.table.commit.{Commits, FragmentColumns}
import io.lancespark.table.evolution.ColumnAddition
import io.lancespark.table.storage.{Dataset, DatasetStorage}
import io.lancespark.table.storage.Snapshot

/** `CALL lance.system.add_columns(table => 'db.t', source => 'view_or_table')`:
  * adds the source's columns (all but its row key) to the table without
  * rewriting it. `expressions => map('c2', 'a * 2', ...)` instead adds
  * computed columns: each a Spark SQL expression over the table's columns,
  * evaluated on executors over a scan of the version read (with `_rowaddr`). The source is keyed by `_rowaddr` (or `_rowid`: on a table
  * with stable row ids, mapped to addresses at the version read). Executors
  * write, per fragment, a data file holding only the new columns in the
  * fragment's row order (NULL where the source has no row, and for deleted
  * rows); the driver commits one version (a Merge transaction). */
final class AddColumnsProcedure(tables: TableResolver) extends LanceProcedure(tables) {
  override def name(): String = "add_columns"
  override def description(): String =
    "Adds columns from a view or table keyed by _rowaddr (or _rowid) as new data files beside the existing ones"

  override val params: Seq[ProcParam] = Seq(
    required("table", StringType, "db.t, lance.db.t or `/path/to/dataset.lance`"),
    optional("source", StringType, "a view or table with _rowaddr (or _rowid) and the new columns"),
    optional("expressions", MapType(StringType, StringType),
      "new column name -> Spark SQL expression over the table's columns (instead of source)"),
    optional("vector_columns", StringType,
      "new ARRAY<FLOAT|DOUBLE> columns stored as fixed-size lists (vectors): name:dimension,... e.g. emb:384"))

  override val outputType: StructType = new StructType()
    .add("read_version", LongType).add("new_version", LongType)
    .add("columns_added", ArrayType(StringType, containsNull = false))
    .add("files_added", LongType).add("rows_with_values", LongType)

  override protected def run(args: Args): InternalRow = {
    val spark = SparkSession.active
    val s = storage(args)
    val exprs = args.stringMap("expressions")
    val vectors = args.string("vector_columns").map(v => WriteOptions.parseVectors(v).getOrElse(
      throw new IllegalArgumentException(s"add_columns(${s.uri}): vector_columns is '$v'; expected " +
        "name:dimension entries separated by commas, e.g. emb:384"))).getOrElse(Map.empty[String, Int])
    val r = (args.string("source"), exprs) match {
      case (Some(source), None) => AddColumnsJob.run(spark, s, spark.table(source), s"source '$source'", vectors)
      case (None, Some(e)) => AddColumnsJob.runExpressions(spark, s, e, vectors)
      case (Some(_), Some(_)) => throw new IllegalArgumentException(
        s"add_columns(${s.uri}): give either source (a view with the new columns) or expressions " +
          "(name -> SQL expression), not both")
      case (None, None) => throw new IllegalArgumentException(
        s"add_columns(${s.uri}): give source => '<view with _rowaddr and the new columns>' or " +
          "expressions => map('<name>', '<SQL expression>', ...)")
    }
    InternalRow(r.readVersion, r.newVersion, new org.apache.spark.sql.catalyst.util.GenericArrayData(
      r.columns.map(utf8).toArray[Any]), r.filesAdded, r.rowsWithValues)
  }
}

/** What an addition of columns did. */
final case class AddColumnsResult(readVersion: Long, newVersion: Long, columns: Seq[String], filesAdded: Long,
    rowsWithValues: Long)

/** An addition of columns as one Spark job (plus one for fragments the source
  * has no row of) and one commit by the driver. A failed job commits nothing
  * and deletes what its tasks wrote. */
object AddColumnsJob {

  private val Keys: Set[String] = MetadataColumns.names

  /** `vectors`: new columns stored as fixed-size lists of that dimension
    * (besides those whose Spark metadata says so, as in writes). */
  def run(spark: SparkSession, storage: DatasetStorage, source: DataFrame, what: String,
      vectors: Map[String, Int] = Map.empty): AddColumnsResult =
    runOn(spark, storage, vectors, snapshot => withRowAddress(spark, snapshot, source, what))

  /** Computed columns: `exprs` (new name -> Spark SQL expression, in order)
    * evaluated over a scan of the version read, keyed by its `_rowaddr`
    * (deleted rows are not scanned: NULL, like a source without them). */
  def runExpressions(spark: SparkSession, storage: DatasetStorage, exprs: Seq[(String, String)],
      vectors: Map[String, Int] = Map.empty): AddColumnsResult = {
    if (exprs.isEmpty) throw new IllegalArgumentException(s"add_columns(${storage.uri}): expressions is empty")
    exprs.foreach { case (n, e) =>
      if (n.trim.isEmpty) throw new IllegalArgumentException(
        s"add_columns(${storage.uri}): expressions has an empty column name (for '$e')")
      if (Keys.contains(n)) throw new IllegalArgumentException(
        s"add_columns(${storage.uri}): $n is a metadata column name; choose another name for '$e'")
    }
    runOn(spark, storage, vectors, { snapshot =>
      val table = spark.read.format("lance").option("version", snapshot.version.toString).load(storage.uri)
      val computed = exprs.map { case (n, e) =>
        val parsed = try { spark.sessionState.sqlParser.parseExpression(e); expr(e) } catch {
          case ex: Exception => throw new IllegalArgumentException(
            s"add_columns(${storage.uri}): the expression for $n does not parse: $e (${ex.getMessage})", ex)
        }
        parsed.as(n)
      }
      try table.select((col(MetadataColumns.RowAddr) +: computed): _*)
      catch {
        case ex: org.apache.spark.sql.AnalysisException => throw new IllegalArgumentException(
          s"add_columns(${storage.uri}): the expressions ${exprs.map { case (n, e) => s"$n = $e" }.mkString("; ")} " +
            s"do not resolve against the table's columns ${table.schema.fieldNames.filterNot(Keys.contains).mkString(", ")}: " +
            ex.getMessage, ex)
      }
    })
  }

  private def runOn(spark: SparkSession, storage: DatasetStorage, vectors: Map[String, Int],
      keyedAt: Snapshot => DataFrame): AddColumnsResult =
    runPlanned(spark, storage, "add_columns", { snapshot =>
      val keyed = keyedAt(snapshot)
      val newCols = keyed.schema.fields.toVector.filterNot(f => Keys.contains(f.name))
      vectors.keys.filterNot(n => newCols.exists(_.name == n)).toSeq.sorted.headOption.foreach { n =>
        throw new IllegalArgumentException(s"add_columns(${storage.uri}): vector_columns names '$n', which is not " +
          s"one of the new columns (${newCols.map(_.name).mkString(", ")})")
      }
      val sparkSchema = StructType(newCols.map(_.copy(nullable = true)))
      val plan = ColumnAddition.plan(snapshot,
        SparkToArrow.schema(sparkSchema, vectors, io.lancespark.table.model.DataFileVersion.ofDataset(snapshot.fileVersion)
          .getOrElse(io.lancespark.table.model.DataFileVersion.Default)))
      Planned(keyed.select((col(MetadataColumns.RowAddr) +: newCols.map(f => col(f.name))): _*), plan, sparkSchema)
    })

  /** What a job writes: `keyed` has `_rowaddr`, then the columns of
    * `sparkSchema` (the plan's columns, in order), then optionally `counted`
    * (a column that is non-NULL on the rows to count as the source's; without
    * it every row counts); `deletedRow` is what deleted rows' slots get (NULLs
    * when None). */
  private[procedures] final case class Planned(keyed: DataFrame, plan: ColumnAddition, sparkSchema: StructType,
      counted: Option[String] = None, deletedRow: Option[InternalRow] = None)

  /** Plans on the latest version (`prepare`), writes each fragment's file in
    * one job (and one more for fragments without source rows), commits once. */
  private[procedures] def runPlanned(spark: SparkSession, storage: DatasetStorage, verb: String,
      prepare: Snapshot => Planned): AddColumnsResult = {
    storage.requireSafeCommit()
    val conf = spark.sessionState.newHadoopConf()
    val snapshot = Dataset.open(storage, None)
    val planned = prepare(snapshot)
    val plan = planned.plan
    val newCols = planned.sparkSchema.fields.toVector
    val task = AddColumnsTask(storage.uri, new SerializableHadoopConf(conf), plan, planned.sparkSchema, None,
      deletedRow = planned.deletedRow,
      filePrefix = (if (plan.isUpdate) "updcol-" else "addcol-") + java.util.UUID.randomUUID().toString.take(8))
    val parts = math.max(1, math.min(plan.fragments.size, spark.sessionState.conf.numShufflePartitions))
    val arranged = planned.keyed
      .repartition(parts, shiftrightunsigned(col(MetadataColumns.RowAddr), 32))
      .sortWithinPartitions(MetadataColumns.RowAddr)
    val countAt: Int = planned.counted.map(c => planned.keyed.schema.fieldIndex(c)).getOrElse(-1)
    val sc = spark.sparkContext
    val rowsWithValues = sc.longAccumulator(s"lance $verb: source rows")
    val results = mutable.ArrayBuffer.empty[FragmentColumns]
    val description = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(s"lance $verb ${storage.uri} (version ${snapshot.version}, " +
      s"${newCols.map(_.name).mkString(", ")})")
    def write(rdd: org.apache.spark.rdd.RDD[InternalRow]): Unit =
      sc.runJob(rdd, (_: TaskContext, rows: Iterator[InternalRow]) =>
        task.writePartition(rows.map { r => if (countAt < 0 || !r.isNullAt(countAt)) rowsWithValues.add(1); r }),
        (_: Int, done: Seq[FragmentColumns]) => results ++= done)
    try {
      FragmentAlignedSource.rows(planned.keyed, storage.uri, snapshot.version) match {
        case Some(aligned) =>
          write(aligned)
          // the plan promised each fragment to one task; should two have written one, shuffle after all
          if (results.map(_.fragmentId).distinct.size != results.size) {
            Commits.discardFiles(storage, results.map(_.file).toSeq)
            results.clear()
            rowsWithValues.reset()
            write(arranged.queryExecution.toRdd)
          }
        case None if FragmentAlignedSource.mayBeInOrder(planned.keyed, plan) =>
          // written where it is read, in pieces joined per fragment; shuffled if not in order after all
          val pieces = mutable.ArrayBuffer.empty[Option[Seq[AddColumnsTask.Piece]]]
          sc.runJob(planned.keyed.queryExecution.toRdd, (_: TaskContext, rows: Iterator[InternalRow]) =>
            task.writePieces(rows.map { r => if (countAt < 0 || !r.isNullAt(countAt)) rowsWithValues.add(1); r }),
            (_: Int, done: Option[Seq[AddColumnsTask.Piece]]) => pieces += done)
          val written = pieces.flatten.flatten.toVector
          val inOrder = pieces.forall(_.isDefined)  // (a task whose rows were not in order wrote nothing)
          (if (inOrder) FragmentAlignedSource.arrangePieces(written, plan) else None) match {
            case Some((whole, toJoin)) =>
              results ++= whole
              if (toJoin.nonEmpty) {
                val jobs = sc.parallelize(toJoin, math.max(1, math.min(toJoin.size, sc.defaultParallelism * 2)))
                sc.runJob(jobs, (_: TaskContext, fs: Iterator[(Long, Vector[AddColumnsTask.Piece])]) =>
                  fs.map { case (f, ps) => task.joinPieces(f, ps) }.toVector,
                  (_: Int, done: Vector[FragmentColumns]) => results ++= done)
              }
            case None =>
              Commits.discardFiles(storage, written.map(_.file))
              rowsWithValues.reset()
              write(arranged.queryExecution.toRdd)
          }
        case None => write(arranged.queryExecution.toRdd)
      }
      val missing = (plan.fragments.keySet -- results.map(_.fragmentId)).toVector.sorted
      if (missing.nonEmpty) {
        val empty = sc.parallelize(missing, math.max(1, math.min(missing.size, sc.defaultParallelism)))
        sc.runJob(empty, (_: TaskContext, ids: Iterator[Long]) => task.writePartition(Iterator.empty, ids.toVector),
          (_: Int, done: Seq[FragmentColumns]) => results ++= done)
      }
    } catch {
      case e: Throwable =>
        Commits.discardFiles(storage, results.map(_.file).toSeq)
        Commits.sweep(storage, task.filePrefix)
        Thread.sleep(1000)  // tasks being killed may still be closing files: sweep once more
        Commits.sweep(storage, task.filePrefix)
        throw e
    } finally sc.setJobDescription(description)
    pauseForTest(spark)
    val committed = ColumnAddition.commit(storage, plan, results.toVector)
    AddColumnsResult(snapshot.version, committed.version, newCols.map(_.name), results.size.toLong,
      rowsWithValues.value)
  }

  /** Tests only (session conf `spark.lance.test.addColumnsPause` = a path
    * prefix): with the files written and before the commit, creates
    * `<prefix>.started` and waits (at most 120 s) for `<prefix>.go`, so a test
    * can commit another change in between. Never set in production. */
  private def pauseForTest(spark: SparkSession): Unit =
    spark.conf.getOption("spark.lance.test.addColumnsPause").filter(_.nonEmpty).foreach { prefix =>
      java.nio.file.Files.write(java.nio.file.Paths.get(prefix + ".started"), Array.emptyByteArray)
      val go = java.nio.file.Paths.get(prefix + ".go")
      val deadline = System.nanoTime() + 120L * 1000000000L
      while (!java.nio.file.Files.exists(go) && System.nanoTime() < deadline) Thread.sleep(20)
    }

  /** The source with `_rowaddr`: as given, or from `_rowid` (equal to the
    * address without stable row ids; else looked up in the version read). */
  private[procedures] def withRowAddress(spark: SparkSession, snapshot: Snapshot, source: DataFrame, what: String): DataFrame = {
    val names = source.schema.fieldNames.toSet
    def requireLong(c: String): Unit = source.schema(c).dataType match {
      case LongType | IntegerType => ()
      case other => throw new IllegalArgumentException(
        s"${snapshot.storage.uri}: the $what's $c is ${other.simpleString}; expected BIGINT")
    }
    val rowAddr = MetadataColumns.RowAddr
    val rowId = MetadataColumns.RowId
    if (names.contains(rowAddr)) {
      requireLong(rowAddr)
      source.drop((names - rowAddr).filter(Keys.contains).toSeq: _*).withColumn(rowAddr, col(rowAddr).cast(LongType))
    } else if (names.contains(rowId)) {
      requireLong(rowId)
      val bare = source.drop((names - rowId).filter(Keys.contains).toSeq: _*)
      if (!snapshot.hasStableRowIds) bare.withColumnRenamed(rowId, rowAddr).withColumn(rowAddr, col(rowAddr).cast(LongType))
      else {
        val ids = spark.read.format("lance").option("version", snapshot.version.toString)
          .load(snapshot.storage.uri).select(col(rowId).as("__lance_rowid"), col(rowAddr))
        bare.join(ids, bare(rowId) === ids("__lance_rowid"), "left_outer").drop(rowId, "__lance_rowid")
      }
    } else
      throw new IllegalArgumentException(
        s"${snapshot.storage.uri}: the $what has no $rowAddr or $rowId column; it needs one to know each " +
          s"row's place (select it from the table: SELECT $rowAddr, <new columns> FROM t); its columns are " +
          source.schema.fieldNames.mkString(", "))
  }
}
