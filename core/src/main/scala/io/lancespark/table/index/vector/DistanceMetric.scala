package io.lancespark.table.index.vector

import java.util.Locale

/** A vector distance as Lance defines it (pylance's `_distance`): `l2` is the
  * SQUARED Euclidean distance, `cosine` is 1 - cos(angle), `dot` is 1 minus
  * the dot product (smaller is nearer for all three). */
sealed abstract class DistanceMetric(val name: String) extends Serializable {
  /** The distance of `query` to the `dim` values of `data` from `offset`. */
  def distance(query: Array[Float], queryNorm: Double, data: Array[Float], offset: Int, dim: Int): Float
}

object DistanceMetric {
  case object L2 extends DistanceMetric("l2") {
    def distance(q: Array[Float], qn: Double, d: Array[Float], o: Int, dim: Int): Float = l2(q, 0, d, o, dim)
  }
  case object Cosine extends DistanceMetric("cosine") {
    def distance(q: Array[Float], qn: Double, d: Array[Float], o: Int, dim: Int): Float = {
      var dot = 0.0f
      var nn = 0.0f
      var i = 0
      while (i < dim) { val x = d(o + i); dot += x * q(i); nn += x * x; i += 1 }
      (1.0 - dot / (math.sqrt(nn.toDouble) * qn)).toFloat
    }
  }
  case object Dot extends DistanceMetric("dot") {
    def distance(q: Array[Float], qn: Double, d: Array[Float], o: Int, dim: Int): Float = 1.0f - dot(q, 0, d, o, dim)
  }

  /** Lanes of the reference's float32 kernels. */
  private val Lanes: Int = 16

  /** The dot product of `n` values of `a` (from `ao`) and `b` (from `bo`),
    * rounded as pylance 14's float32 kernels round it (so that distances are
    * pylance's to the bit, and ties and near-ties rank as there). Pylance's
    * x86 wheels (an AVX2 + FMA baseline) compute every batch of distances
    * (flat search, refine, centroids, PQ tables) with two kernels:
    *  - up to 16 values: [[NarrowKernels]] (8 fused multiply-add lanes);
    *  - more: 16 lane sums over the whole 16-value chunks (lane i: products
    *    i, i + 16, ... in order), the lanes then added in order, and to that
    *    the tail (the values after the last whole chunk) summed in order. */
  def dot(a: Array[Float], ao: Int, b: Array[Float], bo: Int, n: Int): Float =
    if (n <= NarrowKernels.MaxValues) NarrowKernels.dot(a, ao, b, bo, n) else dotWide(a, ao, b, bo, n)

  private def dotWide(a: Array[Float], ao: Int, b: Array[Float], bo: Int, n: Int): Float = {
    val whole = n / Lanes * Lanes
    var tail = 0.0f
    var i = whole
    while (i < n) { tail += a(ao + i) * b(bo + i); i += 1 }
    if (whole == 0) tail
    else {
      var s0 = 0.0f
      var s1 = 0.0f
      var s2 = 0.0f
      var s3 = 0.0f
      var s4 = 0.0f
      var s5 = 0.0f
      var s6 = 0.0f
      var s7 = 0.0f
      var s8 = 0.0f
      var s9 = 0.0f
      var s10 = 0.0f
      var s11 = 0.0f
      var s12 = 0.0f
      var s13 = 0.0f
      var s14 = 0.0f
      var s15 = 0.0f
      var j = 0
      while (j < whole) {
        val x = ao + j
        val y = bo + j
        s0 += a(x + 0) * b(y + 0)
        s1 += a(x + 1) * b(y + 1)
        s2 += a(x + 2) * b(y + 2)
        s3 += a(x + 3) * b(y + 3)
        s4 += a(x + 4) * b(y + 4)
        s5 += a(x + 5) * b(y + 5)
        s6 += a(x + 6) * b(y + 6)
        s7 += a(x + 7) * b(y + 7)
        s8 += a(x + 8) * b(y + 8)
        s9 += a(x + 9) * b(y + 9)
        s10 += a(x + 10) * b(y + 10)
        s11 += a(x + 11) * b(y + 11)
        s12 += a(x + 12) * b(y + 12)
        s13 += a(x + 13) * b(y + 13)
        s14 += a(x + 14) * b(y + 14)
        s15 += a(x + 15) * b(y + 15)
        j += Lanes
      }
      tail + (s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9 + s10 + s11 + s12 + s13 + s14 + s15)
    }
  }

  /** The squared l2 distance of `n` values of `a` and `b`, rounded as
    * pylance's float32 kernels (the kernels and lane order of [[dot]]). */
  def l2(a: Array[Float], ao: Int, b: Array[Float], bo: Int, n: Int): Float =
    if (n <= NarrowKernels.MaxValues) NarrowKernels.l2(a, ao, b, bo, n) else l2Wide(a, ao, b, bo, n)

  private def l2Wide(a: Array[Float], ao: Int, b: Array[Float], bo: Int, n: Int): Float = {
    val whole = n / Lanes * Lanes
    var tail = 0.0f
    var i = whole
    while (i < n) { val d = a(ao + i) - b(bo + i); tail += d * d; i += 1 }
    if (whole == 0) tail
    else {
      var s0 = 0.0f
      var s1 = 0.0f
      var s2 = 0.0f
      var s3 = 0.0f
      var s4 = 0.0f
      var s5 = 0.0f
      var s6 = 0.0f
      var s7 = 0.0f
      var s8 = 0.0f
      var s9 = 0.0f
      var s10 = 0.0f
      var s11 = 0.0f
      var s12 = 0.0f
      var s13 = 0.0f
      var s14 = 0.0f
      var s15 = 0.0f
      var j = 0
      while (j < whole) {
        val x = ao + j
        val y = bo + j
        val d0 = a(x + 0) - b(y + 0); s0 += d0 * d0
        val d1 = a(x + 1) - b(y + 1); s1 += d1 * d1
        val d2 = a(x + 2) - b(y + 2); s2 += d2 * d2
        val d3 = a(x + 3) - b(y + 3); s3 += d3 * d3
        val d4 = a(x + 4) - b(y + 4); s4 += d4 * d4
        val d5 = a(x + 5) - b(y + 5); s5 += d5 * d5
        val d6 = a(x + 6) - b(y + 6); s6 += d6 * d6
        val d7 = a(x + 7) - b(y + 7); s7 += d7 * d7
        val d8 = a(x + 8) - b(y + 8); s8 += d8 * d8
        val d9 = a(x + 9) - b(y + 9); s9 += d9 * d9
        val d10 = a(x + 10) - b(y + 10); s10 += d10 * d10
        val d11 = a(x + 11) - b(y + 11); s11 += d11 * d11
        val d12 = a(x + 12) - b(y + 12); s12 += d12 * d12
        val d13 = a(x + 13) - b(y + 13); s13 += d13 * d13
        val d14 = a(x + 14) - b(y + 14); s14 += d14 * d14
        val d15 = a(x + 15) - b(y + 15); s15 += d15 * d15
        j += Lanes
      }
      tail + (s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9 + s10 + s11 + s12 + s13 + s14 + s15)
    }
  }

  val All: Seq[DistanceMetric] = Seq(L2, Cosine, Dot)

  /** By name (case-insensitive); `euclidean` is l2 as in pylance. */
  def parse(name: String): Option[DistanceMetric] = name.trim.toLowerCase(Locale.ROOT) match {
    case "l2" | "euclidean" => Some(L2)
    case "cosine" => Some(Cosine)
    case "dot" => Some(Dot)
    case _ => None
  }

  def norm(v: Array[Float]): Double = math.sqrt(v.foldLeft(0.0)((s, x) => s + x.toDouble * x))
}
