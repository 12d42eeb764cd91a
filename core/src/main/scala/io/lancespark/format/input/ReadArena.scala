package io.lancespark.format.input

import java.nio.{ByteBuffer, ByteOrder}

/** Reusable heap memory for the reads of one batch, so that scanning does not
  * allocate (and zero) fresh buffers for every page range it reads. Buffers
  * taken before a `reset` must not be used after it. A batch that needs more
  * than the block holds gets the rest in separate arrays; the next `reset`
  * sizes the block to that batch, so after the first batches one block of
  * about one batch's reads serves every batch. Reads running ahead of the
  * decode take buffers from another thread, hence the locking. */
final class ReadArena {
  private var block: Array[Byte] = Array.emptyByteArray
  private var used: Int = 0
  /** Bytes taken since the last reset. */
  private var demand: Long = 0L

  /** Bytes this arena's block holds on the heap. */
  def capacity: Long = synchronized(block.length.toLong)

  /** Makes the whole block available again (no read into it may be in flight),
    * grown first to the last batch's needs plus an eighth if it fell short. */
  def reset(): Unit = synchronized {
    if (demand > block.length)
      block = new Array[Byte](math.min(demand + demand / 8, Int.MaxValue - 16L).toInt)
    used = 0
    demand = 0L
  }

  /** A little-endian buffer of `n` bytes (contents unspecified), positioned at 0. */
  def take(n: Int): ByteBuffer = synchronized {
    require(n >= 0, s"negative size $n")
    demand += n
    if (block.length - used < n) ByteBuffer.wrap(new Array[Byte](n)).order(ByteOrder.LITTLE_ENDIAN)
    else {
      val b = ByteBuffer.wrap(block, used, n).slice().order(ByteOrder.LITTLE_ENDIAN)
      used += n
      b
    }
  }
}
