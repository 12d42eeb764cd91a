package io.lancespark.table.scan

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector

/** Copies chosen rows of a vector into a new one (closing the input). */
object VectorSelection {

  /** `offsets` are physical row offsets; `base` is the offset of `v`'s row 0. */
  def select(v: FieldVector, offsets: Array[Int], base: Int, allocator: BufferAllocator): FieldVector = {
    try {
      val out = v.getField.createVector(allocator)
      out.allocateNew()
      var i = 0
      while (i < offsets.length) {
        out.copyFromSafe(offsets(i) - base, i, v)
        i += 1
      }
      out.setValueCount(offsets.length)
      out
    } finally v.close()
  }
}
