package io.lancespark.format.file

import org.apache.arrow.vector.FieldVector

/** What a data file writer wrote: rows, the field ids stored in the file and
  * the column each is stored in (for a manifest's DataFile), file size. */
final case class WrittenFile(numRows: Long, fieldIds: Vector[Int], columnIndices: Vector[Int], sizeBytes: Long)

/** A writer of one Lance data file (any 2.x version). It owns its output
  * stream: `finish` writes the metadata and closes it; `close` without
  * `finish` closes it without a footer (an unusable file to delete). */
trait DataFileWriter extends AutoCloseable {
  /** Appends a batch: one vector per top-level field, all of the same length. */
  def write(vectors: Seq[FieldVector]): Unit

  /** Writes what is buffered and the file's metadata; closes the stream. */
  def finish(): WrittenFile
}
