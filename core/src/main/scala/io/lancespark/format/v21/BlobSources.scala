package io.lancespark.format.v21

import io.lancespark.format.input.RandomAccessSource

/** Where the values of a 2.2 blob column (`lance.blob.v2`) that are not in the
  * data file itself live: the data file's blob files (packed: several values
  * one after another; dedicated: one value), named by the blob id a
  * description holds, and external files named by their URI. The reader asks
  * for a source per value; implementations keep them open until closed. */
trait BlobSources extends AutoCloseable {

  /** The blob file `blobId` of the data file being read. */
  def blobFile(blobId: Int): RandomAccessSource

  /** The file an external value's URI names. */
  def external(uri: String): RandomAccessSource

  /** Bytes read through the sources opened so far (for scan metrics). */
  def bytesRead: Long

  /** Read requests made through the sources opened so far. */
  def readRequests: Long
}

object BlobSources {

  /** A blob file's name inside the data file's directory of blob files
    * (`<data file stem>/`): the id's 32 bits in reverse order, as binary
    * digits (so that sequential ids spread over key prefixes), then ".blob". */
  def fileName(blobId: Int): String = {
    val bits = Integer.toBinaryString(Integer.reverse(blobId))
    ("0" * (32 - bits.length)) + bits + ".blob"
  }

  /** None: a data file read on its own, whose blob files are unknown. */
  val none: BlobSources = new BlobSources {
    private def refuse(what: String): Nothing =
      throw new UnsupportedOperationException(s"$what: no dataset to resolve blob files against")
    def blobFile(blobId: Int): RandomAccessSource = refuse(s"blob file ${fileName(blobId)}")
    def external(uri: String): RandomAccessSource = refuse(s"external blob $uri")
    def bytesRead: Long = 0L
    def readRequests: Long = 0L
    def close(): Unit = ()
  }
}
