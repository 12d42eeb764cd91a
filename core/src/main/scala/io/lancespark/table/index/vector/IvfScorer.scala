package io.lancespark.table.index.vector

/** The distances an IVF index gives the rows of one partition, computed as
  * the reference computes them (so that the approximate ranking, ties and
  * returned `_distance` are pylance's):
  *  - the query is normalized first for a cosine index (its vectors were
  *    normalized when it was built);
  *  - FLAT: the index's metric over the stored vectors;
  *  - PQ: for l2 and cosine the residual (query - partition centroid) is
  *    compared, by a table of squared l2 distances per sub-vector and
  *    centroid, summed over the row's codes (cosine thus returns the l2
  *    distance of normalized vectors); for dot the query itself, by a table of
  *    1 - dot per sub-vector, summed, minus (sub-vectors - 1);
  *  - SQ, l2 and cosine: the query is scaled to 8-bit codes with the index's
  *    bounds, the squared l2 of the codes computed in integers and scaled
  *    back by (range / 255)^2; SQ, dot: the codes decoded back to values,
  *    1 - their dot with the query (what pylance 14 returns). */
final class IvfScorer(index: IvfIndex, query: Array[Float]) {
  private val dim = index.dim

  /** The query as the index compares it (normalized for cosine). */
  val key: Array[Float] =
    if (index.metric != DistanceMetric.Cosine) query
    else {
      val n = DistanceMetric.norm(query)
      if (n == 0) query else query.map(x => (x / n).toFloat)
    }

  private lazy val sqKey: Array[Int] = index.storage match {
    case sq: IvfStorage.Sq => key.map(v => IvfScorer.scaleToU8(v.toDouble, sq.lo, sq.hi))
    case _ => Array.emptyIntArray
  }

  /** Offers every row of partition `p` that `accept` keeps (by row id) to
    * `top`, in the partition's order (NaN distances left out). */
  def scan(p: Int, part: IvfPartition, accept: Long => Boolean, top: PartitionTopK): Unit = {
    val n = part.size
    index.storage match {
      case IvfStorage.Flat =>
        val qn = DistanceMetric.norm(key)
        var i = 0
        while (i < n) {
          val id = part.rowIds(i)
          if (accept(id)) offer(top, id, index.metric.distance(key, qn, part.vectors, i * dim, dim))
          i += 1
        }
      case pq: IvfStorage.Pq =>
        val table = pqTable(p, pq)
        val c = pq.centroids
        val w = part.codeWidth
        val codes = part.codes
        val shift = if (index.metric == DistanceMetric.Dot) (pq.subVectors - 1).toFloat else 0f
        var i = 0
        while (i < n) {
          val id = part.rowIds(i)
          if (accept(id)) {
            var s = 0.0f
            var j = 0
            if (pq.nbits == 8) {
              while (j < w) { s += table(j * c + (codes(i * w + j) & 0xff)); j += 1 }
            } else {
              while (j < w) {
                val b = codes(i * w + j) & 0xff
                s += table(2 * j * c + (b & 0x0f)) + table((2 * j + 1) * c + (b >> 4))
                j += 1
              }
            }
            offer(top, id, s - shift)
          }
          i += 1
        }
      case sq: IvfStorage.Sq if index.metric == DistanceMetric.Dot =>
        // dot: the codes decoded back to values (lo + code * range / 255), 1 - their dot with the query
        val step = ((sq.hi - sq.lo) / 255.0).toFloat
        val lo = sq.lo.toFloat
        val codes = part.codes
        var i = 0
        while (i < n) {
          val id = part.rowIds(i)
          if (accept(id)) {
            var s = 0.0f
            var j = 0
            val o = i * dim
            while (j < dim) { s += (lo + (codes(o + j) & 0xff) * step) * key(j); j += 1 }
            offer(top, id, 1.0f - s)
          }
          i += 1
        }
      case sq: IvfStorage.Sq =>
        // l2 (and cosine, over normalized vectors): the query scaled to codes too, squared
        // differences of codes summed in integers, scaled back by (range / 255)^2
        val range = (sq.hi - sq.lo).toFloat
        val scale = range * range
        val q = sqKey
        val codes = part.codes
        var i = 0
        while (i < n) {
          val id = part.rowIds(i)
          if (accept(id)) {
            var s = 0L
            var j = 0
            val o = i * dim
            while (j < dim) { val d = (codes(o + j) & 0xff) - q(j); s += d.toLong * d; j += 1 }
            offer(top, id, (s & 0xffffffffL).toFloat * scale / (255f * 255f))
          }
          i += 1
        }
    }
  }

  private def offer(top: PartitionTopK, id: Long, d: Float): Unit =
    if (!d.isNaN && d <= top.bound) top.offer(id, d)

  /** [subVector][centroid] distances of the (residual) query to the codebook. */
  private def pqTable(p: Int, pq: IvfStorage.Pq): Array[Float] = {
    val c = pq.centroids
    val sd = pq.subDim
    val dot = index.metric == DistanceMetric.Dot
    val q = if (dot) key else {
      val cen = index.centroid(p)
      Array.tabulate(dim)(i => key(i) - cen(i))
    }
    val cb = pq.codebook
    val table = new Array[Float](pq.subVectors * c)
    var s = 0
    while (s < pq.subVectors) {
      var k = 0
      while (k < c) {
        val base = (s * c + k) * sd
        table(s * c + k) =
          if (dot) 1.0f - DistanceMetric.dot(q, s * sd, cb, base, sd)
          else DistanceMetric.l2(q, s * sd, cb, base, sd)
        k += 1
      }
      s += 1
    }
    table
  }
}

object IvfScorer {
  /** A value scaled from [lo, hi] to 0..255, truncated and saturated (NaN: 0). */
  def scaleToU8(v: Double, lo: Double, hi: Double): Int =
    if (lo == hi) 0
    else {
      val x = (v - lo) * 255.0 / (hi - lo)
      if (x.isNaN || x <= 0) 0 else if (x >= 255) 255 else x.toInt
    }
}
