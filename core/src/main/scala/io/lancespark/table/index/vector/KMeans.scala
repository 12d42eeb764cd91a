package io.lancespark.table.index.vector

/** Centroids trained by [[KMeans]]: `k` rows of `dim` values, row-major, and
  * the final loss (the sum of each training vector's distance to its centroid). */
final case class KMeansModel(k: Int, dim: Int, centroids: Array[Float], loss: Double) {
  def centroid(c: Int): Array[Float] = java.util.Arrays.copyOfRange(centroids, c * dim, (c + 1) * dim)

  /** The nearest centroid of `v` (from `offset`) under `metric` (l2 or dot);
    * ties go to the lower centroid. */
  def nearest(v: Array[Float], offset: Int, metric: DistanceMetric): Int = KMeans.nearest(centroids, k, dim, v, offset, metric)
}

/** Lloyd's k-means as the reference trains IVF centroids: `k` distinct
  * training vectors picked at random as the initial centroids (seeded),
  * then rounds of assignment to the nearest centroid and centroids moved to
  * their members' mean, until the loss changes by less than `tolerance`
  * (relative) or `maxIters` rounds. Distances are squared l2, or 1 - dot
  * product for dot; cosine is trained as l2 over unit vectors (the caller
  * normalizes). An empty cluster takes half of the largest one (its centroid
  * split in two, slightly apart). */
object KMeans {
  val DefaultMaxIters: Int = 50
  val DefaultTolerance: Double = 1e-4

  def train(data: Array[Float], dim: Int, k: Int, metric: DistanceMetric, maxIters: Int = DefaultMaxIters,
            tolerance: Double = DefaultTolerance, seed: Long = 42L): KMeansModel = {
    require(dim > 0 && data.length % dim == 0, s"k-means over ${data.length} values is not a multiple of dimension $dim")
    val n = data.length / dim
    require(k >= 1 && k <= n, s"k-means with $k centroids over $n vectors")
    require(metric != DistanceMetric.Cosine, "k-means for cosine runs as l2 over normalized vectors")
    val rng = new scala.util.Random(seed)
    // k distinct rows: a partial Fisher-Yates shuffle of the row numbers
    val order = Array.tabulate(n)(identity)
    var i = 0
    while (i < k) {
      val j = i + rng.nextInt(n - i)
      val t = order(i); order(i) = order(j); order(j) = t
      i += 1
    }
    val centroids = new Array[Float](k * dim)
    i = 0
    while (i < k) { System.arraycopy(data, order(i) * dim, centroids, i * dim, dim); i += 1 }

    val assign = new Array[Int](n)
    val dists = new Array[Float](n)
    var loss = Double.MaxValue
    var iter = 0
    var done = false
    while (!done && iter < maxIters) {
      assignAll(data, n, dim, k, centroids, metric, assign, dists)
      val newLoss = sum(dists)
      update(data, n, dim, k, assign, centroids, rng)
      iter += 1
      done = loss != Double.MaxValue && math.abs(loss - newLoss) <= tolerance * math.abs(loss)
      loss = newLoss
    }
    // the loss of the final centroids
    assignAll(data, n, dim, k, centroids, metric, assign, dists)
    val finalLoss = sum(dists)
    KMeansModel(k, dim, centroids, finalLoss)
  }

  /** Rows per task of the parallel assignment step. */
  private val ChunkRows: Int = 2048

  /** Each row's nearest centroid and its distance, rows cut in chunks
    * assigned in parallel (the common fork-join pool); every row's result is
    * what the sequential loop gives. */
  private def assignAll(data: Array[Float], n: Int, dim: Int, k: Int, centroids: Array[Float], metric: DistanceMetric,
                        assign: Array[Int], dists: Array[Float]): Unit = {
    val chunks = (n + ChunkRows - 1) / ChunkRows
    val work: java.util.function.IntConsumer = new java.util.function.IntConsumer {
      def accept(ch: Int): Unit = {
        var r = ch * ChunkRows
        val end = math.min(n, r + ChunkRows)
        while (r < end) {
          val c = nearest(centroids, k, dim, data, r * dim, metric)
          assign(r) = c
          dists(r) = dist(metric, centroids, c * dim, data, r * dim, dim)
          r += 1
        }
      }
    }
    if (chunks <= 1 || n.toLong * k * dim < 1000000L) (0 until chunks).foreach(work.accept)
    else java.util.stream.IntStream.range(0, chunks).parallel().forEach(work)
  }

  /** The distances summed in row order (as doubles). */
  private def sum(dists: Array[Float]): Double = {
    var s = 0.0
    var i = 0
    while (i < dists.length) { s += dists(i); i += 1 }
    s
  }

  private def update(data: Array[Float], n: Int, dim: Int, k: Int, assign: Array[Int], centroids: Array[Float],
                     rng: scala.util.Random): Unit = {
    val sums = new Array[Double](k * dim)
    val counts = new Array[Int](k)
    var r = 0
    while (r < n) {
      val c = assign(r)
      counts(c) += 1
      var d = 0
      while (d < dim) { sums(c * dim + d) += data(r * dim + d); d += 1 }
      r += 1
    }
    var c = 0
    while (c < k) {
      if (counts(c) > 0) {
        var d = 0
        while (d < dim) { centroids(c * dim + d) = (sums(c * dim + d) / counts(c)).toFloat; d += 1 }
      }
      c += 1
    }
    c = 0
    while (c < k) {
      if (counts(c) == 0) {
        // split the largest cluster: its centroid and this one, nudged apart
        val big = counts.indices.maxBy(counts(_))
        var d = 0
        while (d < dim) {
          val v = centroids(big * dim + d)
          val eps = (1e-3f * (math.abs(v) + 1e-3f)) * (if (rng.nextBoolean()) 1f else -1f)
          centroids(c * dim + d) = v + eps
          centroids(big * dim + d) = v - eps
          d += 1
        }
        counts(c) = counts(big) / 2
        counts(big) -= counts(c)
      }
      c += 1
    }
  }

  /** The nearest of `k` centroids to `v` (from `offset`); ties to the lower. */
  def nearest(centroids: Array[Float], k: Int, dim: Int, v: Array[Float], offset: Int, metric: DistanceMetric,
              from: Int = 0): Int = {
    var best = 0
    var bestD = Float.MaxValue
    var c = 0
    while (c < k) {
      val d = dist(metric, centroids, from + c * dim, v, offset, dim)
      if (d < bestD) { bestD = d; best = c }
      c += 1
    }
    best
  }

  /** Squared l2, or 1 - dot product for dot, of `a` from `ao` and `b` from `bo`. */
  def dist(metric: DistanceMetric, a: Array[Float], ao: Int, b: Array[Float], bo: Int, dim: Int): Float =
    if (metric == DistanceMetric.Dot) {
      var s = 0.0f
      var i = 0
      while (i < dim) { s += a(ao + i) * b(bo + i); i += 1 }
      1.0f - s
    } else {
      var s = 0.0f
      var i = 0
      while (i < dim) { val x = a(ao + i) - b(bo + i); s += x * x; i += 1 }
      s
    }

  /** Scales `v` from `offset` to unit length in place (zero vectors stay zero). */
  def normalize(v: Array[Float], offset: Int, dim: Int): Unit = {
    var s = 0.0
    var d = 0
    while (d < dim) { val x = v(offset + d).toDouble; s += x * x; d += 1 }
    if (s > 0) {
      val inv = 1.0 / math.sqrt(s)
      d = 0
      while (d < dim) { v(offset + d) = (v(offset + d) * inv).toFloat; d += 1 }
    }
  }
}

/** A product quantizer as the reference trains it for IVF_PQ: the vector
  * (l2/cosine: its residual to its partition's centroid) cut into `m`
  * sub-vectors of `subDim` values, each coded by the nearest (l2) of 256
  * centroids of its sub-space. `codebook` is [subVector][centroid][subDim]. */
final case class PqModel(m: Int, subDim: Int, codebook: Array[Float]) {
  def dim: Int = m * subDim

  /** The 8-bit codes of `v` (from `offset`), into `out` from `outOffset`. */
  def encode(v: Array[Float], offset: Int, out: Array[Byte], outOffset: Int): Unit = {
    var s = 0
    while (s < m) {
      val c = KMeans.nearest(codebook, PqModel.Centroids, subDim, v, offset + s * subDim, DistanceMetric.L2,
        s * PqModel.Centroids * subDim)
      out(outOffset + s) = c.toByte
      s += 1
    }
  }
}

object PqModel {
  val Centroids: Int = 256

  /** Trains one k-means of 256 centroids per sub-space over `data` (rows of `dim`). */
  def train(data: Array[Float], dim: Int, m: Int, maxIters: Int, seed: Long): PqModel = {
    require(dim % m == 0, s"num_sub_vectors $m does not divide dimension $dim")
    val n = data.length / dim
    val sd = dim / m
    val cb = new Array[Float](m * Centroids * sd)
    // the sub-spaces are independent (each its own seeded k-means): trained in parallel
    java.util.stream.IntStream.range(0, m).parallel().forEach(new java.util.function.IntConsumer {
      def accept(s: Int): Unit = {
        val sub = new Array[Float](n * sd)
        var r = 0
        while (r < n) { System.arraycopy(data, r * dim + s * sd, sub, r * sd, sd); r += 1 }
        val km = KMeans.train(sub, sd, Centroids, DistanceMetric.L2, maxIters, KMeans.DefaultTolerance, seed + s)
        System.arraycopy(km.centroids, 0, cb, s * Centroids * sd, Centroids * sd)
      }
    })
    PqModel(m, sd, cb)
  }
}
