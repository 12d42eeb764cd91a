package io.lancespark.format.stats

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.format.stats.StatsValues.VarKind

/** Bounds of variable-width pages against a sort of the same values
  * (unsigned byte-wise order, computed here from first principles). */
final class StatsCollectorSuite extends AnyFunSuite {

  private final class Page(given: Seq[Option[Array[Byte]]]) extends PageValues {
    private val present = given.map(_.getOrElse(Array.emptyByteArray))
    private val ends = present.scanLeft(0L)(_ + _.length).tail.toArray
    def rows: Int = given.size
    def nullCount: Long = given.count(_.isEmpty).toLong
    def isValid(i: Int): Boolean = given(i).isDefined
    val values: Array[Byte] = present.flatten.toArray
    def end(i: Int): Long = ends(i)
  }

  private def unsignedOrder(a: Array[Byte], b: Array[Byte]): Int = {
    val k = a.indices.intersect(b.indices).find(i => a(i) != b(i))
    k.map(i => (a(i) & 0xff) - (b(i) & 0xff)).getOrElse(a.length - b.length)
  }

  test("binary bounds equal the sorted extremes: shared 8-byte prefixes, zero bytes, high bytes, empties, nulls") {
    val rnd = new scala.util.Random(11)
    val alphabet = Array[Byte](0, 1, 'a', 'b', 0x7f, 0x80.toByte, 0xff.toByte)
    (0 until 300).foreach { round =>
      val prefix = Array.fill(rnd.nextInt(12))(alphabet(rnd.nextInt(alphabet.length)))
      val values = Seq.fill(1 + rnd.nextInt(40)) {
        if (rnd.nextInt(10) == 0) None
        else Some(prefix.take(rnd.nextInt(prefix.length + 1)) ++ Array.fill(rnd.nextInt(4))(alphabet(rnd.nextInt(alphabet.length))))
      }
      val (nulls, min, max) = StatsCollector.collect(VarKind(utf8 = false), new Page(values))
      val present = values.flatten.sortWith(unsignedOrder(_, _) < 0)
      assert(nulls == values.count(_.isEmpty), s"round $round")
      if (present.isEmpty) assert(min == null && max == null)
      else {
        // bounds are truncated to at most MaxBoundBytes: compare within that
        val cut = PageStatistics.MaxBoundBytes
        assert(min.toSeq == present.head.take(cut).toSeq, s"round $round min")
        assert(unsignedOrder(max, present.last.take(cut)) >= 0, s"round $round max")
        if (present.last.length <= cut) assert(max.toSeq == present.last.toSeq, s"round $round max")
      }
    }
  }
}
