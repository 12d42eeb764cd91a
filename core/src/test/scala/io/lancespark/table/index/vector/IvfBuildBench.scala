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
      kernels(samples, plan.dim, pq)
      val enc = IvfPqEncoder(model, pq, plan.metric)
      val rows = time("assign + encode every row (one thread)")(ids.map(id => IvfBuild.encodeFragment(plan, enc, id, alloc).size).sum)
      println(s"rows $rows, k-means loss ${model.loss}")
    }
  }

  /** One thread, same run: rounds of a PQ assignment step (the first
    * sub-space of the sampled vectors against its 256 trained codes) with
    * the exact distance to each centroid in turn (the kernel before) and with
    * the expanded distance over transposed centroids (the kernel now). */
  private def kernels(samples: Seq[Array[Float]], dim: Int, pq: PqModel): Unit = {
    val k = PqModel.Centroids
    val sd = pq.subDim
    val all = samples.flatMap(_.iterator).toArray
    val n = math.min(65536, all.length / dim)
    val sub = new Array[Float](n * sd)
    var r = 0
    while (r < n) { System.arraycopy(all, r * dim, sub, r * sd, sd); r += 1 }
    val codes = java.util.Arrays.copyOfRange(pq.codebook, 0, k * sd)
    val rounds = 5
    var check = 0L
    def time(name: String)(f: => Unit): Double = {
      f // warm-up
      val t0 = System.nanoTime()
      var i = 0
      while (i < rounds) { f; i += 1 }
      val s = (System.nanoTime() - t0) / 1e9 / rounds
      println(f"kernel $name: ${s * 1000}%.1f ms a round ($n x $sd, $k codes, one thread)")
      s
    }
    val before = time("exact per centroid") {
      var r = 0
      while (r < n) {
        val c = KMeans.nearest(codes, k, sd, sub, r * sd, DistanceMetric.L2)
        check += c + KMeans.dist(DistanceMetric.L2, codes, c * sd, sub, r * sd, sd).toLong
        r += 1
      }
    }
    val ct = Array.fill(sd)(new Array[Float](k))
    val bias = new Array[Float](k)
    val scores = new Array[Float](k + 1)
    val after = time("expanded, transposed") {
      KMeans.prepare(codes, 0, k, sd, DistanceMetric.L2, ct, 0, bias)
      var r = 0
      while (r < n) {
        val c = KMeans.nearestScored(ct, 0, bias, k, sd, -2.0f, sub, r * sd, scores)
        check += c
        r += 1
      }
    }
    var same = 0
    r = 0
    while (r < n) {
      if (KMeans.nearestScored(ct, 0, bias, k, sd, -2.0f, sub, r * sd, scores) ==
          KMeans.nearest(codes, k, sd, sub, r * sd, DistanceMetric.L2)) same += 1
      r += 1
    }
    println(f"kernel speed-up ${before / after}%.1fx; same nearest code for $same of $n rows ($check)")
  }
}
