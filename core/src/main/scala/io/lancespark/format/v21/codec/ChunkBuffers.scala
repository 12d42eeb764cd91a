package io.lancespark.format.v21.codec

import java.util.{ArrayDeque, HashMap => JHashMap}

import scala.collection.mutable.ArrayBuffer

/** The arrays one batch's compressed mini-block chunks are decompressed
  * into, lent from the decoding thread's pool and given back when the batch
  * has been copied out ([[release]]), so that the thread's next batches
  * decompress into the same arrays. A fresh array a chunk is zeroed by the
  * JVM and, when the heap has just grown, faulted in page by page by the
  * kernel: LZ4 of decimal prices ran at 0.6-0.8 GB/s into fresh 16 KiB
  * arrays against 2.7 GB/s into a reused one. Used by one thread (a batch
  * decodes on one); arrays are lent at their exact size. */
final class ChunkBuffers private (pool: ChunkBuffers.Pool) {
  private val lent = new ArrayBuffer[Array[Byte]]()

  /** An array of exactly `size` bytes, of undefined content, this batch's until [[release]]. */
  def take(size: Int): Array[Byte] = {
    val a = pool.take(size)
    lent += a
    a
  }

  /** [[take]] as a function, made once a batch (not once a chunk). */
  val lend: Int => Array[Byte] = size => take(size)

  /** Gives the lent arrays back to the thread's pool: nothing may read what
    * was decompressed into them after this. */
  def release(): Unit = {
    lent.foreach(pool.give)
    lent.clear()
  }
}

object ChunkBuffers {
  /** Most bytes a thread's pool keeps between batches (arrays beyond it are
    * left to the collector). */
  val MaxPooledBytes: Long = 32L * 1024 * 1024

  private final class Pool(maxBytes: Long = MaxPooledBytes) {
    private val bySize = new JHashMap[Integer, ArrayDeque[Array[Byte]]]()
    private var pooled = 0L

    def take(size: Int): Array[Byte] = {
      val free = bySize.get(size)
      if (free == null || free.isEmpty) new Array[Byte](size)
      else { pooled -= size; free.pop() }
    }

    def give(a: Array[Byte]): Unit =
      if (pooled + a.length <= maxBytes) {
        var free = bySize.get(a.length)
        if (free == null) { free = new ArrayDeque[Array[Byte]](); bySize.put(a.length, free) }
        free.push(a)
        pooled += a.length
      }
  }

  private val pools: ThreadLocal[Pool] = ThreadLocal.withInitial[Pool](() => new Pool)

  /** A batch's lender from this thread's pool (fresh arrays, none kept, when
    * the JVM's system property `lance.decode.reuseChunkArrays` is `false`:
    * for measuring what the reuse saves). */
  def forThisThread(): ChunkBuffers =
    new ChunkBuffers(if (System.getProperty("lance.decode.reuseChunkArrays") == "false") NoPool else pools.get())

  private val NoPool: Pool = new Pool(0L)
}
