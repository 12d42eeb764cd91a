package io.lancespark.table.index.vector

import scala.collection.mutable

/** The `k` nearest neighbours seen so far (a bounded max-heap). */
final class TopK(k: Int) {
  private val heap = mutable.PriorityQueue.empty[Neighbour](Neighbour.Nearest)

  /** The distance a candidate must beat once `k` are held. */
  def bound: Float = if (heap.size < k) Float.PositiveInfinity else heap.head.distance

  def offer(n: Neighbour): Unit =
    if (heap.size < k) heap.enqueue(n)
    else if (Neighbour.Nearest.lt(n, heap.head)) { heap.dequeue(); heap.enqueue(n) }

  def addAll(ns: Iterable[Neighbour]): Unit = ns.foreach(offer)

  /** Nearest first. */
  def result: Vector[Neighbour] = heap.toVector.sorted(Neighbour.Nearest)
}
