package io.lancespark.format.v20

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector

import io.lancespark.schema.{LanceField, LanceSchema, LogicalType}
import io.lancespark.format.arrow.{Bits, Block, DictionaryCache, Slice, VectorLoader}
import io.lancespark.format.arrow.Block._
import io.lancespark.format.file.{ContainerReader, FileContainer, Footer}
import io.lancespark.format.input.{BlobBytes, ByteRange, ByteReader, CoalescedReads, PlannedRead, RandomAccessSource, RowRangeSums}
import io.lancespark.format.v20.codec.PageContext

/** Reads one Lance 2.0 data file (footer version 0.3).
  *
  * Only the footer, the offset tables, the metadata of the columns asked for
  * and the pages overlapping the requested rows (plus the list item pages they
  * reference) are read. `fieldColumns` maps a Lance field id to its column. */
final class V20FileReader private (
    container: FileContainer,
    schemaOverride: Option[LanceSchema],
    fieldColumnsOverride: Option[Map[Int, Int]])
    extends ContainerReader(container, schemaOverride, fieldColumnsOverride) {

  /** Every field has a column of its own. */
  override protected def storedFields(field: LanceField): Seq[LanceField] = field.allFields

  private val columns = scala.collection.mutable.Map.empty[Int, V20Column]

  /** A column, its encodings parsed once (the read pool plans list items from it too). */
  private def column(index: Int): V20Column =
    columns.synchronized(columns.getOrElseUpdate(index, V20Column(file.columns.column(index), path)))

  private val dictionaries = new DictionaryCache

  private def columnOf(field: LanceField): V20Column = column(columnIndex(field))

  private def context(input: ByteReader, field: LanceField, col: V20Column, p: V20Page): PageContext =
    new PageContext(input, p.meta.buffers, col.meta.buffers, file.globalBuffers, col.index, p.index,
      s"column ${col.index} (field '${field.name}', id ${field.id})",
      directDictionary = LogicalType.isDictionary(field.logicalType), dictionaries)

  /** The reads that decoding rows [from, until) of the field will make, as
    * far as the page metadata tells; a list's items follow from its offsets.
    * Fields it cannot plan for plan nothing. */
  override protected def plan(field: LanceField, from: Long, until: Long): Seq[PlannedRead] =
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

  /** Decoded slices of a column's items [from, until). */
  private def slices(field: LanceField, col: V20Column, from: Long, until: Long, input: ByteReader): Vector[Slice] = {
    if (until <= from) return Vector.empty
    if (until > col.numItems)
      fail(s"column ${col.index} (field '${field.name}', id ${field.id}) holds ${col.numItems} items, " +
        s"but items [$from, $until) are needed")
    val where = s"column ${col.index} (field '${field.name}', id ${field.id})"
    col.pagesOverlapping(from, until).map { p =>
      pageDecoded()
      val s = math.max(from, p.first)
      val e = math.min(until, p.end)
      val block = p.decode(s - p.first, e - p.first, context(input, field, col, p))
      if (block.length != e - s) fail(s"$where page ${p.index}: decoded ${block.length} items, expected ${e - s}")
      Slice(block, 0, e - s)
    }
  }

  /** Fills `vec` (created from `field.toArrow`) with the items of `ranges`
    * (sorted, disjoint) of the field, one range after the other, the batch's
    * pages read from `input`. */
  private def fill(field: LanceField, vec: FieldVector, ranges: IndexedSeq[(Long, Long)], input: ByteReader): Unit = {
    val loader = new VectorLoader(vec.getAllocator,
      p => fail(s"field '${field.name}' (id ${field.id}): $p"))
    def all(col: V20Column): Vector[Slice] = ranges.iterator.flatMap { case (from, until) =>
      slices(field, col, from, until, input) }.toVector
    if (field.isStruct) {
      val sv = structVector(field, vec)
      loader.loadStruct(sv, RowRangeSums.rows(ranges))
      val kids = structChildren(field, sv)
      field.children.zip(kids).foreach { case (f, v) => fill(f, v, ranges, input) }
    } else if (field.isList) {
      if (field.children.size != 1) fail(s"list field '${field.name}' (id ${field.id}) has ${field.children.size} children, not 1")
      val col = columnOf(field)
      val itemBase = col.listItemBases.getOrElse(
        fail(s"column ${col.index} (field '${field.name}', id ${field.id}) has pages that are not list pages"))
      // each range's list slices and the items they span
      val parts = ranges.map { case (from, until) =>
        val ss = slices(field, col, from, until, input)
        val itemRanges = ss.zip(col.pagesOverlapping(from, until)).flatMap { case (s, p) =>
          listBlock(s.block).map { l =>
            val base = itemBase(p.index) + l.firstItem
            (base + l.offsets(s.start.toInt), base + l.offsets((s.start + s.count).toInt))
          }
        }
        itemRanges.zip(itemRanges.drop(1)).foreach { case (a, b) =>
          if (a._2 != b._1) fail(s"list field '${field.name}': item ranges of consecutive pages are not contiguous")
        }
        (ss, if (itemRanges.isEmpty) (0L, 0L) else (itemRanges.head._1, itemRanges.last._2))
      }
      loader.loadList(vec, parts.flatMap(_._1))
      fill(field.children.head, listItems(field, vec), parts.map(_._2).filter(r => r._2 > r._1), input)
    } else if (field.metadata.get("lance-encoding:blob").contains("true")) {
      loader.loadLeaf(vec, blobValues(field, all(columnOf(field))))
    } else {
      loader.loadLeaf(vec, all(columnOf(field)))
    }
  }

  /** A 2.0 blob column (`lance-encoding:blob`): each row's description
    * (position, size) of its value elsewhere in this file; a size of 0 at
    * position 1 is a null (0 at 0: an empty value). The values' bytes are
    * read straight into the batch's one data buffer. */
  private def blobValues(field: LanceField, descriptions: Vector[Slice]): Seq[Slice] = {
    val n = descriptions.map(_.count).sum.toInt
    val pos = new Array[Long](n)
    val size = new Array[Long](n)
    var at = 0
    descriptions.foreach {
      case Slice(PackedBlock(_, Vector(FixedBlock(_, 8, p), FixedBlock(_, 8, z))), start, count) =>
        var i = 0
        while (i < count) {
          pos(at) = p.getLong(8 * (start + i).toInt); size(at) = z.getLong(8 * (start + i).toInt); at += 1; i += 1
        }
      case Slice(other, _, _) =>
        fail(s"blob field '${field.name}': descriptions decode to ${other.getClass.getSimpleName}, not (position, size) pairs")
    }
    val valid = Bits.tabulate(n)(i => !(size(i) == 0 && pos(i) == 1))
    var i = 0
    while (i < n) {
      if (size(i) < 0 || pos(i) < 0 || (size(i) > 0 && pos(i) + size(i) > source.size))
        fail(s"blob field '${field.name}', row ${i} of the batch: [${pos(i)}, ${pos(i) + size(i)}) lies outside the file")
      i += 1
    }
    Seq(BlobBytes.gather(field.name, _ => source, pos, size, valid, fail))
  }

  private def listBlock(b: Block): Option[ListBlock] = b match {
    case l: ListBlock            => Some(l)
    case NullableBlock(_, inner) => listBlock(inner)
    case AllNullBlock(_)         => None
    case other => fail(s"a list page decodes to ${other.getClass.getSimpleName}")
  }

  override protected def decode(fields: Seq[LanceField], ranges: IndexedSeq[(Long, Long)], allocator: BufferAllocator,
                                reads: CoalescedReads, batch: BatchOutput, itemsOnly: Set[Int]): Unit =
    fields.foreach { f =>
      val vec = f.toArrow.createVector(allocator)
      batch.add(vec)
      fill(f, vec, ranges, reads)
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
