package io.lancespark.format.v21.write

import java.io.OutputStream

import io.lancespark.format.v21.BlobSources

/** Where one value of a 2.2 blob column (`lance.blob.v2`) lives, as the
  * description the data file stores for it says: `kind` 0 inline (in the
  * data file; `position` is then set by the data file writer), 1 packed (at
  * `position` of the data file's shared blob file `blobId`), 2 dedicated
  * (all of blob file `blobId`). */
final case class BlobV2Description(kind: Int, position: Long, size: Long, blobId: Int)

/** The blob files of one data file, written as pylance 14 writes them
  * (observed on its files: see docs/blobs.md): values of at most
  * [[BlobV2Files.InlineMax]] bytes stay inline; values of at most
  * [[BlobV2Files.PackedMax]] bytes go back to back (no alignment) into one
  * packed blob file; larger ones each into their own (dedicated) blob file.
  * Blob ids count from 1 in the order the files are first needed (the packed
  * file gets its id at the first packed value). A file is named
  * [[BlobSources.fileName]] inside the data file's directory of blob files;
  * `create` opens it for writing.
  *
  * Values are streamed: `place` hands the caller the stream to write the
  * value's `size` bytes to (e.g. from the batch's Arrow buffer through a small
  * buffer); nothing is held here beyond the open streams. */
final class BlobV2Files(create: String => OutputStream) extends AutoCloseable {

  private var nextId: Int = 1
  private var packedId: Int = 0
  private var packed: Option[OutputStream] = None
  private var packedEnd: Long = 0L
  private var files: Vector[String] = Vector.empty

  /** Names of the blob files written so far (relative to the data file's directory of blob files). */
  def fileNames: Vector[String] = files

  /** The description of a value of `size` bytes. For an inline value nothing
    * is written (the data file writer writes it and sets the position);
    * otherwise `write` is called once with the stream to write exactly
    * `size` bytes to. */
  def place(size: Long, write: OutputStream => Unit): BlobV2Description = {
    require(size >= 0, s"blob size $size")
    BlobV2Files.kindOf(size) match {
      case BlobV2Files.Inline => BlobV2Description(BlobV2Files.Inline, 0L, size, 0)
      case BlobV2Files.Packed =>
        val out = packed.getOrElse {
          packedId = allocate()
          val o = open(packedId)
          packed = Some(o)
          o
        }
        val at = packedEnd
        write(out)
        packedEnd += size
        BlobV2Description(BlobV2Files.Packed, at, size, packedId)
      case _ =>
        val id = allocate()
        val out = open(id)
        try write(out) finally out.close()
        BlobV2Description(BlobV2Files.Dedicated, 0L, size, id)
    }
  }

  private def allocate(): Int = { val id = nextId; nextId += 1; id }

  private def open(id: Int): OutputStream = {
    val name = BlobSources.fileName(id)
    files = files :+ name
    create(name)
  }

  /** Closes the packed blob file (dedicated ones are closed as they are written). */
  def close(): Unit = { val p = packed; packed = None; p.foreach(_.close()) }
}

object BlobV2Files {
  val Inline: Int = 0
  val Packed: Int = 1
  val Dedicated: Int = 2
  val External: Int = 3

  /** Largest value kept inline in the data file (64 KiB, inclusive). */
  val InlineMax: Long = 64L * 1024
  /** Largest value packed into the shared blob file (4 MiB, inclusive). */
  val PackedMax: Long = 4L * 1024 * 1024

  /** Copies `len` bytes of `src` from `index` to `out` through a 64 KiB buffer. */
  def copy(src: org.apache.arrow.memory.ArrowBuf, index: Long, len: Long, out: OutputStream): Unit = {
    val buf = new Array[Byte](math.min(len, 64L * 1024).toInt)
    var done = 0L
    while (done < len) {
      val n = math.min(buf.length.toLong, len - done).toInt
      src.getBytes(index + done, buf, 0, n)
      out.write(buf, 0, n)
      done += n
    }
  }

  /** The kind pylance 14 gives a value of `size` bytes. */
  def kindOf(size: Long): Int =
    if (size <= InlineMax) Inline else if (size <= PackedMax) Packed else Dedicated
}
