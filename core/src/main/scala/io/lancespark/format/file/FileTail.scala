package io.lancespark.format.file

import scala.jdk.CollectionConverters._

import com.google.protobuf.{Any => PbAny, ByteString, Empty}

import io.lancespark.schema.LanceSchema
import io.lancespark.proto.encodings.ColumnEncoding
import io.lancespark.proto.file.{FileDescriptor, Schema => PbSchema}
import io.lancespark.proto.file2.{ColumnMetadata, DirectEncoding, Encoding}

/** Writes what follows the pages of a 2.x file, the same for every 2.x
  * version: the global buffers (the FileDescriptor first), the column
  * metadata, the offset tables and the footer. */
private[format] object FileTail {

  /** A page's encoding message, wrapped as a direct `google.protobuf.Any`. */
  def direct(typeName: String, body: ByteString): Encoding =
    Encoding.newBuilder().setDirect(DirectEncoding.newBuilder().setEncoding(
      PbAny.newBuilder().setTypeUrl(s"/$typeName").setValue(body).build().toByteString)).build()

  private val columnEncoding: Encoding = direct("lance.encodings.ColumnEncoding",
    ColumnEncoding.newBuilder().setValues(Empty.getDefaultInstance).build().toByteString)

  /** Writes the tail; `extraGlobals` are written after the descriptor's slot
    * (global buffer 1 on), `metadata` goes into the schema's metadata. Returns
    * the file size. */
  def write(pos: PositionedOutput, schema: LanceSchema, metadata: Map[String, ByteString], rows: Long,
            columns: Seq[Seq[ColumnMetadata.Page]], extraGlobals: Seq[Array[Byte]], major: Int, minor: Int,
            ownEncoding: Int => Option[ByteString] = _ => None): Long = {
    val pb = PbSchema.newBuilder().addAllFields(schema.toProto.asJava).putAllMetadata(metadata.asJava).build()
    writeColumns(pos, pb, rows, columns.zipWithIndex.map { case (ps, c) =>
      val enc = ownEncoding(c).fold(columnEncoding)(direct("lance.encodings.ColumnEncoding", _))
      ColumnMetadata.newBuilder().setEncoding(enc).addAllPages(ps.asJava).build()
    }, extraGlobals, major, minor)
  }

  /** The tail with the schema message and each column's metadata as given. */
  def writeColumns(pos: PositionedOutput, schema: PbSchema, rows: Long, columns: Seq[ColumnMetadata],
                   extraGlobals: Seq[Array[Byte]], major: Int, minor: Int): Long = {
    val globals = scala.collection.mutable.ArrayBuffer.empty[(Long, Long)]
    globals += ((0L, 0L)) // the descriptor, written last
    extraGlobals.foreach(g => globals += ((pos.writeAligned(g, g.length), g.length.toLong)))
    val fd = FileDescriptor.newBuilder().setSchema(schema).setLength(rows).build().toByteArray
    globals(0) = (pos.writeAligned(fd, fd.length), fd.length.toLong)
    val cmStart = pos.position
    val cmRegions = columns.map { cm =>
      val bytes = cm.toByteArray
      val at = pos.position
      pos.write(bytes, bytes.length)
      (at, bytes.length.toLong)
    }
    val cmTable = pos.position
    cmRegions.foreach { case (p, s) => pos.writeLong(p); pos.writeLong(s) }
    val gbTable = pos.position
    globals.foreach { case (p, s) => pos.writeLong(p); pos.writeLong(s) }
    pos.writeLong(cmStart); pos.writeLong(cmTable); pos.writeLong(gbTable)
    pos.writeInt(globals.size); pos.writeInt(columns.size)
    pos.writeShort(major); pos.writeShort(minor)
    pos.write(Footer.Magic, 4)
    pos.flush()
    pos.position
  }
}
