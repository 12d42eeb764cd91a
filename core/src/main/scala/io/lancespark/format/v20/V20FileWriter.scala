package io.lancespark.format.v20

import java.io.OutputStream

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.complex.StructVector
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.schema.{LanceField, LanceSchema}
import io.lancespark.format.file.{ContainerWriter, ExtraGlobals, VectorOffsets}
import io.lancespark.format.stats.{StatsBuilder, StatsValues}
import io.lancespark.proto.encodings.ArrayEncoding

/** Writes one Lance 2.0 data file (footer version 0.3) as pylance 14 does:
  * one column per Lance field depth first, pages of the 2.0 encodings (flat,
  * nullable, binary, fixed_size_list, list, struct), 64-byte aligned buffers,
  * the FileDescriptor in global buffer 0. Per-page statistics of leaf columns
  * outside lists go to global buffer 1 (see [[PageStatistics]]).
  *
  * `write` takes one vector per top-level field (types as `field.toArrow`),
  * batches of any length; pages are accumulated per column and written when
  * they reach `maxRowsPerPage` rows or `maxPageBytes` bytes. The writer owns
  * `out`: `finish` writes the metadata and closes it; `close` without `finish`
  * closes it without writing the footer (an unusable file to delete). */
final class V20FileWriter(
    out: OutputStream,
    val path: String,
    val schema: LanceSchema,
    val maxRowsPerPage: Int = V20FileWriter.DefaultMaxRowsPerPage,
    val maxPageBytes: Long = V20FileWriter.DefaultMaxPageBytes,
    statistics: Boolean = true,
    allocator: BufferAllocator = null)
    extends ContainerWriter(out, 0, 3) {

  require(maxRowsPerPage > 0, "maxRowsPerPage must be positive")
  require(maxPageBytes > 0, "maxPageBytes must be positive")

  import V20FileWriter.BlobMetadataKey

  private val fields: Vector[LanceField] = schema.allFields
  fields.find(_.isMap).foreach(f => fail(s"column '${f.name}' is a map, which file version 2.0 cannot store (2.2 can)"))
  private val columnOf: Map[Int, Int] = fields.zipWithIndex.map { case (f, i) => f.id -> i }.toMap

  /** Every field has a column, depth first. */
  override protected def columnFields: Vector[LanceField] = fields

  /** Leaf fields with statistics: not inside a list, a type statistics cover. */
  private val stats = new StatsBuilder(if (!statistics) Vector.empty else {
    def walk(f: LanceField): Vector[LanceField] =
      if (f.isStruct) f.children.flatMap(walk)
      else if (f.isList || f.isFixedSizeList) Vector.empty
      else if (f.metadata.contains(BlobMetadataKey)) Vector.empty
      else if (StatsValues.kindOf(f.arrowType).isDefined) Vector(f) else Vector.empty
    schema.fields.flatMap(walk)
  })

  private val sink = new PageSink {
    def maxRowsPerPage: Int = V20FileWriter.this.maxRowsPerPage
    def maxPageBytes: Long = V20FileWriter.this.maxPageBytes
    def emitPage(column: Int, buffers: Seq[(Array[Byte], Int)], length: Long,
                 encoding: ArrayEncoding, priority: Long): Int =
      writePage(column, buffers, length, priority, V20Column.EncodingType, encoding.toByteString)
  }

  private def onLeafPage(enc: LeafEncoder, pageIndex: Int, firstRow: Long, page: LeafPage): Unit =
    if (stats.covers(enc.field.id)) {
      stats.add(enc.column, enc.field.id, pageIndex, firstRow, page, 0, page.rows)
      stats.sketch(enc.field.id, page)
    }

  private val encoders: Vector[ColumnEncoder] = fields.zipWithIndex.map { case (f, i) =>
    if (f.isStruct) new StructEncoder(f, i, sink)
    else if (f.isList) new ListEncoder(f, i, sink)
    else if (f.metadata.get(BlobMetadataKey).contains("true")) {
      if (!f.arrowType.isInstanceOf[ArrowType.LargeBinary])
        fail(s"column '${f.name}' is marked $BlobMetadataKey but is ${f.logicalType}, not large_binary")
      if (!schema.fields.exists(_.id == f.id)) fail(s"column '${f.name}': blob columns inside structs or lists are not written")
      new BlobEncoder(f, i, sink, (buf, at, len) => writeOutOfLine(buf, at, len))
    }
    else new LeafEncoder(f, i, sink, onLeafPage)
  }

  override protected def append(vectors: Seq[FieldVector], n: Int): Unit = {
    val base = rows
    schema.fields.zip(vectors).foreach { case (f, v) => writeField(f, v, 0, n, i => base + i) }
  }

  /** Lance 2.0 files cannot store null structs. */
  override protected def checkStorable(f: LanceField, v: FieldVector, path: String): Unit = v match {
    case s: StructVector if s.getNullCount > 0 =>
      val first = (0 until s.getValueCount).find(s.isNull).getOrElse(-1)
      fail(s"column '$path' holds a null struct (at index $first): Lance 2.0 files cannot store null " +
        "struct values; make the struct non-null (its fields may be null) or write file version 2.1 or later, which stores them")
    case _ => ()
  }

  private def writeField(f: LanceField, v: FieldVector, from: Int, until: Int, rowOf: Int => Long): Unit = {
    if (until <= from) return
    encoders(columnOf(f.id)) match {
      case s: StructEncoder =>
        s.append(from, until)
        val kids = v.asInstanceOf[StructVector].getChildrenFromFields.asScala
        f.children.zip(kids).foreach { case (c, k) => writeField(c, k, from, until, rowOf) }
      case l: ListEncoder =>
        l.append(v, from, until, rowOf)
        val (off, data) = VectorOffsets.ofList(v).getOrElse(
          fail(s"column '${f.name}' is a list but its vector is ${v.getClass.getSimpleName}"))
        val a = off(from)
        val b = off(until)
        if (b > Int.MaxValue) fail(s"column '${f.name}': $b list items do not fit one batch")
        // item j belongs to the last row r (from <= r < until) with off(r) <= j
        val itemRow: Int => Long = j => {
          var lo = from
          var hi = until - 1
          while (lo < hi) {
            val mid = (lo + hi + 1) >>> 1
            if (off(mid) <= j) lo = mid else hi = mid - 1
          }
          rowOf(lo)
        }
        writeField(f.children.head, data, a.toInt, b.toInt, itemRow)
      case leaf: LeafEncoder => leaf.append(v, from, until, rowOf)
      case blob: BlobEncoder => blob.append(v, from, until, rowOf)
    }
  }

  /** The pending pages; a column without pages in a file with rows (the
    * items of lists that are all empty or null) gets one empty page, as
    * pylance writes it. */
  override protected def finishPages(): Unit = {
    encoders.foreach(_.flush())
    if (rows > 0) encoders.foreach { e =>
      if (!hasPages(e.column))
        sink.emitPage(e.column, Nil, 0, if (e.field.isStruct) Encodings.struct else Encodings.allNulls, 0)
    }
  }

  override protected def columnEncoding(column: Int): Option[com.google.protobuf.ByteString] =
    encoders(column) match {
      case _: BlobEncoder => Some(BlobColumn.columnEncoding.toByteString)
      case _ => None
    }

  /** The statistics, when some field has them. */
  override protected def extraGlobals(): ExtraGlobals =
    if (stats.fields.nonEmpty) stats.globals(Option(allocator)) else ExtraGlobals.Empty
}

object V20FileWriter {
  private val BlobMetadataKey = "lance-encoding:blob"
  val DefaultMaxRowsPerPage: Int = 8192
  val DefaultMaxPageBytes: Long = 8L * 1024 * 1024
}
