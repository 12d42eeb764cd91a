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

  /** Rows of several ranges of the fields (sorted, disjoint [from, until)
    * pairs), as one vector per field holding the ranges' rows one after the
    * other. A reader that decodes a unit of storage (page, chunk) for a range
    * fetches and decodes it once for all the ranges of the call that need it;
    * `next` says which ranges the caller reads next (see `read`). This one
    * reads each range and copies the rows together (readers of older file
    * versions). */
  def readRanges(fields: Seq[LanceField], ranges: IndexedSeq[(Long, Long)], allocator: BufferAllocator,
                 next: Option[IndexedSeq[(Long, Long)]]): Seq[FieldVector] =
    if (ranges.size == 1) read(fields, ranges.head._1, ranges.head._2, allocator, next.filter(_.size == 1).map(_.head))
    else io.lancespark.format.arrow.VectorConcat.concat(fields,
      ranges.iterator.filter(r => r._2 > r._1).map { case (f, u) => () => read(fields, f, u, allocator) }.toVector,
      allocator)

  /** Like `readRanges`, for a caller that reads the fields whose ids are in
    * `itemsOnly` through [[dictionaryOf]] alone: a vector of such a field that
    * `dictionaryOf` then gives is hollow (its validity right; a string's every
    * value empty, a fixed-width value unwritten: not to be read), the items not
    * copied into it row by row. This one returns
    * every vector whole (readers of older file versions). */
  def readRanges(fields: Seq[LanceField], ranges: IndexedSeq[(Long, Long)], allocator: BufferAllocator,
                 next: Option[IndexedSeq[(Long, Long)]], itemsOnly: Set[Int]): Seq[FieldVector] =
    readRanges(fields, ranges, allocator, next)

  /** For a vector the last `read` returned: its rows' dictionary items when
    * they all come from one page dictionary (the vector holds the values too,
    * unless the read asked for items only, see `readRanges`). */
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
