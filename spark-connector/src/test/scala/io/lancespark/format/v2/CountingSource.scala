package io.lancespark.format.v2

import java.io.EOFException
import java.nio.ByteBuffer
import java.nio.channels.FileChannel
import java.nio.file.{Path, StandardOpenOption}

import io.lancespark.format.input.RandomAccessSource

/** A local file source that records every read (position, length). */
final class CountingSource(file: Path) extends RandomAccessSource {
  private val channel = FileChannel.open(file, StandardOpenOption.READ)
  override val path: String = file.toString
  override val size: Long = channel.size()
  val reads = scala.collection.mutable.ArrayBuffer.empty[(Long, Int)]


  override protected def readFully(position: Long, dst: ByteBuffer): Unit = {
    reads += ((position, dst.remaining))
    var pos = position
    while (dst.hasRemaining) {
      val n = channel.read(dst, pos)
      if (n < 0) throw new EOFException(path)
      pos += n
    }
  }

  override def close(): Unit = channel.close()
}
