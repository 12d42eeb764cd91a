package io.lancespark.format.v20

import java.util.concurrent.Executor

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.complex.{LargeListVector, ListVector, StructVector}

import io.lancespark.format.DataFileReader
import io.lancespark.schema.{LanceField, LanceFormatException, LanceSchema, LogicalType}
import io.lancespark.format.arrow.{Block, DictionaryCache, Slice, VectorLoader}
import io.lancespark.format.arrow.Block._
import io.lancespark.format.file.{FileContainer, Footer}
import io.lancespark.format.input.{ByteRange, ByteReader, CoalescedReads, PlannedRead, RandomAccessSource, ReadArena, ReadPool}
import io.lancespark.format.v20.codec.PageContext

/** Reads one Lance 2.0 data file (footer version 0.3).
  *
  * Only the footer, the offset tables, the metadata of the columns asked for
  * and the pages overlapping the requested rows (plus the list item pages they
  * reference) are read. `fieldColumns` maps a Lance field id to its column. */
final class V20FileReader private (
    val file: FileContainer,
    schemaOverride: Option[LanceSchema],
    fieldColumnsOverride: Option[Map[Int, Int]])
    extends DataFileReader {

  private val source: RandomAccessSource = file.source

  override def path: String = source.path

  def footer: Footer = file.footer

  private def fail(problem: String): Nothing = throw LanceFormatException(path, problem)

  /** The schema the file itself stores. */
  def fileSchema: LanceSchema = file.fileSchema

  lazy val schema: LanceSchema = schemaOverride.getOrElse(fileSchema)

  /** Field id -> column index. */
  lazy val fieldColumns: Map[Int, Int] = fieldColumnsOverride.getOrElse(
    fileSchema.fields.flatMap(_.allFields).zipWithIndex.map { case (f, i) => f.id -> i }.toMap)

  override def numRows: Long = file.numRows

  private val columns = scala.collection.mutable.Map.empty[Int, V20Column]

  /** A column, its encodings parsed once (the read pool plans list items from it too). */
  private def column(index: Int): V20Column =
    columns.synchronized(columns.getOrElseUpdate(index, V20Column(file.columns.column(index), path)))

  private var decodedPages: Long = 0L

  private val dictionaries = new DictionaryCache

  /** Page bytes of the batch being decoded and of the next one, being read
    * meanwhile; an arena is reset when its batch is done (the vectors `read`
    * returns hold copies). */
  private val arenas = Array(new ReadArena, new ReadArena)

  /** The reads of a batch, issued before its decode. */
  private final class BatchReads(val fields: Seq[LanceField], val from: Long, val until: Long,
                                 val reads: CoalescedReads, val arena: Int)

  /** The next batch's reads, issued while the current one decodes. */
  private var ahead: Option[BatchReads] = None

  private var waitedNanos: Long = 0L

  override def scratchBytes: Long = arenas.map(_.capacity).sum

  /** Nanoseconds `read` spent waiting for storage so far. */
  override def storageWaitNanos: Long = waitedNanos

  /** Read requests made to storage so far (metadata included). */
  override def readRequests: Long = source.readRequests

  /** Pages decoded so far (every column, list items included). */
  override def pagesDecoded: Long = decodedPages

  /** Bytes read from the file so far. */
  override def bytesRead: Long = source.bytesRead

  private def columnOf(field: LanceField): V20Column = {
    val idx = fieldColumns.getOrElse(field.id,
      fail(s"field '${field.name}' (id ${field.id}) is not stored in this file"))
    if (idx < 0 || idx >= footer.numColumns)
      fail(s"field '${field.name}' (id ${field.id}) maps to column $idx but the file has ${footer.numColumns} columns")
    column(idx)
  }

  private def context(input: ByteReader, field: LanceField, col: V20Column, p: V20Page): PageContext =
    new PageContext(input, p.meta.buffers, col.meta.buffers, file.globalBuffers, col.index, p.index,
      s"column ${col.index} (field '${field.name}', id ${field.id})",
      directDictionary = LogicalType.isDictionary(field.logicalType), dictionaries)

  /** The reads that decoding rows [from, until) of the field will make, as
    * far as the page metadata tells; a list's items follow from its offsets.
    * Fields it cannot plan for plan nothing. */
  private def plan(field: LanceField, from: Long, until: Long): Seq[PlannedRead] =
    if (until <= from) Nil
    else if (field.isStruct) field.children.flatMap(plan(_, from, until))
    else planPages(field, from, until, itemsOf(field), dictionaryItems = true)

  /** Plans rows [from, until) of a field's own column page by page; a list
    * page's items [first, last) are planned by `items` from the page's base. */
  private def planPages(field: LanceField, from: Long, until: Long, items: Option[(Long, Long) => Seq[ByteRange]],
                        dictionaryItems: Boolean): Seq[PlannedRead] =
    scala.util.Try(columnOf(field)).toOption.toSeq.flatMap { col =>
      val bases = if (field.isList) col.listItemBases else None
      if (until > col.numItems) Nil
      else col.pagesOverlapping(from, until).flatMap { p =>
        val listItems: (Long, Long) => Seq[ByteRange] = (for {
          plan <- items
          base <- bases.flatMap(_.lift(p.index))
        } yield (first: Long, last: Long) => plan(base + first, base + last)).getOrElse((_, _) => Nil)
        p.plan(math.max(from, p.first) - p.first, math.min(until, p.end) - p.first,
          context(source, field, col, p), listItems, dictionaryItems)
      }
    }

  /** For a list field: what reading its items [a, b) takes, as far as known
    * before any of them is read (their offsets and values, not what nested
    * offsets point at). Built here, on the reading thread, because it runs on
    * the read pool once the list's offsets are in: it touches only column
    * metadata loaded now, and no dictionary cache. */
  private def itemsOf(field: LanceField): Option[(Long, Long) => Seq[ByteRange]] =
    if (!field.isList || field.children.size != 1) None
    else {
      def leaves(f: LanceField): Seq[LanceField] = if (f.isStruct) f.children.flatMap(leaves) else Seq(f)
      val itemFields = leaves(field.children.head)
      itemFields.foreach(f => scala.util.Try(columnOf(f))) // loaded now, read-only later
      Some((a: Long, b: Long) =>
        if (b <= a) Nil
        else itemFields.flatMap(f => planPages(f, a, b, None, dictionaryItems = false).map(_.range)))
    }

  private def issue(fields: Seq[LanceField], from: Long, until: Long, arena: Int, pool: Executor): BatchReads = {
    arenas(arena).reset()
    new BatchReads(fields, from, until,
      CoalescedReads.start(source, fields.flatMap(plan(_, from, until)), arenas(arena), pool), arena)
  }

  /** Decoded slices of a column's items [from, until). */
  private def slices(field: LanceField, col: V20Column, from: Long, until: Long): Vector[Slice] = {
    if (until <= from) return Vector.empty
    val input = batchInput
    if (until > col.numItems)
      fail(s"column ${col.index} (field '${field.name}', id ${field.id}) holds ${col.numItems} items, " +
        s"but items [$from, $until) are needed")
    val where = s"column ${col.index} (field '${field.name}', id ${field.id})"
    col.pagesOverlapping(from, until).map { p =>
      decodedPages += 1
      val s = math.max(from, p.first)
      val e = math.min(until, p.end)
      val block = p.decode(s - p.first, e - p.first, context(input, field, col, p))
      if (block.length != e - s) fail(s"$where page ${p.index}: decoded ${block.length} items, expected ${e - s}")
      Slice(block, 0, e - s)
    }
  }

  /** Fills `vec` (created from `field.toArrow`) with items [from, until) of the field. */
  private def fill(field: LanceField, vec: FieldVector, from: Long, until: Long): Unit = {
    val loader = new VectorLoader(vec.getAllocator,
      p => fail(s"field '${field.name}' (id ${field.id}): $p"))
    if (field.isStruct) {
      val sv = vec match {
        case s: StructVector => s
        case other => fail(s"field '${field.name}' is a struct but its Arrow vector is ${other.getClass.getSimpleName}")
      }
      loader.loadStruct(sv, until - from)
      val kids = sv.getChildrenFromFields.asScala
      if (kids.size != field.children.size)
        fail(s"struct field '${field.name}' has ${field.children.size} children but its vector has ${kids.size}")
      field.children.zip(kids).foreach { case (f, v) => fill(f, v, from, until) }
    } else if (field.isList) {
      if (field.children.size != 1) fail(s"list field '${field.name}' (id ${field.id}) has ${field.children.size} children, not 1")
      val col = columnOf(field)
      val ss = slices(field, col, from, until)
      val itemBase = col.listItemBases.getOrElse(
        fail(s"column ${col.index} (field '${field.name}', id ${field.id}) has pages that are not list pages"))
      val pagesOf = col.pagesOverlapping(from, until)
      val itemRanges = ss.zip(pagesOf).flatMap { case (s, p) =>
        listBlock(s.block).map { l =>
          val base = itemBase(p.index) + l.firstItem
          (base + l.offsets(s.start.toInt), base + l.offsets((s.start + s.count).toInt))
        }
      }
      itemRanges.zip(itemRanges.drop(1)).foreach { case (a, b) =>
        if (a._2 != b._1) fail(s"list field '${field.name}': item ranges of consecutive pages are not contiguous")
      }
      loader.loadList(vec, ss)
      val (ia, ib) = if (itemRanges.isEmpty) (0L, 0L) else (itemRanges.head._1, itemRanges.last._2)
      val child = vec match {
        case l: ListVector => l.getDataVector
        case l: LargeListVector => l.getDataVector
        case other => fail(s"field '${field.name}' is a list but its Arrow vector is ${other.getClass.getSimpleName}")
      }
      fill(field.children.head, child, ia, ib)
    } else {
      val col = columnOf(field)
      loader.loadLeaf(vec, slices(field, col, from, until))
    }
  }

  private def listBlock(b: Block): Option[ListBlock] = b match {
    case l: ListBlock            => Some(l)
    case NullableBlock(_, inner) => listBlock(inner)
    case AllNullBlock(_)         => None
    case other => fail(s"a list page decodes to ${other.getClass.getSimpleName}")
  }

  /** Where the batch being decoded gets its bytes. */
  private var batchInput: ByteReader = source

  override def read(fields: Seq[LanceField], from: Long, until: Long, allocator: BufferAllocator): Seq[FieldVector] =
    read(fields, from, until, allocator, None)

  /** Rows [from, until) of the fields. The batch's reads are planned together
    * (merged where close) before its decode starts, unless they already were
    * as the previous call's `next`. With a `next` (the rows the caller will ask
    * for next), reads run on the read pool: this batch's while its first
    * columns decode, the next batch's while this one decodes. Without one, the
    * calling thread makes this batch's reads, then decodes. */
  override def read(fields: Seq[LanceField], from: Long, until: Long, allocator: BufferAllocator,
                    next: Option[(Long, Long)]): Seq[FieldVector] = {
    if (from < 0 || until < from || until > numRows)
      fail(s"rows [$from, $until) are outside the file's $numRows rows")
    val current = ahead match {
      case Some(a) if a.from == from && a.until == until && a.fields == fields => a
      case other =>
        val t0 = System.nanoTime()
        other.foreach(_.reads.awaitAll())
        val issued = issue(fields, from, until, 0, if (next.isDefined) ReadPool.executor else ReadPool.caller)
        waitedNanos += System.nanoTime() - t0 // reads made here, or waited for
        issued
    }
    ahead = next.filter { case (f, u) => f >= 0 && f < u && u <= numRows }
      .map { case (f, u) => issue(fields, f, u, 1 - current.arena, ReadPool.executor) }
    val out = scala.collection.mutable.ArrayBuffer.empty[FieldVector]
    batchInput = current.reads
    try {
      fields.foreach { f =>
        val vec = f.toArrow.createVector(allocator)
        out += vec
        fill(f, vec, from, until)
      }
      out.toSeq
    } catch {
      case e: Throwable =>
        out.foreach(v => try v.close() catch { case _: Throwable => () })
        e match {
          case l: LanceFormatException => throw l
          case _: IndexOutOfBoundsException | _: IllegalArgumentException | _: IllegalStateException |
               _: ArithmeticException | _: NegativeArraySizeException | _: java.nio.BufferUnderflowException |
               _: MatchError | _: ClassCastException =>
            throw LanceFormatException(path, s"corrupt data: $e", e)
          case _ => throw e
        }
    } finally {
      batchInput = source
      current.reads.awaitAll()
      waitedNanos += current.reads.waitNanos
      source.attributeReads()
    }
  }

  override def close(): Unit = {
    try ahead.foreach(_.reads.awaitAll())
    finally { ahead = None; source.close() }
  }
}

object V20FileReader {

  /** A data file of a dataset: `schema` is the dataset's, `fieldColumns` the
    * manifest's field id -> column index mapping. */
  def open(source: RandomAccessSource, schema: LanceSchema, fieldColumns: Map[Int, Int]): V20FileReader =
    new V20FileReader(container(source), Some(schema), Some(fieldColumns))

  /** A standalone file: schema and column mapping (depth first) from the file. */
  def openStandalone(source: RandomAccessSource): V20FileReader = new V20FileReader(container(source), None, None)

  /** Whether a footer is 2.0's (0.3 in older files). */
  def isV20(f: Footer): Boolean = (f.major == 0 && f.minor == 3) || (f.major == 2 && f.minor == 0)

  private def container(source: RandomAccessSource): FileContainer =
    FileContainer.open(source, isV20, "2.0; this reader only reads 2.0 files")
}
