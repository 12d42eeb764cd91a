package io.lancespark.table.index.vector

import io.lancespark.table.filter.Filter

/** One nearest-neighbour query over a fixed-size-list column of floats: the
  * `k` rows whose vectors are nearest to `vector` by `metric`.
  *
  * `filter` with `prefilter` true: only rows it keeps are searched (always k
  * rows when that many match); with `prefilter` false: the top k are found
  * first, then the filter drops some of them (pylance's semantics: possibly
  * fewer than k rows). `nprobes`/`refineFactor` tune an index search;
  * `useIndex` false asks for the exact (brute force) search. */
final case class VectorQuery(
    column: String,
    vector: Array[Float],
    k: Int,
    metric: DistanceMetric = DistanceMetric.L2,
    nprobes: Option[Int] = None,
    refineFactor: Option[Int] = None,
    useIndex: Boolean = true,
    filter: Option[Filter] = None,
    prefilter: Boolean = true) {
  require(k > 0, s"nearest-neighbour search: k must be positive, got $k")
  require(vector.nonEmpty, "nearest-neighbour search: the query vector is empty")
  require(nprobes.forall(_ > 0), s"nearest-neighbour search: nprobes must be positive, got ${nprobes.getOrElse(0)}")
  require(refineFactor.forall(_ > 0),
    s"nearest-neighbour search: refine_factor must be positive, got ${refineFactor.getOrElse(0)}")

  override def equals(o: Any): Boolean = o match {
    case q: VectorQuery => q.column == column && java.util.Arrays.equals(q.vector, vector) && q.k == k &&
      q.metric == metric && q.nprobes == nprobes && q.refineFactor == refineFactor && q.useIndex == useIndex &&
      q.filter == filter && q.prefilter == prefilter
    case _ => false
  }

  override def hashCode: Int = (column, java.util.Arrays.hashCode(vector), k, metric, nprobes, refineFactor,
    useIndex, filter, prefilter).hashCode()
}

/** One result row: its fragment, its physical offset there, its distance. */
final case class Neighbour(fragmentId: Long, offset: Int, distance: Float) {
  def rowAddress: Long = (fragmentId << 32) | offset.toLong
}

object Neighbour {
  /** Nearest first; ties by row address (deterministic). */
  val Nearest: Ordering[Neighbour] = new Ordering[Neighbour] {
    def compare(a: Neighbour, b: Neighbour): Int = {
      val c = java.lang.Float.compare(a.distance, b.distance)
      if (c != 0) c else java.lang.Long.compare(a.rowAddress, b.rowAddress)
    }
  }
}
