package io.lancespark.format.v21.write

import java.io.OutputStream

import org.apache.arrow.memory.{ArrowBuf, BufferAllocator}
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.schema.{LanceField, LanceSchema}
import io.lancespark.format.file.{ContainerWriter, ExtraGlobals}
import io.lancespark.format.stats.{PageValues, StatsBuilder, StatsValues}
import io.lancespark.format.v21.LayerKind
import io.lancespark.format.v21.layout.{BlobPage, BlobV2Page, StructuralPage}

/** Writes one data file of file version 2.1 or 2.2 (`minor` 1 or 2).
  *
  * Only leaf fields get columns (a struct or list is folded into the
  * repetition and definition levels of the leaves below it, see
  * [[Shredder]]). Each column's rows are buffered until `maxRowsPerPage` rows
  * or `maxPageBytes` bytes, then encoded as one page ([[EncodingChoice]]: layout
  * and codecs chosen from the data). Leaves outside lists also get
  * statistics (docs/page-statistics.md) per block of `statsBlockRows` rows
  * of each page, in a global buffer readers that do not know it (pylance)
  * ignore.
  *
  * A 2.2 blob column (`lance.blob.v2`) is one column of descriptions
  * ([[BlobV2Page]]); its values go into this file or into blob files that
  * `blobFiles` creates by name ([[BlobV2Files]]).
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
    val statsBlockRows: Int = V21FileWriter.DefaultStatsBlockRows,
    blobFiles: Option[String => OutputStream] = None)
    extends ContainerWriter(out, 2, minor) {

  require(minor == 1 || minor == 2, s"file version 2.$minor is not written by this writer")
  require(maxRowsPerPage > 0, "maxRowsPerPage must be positive")
  require(statsBlockRows > 0, "statsBlockRows must be positive")

  private val encodings = new EncodingChoice(minor, codecs)

  /** The leaves, in the depth-first order of their columns. */
  private val leaves: Vector[LeafBuffer] = {
    val out = Vector.newBuilder[LeafBuffer]
    var column = 0
    def walk(f: LanceField, outer: List[LayerKind]): Unit =
      if (f.isStruct && BlobV2Page.isBlobV2(f)) {
        // a 2.2 blob column: one column of descriptions
        if (minor < 2) fail(s"column '${f.name}' is a ${BlobV2Page.ExtensionName} blob column, which file version 2.$minor " +
          s"cannot store (2.2 can; 2.1 stores blobs as large_binary with ${BlobPage.MetadataKey})")
        if (outer.nonEmpty) fail(s"column '${f.name}': blob columns inside structs or lists are not written")
        // (data, uri), and the (position, size) pylance's blob type declares: derived, never stored
        val kids = f.children.map(c => c.name -> c.arrowType)
        val u64 = new ArrowType.Int(64, false)
        val base = Vector("data" -> ArrowType.LargeBinary.INSTANCE, "uri" -> ArrowType.Utf8.INSTANCE)
        if (kids != base && kids != base ++ Vector("position" -> u64, "size" -> u64))
          fail(s"column '${f.name}' is a ${BlobV2Page.ExtensionName} blob column of fields " +
            s"${f.children.map(c => s"${c.name}: ${c.logicalType}").mkString(", ")}, not (data: large_binary, " +
            "uri: string[, position: uint64, size: uint64])")
        out += new LeafBuffer(f, column, Vector(LayerKind.Item), s"column $column (field '${f.name}', id ${f.id})",
          blobV2Out = Some((buf, at, len) => placeBlob(buf, at, len)))
        column += 1
      } else if (f.isStruct) {
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
        val blob = BlobPage.isBlobV1(f)
        if (blob && outer.nonEmpty) fail(s"column '${f.name}': blob columns inside structs or lists are not written")
        if (blob && !f.arrowType.isInstanceOf[ArrowType.LargeBinary])
          fail(s"column '${f.name}' is marked ${BlobPage.MetadataKey} but is ${f.logicalType}, not large_binary")
        if (blob && minor >= 2)
          fail(s"column '${f.name}': blob v1 columns (${BlobPage.MetadataKey}) are written at file version 2.1; " +
            "2.2 stores blobs as lance.blob.v2")
        out += new LeafBuffer(f, column, (LayerKind.Item :: outer).toVector, s"column $column (field '${f.name}', id ${f.id})",
          if (blob) Some((buf, at, len) => writeOutOfLine(buf, at, len)) else None)
        column += 1
      }
    schema.fields.foreach(walk(_, Nil))
    out.result()
  }

  /** The blob files of 2.2 blob columns, opened at the first value that needs one. */
  private lazy val blobs: BlobV2Files = new BlobV2Files(blobFiles.getOrElse(
    (name: String) => fail(s"a blob value over ${BlobV2Files.InlineMax} bytes needs a blob file ($name), and this " +
      "writer has no place for blob files")))
  private var blobsOpened = false

  /** Places one value of a 2.2 blob column: inline (into this file, 64-byte
    * aligned) or into a blob file, streamed from `buf` through a small buffer. */
  private def placeBlob(buf: ArrowBuf, at: Long, len: Long): BlobV2Description =
    if (BlobV2Files.kindOf(len) == BlobV2Files.Inline) BlobV2Description(BlobV2Files.Inline, writeOutOfLine(buf, at, len), len, 0)
    else {
      blobsOpened = true
      blobs.place(len, out => BlobV2Files.copy(buf, at, len, out))
    }

  /** Only leaves have columns, depth first. */
  override protected def columnFields: Vector[LanceField] = leaves.map(_.field)

  private val leafById: Map[Int, LeafBuffer] = leaves.map(l => l.field.id -> l).toMap
  private val shredders: Vector[Shredder] = schema.fields.map(f => new Shredder(f, l => leafById(l.id)))

  /** Leaves with statistics: outside lists, of a type statistics cover. */
  private val stats = new StatsBuilder(if (!statistics) Vector.empty else
    leaves.filter(l => l.maxRep == 0 && l.kind != ValueKind.Blob && l.kind != ValueKind.BlobV2 && !l.field.isFixedSizeList && StatsValues.kindOf(l.field.arrowType).isDefined)
      .map(_.field))
  private val firstRow = Array.fill(leaves.size)(0L)

  override protected def append(vectors: Seq[FieldVector], n: Int): Unit = {
    // in slices, so that a page never holds much more than its limits
    var a = 0
    while (a < n) {
      val b = math.min(n, a + math.max(1, math.min(maxRowsPerPage, 4096)))
      shredders.zip(vectors).foreach { case (s, v) => s.write(v, a, b) }
      leaves.foreach(l => if (l.rows >= maxRowsPerPage || l.bytes >= maxPageBytes) flush(l))
      a = b
    }
  }

  /** Encodes a leaf's buffered rows as a page and writes it. */
  private def flush(l: LeafBuffer): Unit = if (l.rows > 0) {
    val page = encodings.encode(l)
    val index = writePage(l.column, page.buffers.map(b => (b, b.length)), page.rows, firstRow(l.column),
      StructuralPage.LayoutType, page.layout.toByteString)
    if (stats.covers(l.field.id)) {
      // bounds per block of `statsBlockRows` rows of the page: a reader
      // pruning by them decodes only the chunks of the blocks that may match
      val values = new LeafPageValues(l)
      stats.sketch(l.field.id, values)
      var from = 0
      while (from < l.rows) {
        val until = math.min(l.rows, from.toLong + statsBlockRows).toInt
        stats.add(l.column, l.field.id, index, firstRow(l.column) + from, values, from, until)
        from = until
      }
    }
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

  override protected def finishPages(): Unit = {
    leaves.foreach(flush)
    if (blobsOpened) blobs.close()
  }

  /** Closes the blob files too (a writer closed without `finish`: its files are to be deleted). */
  override def close(): Unit =
    try if (blobsOpened) blobs.close() finally super.close()

  /** The statistics, when some page has them. */
  override protected def extraGlobals(): ExtraGlobals =
    if (stats.isEmpty) ExtraGlobals.Empty else stats.globals(Option(allocator))
}

object V21FileWriter {
  /** Rows per page: pages are the unit of statistics (pruning); chunks inside
    * a page are decoded on their own. */
  val DefaultMaxRowsPerPage: Int = 128 * 1024
  val DefaultMaxPageBytes: Long = 8L * 1024 * 1024
  /** Rows per statistics entry inside a page (pruning finer than pages:
    * about the rows of a Parquet page). */
  val DefaultStatsBlockRows: Int = 8192
}
