package io.lancespark.format.file

import scala.jdk.CollectionConverters._

import com.google.protobuf.InvalidProtocolBufferException

import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.proto.file.FileDescriptor

/** The container every 2.x file version shares: the footer, the global
  * buffers (the first holds the FileDescriptor: schema and row count) and the
  * column metadata. What differs between versions is how a page's encoding is
  * decoded; the readers of each version build on this. What is read of the metadata is kept in
  * `meta`, shared with the other readers of the same file ([[FileMetaCache]]). */
final class FileContainer(val source: RandomAccessSource, val footer: Footer, meta: FileMeta) {

  def path: String = source.path

  private def fail(problem: String): Nothing = throw LanceFormatException(path, problem)

  lazy val globalBuffers: Vector[Region] =
    meta.part("global buffers")(
      Footer.readRegions(source, footer.globalBufferTablePos, footer.numGlobalBuffers, "global buffer"))

  lazy val descriptor: FileDescriptor = {
    if (globalBuffers.isEmpty) fail("no global buffers: the file descriptor (schema) is missing")
    val r = globalBuffers.head
    meta.part("descriptor") {
      try FileDescriptor.parseFrom(source.read(r.position, r.size))
      catch { case e: InvalidProtocolBufferException => throw LanceFormatException(path, "corrupt file descriptor", e) }
    }
  }

  /** The schema the file itself stores. */
  lazy val fileSchema: LanceSchema = meta.part("schema") {
    val s = descriptor.getSchema
    LanceSchema.fromProto(s.getFieldsList.asScala.toSeq,
      s.getMetadataMap.asScala.map { case (k, v) => k -> v.toByteArray }.toMap, path)
  }

  lazy val numRows: Long = descriptor.getLength

  val columns: ColumnMetadataReader = new ColumnMetadataReader(source, footer, meta)

  /** The bytes of global buffer `index`. */
  def globalBuffer(index: Int, what: String): java.nio.ByteBuffer = {
    if (index < 0 || index >= globalBuffers.size)
      fail(s"$what in global buffer $index, but the file has ${globalBuffers.size}")
    val r = globalBuffers(index)
    source.read(r.position, r.size)
  }
}

object FileContainer {
  /** The footer of a 2.x file, checked for a version `accept` takes; the
    * source is closed if the file is refused. The footer and the rest of the metadata come
    * from an earlier reader of the same file (path and size) where there was one. */
  def open(source: RandomAccessSource, accept: Footer => Boolean, expected: String): FileContainer =
    try {
      val meta = FileMetaCache.of(source.path, source.size)(Footer.read(source))
      val f = meta.footer
      if (!accept(f))
        throw LanceFormatException(source.path,
          s"file version ${f.versionName} (footer ${f.major}.${f.minor}) is not $expected")
      new FileContainer(source, f, meta)
    } catch { case e: Throwable => try source.close() catch { case _: Throwable => () }; throw e }
}
