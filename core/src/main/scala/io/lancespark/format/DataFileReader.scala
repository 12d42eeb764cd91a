package io.lancespark.format

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector

import io.lancespark.format.arrow.DictionaryColumn
import io.lancespark.schema.LanceField

/** Reads one Lance data file (any file version) into Arrow vectors.
  *
  * `fields` are top-level fields of the dataset schema, possibly pruned (a struct
  * with fewer children); every field id in them must be stored in this file.
  * The result has one vector per requested field, in order, each with
  * `until - from` rows, typed as `field.toArrow` (dictionary columns decoded).
  * The caller owns (closes) the vectors; closing the reader closes its source. */
trait DataFileReader extends AutoCloseable {
  def path: String
  def numRows: Long
  def read(fields: Seq[LanceField], from: Long, until: Long, allocator: BufferAllocator): Seq[FieldVector]

  /** Like `read`; `next` says which rows the caller reads next (of the same
    * fields), so that a reader can start reading them while this batch decodes. */
  def read(fields: Seq[LanceField], from: Long, until: Long, allocator: BufferAllocator,
           next: Option[(Long, Long)]): Seq[FieldVector] = read(fields, from, until, allocator)

  /** For a vector the last `read` returned: its rows' dictionary items when
    * they all come from one page dictionary (the vector holds the values too). */
  def dictionaryOf(vector: FieldVector): Option[DictionaryColumn] = None

  /** Pages decoded so far (0.1 files count one page per column and batch read). */
  def pagesDecoded: Long = 0L

  /** Bytes read from storage so far. */
  def bytesRead: Long = 0L

  /** Read requests made to storage so far. */
  def readRequests: Long = 0L

  /** Nanoseconds spent waiting for storage inside `read` so far. */
  def storageWaitNanos: Long = 0L

  /** Heap memory the reader keeps between reads (reusable read buffers). */
  def scratchBytes: Long = 0L
}
