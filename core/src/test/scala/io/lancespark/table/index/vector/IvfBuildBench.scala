package io.lancespark.table.index.vector

import scala.util.Using

import org.apache.arrow.memory.RootAllocator
import org.apache.hadoop.conf.Configuration

import io.lancespark.table.storage.{Dataset, DatasetStorage}

/** Times the phases of an IVF_PQ build in one JVM, without Spark and
  * without writing (`core/Test/runMain ...IvfBuildBench <path> <num_partitions>
  * <num_sub_vectors> [metric]`): the seeded sample, the IVF k-means, the PQ
  * codebook training (both on the driver in a Spark build) and the
  * assignment + encoding of every row (the executors' work in a Spark build). */
object IvfBuildBench {
  def main(args: Array[String]): Unit = {
    val Array(path, parts, subs) = args.take(3)
    val metric = if (args.length > 3) args(3) else "l2"
    val snapshot = Dataset.open(DatasetStorage(path, new Configuration()), None)
    val plan = IvfBuild.plan(snapshot, "emb", "ivf_pq", Some("bench"),
      Map("num_partitions" -> parts, "num_sub_vectors" -> subs, "metric" -> metric))
    def time[A](name: String)(f: => A): A = {
      val t0 = System.nanoTime()
      val r = f
      println(f"$name: ${(System.nanoTime() - t0) / 1e9}%.2f s")
      r
    }
    Using.resource(new RootAllocator()) { alloc =>
      val ids = snapshot.fragments.map(_.id)
      val fraction = IvfBuild.sampleFraction(plan)
      val samples = time("sample")(ids.map(id => IvfBuild.sampleFragment(plan, id, fraction, alloc)))
      val model = time(s"IVF k-means (${plan.ivfSampleSize} x ${plan.dim}, $parts centroids)")(IvfBuild.train(plan, samples))
      val pq = time(s"PQ training ($subs sub-spaces x 256 codes, ${plan.sampleSize} vectors)")(
        IvfBuild.trainPq(plan, model, samples).get)
      val enc = IvfPqEncoder(model, pq, plan.metric)
      val rows = time("assign + encode every row (one thread)")(ids.map(id => IvfBuild.encodeFragment(plan, enc, id, alloc).size).sum)
      println(s"rows $rows, k-means loss ${model.loss}")
    }
  }
}
