package io.lancespark.format.input

import java.nio.ByteBuffer

import io.lancespark.format.arrow.{Bits, Slice}
import io.lancespark.format.arrow.Block.VarBlock

/** The bytes of a batch of blob values, gathered from where each value lives
  * (this data file, a blob file, an external object) straight into the
  * batch's one data buffer: shared by the 2.0 and 2.1/2.2 blob readers. */
object BlobBytes {

  /** Row `r`'s value is `lengths(r)` bytes at `positions(r)` of `sources(r)`
    * (no source where the length is 0); `valid` marks the non-null rows.
    * `fail` reports a problem with the file's name. */
  def gather(field: String, sources: Int => RandomAccessSource, positions: Array[Long], lengths: Array[Long],
             valid: Bits, fail: String => Nothing): Slice = {
    val n = lengths.length
    val offsets = new Array[Long](n + 1)
    var r = 0
    while (r < n) { offsets(r + 1) = offsets(r) + lengths(r); r += 1 }
    if (offsets(n) > Int.MaxValue - 16)
      fail(s"blob field '$field': ${offsets(n)} bytes of blob values in one batch of $n rows " +
        "(more than a Java array holds; read fewer rows per batch)")
    val bytes = ByteBuffer.allocate(offsets(n).toInt)
    r = 0
    while (r < n) {
      if (lengths(r) > 0) {
        val dst = bytes.duplicate()
        dst.position(offsets(r).toInt).limit(offsets(r + 1).toInt)
        sources(r).readInto(positions(r), dst.slice())
      }
      r += 1
    }
    Slice(VarBlock(n.toLong, offsets, bytes, Some(valid)), 0, n.toLong)
  }
}
