package io.lancespark.spark.procedures

import scala.util.Using

import org.apache.spark.sql.SparkSession

import io.lancespark.spark.SerializableHadoopConf
import io.lancespark.spark.read.ArrowAllocators
import io.lancespark.table.commit.CommitSettings
import io.lancespark.table.index.IndexEntry
import io.lancespark.table.index.vector.{IvfBuild, IvfBuildPlan, IvfPqEncoder, KMeansModel, PqModel}
import io.lancespark.table.storage.{Dataset, DatasetStorage, Snapshot}

/** What each task of a vector index build needs; serialized to executors,
  * where it re-plans the build at the same dataset version (the plan's
  * checks pass there as they did on the driver). */
final case class VectorIndexTask(uri: String, hadoopConf: SerializableHadoopConf, version: Long, column: String,
                                 indexType: String, name: String, options: Map[String, String],
                                 replace: Boolean = false) {
  private def plan(): IvfBuildPlan = {
    val snapshot = Dataset.open(DatasetStorage(uri, hadoopConf.value), Some(version))
    IvfBuild.plan(snapshot, column, indexType, Some(name), options, replace)
  }

  /** A seeded sample of one fragment's vectors (concatenated). */
  def sample(fragmentId: Long, fraction: Double): Array[Float] =
    Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-ivf-sample-$fragmentId", 0, Long.MaxValue)) { a =>
      IvfBuild.sampleFragment(plan(), fragmentId, fraction, a)
    }

  /** One fragment's vectors with their partitions: ((partition, row address), vector). */
  def assign(model: KMeansModel, fragmentId: Long): Vector[((Int, Long), Array[Float])] =
    Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-ivf-assign-$fragmentId", 0, Long.MaxValue)) { a =>
      IvfBuild.assignFragment(plan(), model, fragmentId, a).map { case (p, addr, v) => ((p, addr), v) }
    }

  /** IVF_PQ: one fragment's vectors assigned and encoded: ((partition, row address), PQ codes). */
  def encode(encoder: IvfPqEncoder, fragmentId: Long): Vector[((Int, Long), Array[Byte])] =
    Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-ivf-encode-$fragmentId", 0, Long.MaxValue)) { a =>
      IvfBuild.encodeFragment(plan(), encoder, fragmentId, a).map { case (p, addr, code) => ((p, addr), code) }
    }
}

/** A vector (IVF) index build as Spark jobs: the driver checks the request
  * (column, type, options, name) before any job; a first job samples each
  * fragment's vectors (seeded), the driver trains the centroids (k-means) on
  * the sample (and for IVF_PQ the codebook); a second job assigns every live
  * non-null vector to its nearest centroid on the executors (IVF_PQ: and
  * encodes it there, with the broadcast centroids and codebook, so only
  * the codes travel) and sorts the rows by (partition, row address) across
  * them; the driver streams the sorted rows into the index writer and
  * commits one CreateIndex. A failed build commits nothing and
  * removes its files. `rows` of the result: the vectors indexed (live, not null). */
object VectorIndexBuildJob {

  def run(spark: SparkSession, storage: DatasetStorage, column: String, indexType: String, name: Option[String],
          options: Map[String, String]): IndexBuildResult = {
    storage.requireSafeCommit()
    val snapshot = Dataset.open(storage, None)
    val plan = IvfBuild.plan(snapshot, column, indexType, name, options)
    val conf = spark.sessionState.newHadoopConf()
    val resolved = options.map { case (k, v) => k.trim.toLowerCase(java.util.Locale.ROOT) -> v } +
      ("num_partitions" -> plan.numPartitions.toString)
    val task = VectorIndexTask(storage.uri, new SerializableHadoopConf(conf), snapshot.version, column, plan.indexType,
      plan.name, resolved)
    val sc = spark.sparkContext
    val description = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(s"lance create_index ${plan.name} (${plan.indexType} on $column, ${plan.numPartitions} " +
      s"partitions, ${plan.metric.name}) ${storage.uri} (version ${snapshot.version}, ${snapshot.fragments.size} fragments)")
    try {
      val ids = snapshot.fragments.map(_.id)
      val fraction = IvfBuild.sampleFraction(plan)
      val samples = sc.parallelize(ids, math.max(1, ids.size)).map(id => id -> task.sample(id, fraction))
        .collect().sortBy(_._1).map(_._2).toVector
      val model = IvfBuild.train(plan, samples)
      val pq = IvfBuild.trainPq(plan, model, samples)
      writeAndCommit(spark, plan, task, model, pq)
    } finally sc.setJobDescription(description)
  }

  /** Refreshes the IVF_FLAT or IVF_PQ index `entry` over the current fragments with its own
    * centroids and codebook ([[IvfBuild.refreshPlan]]): one job assigns (and encodes) every live
    * vector on the executors, the driver writes and commits the index replacing the old one. None
    * when it already covers every fragment. */
  def refresh(spark: SparkSession, snapshot: Snapshot, entry: IndexEntry): Option[IndexBuildResult] =
    IvfBuild.refreshPlan(snapshot, entry).map { case (plan, model, pq) =>
      val storage = snapshot.storage
      val task = VectorIndexTask(storage.uri, new SerializableHadoopConf(spark.sessionState.newHadoopConf()),
        snapshot.version, entry.fields.head.mkString("."), plan.indexType, plan.name, plan.modelOptions, replace = true)
      val sc = spark.sparkContext
      val description = sc.getLocalProperty("spark.job.description")
      sc.setJobDescription(s"lance optimize_indices ${plan.name} (${plan.indexType} on ${plan.field.name}, " +
        s"${plan.numPartitions} partitions, ${plan.metric.name}) ${storage.uri} (version ${snapshot.version}, " +
        s"${snapshot.fragments.size} fragments)")
      try writeAndCommit(spark, plan, task, model, pq)
      finally sc.setJobDescription(description)
    }

  /** Assigns (IVF_PQ: and encodes) every live vector of the plan's fragments on the executors,
    * sorted by (partition, row address); the driver writes the index and commits it. */
  private def writeAndCommit(spark: SparkSession, plan: IvfBuildPlan, task: VectorIndexTask, model: KMeansModel,
                             pq: Option[PqModel]): IndexBuildResult = {
    val sc = spark.sparkContext
    val ids = plan.snapshot.fragments.map(_.id)
    var indexed = 0L
    val parts = math.max(1, math.min(ids.size, sc.defaultParallelism * 2))
    val files = pq match {
      case Some(q) =>
        val bc = sc.broadcast(IvfPqEncoder(model, q, plan.metric))
        try {
          val sorted = sc.parallelize(ids, math.max(1, ids.size)).flatMap(id => task.encode(bc.value, id))
            .sortByKey(ascending = true, parts)
          Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-index-${plan.uuid}", 0, Long.MaxValue)) { a =>
            IvfBuild.writePq(plan, model, q, sorted.toLocalIterator.map { case ((p, addr), code) =>
              indexed += 1
              (p, addr, code)
            }, a)
          }
        } finally { bc.destroy() }
      case None =>
        val bc = sc.broadcast(model)
        try {
          val sorted = sc.parallelize(ids, math.max(1, ids.size)).flatMap(id => task.assign(bc.value, id))
            .sortByKey(ascending = true, parts)
          Using.resource(ArrowAllocators.root.newChildAllocator(s"lance-index-${plan.uuid}", 0, Long.MaxValue)) { a =>
            IvfBuild.write(plan, model, sorted.toLocalIterator.map { case ((p, addr), v) =>
              indexed += 1
              (p, addr, v)
            }, a)
          }
        } finally { bc.destroy() }
    }
    val committed = IvfBuild.commit(plan, CommitSettings())
    IndexBuildResult(plan.name, plan.indexType, plan.uuid, plan.snapshot.version, committed.version,
      indexed, plan.fragments.getLongCardinality, files.map(_._2).sum)
  }
}
