package io.lancespark.table.index.vector

/** The best `k` rows of one IVF partition, kept exactly as the reference's
  * flat sub-index search keeps them, so that rows tied at the k-th place are
  * the ones pylance keeps (PQ and SQ codes make exact ties common: rows with
  * the same codes have the same distance):
  *  - a max-heap ordered by distance alone (a total order over floats), in
  *    an array laid out as a binary heap;
  *  - rows are offered in the partition's storage order; while fewer than
  *    `k` are held a row is pushed, afterwards a row replaces the top only
  *    when strictly nearer (the top removed first, then the row pushed);
  *  - push: the row appended and moved up while strictly farther than its
  *    parent; removing the top: the last element put at the root, moved down
  *    to a leaf (to the right child when the children are equal, the left
  *    child when it is the only one), then up while strictly farther than its
  *    parent.
  * Which of several rows tied at the top leaves the heap follows from that
  * layout, as in the reference. The rows kept are then ranked over all
  * partitions by (distance, row address). */
final class PartitionTopK(k: Int) {
  require(k >= 1, s"top k with k = $k")
  private val dist = new Array[Float](k)
  private val ids = new Array[Long](k)
  private var size = 0

  /** The distance a row must beat (strictly) once `k` rows are held. */
  def bound: Float = if (size < k) Float.PositiveInfinity else dist(0)

  def offer(id: Long, d: Float): Unit =
    if (size < k) push(id, d)
    else if (java.lang.Float.compare(dist(0), d) > 0) { popTop(); push(id, d) }

  private def push(id: Long, d: Float): Unit = {
    dist(size) = d
    ids(size) = id
    size += 1
    siftUp(0, size - 1)
  }

  /** Moves the element at `pos` up while it is strictly farther than its parent. */
  private def siftUp(start: Int, pos0: Int): Unit = {
    val d = dist(pos0)
    val id = ids(pos0)
    var pos = pos0
    var moving = true
    while (moving && pos > start) {
      val parent = (pos - 1) / 2
      if (java.lang.Float.compare(d, dist(parent)) <= 0) moving = false
      else {
        dist(pos) = dist(parent); ids(pos) = ids(parent)
        pos = parent
      }
    }
    dist(pos) = d
    ids(pos) = id
  }

  /** Removes the top: the last element taken out, put at the root and sifted to the bottom, then up. */
  private def popTop(): Unit = {
    size -= 1
    if (size > 0) {
      val d = dist(size)
      val id = ids(size)
      val end = size
      var pos = 0
      var child = 1
      while (child <= end - 2) {
        if (java.lang.Float.compare(dist(child), dist(child + 1)) <= 0) child += 1
        dist(pos) = dist(child); ids(pos) = ids(child)
        pos = child
        child = 2 * pos + 1
      }
      if (child == end - 1) {
        dist(pos) = dist(child); ids(pos) = ids(child)
        pos = child
      }
      dist(pos) = d
      ids(pos) = id
      siftUp(0, pos)
    }
  }

  /** The rows held, as neighbours (in no particular order). */
  def result: Vector[Neighbour] =
    (0 until size).map(i => Neighbour(ids(i) >>> 32, (ids(i) & 0xffffffffL).toInt, dist(i))).toVector
}
