package io.lancespark.format.v2

import java.nio.ByteBuffer
import java.nio.file.Path

import io.lancespark.format.input.LocalFileSource

/** A local file source that records every read (position, length). */
final class CountingSource(file: Path) extends LocalFileSource(file) {
  val reads = scala.collection.mutable.ArrayBuffer.empty[(Long, Int)]

  override protected def readFully(position: Long, dst: ByteBuffer): Unit = {
    reads += ((position, dst.remaining))
    super.readFully(position, dst)
  }
}
