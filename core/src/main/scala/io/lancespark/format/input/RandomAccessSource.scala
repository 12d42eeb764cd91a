package io.lancespark.format.input

import java.io.EOFException
import java.nio.{ByteBuffer, ByteOrder}
import java.nio.channels.FileChannel
import java.nio.file.{Path, StandardOpenOption}
import java.util.concurrent.atomic.AtomicLong

import io.lancespark.schema.LanceFormatException

/** Positional reads of one immutable file. Reads may come from several threads
  * at once (a batch's reads are issued ahead of its decode), so `readFully`
  * must be safe to call concurrently; `read` never returns fewer bytes than
  * asked. */
trait RandomAccessSource extends ByteReader with AutoCloseable {

  def size: Long

  /** Planned reads of one batch at most this many bytes apart are merged into
    * one request (wider where requests are expensive). */
  def coalesceGap: Long = CoalescedReads.MaxGap

  private val bytesReadSoFar = new AtomicLong
  private val requestsSoFar = new AtomicLong

  /** Bytes read through this source so far (for scan metrics). */
  final def bytesRead: Long = bytesReadSoFar.get

  /** Read requests made to storage so far (coalesced reads count once). */
  final def readRequests: Long = requestsSoFar.get

  /** Reads exactly `length` bytes at `position`, little-endian, positioned at 0. */
  final def read(position: Long, length: Long): ByteBuffer = {
    check(position, length)
    fill(position, length, ByteBuffer.allocate(length.toInt).order(ByteOrder.LITTLE_ENDIAN))
  }

  /** Like `read`, into memory of `arena` (valid until the arena's next reset). */
  final def read(position: Long, length: Long, arena: ReadArena): ByteBuffer = {
    check(position, length)
    fill(position, length, arena.take(length.toInt))
  }

  /** Fills `dst` (all of its remaining bytes) from `position`; returns it flipped. */
  final def readInto(position: Long, dst: ByteBuffer): ByteBuffer = {
    check(position, dst.remaining().toLong)
    fill(position, dst.remaining().toLong, dst)
  }

  private def check(position: Long, length: Long): Unit = {
    if (position < 0 || length < 0 || position + length > size)
      throw LanceFormatException(
        path,
        s"truncated or corrupt: needs bytes [$position, ${position + length}) but the file has $size bytes")
    if (length > Int.MaxValue - 16)
      throw LanceFormatException(path, s"a single read of $length bytes is too large")
  }

  private def fill(position: Long, length: Long, buf: ByteBuffer): ByteBuffer = {
    try {
      requestsSoFar.incrementAndGet()
      readFully(position, buf)
      bytesReadSoFar.addAndGet(length)
    } catch {
      case e: EOFException => throw LanceFormatException(path, "unexpected end of file", e)
    }
    buf.flip()
    buf
  }

  /** Credits the calling thread with reads other threads made for it, where
    * the storage keeps per-thread statistics (see `HadoopSource`). */
  def attributeReads(): Unit = ()

  /** Fills `dst` from `position`; throws EOFException if the file ends first. */
  protected def readFully(position: Long, dst: ByteBuffer): Unit
}

/** A local file read through a FileChannel (positional reads are thread-safe). */
class LocalFileSource(file: Path) extends RandomAccessSource {
  private val channel: FileChannel = FileChannel.open(file, StandardOpenOption.READ)
  override val path: String = file.toString
  override val size: Long = channel.size()

  override protected def readFully(position: Long, dst: ByteBuffer): Unit = {
    var pos = position
    while (dst.hasRemaining) {
      val n = channel.read(dst, pos)
      if (n < 0) throw new EOFException(path)
      pos += n
    }
  }

  override def close(): Unit = channel.close()
}

/** `source` with its bytes from `from` to its end read in one request up front:
  * the reads that fall there (a file's column metadata, read column by column)
  * are served from memory, others go to `source`. Closing it closes `source`. */
final class TailSource(source: RandomAccessSource, from: Long) extends RandomAccessSource {
  override val path: String = source.path
  override val size: Long = source.size
  private val start: Long = math.max(0L, math.min(from, source.size))
  private val tail: ByteBuffer = source.read(start, size - start)

  override protected def readFully(position: Long, dst: ByteBuffer): Unit =
    if (position >= start && position + dst.remaining() <= size) {
      val src = tail.duplicate()
      src.position((position - start).toInt).limit((position - start).toInt + dst.remaining())
      dst.put(src)
    } else dst.put(source.read(position, dst.remaining().toLong))

  override def close(): Unit = source.close()
}
