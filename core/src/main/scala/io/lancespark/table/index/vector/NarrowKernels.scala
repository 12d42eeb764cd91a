package io.lancespark.table.index.vector

/** Pylance 14's float32 kernels for vectors of at most 16 values (PQ
  * sub-vectors, small embeddings), rounded as they round: 8 lanes, each
  * accumulating the whole 8-value chunks with a fused multiply-add (one
  * rounding per step); the lanes reduced as an AVX horizontal sum,
  * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)); to that the tail
  * (values after the last whole chunk: their rounded products summed in
  * order). Fewer than 8 values: the tail alone. */
private[vector] object NarrowKernels {
  val MaxValues: Int = 16

  def dot(a: Array[Float], ao: Int, b: Array[Float], bo: Int, n: Int): Float = {
    val whole = n / 8 * 8
    var tail = 0.0f
    var i = whole
    while (i < n) { tail += a(ao + i) * b(bo + i); i += 1 }
    if (whole == 0) tail
    else {
      var l0, l1, l2, l3, l4, l5, l6, l7 = 0.0f
      var j = 0
      while (j < whole) {
        val x = ao + j
        val y = bo + j
        l0 = Math.fma(a(x), b(y), l0)
        l1 = Math.fma(a(x + 1), b(y + 1), l1)
        l2 = Math.fma(a(x + 2), b(y + 2), l2)
        l3 = Math.fma(a(x + 3), b(y + 3), l3)
        l4 = Math.fma(a(x + 4), b(y + 4), l4)
        l5 = Math.fma(a(x + 5), b(y + 5), l5)
        l6 = Math.fma(a(x + 6), b(y + 6), l6)
        l7 = Math.fma(a(x + 7), b(y + 7), l7)
        j += 8
      }
      hsum(l0, l1, l2, l3, l4, l5, l6, l7) + tail
    }
  }

  def l2(a: Array[Float], ao: Int, b: Array[Float], bo: Int, n: Int): Float = {
    val whole = n / 8 * 8
    var tail = 0.0f
    var i = whole
    while (i < n) { val d = a(ao + i) - b(bo + i); tail += d * d; i += 1 }
    if (whole == 0) tail
    else {
      var l0, l1, l2, l3, l4, l5, l6, l7 = 0.0f
      var j = 0
      while (j < whole) {
        val x = ao + j
        val y = bo + j
        val d0 = a(x) - b(y); l0 = Math.fma(d0, d0, l0)
        val d1 = a(x + 1) - b(y + 1); l1 = Math.fma(d1, d1, l1)
        val d2 = a(x + 2) - b(y + 2); l2 = Math.fma(d2, d2, l2)
        val d3 = a(x + 3) - b(y + 3); l3 = Math.fma(d3, d3, l3)
        val d4 = a(x + 4) - b(y + 4); l4 = Math.fma(d4, d4, l4)
        val d5 = a(x + 5) - b(y + 5); l5 = Math.fma(d5, d5, l5)
        val d6 = a(x + 6) - b(y + 6); l6 = Math.fma(d6, d6, l6)
        val d7 = a(x + 7) - b(y + 7); l7 = Math.fma(d7, d7, l7)
        j += 8
      }
      hsum(l0, l1, l2, l3, l4, l5, l6, l7) + tail
    }
  }

  /** The AVX horizontal sum of 8 lanes: high half onto low, then pairwise. */
  private def hsum(l0: Float, l1: Float, l2: Float, l3: Float, l4: Float, l5: Float, l6: Float, l7: Float): Float =
    ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
}
