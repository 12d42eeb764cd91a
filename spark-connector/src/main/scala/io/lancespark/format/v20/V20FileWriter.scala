package io.lancespark.format.v20

import java.io.OutputStream

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import com.google.protobuf.ByteString
import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.complex.{LargeListVector, ListVector, StructVector}
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.schema.{LanceField, LanceFormatException, LanceSchema}
import io.lancespark.format.file.{DataFileWriter, FileTail, PositionedOutput, WrittenFile}
import io.lancespark.format.stats.{DistinctSketch, PageStatistics, StatsCollector, StatsStore, StatsValues}
import io.lancespark.proto.encodings.ArrayEncoding
import io.lancespark.proto.file2.ColumnMetadata

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
    extends DataFileWriter {

  require(maxRowsPerPage > 0, "maxRowsPerPage must be positive")
  require(maxPageBytes > 0, "maxPageBytes must be positive")

  private def fail(problem: String): Nothing = throw LanceFormatException(path, problem)

  private val fields: Vector[LanceField] = schema.allFields
  fields.find(_.isMap).foreach(f => fail(s"column '${f.name}' is a map, which file version 2.0 cannot store (2.2 can)"))
  private val columnOf: Map[Int, Int] = fields.zipWithIndex.map { case (f, i) => f.id -> i }.toMap

  private val pos = new PositionedOutput(out, V20FileWriter.Alignment)
  private val pages = Vector.fill(fields.size)(ArrayBuffer.empty[ColumnMetadata.Page])
  private var rowsWritten = 0L
  private var state: String = "open" // open | failed | finished | closed

  /** Leaf fields with statistics: not inside a list, a type statistics cover. */
  private val statsFields: Vector[LanceField] = if (!statistics) Vector.empty else {
    def walk(f: LanceField): Vector[LanceField] =
      if (f.isStruct) f.children.flatMap(walk)
      else if (f.isList || f.isFixedSizeList) Vector.empty
      else if (StatsValues.kindOf(f.arrowType).isDefined) Vector(f) else Vector.empty
    schema.fields.flatMap(walk)
  }
  private val statsKinds: Map[Int, StatsValues.Kind] =
    statsFields.map(f => f.id -> StatsValues.kindOf(f.arrowType).get).toMap
  private val stats = ArrayBuffer.empty[StatsCollector.RawStat]
  /** Distinct-value sketches of the fields with statistics, over the whole file. */
  private val sketches: Map[Int, DistinctSketch] = statsKinds.keys.map(_ -> DistinctSketch.empty()).toMap

  private val sink = new PageSink {
    def maxRowsPerPage: Int = V20FileWriter.this.maxRowsPerPage
    def maxPageBytes: Long = V20FileWriter.this.maxPageBytes
    def emitPage(column: Int, buffers: Seq[(Array[Byte], Int)], length: Long,
                 encoding: ArrayEncoding, priority: Long): Int = {
      val p = ColumnMetadata.Page.newBuilder().setLength(length).setPriority(priority)
        .setEncoding(FileTail.direct("lance.encodings.ArrayEncoding", encoding.toByteString))
      buffers.foreach { case (bytes, len) =>
        p.addBufferOffsets(pos.writeAligned(bytes, len))
        p.addBufferSizes(len.toLong)
      }
      pages(column) += p.build()
      pages(column).size - 1
    }
  }

  private def onLeafPage(enc: LeafEncoder, pageIndex: Int, firstRow: Long, page: LeafPage): Unit =
    statsKinds.get(enc.field.id).foreach { kind =>
      val (nulls, mn, mx) = StatsCollector.collect(kind, page)
      StatsCollector.addTo(sketches(enc.field.id), kind, page, 0, page.rows)
      stats += StatsCollector.RawStat(enc.column, enc.field.id, pageIndex, firstRow, page.rows, nulls, mn, mx,
        StatsCollector.valueBytes(kind, page, 0, page.rows))
    }

  private val encoders: Vector[ColumnEncoder] = fields.zipWithIndex.map { case (f, i) =>
    if (f.isStruct) new StructEncoder(f, i, sink)
    else if (f.isList) new ListEncoder(f, i, sink)
    else new LeafEncoder(f, i, sink, onLeafPage)
  }

  /** Appends a batch: one vector per top-level field, all of the same length. */
  override def write(vectors: Seq[FieldVector]): Unit = {
    if (state != "open") fail(s"write on a writer that is $state")
    if (vectors.size != schema.fields.size)
      fail(s"${vectors.size} vectors for a schema of ${schema.fields.size} top-level fields")
    val n = vectors.headOption.fold(0)(_.getValueCount)
    schema.fields.zip(vectors).foreach { case (f, v) =>
      if (v.getValueCount != n)
        fail(s"column '${f.name}' has ${v.getValueCount} values but column '${schema.fields.head.name}' has $n")
      check(f, v, f.name)
    }
    if (n == 0) return
    val base = rowsWritten
    try {
      schema.fields.zip(vectors).foreach { case (f, v) => writeField(f, v, 0, n, i => base + i) }
      rowsWritten += n
    } catch { case e: Throwable => state = "failed"; throw e }
  }

  /** Checks the vector matches the field and refuses what 2.0 cannot store. */
  private def check(f: LanceField, v: FieldVector, path: String): Unit = {
    val expected = f.arrowType
    val actual = v.getField.getType
    val sameKind = (expected, actual) match {
      case (_: ArrowType.FixedSizeList, a: ArrowType.FixedSizeList) => expected == a
      case (e, a) => e == a
    }
    if (!sameKind) fail(s"column '$path' is $expected in the schema but the vector is $actual")
    v match {
      case s: StructVector =>
        if (s.getNullCount > 0) {
          val first = (0 until s.getValueCount).find(s.isNull).getOrElse(-1)
          fail(s"column '$path' holds a null struct (at index $first): Lance 2.0 files cannot store null " +
            "struct values; make the struct non-null (its fields may be null) or write file version 2.1 or later, which stores them")
        }
        val kids = s.getChildrenFromFields.asScala
        if (kids.size != f.children.size)
          fail(s"struct column '$path' has ${f.children.size} fields in the schema but its vector has ${kids.size}")
        f.children.zip(kids).foreach { case (c, k) => check(c, k, s"$path.${c.name}") }
      case l: ListVector => check(f.children.head, l.getDataVector, s"$path.${f.children.head.name}")
      case l: LargeListVector => check(f.children.head, l.getDataVector, s"$path.${f.children.head.name}")
      case _ => ()
    }
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
        val (offs, ow, data) = v match {
          case lv: ListVector      => (lv.getOffsetBuffer, 4, lv.getDataVector)
          case lv: LargeListVector => (lv.getOffsetBuffer, 8, lv.getDataVector)
          case other => fail(s"column '${f.name}' is a list but its vector is ${other.getClass.getSimpleName}")
        }
        def off(i: Int): Long = if (ow == 4) offs.getInt(4L * i).toLong else offs.getLong(8L * i)
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
    }
  }

  /** Writes the remaining pages, the statistics, schema, column metadata and
    * footer; closes the stream. */
  override def finish(): WrittenFile = {
    if (state != "open") fail(s"finish on a writer that is $state")
    try {
      encoders.foreach(_.flush())
      // a column without pages in a file with rows (the items of lists that
      // are all empty or null) gets one empty page, as pylance writes it
      if (rowsWritten > 0) encoders.foreach { e =>
        if (pages(e.column).isEmpty)
          sink.emitPage(e.column, Nil, 0, if (e.field.isStruct) Encodings.struct else Encodings.allNulls, 0)
      }
      val metadata = Map.newBuilder[String, ByteString] ++= schema.metadataProto
      val extra = scala.collection.mutable.ArrayBuffer.empty[Array[Byte]]
      if (statsFields.nonEmpty) {
        val alloc = if (allocator != null) allocator else new RootAllocator()
        try {
          extra += StatsStore.toIpc(statsFields, stats.toSeq, alloc)
          extra += StatsStore.sketchesToIpc(statsFields.map(f => f.id -> sketches(f.id)), alloc)
        } finally if (allocator == null) alloc.close()
        metadata += PageStatistics.BufferKey -> ByteString.copyFromUtf8("1")
        metadata += PageStatistics.SketchBufferKey -> ByteString.copyFromUtf8("2")
      }
      FileTail.write(pos, schema, metadata.result(), rowsWritten, pages.map(_.toSeq), extra.toSeq, 0, 3)
      out.close()
      state = "finished"
      WrittenFile(rowsWritten, fields.map(_.id), fields.indices.toVector, pos.position)
    } catch { case e: Throwable => state = "failed"; throw e }
  }

  /** Closes the stream; without `finish` the file is incomplete. */
  override def close(): Unit = if (state != "finished" && state != "closed") {
    state = "closed"
    out.close()
  }
}

object V20FileWriter {
  val DefaultMaxRowsPerPage: Int = 8192
  val DefaultMaxPageBytes: Long = 8L * 1024 * 1024
  val Alignment = 64
}
