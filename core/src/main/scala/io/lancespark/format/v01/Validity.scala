package io.lancespark.format.v01

import org.apache.arrow.memory.ArrowBuf

/** Validity bitmaps. */
private[v01] object Validity {

  /** Marks the first `n` slots valid. */
  def setAllValid(buf: ArrowBuf, n: Int): Unit = {
    val full = n / 8
    if (full > 0) buf.setBytes(0, Array.fill[Byte](full)(-1))
    val rem = n % 8
    if (rem > 0) buf.setByte(full.toLong, (1 << rem) - 1)
  }

  /** Copies a packed bitmap built on the heap. */
  def copy(buf: ArrowBuf, bits: Array[Byte]): Unit = buf.setBytes(0, bits)

  def newBitmap(n: Int): Array[Byte] = new Array[Byte]((n + 7) / 8)

  @inline def set(bits: Array[Byte], i: Int): Unit =
    bits(i >>> 3) = (bits(i >>> 3) | (1 << (i & 7))).toByte
}
