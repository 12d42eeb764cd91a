package io.lancespark.format.input

import java.nio.ByteBuffer

/** Where a decoder gets the bytes of a file: straight from storage, or from
  * reads already issued for the batch (see [[CoalescedReads]]). */
trait ByteReader {

  /** Path used in error messages. */
  def path: String

  /** Exactly `length` bytes at `position`, little-endian, positioned at 0. */
  def read(position: Long, length: Long): ByteBuffer
}
