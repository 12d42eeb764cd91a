package io.lancespark.format.v20.codec

import java.nio.{ByteBuffer, ByteOrder}

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.arrow.DictionaryCache
import io.lancespark.format.file.Region
import io.lancespark.format.input.{ByteRange, ByteReader}
import io.lancespark.proto.encodings.{Buffer => PbBuffer}

/** What the codecs of one 2.0 page decode with: where bytes come from, the
  * buffers a buffer reference can name (the page's, the column's, the
  * file's), and how problems are reported (naming file, column and page). */
private[v20] final class PageContext(
    val input: ByteReader,
    pageBuffers: Vector[Region],
    columnBuffers: Vector[Region],
    globalBuffers: => Vector[Region],
    val column: Int,
    val page: Int,
    where: String,
    val directDictionary: Boolean,
    val dictionaries: DictionaryCache) {

  def path: String = input.path

  def fail(problem: String): Nothing =
    throw LanceFormatException(path, s"$where, page $page: $problem")

  /** The buffers a buffer reference of this type indexes; None for an unknown type. */
  def buffersOf(b: PbBuffer): Option[Vector[Region]] = b.getBufferType match {
    case PbBuffer.BufferType.page   => Some(pageBuffers)
    case PbBuffer.BufferType.column => Some(columnBuffers)
    case PbBuffer.BufferType.file   => Some(globalBuffers)
    case _                          => None
  }

  def region(b: PbBuffer): Region = {
    val idx = b.getBufferIndex
    val table = buffersOf(b).getOrElse(fail(s"unknown buffer type ${b.getBufferType}"))
    if (idx < 0 || idx >= table.size)
      fail(s"encoding refers to ${b.getBufferType} buffer $idx but there are ${table.size}")
    table(idx)
  }

  /** Bytes [offset, offset + len) of a buffer. */
  def bytes(b: PbBuffer, offset: Long, len: Long, what: String): ByteBuffer = {
    val r = region(b)
    if (offset < 0 || len < 0 || offset + len > r.size)
      fail(s"$what needs bytes [$offset, ${offset + len}) of a ${r.size}-byte buffer")
    if (len == 0) ByteBuffer.allocate(0).order(ByteOrder.LITTLE_ENDIAN)
    else input.read(r.position + offset, len)
  }

  /** The file range of bytes [offset, offset + len) of a buffer, if it lies inside it. */
  def fileRange(b: PbBuffer, offset: Long, len: Long): Option[ByteRange] =
    buffersOf(b).flatMap(_.lift(b.getBufferIndex))
      .filter(r => offset >= 0 && len > 0 && offset + len <= r.size)
      .map(r => ByteRange(r.position + offset, len))

  /** The whole of a buffer as a file range, if it exists and is not empty. */
  def wholeRange(b: PbBuffer): Option[ByteRange] =
    buffersOf(b).flatMap(_.lift(b.getBufferIndex)).flatMap(r => fileRange(b, 0, r.size))

  def checkCount(n: Long): Int = {
    if (n < 0 || n > Int.MaxValue - 1) fail(s"$n items, more than this reader supports at once")
    n.toInt
  }
}
