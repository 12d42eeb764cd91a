package io.lancespark.table.scan

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector

/** Copies chosen rows of a vector into a new one (closing the input). */
object VectorSelection {

  /** `rows` are positions in `v`. */
  def select(v: FieldVector, rows: Array[Int], allocator: BufferAllocator): FieldVector = {
    try {
      val out = v.getField.createVector(allocator)
      out.allocateNew()
      var i = 0
      while (i < rows.length) {
        out.copyFromSafe(rows(i), i, v)
        i += 1
      }
      out.setValueCount(rows.length)
      out
    } finally v.close()
  }
}
