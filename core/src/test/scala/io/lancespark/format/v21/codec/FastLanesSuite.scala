package io.lancespark.format.v21.codec

import java.nio.{ByteBuffer, ByteOrder}

import org.scalatest.funsuite.AnyFunSuite

/** FastLanes groups unpacked to ints (dictionary indices, levels) give back the
  * values packed, at every width of 8-, 16- and 32-bit values, whole groups and
  * a group's first values, wherever in a buffer and in the output they are.
  * (The packing itself is checked against the reference by pylance reading our
  * files, the unpacking by reading pylance's.) */
class FastLanesSuite extends AnyFunSuite {

  /** A group of random `w`-bit values (the largest of the width at one
    * place: the top bits are kept), packed at byte `at` of the bytes. */
  private def packed(rng: scala.util.Random, t: Int, w: Int, at: Int, s: FastLanes.Scratch): (Array[Long], Array[Byte]) = {
    val values = Array.fill[Long](FastLanes.GroupSize) {
      if (w == 0) 0L else if (w == 64) rng.nextLong() else rng.nextLong() & ((1L << w) - 1)
    }
    if (w > 0) values(rng.nextInt(FastLanes.GroupSize)) = if (w == 64) -1L else (1L << w) - 1
    val bytes = new Array[Byte](at + FastLanes.packedBytes(w) + 8)
    FastLanes.pack(values, t, w, bytes, at, s)
    (values, bytes)
  }

  test("unpackInts returns what was packed: every width, whole and partial groups, at offsets") {
    val rng = new scala.util.Random(5)
    val s = new FastLanes.Scratch
    for (t <- Seq(8, 16, 32); w <- 0 to t) {
      val at = 3
      val (values, bytes) = packed(rng, t, w, at, s)
      val src = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)
      for (take <- Seq(FastLanes.GroupSize, 1000, 300, 128, 1); big <- Seq(false, true)) {
        val into = 7
        val dst = Array.fill(into + take + 2)(-9)
        val buf = if (big) src.duplicate().order(ByteOrder.BIG_ENDIAN) else src
        FastLanes.unpackInts(buf, at, t, w, take, dst, into, s)
        val want = values.take(take).map(_.toInt)
        assert(dst.slice(into, into + take).sameElements(want), s"t $t, w $w, take $take, big-endian view $big")
        assert(dst.take(into).forall(_ == -9) && dst.drop(into + take).forall(_ == -9), s"t $t, w $w: wrote outside")
      }
    }
  }

  test("valueAt reads single values without unpacking: every value type and width, either byte order") {
    val rng = new scala.util.Random(9)
    val s = new FastLanes.Scratch
    for (t <- Seq(8, 16, 32, 64); w <- 0 to t) {
      val at = 5
      val (values, bytes) = packed(rng, t, w, at, s)
      for (big <- Seq(false, true)) {
        val src = ByteBuffer.wrap(bytes).order(if (big) ByteOrder.BIG_ENDIAN else ByteOrder.LITTLE_ENDIAN)
        (0 until FastLanes.GroupSize).foreach { p =>
          assert(FastLanes.valueAt(src, at, t, w, p) == values(p), s"t $t, w $w, position $p")
        }
      }
    }
  }
  test("orValue into zeroed words places values where pack puts them: every value type and width, sparse and dense") {
    val rng = new scala.util.Random(13)
    val s = new FastLanes.Scratch
    for (t <- Seq(8, 16, 32, 64); w <- 1 to t; nonZero <- Seq(1, 3, 64, FastLanes.GroupSize)) {
      val values = new Array[Long](FastLanes.GroupSize)
      (0 until nonZero).foreach { _ =>
        values(rng.nextInt(FastLanes.GroupSize)) = if (w == 64) rng.nextLong() | 1L else (rng.nextLong() & ((1L << w) - 1)) | 1L
      }
      val at = 3
      val want = new Array[Byte](at + FastLanes.packedBytes(w) + 4)
      FastLanes.pack(values, t, w, want, at, s)
      val got = new Array[Byte](want.length)
      values.indices.foreach(p => if (values(p) != 0) FastLanes.orValue(got, at, t, w, p, values(p)))
      assert(got.sameElements(want), s"t $t, w $w, $nonZero non-zero values")
    }
  }

  test("levels with few non-zero values (long lists) encode as when every value is packed") {
    val rng = new scala.util.Random(21)
    for (w <- 1 to 16; ones <- Seq(0, 1, 3, 64, 65, 300)) {
      val n = 1024 * 3 + 700
      val levels = new Array[Int](n + 10)
      (0 until ones * 4).foreach(_ => levels(5 + rng.nextInt(n)) = 1 + rng.nextInt((1 << w) - 1 max 1))
      val sparse = new io.lancespark.format.file.ByteBuilder(16)
      OutOfLineBitpackingCodec.encodeLevels(levels, 5, n, w, sparse)
      // every group packed value by value, as encodeLevels does for dense groups
      val dense = new io.lancespark.format.file.ByteBuilder(16)
      val s = new FastLanes.Scratch
      val groups = n / 1024 + (if (FastLanes.packedBytes(w) < 2 * (n % 1024)) 1 else 0)
      (0 until groups).foreach { g =>
        val group = Array.tabulate[Long](1024)(i => if (g * 1024 + i < n) levels(5 + g * 1024 + i).toLong else 0L)
        val out = new Array[Byte](FastLanes.packedBytes(w))
        FastLanes.pack(group, 16, w, out, 0, s)
        dense.put(out, 0, out.length)
      }
      if (groups * 1024 < n) (groups * 1024 until n).foreach(i => dense.putShort(levels(5 + i)))
      assert(sparse.toArray.sameElements(dense.toArray), s"w $w, ${ones * 4} ones")
    }
  }
}
