package io.lancespark.format.v21.write

import java.nio.charset.StandardCharsets.UTF_8

import org.scalatest.funsuite.AnyFunSuite

/** Dictionaries of string pages: the distinct values found, and pages given
  * up on early when they foretell more distinct values than the limit.
  * Expected counts come from a hash set of the values (and the limit). */
final class StringDictionarySuite extends AnyFunSuite {
  private val N = 131072

  /** A page of the given values: their bytes one after another. */
  private def page(values: Seq[String]): (Array[Byte], Int => Int, Int => Int) = {
    val bytes = values.map(_.getBytes(UTF_8))
    val ends = bytes.scanLeft(0)(_ + _.length).toArray
    (bytes.flatten.toArray, i => ends(i), i => ends(i + 1))
  }

  private def build(values: Seq[String], limit: Int): Option[StringDictionary] = {
    val (data, start, end) = page(values)
    StringDictionary.build(data, start, end, values.size, limit)
  }

  private def uniform(vocabulary: Int, seed: Long): Seq[String] = {
    val rnd = new scala.util.Random(seed)
    Seq.fill(N)(s"value-${rnd.nextInt(vocabulary)}")
  }

  test("foretold distinct values of uniform draws are within 3% of the values' distinct count") {
    Seq(20000, 60000, 100000, 400000).foreach { v =>
      val values = uniform(v, v.toLong)
      val distinct = values.toSet.size
      Seq(N / 8, N / 4, N / 2).foreach { i =>
        val seen = values.take(i).toSet.size
        val f = StringDictionary.foretold(seen, i, N)
        assert(math.abs(f / distinct - 1) < 0.03, s"vocabulary $v, at $i: foretold $f, distinct $distinct")
      }
    }
    assert(StringDictionary.foretold(1000, 1000, N) == N.toDouble, "none repeated: all distinct")
  }

  test("a page of a vocabulary's values: its dictionary when within the limit, none when over it") {
    val within = uniform(30000, 1)
    val d = build(within, N / 2)
    assert(d.map(_.count).contains(within.toSet.size))
    // ~73,000 distinct of 131,072: over half (found at an eighth of the page now)
    val over = uniform(100000, 2)
    assert(over.toSet.size > N / 2)
    assert(build(over, N / 2).isEmpty)
    // given up at its first look, an eighth in: ~11% over the limit is past the margin
    val atEighth = StringDictionary.foretold(over.take(N / 8).toSet.size, N / 8, N)
    assert(atEighth > N / 2 * StringDictionary.Margin, s"foretold $atEighth")
  }

  test("a page of skewed frequencies just under the limit keeps its dictionary") {
    // Zipf-like: value k drawn with weight 1/k over a large vocabulary; its
    // early values repeat more than its late ones, so nothing is given up early
    val rnd = new scala.util.Random(3)
    val vocabulary = 2000000
    val h = (1 to vocabulary).scanLeft(0.0)(_ + 1.0 / _).toArray
    def draw(): Int = {
      val u = rnd.nextDouble() * h(vocabulary)
      val k = java.util.Arrays.binarySearch(h, u)
      if (k >= 0) k else -k - 1
    }
    val values = Seq.fill(N)(s"w${draw()}")
    val distinct = values.toSet.size
    val limit = math.ceil(distinct / 0.95).toInt   // 5% headroom
    assert(distinct > N / 4, s"a page of many distinct values ($distinct)")
    assert(build(values, limit).map(_.count).contains(distinct))
  }

  test("indices point each value at its item") {
    val values = uniform(500, 4).take(20000)
    val d = build(values, 10000).get
    val (data, start, end) = page(values)
    val items = d.items.map(v => new String(data, start(v), end(v) - start(v), UTF_8))
    assert(items.toSet == values.toSet && items.length == values.toSet.size)
    values.indices.foreach { i =>
      val id = (d.indices(4 * i) & 0xff) | ((d.indices(4 * i + 1) & 0xff) << 8) |
        ((d.indices(4 * i + 2) & 0xff) << 16) | ((d.indices(4 * i + 3) & 0xff) << 24)
      assert(items(id) == values(i), s"value $i")
    }
  }
}
