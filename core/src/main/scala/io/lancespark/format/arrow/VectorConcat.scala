package io.lancespark.format.arrow

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector

import io.lancespark.schema.LanceField

/** The vectors of several reads of the same fields as one vector per field,
  * their rows one after the other (row by row copies: for readers without a
  * read of several ranges of their own). */
object VectorConcat {

  /** Runs each of `reads` in turn, copying its vectors' rows into one vector
    * per field; every vector is closed, the result's too when a read fails. */
  def concat(fields: Seq[LanceField], reads: Vector[() => Seq[FieldVector]], allocator: BufferAllocator): Seq[FieldVector] = {
    val out: Vector[FieldVector] = fields.map(_.toArrow.createVector(allocator)).toVector
    try {
      out.foreach(_.allocateNew())
      var at = 0
      reads.foreach { read =>
        val part = read()
        try {
          if (part.size != out.size) throw new IllegalStateException(s"a read returned ${part.size} vectors for ${out.size} fields")
          val n = if (part.isEmpty) 0 else part.head.getValueCount
          out.zip(part).foreach { case (o, p) =>
            var i = 0
            while (i < n) { o.copyFromSafe(i, at + i, p); i += 1 }
          }
          at += n
        } finally part.foreach(_.close())
      }
      out.foreach(_.setValueCount(at))
      out
    } catch {
      case e: Throwable => out.foreach(_.close()); throw e
    }
  }
}
