package io.lancespark.format.v20

import java.nio.ByteBuffer
import java.nio.file.Path

import io.lancespark.format.input.LocalFileSource

/** A local file source that records every read (position, length) and the
  * thread that made it. */
final class CountingSource(file: Path) extends LocalFileSource(file) {
  private val log = scala.collection.mutable.ArrayBuffer.empty[(Long, Int, String)]

  /** (position, length) of every read so far, in the order they started. */
  def reads: Seq[(Long, Int)] = log.synchronized(log.map(r => (r._1, r._2)).toSeq)

  /** (position, length, thread name) of every read so far. */
  def readsWithThreads: Seq[(Long, Int, String)] = log.synchronized(log.toSeq)

  override protected def readFully(position: Long, dst: ByteBuffer): Unit = {
    log.synchronized(log += ((position, dst.remaining, Thread.currentThread.getName)))
    super.readFully(position, dst)
  }
}
