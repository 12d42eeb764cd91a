package io.lancespark.format.input

import java.nio.{ByteBuffer, ByteOrder}

/** Reusable heap memory for the reads of one batch, so that scanning does not
  * allocate (and zero) fresh buffers for every page range it reads. Buffers
  * taken before a `reset` must not be used after it. When a batch needs more
  * than the arena holds, a larger block replaces it (buffers already taken keep
  * the old one); after a few batches one block serves a whole batch. */
final class ReadArena {
  private var block: Array[Byte] = Array.emptyByteArray
  private var used: Int = 0

  /** Bytes this arena holds on the heap. */
  def capacity: Long = synchronized(block.length.toLong)

  /** Makes the whole block available again (no read into it may be in flight). */
  def reset(): Unit = synchronized { used = 0 }

  /** A little-endian buffer of `n` bytes (contents unspecified), positioned at
    * 0. Reads running ahead of the decode take buffers from another thread. */
  def take(n: Int): ByteBuffer = synchronized {
    require(n >= 0, s"negative size $n")
    if (block.length - used < n) {
      val grown = math.max(n.toLong, math.max(2L * block.length, ReadArena.MinBlock))
      block = new Array[Byte](math.min(grown, Int.MaxValue - 16L).toInt)
      used = 0
    }
    val b = ByteBuffer.wrap(block, used, n).slice().order(ByteOrder.LITTLE_ENDIAN)
    used += n
    b
  }
}

object ReadArena {
  val MinBlock: Long = 1L << 16
}
