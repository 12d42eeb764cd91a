package io.lancespark.format.v21.write

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
import io.lancespark.format.stats.{DistinctSketch, PageStatistics, PageValues, StatsCollector, StatsStore, StatsValues}
import io.lancespark.format.v21.LayerKind
import io.lancespark.format.v21.layout.StructuralPage
import io.lancespark.proto.file2.ColumnMetadata

/** Writes one data file of file version 2.1 or 2.2 (`minor` 1 or 2).
  *
  * Only leaf fields get columns (a struct or list is folded into the
  * repetition and definition levels of the leaves below it, see
  * [[Shredder]]). Each column's rows are buffered until `maxRowsPerPage` rows
  * or `maxPageBytes` bytes, then encoded as one page ([[PageWriter]]: layout
  * and codecs chosen from the data). Leaves outside lists also get
  * statistics (docs/page-statistics.md) per block of `statsBlockRows` rows
  * of each page, in a global buffer readers that do not know it (pylance)
  * ignore.
  *
  * `write` takes one vector per top-level field (types as `field.toArrow`).
  * The writer owns `out`: `finish` writes the metadata and closes it; `close`
  * without `finish` closes it without a footer (an unusable file to delete). */
final class V21FileWriter(
    out: OutputStream,
    val path: String,
    val schema: LanceSchema,
    minor: Int,
    val maxRowsPerPage: Int = V21FileWriter.DefaultMaxRowsPerPage,
    val maxPageBytes: Long = V21FileWriter.DefaultMaxPageBytes,
    codecs: WriteCodecs = WriteCodecs(),
    statistics: Boolean = true,
    allocator: BufferAllocator = null,
    val statsBlockRows: Int = V21FileWriter.DefaultStatsBlockRows)
    extends DataFileWriter {

  require(minor == 1 || minor == 2, s"file version 2.$minor is not written by this writer")
  require(maxRowsPerPage > 0, "maxRowsPerPage must be positive")
  require(statsBlockRows > 0, "statsBlockRows must be positive")

  private def fail(problem: String): Nothing = throw LanceFormatException(path, problem)

  private val pos = new PositionedOutput(out, V21FileWriter.Alignment)
  private val pageWriter = new PageWriter(minor, codecs)
  private var rowsWritten = 0L
  private var state: String = "open"

  /** The leaves, in the depth-first order of their columns. */
  private val leaves: Vector[LeafBuffer] = {
    val out = Vector.newBuilder[LeafBuffer]
    var column = 0
    def walk(f: LanceField, outer: List[LayerKind]): Unit =
      if (f.isStruct) {
        if (f.metadata.contains("lance-encoding:packed"))
          fail(s"column '${f.name}' is a packed struct (lance-encoding:packed), which this writer does not write")
        if (f.children.isEmpty) fail(s"struct column '${f.name}' has no fields")
        f.children.foreach(walk(_, LayerKind.Item :: outer))
      } else if (f.isList || f.isMap) {
        if (f.isMap && minor < 2) fail(s"column '${f.name}' is a map, which file version 2.1 cannot store (2.2 can)")
        walk(f.children.head, LayerKind.List :: outer)
      } else {
        if (f.arrowType.isInstanceOf[ArrowType.FixedSizeList] && f.logicalType.contains("struct"))
          fail(s"column '${f.name}': fixed-size lists of structs are not supported")
        out += new LeafBuffer(f, column, (LayerKind.Item :: outer).toVector, s"column $column (field '${f.name}', id ${f.id})")
        column += 1
      }
    schema.fields.foreach(walk(_, Nil))
    out.result()
  }

  private val leafById: Map[Int, LeafBuffer] = leaves.map(l => l.field.id -> l).toMap
  private val shredders: Vector[Shredder] = schema.fields.map(f => new Shredder(f, l => leafById(l.id)))
  private val pages = Vector.fill(leaves.size)(ArrayBuffer.empty[ColumnMetadata.Page])

  /** Leaves with statistics: outside lists, of a type statistics cover. */
  private val statsKinds: Map[Int, StatsValues.Kind] = if (!statistics) Map.empty else
    leaves.filter(l => l.maxRep == 0 && !l.field.isFixedSizeList)
      .flatMap(l => StatsValues.kindOf(l.field.arrowType).map(l.field.id -> _)).toMap
  private val stats = ArrayBuffer.empty[StatsCollector.RawStat]
  /** Distinct-value sketches of the fields with statistics, over the whole file. */
  private val sketches: Map[Int, DistinctSketch] = statsKinds.keys.map(_ -> DistinctSketch.empty()).toMap
  private val firstRow = Array.fill(leaves.size)(0L)

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
    try {
      // in slices, so that a page never holds much more than its limits
      var a = 0
      while (a < n) {
        val b = math.min(n, a + math.max(1, math.min(maxRowsPerPage, 4096)))
        shredders.zip(vectors).foreach { case (s, v) => s.write(v, a, b) }
        leaves.foreach(l => if (l.rows >= maxRowsPerPage || l.bytes >= maxPageBytes) flush(l))
        a = b
      }
      rowsWritten += n
    } catch { case e: Throwable => state = "failed"; throw e }
  }

  private def check(f: LanceField, v: FieldVector, path: String): Unit = {
    val expected = f.arrowType
    val actual = v.getField.getType
    val ok = (expected, actual) match {
      case (_: ArrowType.FixedSizeList, a: ArrowType.FixedSizeList) => expected == a
      case (_: ArrowType.Map, _: ArrowType.Map | _: ArrowType.List) => true
      case (e, a) => e == a
    }
    if (!ok) fail(s"column '$path' is $expected in the schema but the vector is $actual")
    v match {
      case s: StructVector =>
        val kids = s.getChildrenFromFields.asScala
        if (kids.size != f.children.size)
          fail(s"struct column '$path' has ${f.children.size} fields in the schema but its vector has ${kids.size}")
        f.children.zip(kids).foreach { case (c, k) => check(c, k, s"$path.${c.name}") }
      case l: ListVector => check(f.children.head, l.getDataVector, s"$path.${f.children.head.name}")
      case l: LargeListVector => check(f.children.head, l.getDataVector, s"$path.${f.children.head.name}")
      case _ => ()
    }
  }

  /** Encodes a leaf's buffered rows as a page and writes it. */
  private def flush(l: LeafBuffer): Unit = if (l.rows > 0) {
    val page = pageWriter.encode(l)
    val p = ColumnMetadata.Page.newBuilder().setLength(page.rows).setPriority(firstRow(l.column))
      .setEncoding(FileTail.direct(StructuralPage.LayoutType, page.layout.toByteString))
    page.buffers.foreach { b =>
      p.addBufferOffsets(pos.writeAligned(b, b.length))
      p.addBufferSizes(b.length.toLong)
    }
    statsKinds.get(l.field.id).foreach { kind =>
      // bounds per block of `statsBlockRows` rows of the page: a reader
      // pruning by them decodes only the chunks of the blocks that may match
      val values = new LeafPageValues(l)
      StatsCollector.addTo(sketches(l.field.id), kind, values, 0, values.rows)
      var from = 0
      while (from < l.rows) {
        val until = math.min(l.rows, from.toLong + statsBlockRows).toInt
        val (nulls, mn, mx) = StatsCollector.collect(kind, values, from, until)
        stats += StatsCollector.RawStat(l.column, l.field.id, pages(l.column).size, firstRow(l.column) + from,
          until - from, nulls, mn, mx, StatsCollector.valueBytes(kind, values, from, until))
        from = until
      }
    }
    pages(l.column) += p.build()
    firstRow(l.column) += l.rows
    l.clear()
  }

  /** A page's values as statistics read them (leaves outside lists: one value per row). */
  private final class LeafPageValues(l: LeafBuffer) extends PageValues {
    def rows: Int = l.values
    def nullCount: Long = l.nulls
    def isValid(i: Int): Boolean = l.defs(i) == 0
    def values: Array[Byte] = if (l.kind == ValueKind.Bool) l.bits.arr else l.fixed.arr
    def end(i: Int): Long = l.ends.getLong(i)
  }

  /** Writes the remaining pages, the statistics, schema, column metadata and
    * footer; closes the stream. */
  override def finish(): WrittenFile = {
    if (state != "open") fail(s"finish on a writer that is $state")
    try {
      leaves.foreach(flush)
      val metadata = Map.newBuilder[String, ByteString] ++= schema.metadataProto
      val extra = ArrayBuffer.empty[Array[Byte]]
      if (stats.nonEmpty) {
        val alloc = if (allocator != null) allocator else new RootAllocator()
        val fields = leaves.map(_.field).filter(f => statsKinds.contains(f.id))
        try {
          extra += StatsStore.toIpc(fields, stats.toSeq, alloc)
          extra += StatsStore.sketchesToIpc(fields.map(f => f.id -> sketches(f.id)), alloc)
        } finally if (allocator == null) alloc.close()
        metadata += PageStatistics.BufferKey -> ByteString.copyFromUtf8("1")
        metadata += PageStatistics.SketchBufferKey -> ByteString.copyFromUtf8("2")
      }
      val size = FileTail.write(pos, schema, metadata.result(), rowsWritten, pages.map(_.toSeq), extra.toSeq, 2, minor)
      out.close()
      state = "finished"
      WrittenFile(rowsWritten, leaves.map(_.field.id), leaves.map(_.column), size)
    } catch { case e: Throwable => state = "failed"; throw e }
  }

  override def close(): Unit = if (state != "finished" && state != "closed") {
    state = "closed"
    out.close()
  }
}

object V21FileWriter {
  /** Rows per page: pages are the unit of statistics (pruning); chunks inside
    * a page are decoded on their own. */
  val DefaultMaxRowsPerPage: Int = 128 * 1024
  val DefaultMaxPageBytes: Long = 8L * 1024 * 1024
  /** Rows per statistics entry inside a page (pruning finer than pages:
    * about the rows of a Parquet page). */
  val DefaultStatsBlockRows: Int = 8192
  val Alignment = 64
}
