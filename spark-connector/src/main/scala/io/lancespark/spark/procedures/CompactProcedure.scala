package io.lancespark.spark.procedures

import scala.util.Using

import org.apache.spark.TaskContext
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types._
import org.apache.spark.util.LongAccumulator

import io.lancespark.spark.SerializableHadoopConf
import io.lancespark.spark.procedures.LanceProcedure._
import io.lancespark.spark.read.ArrowAllocators
import io.lancespark.table.maintenance.{Compaction, CompactionGroup, CompactionMetrics, CompactionOptions, CompactionRewrite, RewrittenGroup}
import io.lancespark.table.storage.{Dataset, DatasetStorage, FragmentWriter}

/** `CALL lance.system.compact(table => 'db.t', target_rows_per_fragment => ..., max_rows_per_group => ...,
  * materialize_deletions => ..., materialize_deletions_threshold => ...)`: the reference's compact_files, as
  * one Spark job (a task per fragment group) and one commit by the driver. */
final class CompactProcedure(tables: TableResolver) extends LanceProcedure(tables) {
  override def name(): String = "compact"
  override def description(): String =
    "Merges small fragments and rewrites fragments with many deleted rows (a Rewrite commit; row ids kept)"

  private val defaults = CompactionOptions()

  override val params: Seq[ProcParam] = Seq(
    required("table", StringType, "db.t, lance.db.t or `/path/to/dataset.lance`"),
    optional("target_rows_per_fragment", LongType,
      "fragments with fewer rows are merged with their neighbours; rows per new fragment", defaults.targetRowsPerFragment.toString),
    optional("max_rows_per_group", LongType, "rows per batch handed to the file writer", defaults.maxRowsPerGroup.toString),
    optional("materialize_deletions", BooleanType, "rewrite fragments whose deleted share passes the threshold", "true"),
    optional("materialize_deletions_threshold", DoubleType, "the deleted share above which a fragment is rewritten",
      defaults.materializeDeletionsThreshold.toString))

  override val outputType: StructType = new StructType()
    .add("read_version", LongType).add("new_version", LongType).add("groups", LongType)
    .add("fragments_removed", LongType).add("fragments_added", LongType)
    .add("files_removed", LongType).add("files_added", LongType)
    .add("rows_rewritten", LongType).add("deletions_materialized", LongType)
    .add("groups_skipped", LongType)

  override protected def run(args: Args): InternalRow = {
    val s = storage(args)
    val rowsPerGroup = args.long("max_rows_per_group").getOrElse(defaults.maxRowsPerGroup.toLong)
    val options = try CompactionOptions(
        targetRowsPerFragment = args.long("target_rows_per_fragment").getOrElse(defaults.targetRowsPerFragment),
        maxRowsPerGroup = math.min(rowsPerGroup, Int.MaxValue.toLong).toInt,
        materializeDeletions = args.boolean("materialize_deletions").getOrElse(true),
        materializeDeletionsThreshold =
          args.double("materialize_deletions_threshold").getOrElse(defaults.materializeDeletionsThreshold))
      catch { case e: IllegalArgumentException => throw new IllegalArgumentException(s"compact of ${s.uri}: ${e.getMessage}") }
    val m = CompactionJob.run(SparkSession.active, s.uri, options)
    InternalRow(m.readVersion, m.newVersion.map(Long.box).orNull, m.groups.toLong, m.fragmentsRemoved.toLong,
      m.fragmentsAdded.toLong, m.filesRemoved.toLong, m.filesAdded.toLong, m.rowsRewritten, m.deletionsMaterialized,
      m.groupsSkipped.toLong)
  }
}

/** What every task of one compaction needs; serialized to executors. */
final case class CompactTask(uri: String, hadoopConf: SerializableHadoopConf, readVersion: Long,
    options: CompactionOptions, prefix: String) {
  def rewrite(group: CompactionGroup): RewrittenGroup = {
    val storage = DatasetStorage(uri, hadoopConf.value)
    val snapshot = Dataset.open(storage, Some(readVersion))
    Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-compact-$prefix", 0, Long.MaxValue)) { allocator =>
      CompactionRewrite.rewrite(storage, snapshot, group, options, allocator, prefix)
    }
  }
}

/** A compaction as one Spark job: the driver plans, each task rewrites one
  * group, the driver commits them all as one Rewrite. A failed job commits
  * nothing and deletes what its tasks wrote. */
object CompactionJob {

  def run(spark: SparkSession, uri: String, options: CompactionOptions): CompactionMetrics = {
    val conf = spark.sessionState.newHadoopConf()
    val storage = DatasetStorage(uri, conf)
    storage.requireSafeCommit()
    val snapshot = Dataset.open(storage, None)
    val plan = Compaction.plan(snapshot, options)
    if (plan.groups.isEmpty) Compaction.empty(snapshot.version)
    else {
      val task = CompactTask(storage.uri, new SerializableHadoopConf(conf), snapshot.version, options,
        CompactionRewrite.newPrefix())
      val sc = spark.sparkContext
      val rows: LongAccumulator = sc.longAccumulator("lance compact: rows rewritten")
      val files: LongAccumulator = sc.longAccumulator("lance compact: files written")
      val results = new Array[RewrittenGroup](plan.groups.size)
      val description = sc.getLocalProperty("spark.job.description")
      sc.setJobDescription(s"lance compact ${storage.uri} (version ${snapshot.version}, ${plan.groups.size} groups)")
      try {
        val rdd = sc.parallelize(plan.groups, plan.groups.size)
        sc.runJob(rdd, (_: TaskContext, groups: Iterator[CompactionGroup]) => groups.map { g =>
          val r = task.rewrite(g)
          rows.add(r.rowsWritten)
          files.add(r.added.size.toLong)
          r
        }.toVector, (partition: Int, done: Vector[RewrittenGroup]) => done.foreach(results(partition) = _))
      } catch {
        case e: Throwable =>
          results.filter(_ != null).flatMap(_.added).foreach(a => FragmentWriter.delete(storage, a.file.path))
          FragmentWriter.sweep(storage, task.prefix)
          Thread.sleep(1000)  // tasks being killed may still be closing files: sweep once more
          FragmentWriter.sweep(storage, task.prefix)
          throw e
      } finally sc.setJobDescription(description)
      Compaction.commit(storage, plan, snapshot, results.toSeq)
    }
  }
}
