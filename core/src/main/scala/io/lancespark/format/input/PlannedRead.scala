package io.lancespark.format.input

import java.nio.ByteBuffer

/** `length` bytes of a file at `position`. */
final case class ByteRange(position: Long, length: Long) {
  def end: Long = position + length
}

/** A read a batch needs, known before any of its bytes are read, and the reads
  * its bytes lead to (the value bytes a string page's offsets point at). */
final case class PlannedRead(range: ByteRange, andThen: ByteBuffer => Seq[ByteRange] = PlannedRead.Nothing)

object PlannedRead {
  val Nothing: ByteBuffer => Seq[ByteRange] = _ => Seq.empty
}
