package io.lancespark.spark.procedures

import java.util.Locale

import scala.util.Using

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.util.GenericArrayData
import org.apache.spark.sql.types._
import org.apache.spark.storage.StorageLevel

import io.lancespark.spark.SerializableHadoopConf
import io.lancespark.spark.procedures.LanceProcedure._
import io.lancespark.spark.read.ArrowAllocators
import io.lancespark.table.index.{BuiltIndexType, IndexBuild, IndexBuildPlan, IndexCatalog, IndexFileWriter, IndexValues,
  KeyCodec, KeyRuns, RowChunk, ZoneIndexWriter, ZoneParams, ZoneRow}
import io.lancespark.table.index.vector.{IvfBuild, VectorIndexTypes}
import io.lancespark.table.storage.{Dataset, DatasetStorage}

/** `CALL lance.system.create_index(table => 'db.t', column => 'id', index_type => 'btree'|'bitmap',
  * name => 'id_idx')`: builds a scalar index as a Spark job (see [[IndexBuildJob]]) and commits it
  * as a CreateIndex, in the reference's layout (pylance uses it). */
final class CreateIndexProcedure(tables: TableResolver) extends LanceProcedure(tables) {
  override def name(): String = "create_index"
  override def description(): String =
    "Builds a BTREE, BITMAP, ZONEMAP, BLOOMFILTER or LABEL_LIST index over a column, or an IVF_FLAT or IVF_PQ " +
      "index over a vector column (Spark jobs; a CreateIndex commit pylance reads)"

  override val params: Seq[ProcParam] = Seq(
    required("table", StringType, "db.t, lance.db.t or `/path/to/dataset.lance`"),
    required("column", StringType, "the column to index (a.b for a struct's field)"),
    optional("index_type", StringType, "btree, bitmap, zonemap, bloomfilter, label_list, ivf_flat or ivf_pq", "'btree'"),
    optional("name", StringType, "the index's name (default <column>_idx)"),
    optional("options", MapType(StringType, StringType),
      "index options: rows_per_zone (zonemap); number_of_items, probability (bloomfilter); vector indices: " +
        "map('num_partitions', '16', 'metric', 'l2'|'cosine'|'dot', 'num_sub_vectors', ...)"))

  override val outputType: StructType = new StructType()
    .add("name", StringType).add("index_type", StringType).add("uuid", StringType)
    .add("read_version", LongType).add("new_version", LongType)
    .add("rows_indexed", LongType).add("fragments_covered", LongType).add("bytes_written", LongType)

  override protected def run(args: Args): InternalRow = {
    val s = storage(args)
    val typeName = args.string("index_type").getOrElse("btree")
    val options = args.stringMap("options").map(_.toMap).getOrElse(Map.empty[String, String])
    val r = if (VectorIndexTypes.isVector(typeName))
      VectorIndexBuildJob.run(SparkSession.active, s, need("column", args.string("column")), typeName,
        args.string("name"), options)
    else IndexBuildJob.run(SparkSession.active, s, need("column", args.string("column")), BuiltIndexType.parse(typeName),
      args.string("name"), options)
    InternalRow(utf8(r.name), utf8(r.indexType.toLowerCase(Locale.ROOT)), utf8(r.uuid), r.readVersion,
      r.newVersion, r.rows, r.fragments, r.bytes)
  }

  private def need[T](n: String, v: Option[T]): T =
    v.getOrElse(throw new IllegalArgumentException(s"create_index: the argument $n is required"))
}

/** `CALL lance.system.drop_index(table => 'db.t', name => 'id_idx')`: commits the index's removal
  * (its files stay until vacuum). */
final class DropIndexProcedure(tables: TableResolver) extends LanceProcedure(tables) {
  override def name(): String = "drop_index"
  override def description(): String = "Removes an index from the dataset (a CreateIndex commit removing it)"

  override val params: Seq[ProcParam] = Seq(
    required("table", StringType, "db.t, lance.db.t or `/path/to/dataset.lance`"),
    required("name", StringType, "the index's name"))

  override val outputType: StructType = new StructType().add("name", StringType).add("new_version", LongType)

  override protected def run(args: Args): InternalRow = {
    val s = storage(args)
    s.requireSafeCommit()
    val n = args.string("name").getOrElse(throw new IllegalArgumentException("drop_index: the argument name is required"))
    val snap = IndexBuild.drop(Dataset.open(s, None), n)
    InternalRow(utf8(n), snap.version)
  }
}

final case class IndexBuildResult(name: String, indexType: String, uuid: String, readVersion: Long, newVersion: Long,
                                  rows: Long, fragments: Long, bytes: Long)

/** What each task of an index build needs; serialized to executors. */
final case class IndexScanTask(uri: String, hadoopConf: SerializableHadoopConf, version: Long, fieldId: Int) {
  /** The (value, row address) pairs of one fragment's live rows. */
  def scan(fragmentId: Long): Vector[(Any, Long)] = {
    val storage = DatasetStorage(uri, hadoopConf.value)
    val snapshot = Dataset.open(storage, Some(version))
    val out = Vector.newBuilder[(Any, Long)]
    Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-index-$fragmentId", 0, Long.MaxValue)) { a =>
      IndexBuild.scanFragment(snapshot, fieldId, fragmentId, a)((v, addr) => out += (v -> addr))
    }
    out.result()
  }

  /** Reads `chunks` (in row address order) of the column as keys, sorts
    * them and writes them as run `run` of the build of index `uuid`; the
    * run's number, rows and file size. */
  def sortRun(uuid: String, run: Int, chunks: Vector[RowChunk], codec: KeyCodec): (Int, Long, Long) = {
    val storage = DatasetStorage(uri, hadoopConf.value)
    val snapshot = Dataset.open(storage, Some(version))
    Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-index-run-$run", 0, Long.MaxValue)) { a =>
      val (rows, bytes) = KeyRuns.sortToFile(snapshot, fieldId, codec, uuid, run, chunks, a)
      (run, rows, bytes)
    }
  }

  /** The zones of one fragment for a ZONEMAP or BLOOMFILTER index. */
  def zones(fragmentId: Long, indexType: BuiltIndexType, params: ZoneParams): Vector[ZoneRow] = {
    val snapshot = Dataset.open(DatasetStorage(uri, hadoopConf.value), Some(version))
    Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-index-$fragmentId", 0, Long.MaxValue)) { a =>
      ZoneIndexWriter.fragmentZones(snapshot, fieldId, fragmentId, indexType, params, a)
    }
  }
}

/** An index build as one Spark job: the driver checks the request (column,
  * type, name) before any work, then
  *  - BTREE, BITMAP, LABEL_LIST over a keyed column ([[KeyCodec]]: integers,
  *    floats, dates, timestamps, booleans): tasks read chunks of fragments
  *    (the indexed column only, with its row addresses) into primitive
  *    arrays, sort them and write each as a sorted run file under the
  *    index's directory; the driver merges the runs as it reads them
  *    (streaming, a block of each run in memory) into the index writer,
  *    removes the runs and commits. Tables of at most
  *    `spark.lance.index.build.localRows` physical rows (default 2,000,000)
  *    are read and sorted by the driver alone (no job: its fixed costs
  *    outweigh the work). Runs hold at most `spark.lance.index.build.runRows`
  *    rows (default 4,000,000; at least one run per core).
  *  - other columns (strings, binaries, decimals): tasks read each fragment's
  *    (value, row address) pairs, which a range-partitioned sort orders
  *    across the executors in the index's order (nulls first); the driver
  *    streams the sorted partitions in order into the index writer.
  *  - ZONEMAP, BLOOMFILTER: a task per fragment computes its zones; the
  *    driver writes them in fragment order.
  * A failed build commits nothing and removes its files. */
object IndexBuildJob {

  def run(spark: SparkSession, storage: DatasetStorage, column: String, indexType: BuiltIndexType,
          name: Option[String], options: Map[String, String] = Map.empty): IndexBuildResult = {
    storage.requireSafeCommit()
    val snapshot = Dataset.open(storage, None)
    execute(spark, IndexBuild.plan(snapshot, column, indexType, name, options))
  }

  /** Runs the build `plan` (a new index, or the rebuild of one it replaces) and commits it. */
  def execute(spark: SparkSession, plan: IndexBuildPlan): IndexBuildResult = {
    val (snapshot, storage, indexType, column, options) =
      (plan.snapshot, plan.snapshot.storage, plan.indexType, plan.column, plan.options)
    val conf = spark.sessionState.newHadoopConf()
    val task = IndexScanTask(storage.uri, new SerializableHadoopConf(conf), snapshot.version, plan.field.id)
    val sc = spark.sparkContext
    val description = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(s"lance create_index ${plan.name} (${indexType.name} on $column) ${storage.uri} " +
      s"(version ${snapshot.version}, ${snapshot.fragments.size} fragments)")
    try {
      val ids = snapshot.fragments.map(_.id)
      val files = if (ZoneIndexWriter.zoned(indexType)) {
        // zones are per fragment in row order: a task per fragment, the driver writes them in fragment order
        val params = ZoneIndexWriter.params(indexType, options, plan.where)
        // one job (zones are small: a row per 8,192 rows), not a job per fragment
        val zones = sc.parallelize(ids, math.max(1, ids.size)).map(id => task.zones(id, indexType, params)).collect()
        Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-index-${plan.uuid}", 0, Long.MaxValue)) {
          a => ZoneIndexWriter.write(plan, params, zones.iterator.flatMap(_.iterator), a)
        }
      } else IndexBuild.keyCodec(plan) match {
        case Some(codec) => keyedBuild(spark, plan, task, codec)
        case None =>
          // boxed (value, address) pairs: on the driver up to a quarter of the keyed columns' rows
          if (plan.snapshot.fragments.map(_.physicalRows).sum <= positiveConf(spark, LocalRowsKey, DefaultLocalRows, 0L) / 4)
            Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-index-${plan.uuid}", 0, Long.MaxValue)) { a =>
              IndexBuild.writeInMemory(plan, a)
            }
          else sortedBuild(sc, plan, task, ids)
      }
      val committed = IndexBuild.commit(plan, io.lancespark.table.commit.CommitSettings())
      IndexBuildResult(plan.name, indexType.name, plan.uuid, snapshot.version, committed.version,
        snapshot.countRows, plan.fragments.getLongCardinality, files.map(_._2).sum)
    } finally sc.setJobDescription(description)
  }

  /** Physical rows up to which a keyed build runs on the driver alone. */
  val LocalRowsKey: String = "spark.lance.index.build.localRows"
  /** The most rows of one sorted run of a keyed build. */
  val RunRowsKey: String = "spark.lance.index.build.runRows"
  val DefaultLocalRows: Long = 2000000L
  val DefaultRunRows: Long = 4000000L

  private def positiveConf(spark: SparkSession, key: String, default: Long, min: Long): Long =
    spark.conf.getOption(key).map { v =>
      val n = try v.trim.toLong catch { case _: NumberFormatException => -1L }
      if (n < min) throw new IllegalArgumentException(s"$key must be an integer of at least $min, not '$v'")
      n
    }.getOrElse(default)

  private val log = org.slf4j.LoggerFactory.getLogger(getClass)

  private def keyedBuild(spark: SparkSession, plan: IndexBuildPlan, task: IndexScanTask,
                         codec: KeyCodec): Seq[(String, Long)] = {
    val total = plan.snapshot.fragments.map(_.physicalRows).sum
    val localRows = positiveConf(spark, LocalRowsKey, DefaultLocalRows, 0L)
    Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-index-${plan.uuid}", 0, Long.MaxValue)) { a =>
      val t0 = System.nanoTime()
      def ms(t: Long): Long = (System.nanoTime() - t) / 1000000L
      if (total <= localRows) {
        val files = IndexBuild.writeInMemory(plan, a)
        log.info(s"index ${plan.name} (${plan.indexType.name}) over $total rows built on the driver in ${ms(t0)} ms")
        files
      } else {
        val sc = spark.sparkContext
        val groups = KeyRuns.plan(plan.snapshot, sc.defaultParallelism, positiveConf(spark, RunRowsKey, DefaultRunRows, 1L))
        val uuid = plan.uuid
        val written = try sc.parallelize(groups.zipWithIndex, math.max(1, groups.size))
            .map { case (g, i) => task.sortRun(uuid, i, g, codec) }.collect().sortBy(_._1)
          catch { case e: Throwable => IndexFileWriter.removeDir(plan.snapshot.storage, uuid); throw e }
        val t1 = System.nanoTime()
        val files = IndexBuild.writeFromRunFiles(plan, codec, written.map(_._1).toVector, a)
        log.info(s"index ${plan.name} (${plan.indexType.name}) over $total rows: ${groups.size} sorted runs in " +
          s"${(t1 - t0) / 1000000L} ms, merged and written in ${ms(t1)} ms")
        files
      }
    }
  }

  private def sortedBuild(sc: org.apache.spark.SparkContext, plan: IndexBuildPlan, task: IndexScanTask,
                          ids: Seq[Long]): Seq[(String, Long)] = {
      val parts = math.max(1, math.min(ids.size, sc.defaultParallelism * 2))
      // kept: the sort's range sampling and its shuffle both read the pairs
      val pairs = sc.parallelize(ids, math.max(1, ids.size)).flatMap(id => task.scan(id))
        .persist(StorageLevel.MEMORY_AND_DISK)
      val files = try {
        val ordering: Ordering[(Any, Long)] = Ordering.Tuple2(IndexValues.ordering, Ordering.Long)
        val sorted = pairs.sortBy(identity, ascending = true, parts)(ordering, scala.reflect.classTag[(Any, Long)])
        Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-index-${plan.uuid}", 0, Long.MaxValue)) {
          a => IndexBuild.write(plan, sorted.toLocalIterator, a)
        }
      } finally { pairs.unpersist(blocking = false); () }
      files
  }
}

/** `CALL lance.system.optimize_indices(table => 'db.t' [, index => 'name'])`: brings the indices this
  * connector builds (BTREE, BITMAP, ZONEMAP, BLOOMFILTER) up to date with fragments appended or
  * rewritten since their build: each index that does not cover every fragment is rebuilt over the
  * current fragments (a Spark job, as create_index) and committed under its name as a CreateIndex
  * that replaces the old one. One row: the indices rebuilt, those already up to date, the version. */
final class OptimizeIndicesProcedure(tables: TableResolver) extends LanceProcedure(tables) {
  override def name(): String = "optimize_indices"
  override def description(): String =
    "Rebuilds indices that do not cover every fragment (appends, updates or compaction since the build) over the " +
      "current fragments; IVF_FLAT and IVF_PQ indices keep their centroids and codebook"

  override val params: Seq[ProcParam] = Seq(
    required("table", StringType, "db.t, lance.db.t or `/path/to/dataset.lance`"),
    optional("index", StringType, "the index to optimize (default: every index built here)"))

  override val outputType: StructType = new StructType()
    .add("rebuilt", ArrayType(StringType, containsNull = false))
    .add("up_to_date", ArrayType(StringType, containsNull = false))
    .add("read_version", LongType).add("new_version", LongType)

  override protected def run(args: Args): InternalRow = {
    val s = storage(args)
    s.requireSafeCommit()
    val snap = Dataset.open(s, None)
    val all = IndexCatalog.load(snap)
    val chosen = args.string("index") match {
      case Some(n) => Seq(all.find(_.name == n).getOrElse(throw new IllegalArgumentException(
        s"${s.uri} (version ${snap.version}): no index named '$n' (indices: ${all.map(_.name).mkString(", ")})")))
      case None => all.filter(e => BuiltIndexType.All.exists(_.detailsType == e.kind) || e.kind == IvfBuild.DetailsKind)
        .groupBy(_.name).values.map(_.head).toSeq.sortBy(_.name)
    }
    // each rebuild reads the latest version (the one the previous rebuild committed)
    val results = chosen.map(_.name).map { n =>
      val latest = Dataset.open(s, None)
      val e = IndexCatalog.load(latest).find(_.name == n).getOrElse(
        throw new IllegalStateException(s"${s.uri}: index '$n' was dropped meanwhile"))
      n -> (if (e.kind == IvfBuild.DetailsKind) VectorIndexBuildJob.refresh(SparkSession.active, latest, e)
            else IndexBuild.rebuildPlan(latest, e).map(plan => IndexBuildJob.execute(SparkSession.active, plan)))
    }
    def names(xs: Seq[String]): GenericArrayData = new GenericArrayData(xs.map(utf8).toArray[Any])
    InternalRow(names(results.collect { case (n, Some(_)) => n }), names(results.collect { case (n, None) => n }),
      snap.version, Dataset.open(s, None).version)
  }
}
