package io.lancespark.table.index.vector

import org.scalatest.funsuite.AnyFunSuite

/** Which rows a partition's top k keeps when distances tie, worked out by
  * hand from the reference's rule (a binary max-heap by distance alone:
  * push = append and move up while strictly farther than the parent;
  * replace = only when strictly nearer than the top, the top removed by
  * moving the last element to the root, down to a leaf (right child on
  * equal children), then up). */
class PartitionTopKSuite extends AnyFunSuite {
  private def kept(k: Int, rows: Seq[(Long, Float)]): Set[Long] = {
    val t = new PartitionTopK(k)
    rows.foreach { case (id, d) => t.offer(id, d) }
    t.result.map(_.rowAddress).toSet
  }

  test("a row tied with the top does not replace it; a nearer row removes the top the heap layout gives") {
    // k = 2: [1, 2] (2 does not move above its equal parent); 3 ties: ignored;
    // 4 nearer: the top removed = the last element (2) moved to the root, so row 1 leaves
    assert(kept(2, Seq(1L -> 1f, 2L -> 1f, 3L -> 1f, 4L -> 0.5f)) == Set(2L, 4L))
  }

  test("three tied rows and two nearer ones, k = 3") {
    // [1, 2, 3] all 1.0; 4 (0.5): pop -> last (3) to the root, moved to the bottom: children 2 (idx 1)
    // only (len 2: child 1 == end - 1), so 2 goes up, 3 sits at index 1 -> [2, 3]; push 4 -> [2, 3, 4].
    // 5 (0.2): pop -> last (4) to the root; children 3 (idx 1) only: 3 up, 4 at index 1, then 4 sifted up:
    // 0.5 <= 1.0 stays -> [3, 4]; push 5 -> [3, 4, 5]
    assert(kept(3, Seq(1L -> 1f, 2L -> 1f, 3L -> 1f, 4L -> 0.5f, 5L -> 0.2f)) == Set(3L, 4L, 5L))
  }

  test("without ties it is the k nearest") {
    val rows = (0 until 50).map(i => i.toLong -> ((i * 37) % 50).toFloat)
    assert(kept(7, rows) == rows.sortBy(_._2).take(7).map(_._1).toSet)
  }
}
