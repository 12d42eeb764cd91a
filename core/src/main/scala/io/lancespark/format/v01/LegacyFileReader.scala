package io.lancespark.format.v01

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{BaseFixedWidthVector, BaseLargeVariableWidthVector, BaseVariableWidthVector,
  BitVector, FieldVector, NullVector}
import org.apache.arrow.vector.complex.{FixedSizeListVector, LargeListVector, ListVector, StructVector}
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.format.DataFileReader
import io.lancespark.schema.{FieldEncoding, LanceField, LanceFormatException, LanceSchema, LogicalType}
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.proto.file.{Field => PbField}

/** Reads one file of format 0.1 ("legacy").
  *
  * Layout: each batch (row group) stores one page per field with data, in the
  * page table under (field id, batch). A struct has no page and no validity;
  * its children are stored as columns. A list's page holds `rows + 1` positions
  * (i32, or i64 for large lists) into its child's page of the same batch,
  * starting at 0 per batch, and has no validity (a null list reads as empty).
  * Leaves are plain (fixed width, no validity), var-binary (empty = null when
  * nullable) or dictionary encoded. */
final class LegacyFileReader private (
    source: RandomAccessSource,
    val schema: LanceSchema,
    fileFieldIds: Set[Int],
    val footer: LegacyFooter,
    pageTable: PageTable) extends DataFileReader {

  override def path: String = source.path
  override def numRows: Long = footer.numRows

  private val io = new PageReader(source, pageTable)
  private lazy val embeddedFields: Map[Int, PbField] =
    LegacyFooter.readManifest(source, footer).map(_.getFieldsList.asScala.map(f => f.getId -> f).toMap)
      .getOrElse(Map.empty)
  private val dictionaries = mutable.Map.empty[Int, LegacyDictionary]

  override def close(): Unit = source.close()

  override def bytesRead: Long = source.bytesRead

  override def readRequests: Long = source.readRequests

  override def read(fields: Seq[LanceField], from: Long, until: Long, allocator: BufferAllocator): Seq[FieldVector] = {
    if (from < 0 || until < from || until > numRows)
      throw LanceFormatException(path, s"rows [$from, $until) are outside the file's $numRows rows")
    if (until - from > Int.MaxValue - 1)
      throw LanceFormatException(path, s"cannot read ${until - from} rows into one vector")
    val segments = batchSegments(from, until)
    val rows = (until - from).toInt
    val out = mutable.ArrayBuffer.empty[FieldVector]
    try {
      fields.foreach { f =>
        checkInFile(f)
        val read = fieldRead(f, segments, rows)
        val vec = f.toArrow.createVector(allocator)
        out += vec
        allocate(read, vec)
        fill(read, vec)
        finish(read, vec)
      }
      out.toSeq
    } catch {
      case e: Throwable =>
        out.foreach(v => try v.close() catch { case _: Throwable => () })
        e match {
          case _: LanceFormatException => throw e
          case _: IndexOutOfBoundsException | _: IllegalArgumentException | _: IllegalStateException |
               _: java.nio.BufferUnderflowException | _: UnsupportedOperationException |
               _: NegativeArraySizeException | _: ArithmeticException =>
            throw LanceFormatException(path, s"corrupt or unsupported data: $e", e)
          case _ => throw e
        }
    }
  }

  /** The parts of batches holding file rows `[from, until)`. */
  private def batchSegments(from: Long, until: Long): Vector[Segment] = {
    val b = Vector.newBuilder[Segment]
    var i = 0
    while (i < footer.numBatches) {
      val s = footer.batchStart(i)
      val e = footer.batchEnd(i)
      if (e > from && s < until && e > s) b += Segment(i, math.max(from, s) - s, math.min(until, e) - s)
      i += 1
    }
    b.result()
  }

  private def checkInFile(f: LanceField): Unit = f.allFields.foreach { x =>
    if (!fileFieldIds.contains(x.id))
      io.fail(x, "is not stored in this data file")
    x.encoding match {
      case FieldEncoding.Rle | FieldEncoding.Unknown(_) => io.fail(x, s"encoding ${x.encoding.name.toUpperCase(java.util.Locale.ROOT)} is not supported")
      case _ =>
    }
  }

  // ---- what to read, and how big each vector is --------------------

  private def fieldRead(f: LanceField, segs: Vector[Segment], rows: Int): FieldRead = {
    val t = f.arrowType
    if (LogicalType.isDictionary(f.logicalType)) {
      val values = dictionaryValues(f)
      DictRead(f, rows, values, DictionaryDecoder.keys(io, f, segs, values.size))
    } else t match {
      case _: ArrowType.Null => NullRead(f, rows)
      case _: ArrowType.Struct =>
        StructRead(f, rows, f.children.map(fieldRead(_, segs, rows)))
      case _: ArrowType.List | _: ArrowType.LargeList =>
        if (f.children.length != 1) io.fail(f, s"a list needs one child field, found ${f.children.length}")
        val large = t.isInstanceOf[ArrowType.LargeList]
        val positions = segs.map(s => PlainDecoder.positions(io, f, s, large))
        val childSegs = segs.zip(positions).map { case (s, p) => Segment(s.batch, p.head, p.last) }
        val childRows = childSegs.map(_.length).sum
        if (childRows > Int.MaxValue - 1) io.fail(f, s"$childRows list items do not fit one vector")
        ListRead(f, rows, positions, fieldRead(f.children.head, childSegs, childRows.toInt))
      case fsl: ArrowType.FixedSizeList =>
        val item = LogicalType.toArrow(LogicalType.fixedSizeListItem(f.logicalType), s"column '${f.name}'")
        val w = PlainDecoder.width(item).getOrElse(io.fail(f, s"fixed-size list items of type $item are not supported"))
        if (rows.toLong * fsl.getListSize > Int.MaxValue - 1) io.fail(f, "too many fixed-size list items for one vector")
        segs.foreach(s => io.check(f, s.batch, s.start * fsl.getListSize, s.length * fsl.getListSize, w, fsl.getListSize))
        PlainRead(f, rows, segs, fsl.getListSize, w)
      case _ if DictionaryDecoder.isBinary(t) =>
        val positions = segs.map(s => VarBinaryDecoder.positions(io, f, s))
        val bytes = VarBinaryDecoder.dataBytes(positions)
        val limit = if (t.isInstanceOf[ArrowType.Utf8] || t.isInstanceOf[ArrowType.Binary]) Int.MaxValue.toLong else Long.MaxValue
        if (bytes > math.min(limit, Int.MaxValue.toLong - 16)) io.fail(f, s"$bytes bytes of values do not fit one vector")
        VarBinaryRead(f, rows, segs, positions, bytes)
      case _ =>
        PlainDecoder.width(t) match {
          case Some(w) =>
            segs.foreach(s => io.check(f, s.batch, s.start, s.length, w, 1))
            PlainRead(f, rows, segs, 1, w)
          case None => io.fail(f, s"type ${f.logicalType} is not supported in 0.1 files")
        }
    }
  }

  private def dictionaryValues(f: LanceField): LegacyDictionary =
    dictionaries.getOrElseUpdate(f.id, {
      val pb = embeddedFields.get(f.id).filter(_.hasDictionary).getOrElse(
        io.fail(f, "dictionary values not found: the file has no embedded manifest describing them"))
      DictionaryDecoder.loadValues(io, f, pb.getDictionary.getOffset, pb.getDictionary.getLength)
    })

  // ---- allocation, filling, value counts ---------------------------------------

  private def allocFixed(v: BaseFixedWidthVector, n: Int): Unit = {
    v.setInitialCapacity(math.max(n, 1))
    v.allocateNew()
    while (v.getValueCapacity < n) v.reAlloc()
  }

  private def allocate(plan: FieldRead, vec: FieldVector): Unit = (plan, vec) match {
    case (_: NullRead, _) => ()
    case (p: PlainRead, v: FixedSizeListVector) =>
      v.setInitialCapacity(math.max(p.rows, 1))
      v.allocateNew()
      allocFixed(v.getDataVector.asInstanceOf[BaseFixedWidthVector], p.rows * p.perRow)
    case (p: PlainRead, v: BaseFixedWidthVector) => allocFixed(v, p.rows)
    case (p: VarBinaryRead, v: BaseVariableWidthVector) => v.allocateNew(math.max(p.bytes, 1), math.max(p.rows, 1))
    case (p: VarBinaryRead, v: BaseLargeVariableWidthVector) => v.allocateNew(math.max(p.bytes, 1), math.max(p.rows, 1))
    case (p: DictRead, v) => p.values match {
        case d: BinaryDictionary =>
          val bytes = math.max(DictionaryDecoder.decodedBytes(d, p.keys), 1)
          v match {
            case v: BaseVariableWidthVector => v.allocateNew(bytes, math.max(p.rows, 1))
            case v: BaseLargeVariableWidthVector => v.allocateNew(bytes, math.max(p.rows, 1))
            case _ => io.fail(p.field, s"cannot decode a string dictionary into ${v.getClass.getSimpleName}")
          }
        case _: FixedDictionary => v match {
            case v: BaseFixedWidthVector => allocFixed(v, p.rows)
            case _ => io.fail(p.field, s"cannot decode an integer dictionary into ${v.getClass.getSimpleName}")
          }
      }
    case (p: StructRead, v: StructVector) =>
      v.setInitialCapacity(math.max(p.rows, 1))
      v.allocateNew()
      p.children.zip(structChildren(v, p)).foreach { case (cp, cv) => allocate(cp, cv) }
    case (p: ListRead, v: ListVector) =>
      v.setInitialCapacity(math.max(p.rows, 1))
      v.allocateNew()
      allocate(p.child, v.getDataVector)
    case (p: ListRead, v: LargeListVector) =>
      v.setInitialCapacity(math.max(p.rows, 1))
      v.allocateNew()
      allocate(p.child, v.getDataVector)
    case (p, v) => io.fail(p.field, s"internal mismatch: cannot read into ${v.getClass.getSimpleName}")
  }

  private def structChildren(v: StructVector, p: StructRead): Vector[FieldVector] =
    p.children.map(c => Option(v.getChild(c.field.name, classOf[FieldVector]))
      .getOrElse(io.fail(c.field, "missing from the struct vector")))

  private def fill(plan: FieldRead, vec: FieldVector): Unit = (plan, vec) match {
    case (_: NullRead, _) => ()
    case (p: PlainRead, v: FixedSizeListVector) =>
      Validity.setAllValid(v.getValidityBuffer, p.rows)
      val child = v.getDataVector.asInstanceOf[BaseFixedWidthVector]
      fillPlain(p, child, p.rows * p.perRow)
    case (p: PlainRead, v: BaseFixedWidthVector) => fillPlain(p, v, p.rows)
    case (p: VarBinaryRead, v: BaseVariableWidthVector) =>
      VarBinaryDecoder.fill(io, p.field, p.segments, p.positions, p.field.nullable, p.rows, 4,
        v.getOffsetBuffer, v.getDataBuffer, v.getValidityBuffer)
    case (p: VarBinaryRead, v: BaseLargeVariableWidthVector) =>
      VarBinaryDecoder.fill(io, p.field, p.segments, p.positions, p.field.nullable, p.rows, 8,
        v.getOffsetBuffer, v.getDataBuffer, v.getValidityBuffer)
    case (p: DictRead, v) => (p.values, v) match {
        case (d: BinaryDictionary, v: BaseVariableWidthVector) =>
          DictionaryDecoder.fillBinary(d, p.keys, 4, v.getOffsetBuffer, v.getDataBuffer, v.getValidityBuffer)
        case (d: BinaryDictionary, v: BaseLargeVariableWidthVector) =>
          DictionaryDecoder.fillBinary(d, p.keys, 8, v.getOffsetBuffer, v.getDataBuffer, v.getValidityBuffer)
        case (d: FixedDictionary, v: BaseFixedWidthVector) =>
          DictionaryDecoder.fillFixed(d, p.keys, v.getDataBuffer, v.getValidityBuffer)
        case _ => io.fail(p.field, "internal mismatch of dictionary and vector")
      }
    case (p: StructRead, v: StructVector) =>
      Validity.setAllValid(v.getValidityBuffer, p.rows)
      p.children.zip(structChildren(v, p)).foreach { case (cp, cv) => fill(cp, cv) }
    case (p: ListRead, v: ListVector) =>
      fillListOffsets(p, 4, v.getOffsetBuffer)
      Validity.setAllValid(v.getValidityBuffer, p.rows)
      fill(p.child, v.getDataVector)
    case (p: ListRead, v: LargeListVector) =>
      fillListOffsets(p, 8, v.getOffsetBuffer)
      Validity.setAllValid(v.getValidityBuffer, p.rows)
      fill(p.child, v.getDataVector)
    case (p, v) => io.fail(p.field, s"internal mismatch: cannot read into ${v.getClass.getSimpleName}")
  }

  private def fillPlain(p: PlainRead, v: BaseFixedWidthVector, values: Int): Unit = {
    if (v.isInstanceOf[BitVector]) PlainDecoder.copyBits(io, p.field, p.segments, p.perRow, values, v.getDataBuffer)
    else {
      if (v.getTypeWidth != p.width)
        io.fail(p.field, s"internal mismatch: value width ${p.width} but vector width ${v.getTypeWidth}")
      PlainDecoder.copyBytes(io, p.field, p.segments, p.perRow, p.width, v.getDataBuffer)
    }
    Validity.setAllValid(v.getValidityBuffer, values)
  }

  private def fillListOffsets(p: ListRead, width: Int, buf: org.apache.arrow.memory.ArrowBuf): Unit = {
    val out = java.nio.ByteBuffer.allocate((p.rows + 1) * width).order(java.nio.ByteOrder.LITTLE_ENDIAN)
    var row = 0
    var base = 0L
    p.positions.foreach { pos =>
      var i = 0
      while (i < pos.length) {
        val o = base + pos(i) - pos(0)
        if (width == 4) out.putInt((row + i) * 4, o.toInt) else out.putLong((row + i) * 8, o)
        i += 1
      }
      base += pos.last - pos.head
      row += pos.length - 1
    }
    buf.setBytes(0, out)
  }

  /** Value counts, children first (parents re-derive their children's counts). */
  private def finish(plan: FieldRead, vec: FieldVector): Unit = (plan, vec) match {
    case (p: StructRead, v: StructVector) =>
      p.children.zip(structChildren(v, p)).foreach { case (cp, cv) => finish(cp, cv) }
      v.setValueCount(p.rows)
    case (p: ListRead, v: ListVector) =>
      finish(p.child, v.getDataVector)
      v.setLastSet(p.rows - 1)
      v.setValueCount(p.rows)
    case (p: ListRead, v: LargeListVector) =>
      finish(p.child, v.getDataVector)
      v.setLastSet(p.rows - 1)
      v.setValueCount(p.rows)
    case (p, v: FixedSizeListVector) =>
      v.getDataVector.setValueCount(p.rows * v.getListSize)
      v.setValueCount(p.rows)
    case (p, v: BaseVariableWidthVector) =>
      v.setLastSet(p.rows - 1)
      v.setValueCount(p.rows)
    case (p, v: BaseLargeVariableWidthVector) =>
      v.setLastSet(p.rows - 1)
      v.setValueCount(p.rows)
    case (p, v: NullVector) => v.setValueCount(p.rows)
    case (p, v) => v.setValueCount(p.rows)
  }
}

object LegacyFileReader {

  /** A reader of columns stored like data but described by another schema and
    * page table (the statistics section); does not own `source`. */
  private[v01] def forColumns(source: RandomAccessSource, schema: LanceSchema, footer: LegacyFooter,
                              pageTable: PageTable): LegacyFileReader =
    new LegacyFileReader(source, schema, schema.allFields.map(_.id).toSet, footer, pageTable)

  /** Opens a 0.1 data file. `schema` is the dataset schema; `fileFieldIds` the
    * field ids the manifest lists for this file (`DataFile.fields`). */
  def open(source: RandomAccessSource, schema: LanceSchema, fileFieldIds: Seq[Int]): LegacyFileReader = {
    val ids = fileFieldIds.filter(_ >= 0)
    if (ids.isEmpty) throw LanceFormatException(source.path, "the data file lists no field ids")
    try {
      val footer = LegacyFooter.read(source)
      val pageTable = PageTable.read(source, footer.pageTablePosition, ids.min, ids.max, footer.numBatches)
      new LegacyFileReader(source, schema, ids.toSet, footer, pageTable)
    } catch {
      case e @ (_: IndexOutOfBoundsException | _: IllegalArgumentException | _: ArithmeticException |
                _: java.nio.BufferUnderflowException | _: NegativeArraySizeException) =>
        throw LanceFormatException(source.path, s"corrupt file: $e", e)
    }
  }
}
