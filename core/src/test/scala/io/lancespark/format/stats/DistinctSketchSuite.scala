package io.lancespark.format.stats

import java.nio.charset.StandardCharsets

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.format.stats.StatsValues.{FloatKind, IntKind, VarKind}

/** The distinct-value sketch against exact counts computed here. */
final class DistinctSketchSuite extends AnyFunSuite {

  private def sketchOfLongs(xs: Iterator[Long]): DistinctSketch = {
    val s = DistinctSketch.empty()
    xs.foreach(x => s.add(DistinctSketch.hashLong(x)))
    s
  }

  /** Within `k` standard errors (1.04 / sqrt(2^11) = 2.3%) of `exact`. */
  private def near(estimate: Long, exact: Long, k: Double = 3.0): Boolean =
    math.abs(estimate - exact) <= math.max(1.0, k * 0.023 * exact)

  test("estimates of 0 to 2 million distinct values (repeated and not) are within 3 standard errors") {
    assert(DistinctSketch.empty().estimate == 0)
    Seq(1, 7, 100, 1000, 5000, 20000, 300000, 2000000).foreach { n =>
      val est = sketchOfLongs(Iterator.range(0, n).map(_.toLong * 7919L)).estimate
      assert(near(est, n), s"$n distinct: estimated $est")
      // each value three times, in another order: the same estimate
      val rep = sketchOfLongs(Iterator.range(0, 3 * n).map(i => ((i * 31L) % n) * 7919L)).estimate
      assert(rep == est, s"$n distinct repeated: $rep vs $est")
    }
  }

  test("merging is the sketch of the union: disjoint, overlapping and identical sets") {
    val a = sketchOfLongs(Iterator.range(0, 50000).map(_.toLong))
    val b = sketchOfLongs(Iterator.range(50000, 120000).map(_.toLong))
    val c = sketchOfLongs(Iterator.range(30000, 80000).map(_.toLong))
    assert(near(a.merge(b).estimate, 120000))
    assert(near(a.merge(c).estimate, 80000))
    assert(a.merge(a).estimate == a.estimate)
    assert(a.merge(b).toBytes.sameElements(sketchOfLongs(Iterator.range(0, 120000).map(_.toLong)).toBytes))
    assertThrows[IllegalArgumentException](a.merge(DistinctSketch.empty(12)))
  }

  test("bytes round-trip; bad bytes are refused with the reason") {
    val a = sketchOfLongs(Iterator.range(0, 4000).map(_.toLong))
    val back = DistinctSketch.fromBytes(a.toBytes).toOption.get
    assert(back.estimate == a.estimate && back.precision == DistinctSketch.Precision)
    assert(DistinctSketch.fromBytes(Array.emptyByteArray).isLeft)
    assert(DistinctSketch.fromBytes(Array[Byte](11, 0, 0)).left.toOption.get.contains("precision 11"))
    assert(DistinctSketch.fromBytes(Array[Byte](30)).left.toOption.get.contains("not in [4, 16]"))
    val bad = a.toBytes.clone(); bad(5) = 100
    assert(DistinctSketch.fromBytes(bad).left.toOption.get.contains("out of range"))
  }

  private final class Fixed(vals: Array[Byte], valid: Int => Boolean, n: Int) extends PageValues {
    def rows: Int = n
    def nullCount: Long = (0 until n).count(i => !valid(i)).toLong
    def isValid(i: Int): Boolean = valid(i)
    def values: Array[Byte] = vals
    def end(i: Int): Long = throw new UnsupportedOperationException
  }

  test("page values: nulls are not counted; -0.0 and 0.0 and every NaN count once; strings by their bytes") {
    val n = 10000
    val ints = new Array[Byte](4 * n)
    (0 until n).foreach(i => java.nio.ByteBuffer.wrap(ints, 4 * i, 4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(i % 700))
    val s = DistinctSketch.empty()
    // every third row null: the values of the other rows are still 700 distinct
    StatsCollector.addTo(s, IntKind(4, signed = true), new Fixed(ints, i => i % 3 != 0, n), 0, n)
    assert(near(s.estimate, 700))

    val doubles = Seq(0.0, -0.0, Double.NaN, java.lang.Double.longBitsToDouble(0x7ff8000000000123L), 1.5, 1.5, -2.0)
    val bytes = new Array[Byte](8 * doubles.size)
    doubles.zipWithIndex.foreach { case (d, i) =>
      java.nio.ByteBuffer.wrap(bytes, 8 * i, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(java.lang.Double.doubleToRawLongBits(d))
    }
    val f = DistinctSketch.empty()
    StatsCollector.addTo(f, FloatKind(8), new Fixed(bytes, _ => true, doubles.size), 0, doubles.size)
    assert(f.estimate == 4) // 0.0, NaN, 1.5, -2.0

    val words = (0 until 3000).map(i => s"w${i % 250}-" + "x" * (i % 250 % 13))
    val data = words.mkString.getBytes(StandardCharsets.UTF_8)
    val ends = words.scanLeft(0L)(_ + _.getBytes(StandardCharsets.UTF_8).length).tail.toArray
    val v = DistinctSketch.empty()
    StatsCollector.addTo(v, VarKind(utf8 = true), new PageValues {
      def rows: Int = words.size
      def nullCount: Long = 0
      def isValid(i: Int): Boolean = true
      def values: Array[Byte] = data
      def end(i: Int): Long = ends(i)
    }, 0, words.size)
    assert(near(v.estimate, 250))
  }

  test("the hashes are the documented functions (part of the file format)") {
    // from the definitions: fmix64(0) = 0; lengths and offsets count
    assert(DistinctSketch.hashLong(0L) == 0L)
    assert(DistinctSketch.hashLong(1L) != DistinctSketch.hashLong(2L))
    assert(DistinctSketch.hashBytes("ab".getBytes, 0, 2) != DistinctSketch.hashBytes("ab\u0000".getBytes, 0, 3))
    assert(DistinctSketch.hashBytes("xaby".getBytes, 1, 3) == DistinctSketch.hashBytes("ab".getBytes, 0, 2))
  }
}
