package io.lancespark.table.index.vector

/** Centroids trained by [[KMeans]]: `k` rows of `dim` values, row-major, and
  * the loss of the last round (the sum of each training vector's distance to
  * the centroid it was assigned), as the reference records it. */
final case class KMeansModel(k: Int, dim: Int, centroids: Array[Float], loss: Double) {
  def centroid(c: Int): Array[Float] = java.util.Arrays.copyOfRange(centroids, c * dim, (c + 1) * dim)

  /** The nearest centroid of `v` (from `offset`) under `metric` (l2 or dot);
    * ties go to the lower centroid. */
  def nearest(v: Array[Float], offset: Int, metric: DistanceMetric): Int = {
    val p = if (metric == DistanceMetric.Dot) preparedDot else preparedL2
    val scores = KMeans.scratch(k + 1)
    KMeans.nearestScored(p._1, 0, p._2, k, dim, if (metric == DistanceMetric.Dot) -1.0f else -2.0f, v, offset, scores)
  }

  // the centroids transposed with their score bias, for the expanded distance (built once, where used)
  @transient private lazy val preparedL2: (Array[Array[Float]], Array[Float]) = prepared(DistanceMetric.L2)
  @transient private lazy val preparedDot: (Array[Array[Float]], Array[Float]) = prepared(DistanceMetric.Dot)
  private def prepared(metric: DistanceMetric): (Array[Array[Float]], Array[Float]) = {
    val ct = Array.fill(dim)(new Array[Float](k))
    val bias = new Array[Float](k)
    KMeans.prepare(centroids, 0, k, dim, metric, ct, 0, bias)
    (ct, bias)
  }
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
    val ws = new Workspace(k, dim)
    var loss = Double.MaxValue
    var iter = 0
    var done = false
    while (!done && iter < maxIters) {
      assignAll(data, n, dim, k, centroids, metric, assign, dists, ws)
      val newLoss = sum(dists)
      update(data, n, dim, k, assign, centroids, rng, ws)
      iter += 1
      // the reference's rule: stop once the loss changes by less than tolerance of itself
      // (or not at all: a loss of 0 stops too)
      done = loss != Double.MaxValue && math.abs(loss - newLoss) <= tolerance * newLoss
      loss = newLoss
    }
    // as the reference, the loss recorded is the last round's (of the centroids it assigned with)
    KMeansModel(k, dim, centroids, loss)
  }

  /** Buffers a training reuses across rounds: the centroids transposed
    * (`dim` arrays of `k`), their bias (l2: squared norm; dot: 1), the
    * update's sums and counts. */
  private final class Workspace(val k: Int, val dim: Int) {
    val ct: Array[Array[Float]] = Array.fill(dim)(new Array[Float](k))
    val bias: Array[Float] = new Array[Float](k)
    val sums: Array[Double] = new Array[Double](k * dim)
    val counts: Array[Int] = new Array[Int](k)
  }

  /** Fills `ct` (from array `ctFrom`: one array of `k` a dimension) and
    * `bias` for the `k` centroids of `centroids` (from `from`): the
    * centroids transposed and each one's score bias (l2: ||c||^2; dot: 1). */
  private[vector] def prepare(centroids: Array[Float], from: Int, k: Int, dim: Int, metric: DistanceMetric,
                              ct: Array[Array[Float]], ctFrom: Int, bias: Array[Float]): Unit = {
    val dot = metric == DistanceMetric.Dot
    var c = 0
    while (c < k) {
      var s = 0.0f
      var d = 0
      val o = from + c * dim
      while (d < dim) { val v = centroids(o + d); ct(ctFrom + d)(c) = v; s += v * v; d += 1 }
      bias(c) = if (dot) 1.0f else s
      c += 1
    }
  }

  /** The nearest centroid of row `v` (from `offset`) by the expanded
    * distance: every centroid's score `bias(c) + alpha * (v . c)` (l2:
    * ||c||^2 - 2 v.c, the squared distance less ||v||^2; dot: 1 - v.c) built
    * in `scores` by passes over the transposed centroids `ct` (from array
    * `ctFrom`), four dimensions a pass, each a loop over contiguous floats
    * at one index that the JIT vectorizes; then the lowest score (ties to
    * the lower centroid), which is left in `scores(k)`. */
  private[vector] def nearestScored(ct: Array[Array[Float]], ctFrom: Int, bias: Array[Float], k: Int, dim: Int,
                                    alpha: Float, v: Array[Float], offset: Int, scores: Array[Float]): Int = {
    var d = 0
    var first = true
    while (d + 3 < dim) {
      val s0 = alpha * v(offset + d); val s1 = alpha * v(offset + d + 1)
      val s2 = alpha * v(offset + d + 2); val s3 = alpha * v(offset + d + 3)
      val t0 = ct(ctFrom + d); val t1 = ct(ctFrom + d + 1); val t2 = ct(ctFrom + d + 2); val t3 = ct(ctFrom + d + 3)
      var c = 0
      if (first) {
        while (c < k) { scores(c) = bias(c) + s0 * t0(c) + s1 * t1(c) + s2 * t2(c) + s3 * t3(c); c += 1 }
        first = false
      } else {
        while (c < k) { scores(c) += s0 * t0(c) + s1 * t1(c) + s2 * t2(c) + s3 * t3(c); c += 1 }
      }
      d += 4
    }
    while (d < dim) {
      val s0 = alpha * v(offset + d)
      val t0 = ct(ctFrom + d)
      var c = 0
      if (first) {
        while (c < k) { scores(c) = bias(c) + s0 * t0(c); c += 1 }
        first = false
      } else {
        while (c < k) { scores(c) += s0 * t0(c); c += 1 }
      }
      d += 1
    }
    var best = 0
    var bestS = scores(0)
    var c = 1
    while (c < k) {
      val x = scores(c)
      if (x < bestS) { bestS = x; best = c }
      c += 1
    }
    scores(k) = bestS
    best
  }

  private def squaredNorm(v: Array[Float], offset: Int, dim: Int): Float = {
    var s0 = 0.0f; var s1 = 0.0f; var s2 = 0.0f; var s3 = 0.0f
    var d = 0
    while (d + 3 < dim) {
      val a = v(offset + d); val b = v(offset + d + 1); val c = v(offset + d + 2); val e = v(offset + d + 3)
      s0 += a * a; s1 += b * b; s2 += c * c; s3 += e * e
      d += 4
    }
    while (d < dim) { val a = v(offset + d); s0 += a * a; d += 1 }
    (s0 + s1) + (s2 + s3)
  }

  private val scratchBuffers: ThreadLocal[Array[Float]] = new ThreadLocal[Array[Float]]

  /** A per-thread scratch array of at least `size` floats. */
  private[vector] def scratch(size: Int): Array[Float] = {
    val a = scratchBuffers.get()
    if (a != null && a.length >= size) a else { val b = new Array[Float](size); scratchBuffers.set(b); b }
  }

  /** Rows per task of the parallel assignment step. */
  private val ChunkRows: Int = 2048

  /** Each row's nearest centroid and its distance (l2: squared, from the
    * expansion, at least 0; dot: 1 - dot product), rows cut in chunks
    * assigned in parallel (the common fork-join pool); every row's result
    * does not depend on the chunking. */
  private def assignAll(data: Array[Float], n: Int, dim: Int, k: Int, centroids: Array[Float], metric: DistanceMetric,
                        assign: Array[Int], dists: Array[Float], ws: Workspace): Unit = {
    prepare(centroids, 0, k, dim, metric, ws.ct, 0, ws.bias)
    assignPrepared(data, n, dim, k, ws.ct, ws.bias, metric, assign, dists)
  }

  private def assignPrepared(data: Array[Float], n: Int, dim: Int, k: Int, ct: Array[Array[Float]], bias: Array[Float],
                             metric: DistanceMetric, assign: Array[Int], dists: Array[Float]): Unit = {
    val l2 = metric != DistanceMetric.Dot
    val alpha = if (l2) -2.0f else -1.0f
    val chunks = (n + ChunkRows - 1) / ChunkRows
    val work: java.util.function.IntConsumer = new java.util.function.IntConsumer {
      def accept(ch: Int): Unit = {
        val scores = new Array[Float](k + 1)
        var r = ch * ChunkRows
        val end = math.min(n, r + ChunkRows)
        while (r < end) {
          val c = nearestScored(ct, 0, bias, k, dim, alpha, data, r * dim, scores)
          assign(r) = c
          if (dists != null) dists(r) = if (l2) math.max(0.0f, scores(k) + squaredNorm(data, r * dim, dim)) else scores(k)
          r += 1
        }
      }
    }
    if (chunks <= 1 || n.toLong * k * dim < 1000000L) (0 until chunks).foreach(work.accept)
    else java.util.stream.IntStream.range(0, chunks).parallel().forEach(work)
  }

  /** The nearest of `model`'s centroids (under `metric`: l2 or dot) of every
    * row of `data` (rows of the model's dimension), computed in parallel. */
  def assignments(model: KMeansModel, data: Array[Float], metric: DistanceMetric): Array[Int] = {
    val n = data.length / model.dim
    val out = new Array[Int](n)
    val ws = new Workspace(model.k, model.dim)
    prepare(model.centroids, 0, model.k, model.dim, metric, ws.ct, 0, ws.bias)
    assignPrepared(data, n, model.dim, model.k, ws.ct, ws.bias, metric, out, null)
    out
  }

  /** The distances summed in row order (as doubles). */
  private def sum(dists: Array[Float]): Double = {
    var s = 0.0
    var i = 0
    while (i < dists.length) { s += dists(i); i += 1 }
    s
  }

  /** Moves each centroid to its members' mean (sums in one pass over the
    * rows); an empty cluster takes half of the largest. */
  private def update(data: Array[Float], n: Int, dim: Int, k: Int, assign: Array[Int], centroids: Array[Float],
                     rng: scala.util.Random, ws: Workspace): Unit = {
    val sums = ws.sums
    val counts = ws.counts
    java.util.Arrays.fill(sums, 0.0)
    java.util.Arrays.fill(counts, 0)
    var r = 0
    while (r < n) {
      val c = assign(r)
      counts(c) += 1
      val so = c * dim
      val ro = r * dim
      var d = 0
      while (d < dim) { sums(so + d) += data(ro + d); d += 1 }
      r += 1
    }
    var c = 0
    while (c < k) {
      if (counts(c) > 0) {
        val inv = 1.0 / counts(c)
        var d = 0
        while (d < dim) { centroids(c * dim + d) = (sums(c * dim + d) * inv).toFloat; d += 1 }
      }
      c += 1
    }
    c = 0
    while (c < k) {
      if (counts(c) == 0) {
        // split the largest cluster: its centroid and this one, nudged apart
        var big = 0
        var j = 1
        while (j < k) { if (counts(j) > counts(big)) big = j; j += 1 }
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
    val k = PqModel.Centroids
    val (ct, bias) = prepared
    val scores = KMeans.scratch(k + 1)
    var s = 0
    while (s < m) {
      val c = KMeans.nearestScored(ct, s * subDim, bias(s), k, subDim, -2.0f, v, offset + s * subDim, scores)
      out(outOffset + s) = c.toByte
      s += 1
    }
  }

  // each sub-space's codes transposed with their squared norms (built once, where used)
  @transient private lazy val prepared: (Array[Array[Float]], Array[Array[Float]]) = {
    val k = PqModel.Centroids
    val ct = Array.fill(m * subDim)(new Array[Float](k))
    val bias = Array.fill(m)(new Array[Float](k))
    var s = 0
    while (s < m) {
      KMeans.prepare(codebook, s * k * subDim, k, subDim, DistanceMetric.L2, ct, s * subDim, bias(s))
      s += 1
    }
    (ct, bias)
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
