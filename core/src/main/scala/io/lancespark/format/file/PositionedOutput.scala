package io.lancespark.format.file

import java.io.OutputStream

/** An output stream that knows its position; little-endian scalars; pads
  * with zeros to `alignment`-byte boundaries before aligned buffers. */
private[format] final class PositionedOutput(out: OutputStream, alignment: Int = 64) {
  private val buf = new java.io.BufferedOutputStream(out, 1 << 16)
  private val scratch = new Array[Byte](8)
  private val zeros = new Array[Byte](alignment)
  var position: Long = 0

  def write(bytes: Array[Byte], len: Int): Unit = { buf.write(bytes, 0, len); position += len }

  /** Pads to the alignment, writes, and returns where the bytes start. */
  def writeAligned(bytes: Array[Byte], len: Int): Long = {
    val pad = ((alignment - position % alignment) % alignment).toInt
    if (pad > 0) write(zeros, pad)
    val at = position
    write(bytes, len)
    at
  }

  /** Pads to the alignment, copies `len` bytes of `src` from `index` through a
    * small scratch buffer (no copy of the whole value), and returns where they start. */
  def writeAligned(src: org.apache.arrow.memory.ArrowBuf, index: Long, len: Long): Long = {
    val pad = ((alignment - position % alignment) % alignment).toInt
    if (pad > 0) write(zeros, pad)
    val at = position
    if (copyBuffer == null) copyBuffer = new Array[Byte](1 << 16)
    var done = 0L
    while (done < len) {
      val n = math.min(copyBuffer.length.toLong, len - done).toInt
      src.getBytes(index + done, copyBuffer, 0, n)
      write(copyBuffer, n)
      done += n
    }
    at
  }
  private var copyBuffer: Array[Byte] = null

  private def le(v: Long, n: Int): Unit = {
    var i = 0
    while (i < n) { scratch(i) = (v >>> (8 * i)).toByte; i += 1 }
    write(scratch, n)
  }
  def writeLong(v: Long): Unit = le(v, 8)
  def writeInt(v: Int): Unit = le(v.toLong, 4)
  def writeShort(v: Int): Unit = le(v.toLong, 2)
  def flush(): Unit = buf.flush()
}
