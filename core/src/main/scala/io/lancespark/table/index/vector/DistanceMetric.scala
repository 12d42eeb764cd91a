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
    def distance(q: Array[Float], qn: Double, d: Array[Float], o: Int, dim: Int): Float = {
      var s = 0.0f
      var i = 0
      while (i < dim) { val x = d(o + i) - q(i); s += x * x; i += 1 }
      s
    }
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
    def distance(q: Array[Float], qn: Double, d: Array[Float], o: Int, dim: Int): Float = {
      var dot = 0.0f
      var i = 0
      while (i < dim) { dot += d(o + i) * q(i); i += 1 }
      1.0f - dot
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
