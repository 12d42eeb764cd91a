package io.lancespark.format.v21

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.complex.StructVector
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.schema.{LanceField, LanceSchema}
import io.lancespark.format.arrow.{Bits, DictionaryColumn, DictionaryValues, Slice, VectorLoader}
import io.lancespark.format.arrow.Block.{AllNullBlock, DictBlock, FixedBlock, FixedDictBlock, ListBlock, NullableBlock, PackedBlock, VarBlock}
import io.lancespark.format.file.{ContainerReader, FileContainer, Footer}
import io.lancespark.format.input.{BlobBytes, CoalescedReads, PlannedRead, RandomAccessSource, RowRangeSums}
import io.lancespark.format.v21.layout.{PageIO, StructuralPage}

/** Reads one data file of file version 2.1 or 2.2.
  *
  * These versions store only leaf columns: a struct or list field has no
  * column of its own, and its validity and offsets are folded into the
  * repetition and definition levels of each leaf below it ([[RepDef]]). To
  * read rows of a field, each of its (requested) leaves decodes those rows
  * from the pages that hold them ([[StructuralPage]]: mini-block, full-zip,
  * constant), the levels are unravelled into each layer's validity and
  * offsets, and the Arrow vectors are filled from the outside in: every
  * struct or list takes its layer from the first leaf below it.
  *
  * Reads are planned per batch (the chunks, entries or rows each page needs),
  * merged where close and issued together, the next batch's while this one
  * decodes, as for 2.0 files. `fieldColumns` maps a leaf field id to its column. */
final class V21FileReader private (
    container: FileContainer,
    schemaOverride: Option[LanceSchema],
    fieldColumnsOverride: Option[Map[Int, Int]],
    blobs: BlobSources)
    extends ContainerReader(container, schemaOverride, fieldColumnsOverride) {

  override def bytesRead: Long = super.bytesRead + blobs.bytesRead

  override def readRequests: Long = super.readRequests + blobs.readRequests

  override def close(): Unit = try super.close() finally blobs.close()

  /** Only leaves have columns (a packed struct or a blob is one). */
  override protected def storedFields(field: LanceField): Seq[LanceField] = V21FileReader.leaves(field)

  private val pagesByColumn = mutable.Map.empty[Int, Vector[StructuralPage]]

  private def leafColumn(leaf: LanceField, path: Vector[LayerKind]): LeafColumn = {
    val idx = columnIndex(leaf)
    LeafColumn(leaf, idx, path, s"column $idx (field '${leaf.name}', id ${leaf.id})")
  }

  /** The pages of a leaf's column, their layouts parsed once. */
  private def pages(leaf: LeafColumn): Vector[StructuralPage] = pagesByColumn.synchronized {
    pagesByColumn.getOrElseUpdate(leaf.column, {
      val meta = file.columns.column(leaf.column)
      if (meta.length != numRows)
        fail(s"${leaf.where} holds ${meta.length} rows but the file has $numRows")
      meta.pages.map(p => StructuralPage.of(p, leaf, path))
    })
  }

  /** How each page of each column below `field` is stored (layout and codecs,
    * e.g. "mini-block: bitpack + dictionary(...)"), by leaf field name. */
  def pageLayouts(field: LanceField): Vector[(String, Vector[String])] =
    leavesOf(field).map(l => l.field.name -> pages(l).map(_.describe))

  private val leavesByField = new java.util.IdentityHashMap[LanceField, Vector[LeafColumn]]()

  /** Each leaf below a (possibly pruned) field, with its layers innermost
    * first; worked out once per field (a scan of scattered rows plans and
    * decodes each field once per range of rows). */
  private def leavesOf(field: LanceField): Vector[LeafColumn] = leavesByField.synchronized {
    val known = leavesByField.get(field)
    if (known != null) known
    else {
      val found = walkLeaves(field)
      leavesByField.put(field, found)
      found
    }
  }

  private def walkLeaves(field: LanceField): Vector[LeafColumn] = {
    def walk(f: LanceField, outer: List[LayerKind]): Vector[LeafColumn] =
      if (isPacked(f)) Vector(leafColumn(f, (LayerKind.Item :: outer).toVector))
      else if (f.isStruct) {
        if (f.children.isEmpty) fail(s"struct field '${f.name}' (id ${f.id}) has no fields to read")
        f.children.flatMap(walk(_, LayerKind.Item :: outer))
      } else if (f.isList || f.isMap) {
        if (f.children.size != 1) fail(s"list field '${f.name}' (id ${f.id}) has ${f.children.size} children, not 1")
        walk(f.children.head, LayerKind.List :: outer)
      } else Vector(leafColumn(f, (LayerKind.Item :: outer).toVector))
    walk(field, Nil)
  }

  /** A struct stored in one column of its own (a packed struct). */
  private def isPacked(f: LanceField): Boolean = f.isStruct && fieldColumns.contains(f.id)

  /** The pages (in row order) holding rows of [from, until): a binary search
    * for the first, as a scan of scattered rows asks once per range. */
  private def overlapping(pages: Vector[StructuralPage], from: Long, until: Long): Vector[StructuralPage] = {
    val lo = firstEndingAfter(pages, from)
    var end = lo
    while (end < pages.size && pages(end).meta.first < until) end += 1
    if (end - lo == 1 && pages(lo).meta.length > 0) Vector(pages(lo))
    else pages.slice(lo, end).filter(p => p.meta.length > 0 && p.meta.first < until && p.meta.end > from)
  }

  /** The first of `pages` (in row order) ending after row `from`. */
  private def firstEndingAfter(pages: Vector[StructuralPage], from: Long): Int = {
    var lo = 0
    var hi = pages.size
    while (lo < hi) {
      val mid = (lo + hi) >>> 1
      if (pages(mid).meta.end <= from) lo = mid + 1 else hi = mid
    }
    lo
  }

  /** Each page's part of `ranges` (sorted, disjoint), in the page's rows,
    * pages in row order: the parts come out in the ranges' order. */
  private def pageParts(pages: Vector[StructuralPage], ranges: IndexedSeq[(Long, Long)])
      : Vector[(StructuralPage, IndexedSeq[(Long, Long)])] = {
    val parts = Vector.newBuilder[(StructuralPage, IndexedSeq[(Long, Long)])]
    var page: StructuralPage = null
    var part = Vector.newBuilder[(Long, Long)]
    // one walk over the pages for sorted ranges (a binary search where a range goes back)
    var at = 0
    var last = Long.MinValue
    var ri = 0
    while (ri < ranges.length) {
      val r = ranges(ri)
      val from = r._1
      val until = r._2
      if (from < last) at = firstEndingAfter(pages, from)
      last = from
      while (at < pages.size && pages(at).meta.end <= from) at += 1
      var q = at
      while (q < pages.size && pages(q).meta.first < until) {
        val p = pages(q)
        if (p.meta.length > 0 && p.meta.end > from) {
          if (!(page eq p)) {
            if (page != null) parts += ((page, part.result()))
            page = p
            part = Vector.newBuilder[(Long, Long)]
          }
          part += ((math.max(from, p.meta.first) - p.meta.first, math.min(until, p.meta.end) - p.meta.first))
        }
        q += 1
      }
      ri += 1
    }
    if (page != null) parts += ((page, part.result()))
    parts.result()
  }

  /** A field's reads for many ranges: each page plans the ranges it holds
    * together (a mini-block page reads each chunk once for them). */
  override protected def planRanges(field: LanceField, ranges: IndexedSeq[(Long, Long)]): Seq[PlannedRead] =
    scala.util.Try(leavesOf(field)).toOption.toSeq.flatten.flatMap { leaf =>
      scala.util.Try(pages(leaf)).toOption.toSeq.flatMap { ps =>
        pageParts(ps, ranges.filter(r => r._2 > r._1)).flatMap { case (p, part) =>
          scala.util.Try(p.planRanges(part, source)).getOrElse(Nil)
        }
      }
    }

  override protected def plan(field: LanceField, from: Long, until: Long): Seq[PlannedRead] =
    if (until <= from) Nil
    else scala.util.Try(leavesOf(field)).toOption.toSeq.flatten.flatMap { leaf =>
      scala.util.Try(pages(leaf)).toOption.toSeq.flatMap { ps =>
        overlapping(ps, from, until).flatMap { p =>
          scala.util.Try(p.plan(math.max(from, p.meta.first) - p.meta.first,
            math.min(until, p.meta.end) - p.meta.first, source)).getOrElse(Nil)
        }
      }
    }

  /** The rows of `ranges` of a leaf, one after the other: their levels and
    * visible values. A page is counted decoded once however many ranges it
    * serves (a mini-block page decodes each chunk once for them: [[PageIO]]). */
  private def decodeLeaf(leaf: LeafColumn, ranges: IndexedSeq[(Long, Long)], io: PageIO): LeafRun = {
    // a page decodes its part of the ranges at once
    val runs = pageParts(pages(leaf), ranges).map { case (p, part) =>
      pageDecoded()
      if (part.size == 1) p.decode(part.head._1, part.head._2, io) else p.decodeRanges(part, io)
    }
    if (runs.isEmpty) new LeafRun(new Levels(null, null, 0), Vector.empty) else LeafRun.concat(runs)
  }

  /** A leaf's layers, outermost first, and its values. */
  private final class Unravelled(val layers: Vector[LayerOut], val values: Vector[Slice])

  private def unravel(leaf: LeafColumn, run: LeafRun): Unravelled = {
    val layers = RepDef.unravel(run.levels, leaf.path, p => fail(s"${leaf.where}: $p")).reverse
    val leafCount = layers.last.count
    if (run.visible != leafCount)
      fail(s"${leaf.where}: the levels have $leafCount visible entries but ${run.visible} values were decoded")
    new Unravelled(layers, run.values)
  }

  /** Fills `vec` from the leaves' layers: `depth` is the field's layer index
    * (outermost = 0); `leaves` maps each leaf field id to its data; `hollow`:
    * a string leaf gets its validity only (its rows read as dictionary items,
    * see `DataFileReader.readRanges`). */
  private def fill(field: LanceField, vec: FieldVector, depth: Int, leaves: Map[Int, Unravelled],
                   loader: VectorLoader, hollow: Boolean = false): Unit = {
    def first(f: LanceField): Unravelled =
      if (isPacked(f)) leaves(f.id)
      else if (f.isStruct || f.isList || f.isMap) first(f.children.head) else leaves(f.id)
    val u = first(field)
    if (depth >= u.layers.size) fail(s"field '${field.name}': no layer $depth in its leaf's levels")
    val layer = u.layers(depth)
    if (isPacked(field) && V21FileReader.isBlobV2(field)) fillBlobV2(field, vec, u, layer, loader)
    else if (isPacked(field)) fillPacked(field, vec, u, layer, loader)
    else if (field.isStruct) {
      val sv = structVector(field, vec)
      loader.loadStruct(sv, layer.count, layer.validity)
      val kids = structChildren(field, sv)
      field.children.zip(kids).foreach { case (f, v) => fill(f, v, depth + 1, leaves, loader) }
    } else if (field.isList || field.isMap) {
      val l = layer match {
        case l: ListOut => l
        case _ => fail(s"field '${field.name}' is a list but its levels say otherwise")
      }
      loader.loadList(vec, Seq(Slice(ListBlock(l.count, l.offsets, l.validity, 0), 0, l.count)))
      fill(field.children.head, listItems(field, vec), depth + 1, leaves, loader)
    } else {
      if (depth != u.layers.size - 1) fail(s"field '${field.name}': a leaf at layer $depth of ${u.layers.size}")
      val slices = layer.validity match {
        case None => u.values
        case Some(bits) =>
          var at = 0L
          u.values.map { s =>
            val out = s.block match {
              case _: AllNullBlock => s
              case b => Slice(NullableBlock(new Bits(bits.buf, bits.bitOffset + at - s.start), b), s.start, s.count)
            }
            at += s.count
            out
          }
      }
      if (hollow) loader.loadHollow(vec, slices) else loader.loadLeaf(vec, slices)
    }
  }


  /** A packed struct: its validity from the levels, each field from its
    * share of the packed values (fields kept by a projection, by id). */
  private def fillPacked(field: LanceField, vec: FieldVector, u: Unravelled, layer: LayerOut, loader: VectorLoader): Unit = {
    val sv = structVector(field, vec)
    loader.loadStruct(sv, layer.count, layer.validity)
    val stored = schema.byId.get(field.id).map(_.children).getOrElse(field.children)
    field.children.zip(sv.getChildrenFromFields.asScala).foreach { case (c, cv) =>
      if (c.isStruct || c.isList || c.isMap)
        fail(s"field '${field.name}.${c.name}': nested fields of a packed struct are not supported")
      val k = stored.indexWhere(_.id == c.id)
      if (k < 0) fail(s"field '${field.name}.${c.name}' (id ${c.id}) is not part of the packed struct")
      val slices = u.values.map { s =>
        s.block match {
          case PackedBlock(_, children) if k < children.size => Slice(children(k), s.start, s.count)
          case a: AllNullBlock => Slice(a, s.start, s.count)
          case other => fail(s"field '${field.name}': packed values decode to ${other.getClass.getSimpleName}")
        }
      }
      loader.loadLeaf(cv, slices)
    }
  }

  /** A blob column of file version 2.2 (`lance.blob.v2`): the Lance schema
    * says struct<data, uri>; the file stores one description per value (kind,
    * position, size, blob id, uri). `data` is the value, wherever it lives:
    * in this data file (kind 0, "inline"), in one of the data file's blob
    * files (1 "packed", 2 "dedicated": [[BlobSources.blobFile]] by blob id),
    * or in an external file (3: its uri, the range [position, position +
    * size) of it, or all of it when size is 0); `uri` the uri of external
    * values. The values' bytes are read straight into the one buffer of the
    * batch's `data` vector (no copy per value). */
  private def fillBlobV2(field: LanceField, vec: FieldVector, u: Unravelled, layer: LayerOut,
                         loader: VectorLoader): Unit = {
    val sv = vec match {
      case s: StructVector => s
      case other => fail(s"blob field '${field.name}' is a struct but its Arrow vector is ${other.getClass.getSimpleName}")
    }
    loader.loadStruct(sv, layer.count, layer.validity)
    val n = layer.count
    val kinds = new Array[Int](n)
    java.util.Arrays.fill(kinds, -1)
    val positions = new Array[Long](n)
    val sizes = new Array[Long](n)
    val ids = new Array[Int](n)
    val uris = new Array[String](n)
    var row = 0
    u.values.foreach { s =>
      s.block match {
        case PackedBlock(_, Vector(FixedBlock(_, 1, kind), FixedBlock(_, 8, pos), FixedBlock(_, 8, size),
                                   FixedBlock(_, 4, id), VarBlock(_, uo, ud, _))) =>
          var i = s.start.toInt
          while (i < s.start + s.count) {
            if (layer.validity.forall(_.get(row))) {
              kinds(row) = kind.get(i) & 0xff
              positions(row) = pos.getLong(8 * i)
              sizes(row) = size.getLong(8 * i)
              ids(row) = id.getInt(4 * i)
              val uriLen = (uo(i + 1) - uo(i)).toInt
              if (uriLen > 0) {
                val b = new Array[Byte](uriLen)
                ud.duplicate().position(uo(i).toInt).asInstanceOf[java.nio.ByteBuffer].get(b)
                uris(row) = new String(b, java.nio.charset.StandardCharsets.UTF_8)
              }
            }
            row += 1
            i += 1
          }
        case AllNullBlock(c) => row += c.toInt
        case other => fail(s"blob field '${field.name}': descriptions decode to ${other.getClass.getSimpleName}")
      }
    }
    if (row != n) fail(s"blob field '${field.name}': $row descriptions for $n rows")
    // read only when the scan asks for `data` (a scan of `uri` reads no blob bytes)
    def dataColumn: Seq[Slice] = {
      // where each value's bytes are: (source, position, length)
      val sources = new Array[RandomAccessSource](n)
      val lengths = new Array[Long](n)
      var r = 0
      while (r < n) {
        val k = kinds(r)
        val (src, at, len) = k match {
          case -1 => (null, 0L, 0L)
          case 0 => (source, positions(r), sizes(r))
          case 1 | 2 => (blobSource(field, r, blobs.blobFile(ids(r)), ids(r)), positions(r), sizes(r))
          case 3 =>
            if (uris(r) == null) fail(s"blob field '${field.name}', row $r: an external blob without a uri")
            val ext = blobSource(field, r, blobs.external(uris(r)), uris(r))
            if (sizes(r) == 0) (ext, 0L, ext.size) else (ext, positions(r), sizes(r))
          case other => fail(s"blob field '${field.name}', row $r: unknown blob kind $other")
        }
        if (src != null && (len < 0 || at < 0 || at + len > src.size))
          fail(s"blob field '${field.name}', row $r: bytes [$at, ${at + len}) lie outside ${src.path} (${src.size} bytes)")
        sources(r) = src
        positions(r) = at
        lengths(r) = len
        r += 1
      }
      Seq(BlobBytes.gather(field.name, r => sources(r), positions, lengths, Bits.tabulate(n)(kinds(_) >= 0), fail))
    }
    def uriColumn: Seq[Slice] = {
      val enc = uris.map(u => if (u == null) null else u.getBytes(java.nio.charset.StandardCharsets.UTF_8))
      val off = new Array[Long](n + 1)
      var i = 0
      while (i < n) { off(i + 1) = off(i) + (if (enc(i) == null) 0 else enc(i).length); i += 1 }
      val b = new Array[Byte](off(n).toInt)
      i = 0
      while (i < n) { if (enc(i) != null) System.arraycopy(enc(i), 0, b, off(i).toInt, enc(i).length); i += 1 }
      Seq(Slice(VarBlock(n, off, java.nio.ByteBuffer.wrap(b), Some(Bits.tabulate(n)(enc(_) != null))), 0, n))
    }
    // a value's position in the file holding it and its size in bytes, as
    // the descriptions say (an external value's whole file: 0 and the file's size)
    def longColumn(value: Int => Long): Seq[Slice] = {
      val buf = java.nio.ByteBuffer.allocate(8 * n).order(java.nio.ByteOrder.LITTLE_ENDIAN)
      var i = 0
      while (i < n) { if (kinds(i) >= 0) buf.putLong(8 * i, value(i)); i += 1 }
      Seq(Slice(NullableBlock(Bits.tabulate(n)(kinds(_) >= 0), FixedBlock(n, 8, buf)), 0, n))
    }
    field.children.zip(sv.getChildrenFromFields.asScala).foreach { case (c, cv) =>
      c.name match {
        case "data" => loader.loadLeaf(cv, dataColumn)
        case "uri"  => loader.loadLeaf(cv, uriColumn)
        case "position" => loader.loadLeaf(cv, longColumn(r => if (kinds(r) == 3 && sizes(r) == 0) 0L else positions(r)))
        case "size" => loader.loadLeaf(cv, longColumn(r =>
          if (kinds(r) == 3 && sizes(r) == 0) blobSource(field, r, blobs.external(uris(r)), uris(r)).size else sizes(r)))
        case other  => fail(s"blob field '${field.name}' has an unknown field '$other'")
      }
    }
  }

  /** Opens a blob value's file, naming the data file and column when that fails. */
  private def blobSource(field: LanceField, row: Int, open: => RandomAccessSource, what: Any): RandomAccessSource =
    try open
    catch {
      case e: Exception =>
        throw io.lancespark.schema.LanceFormatException(path,
          s"blob field '${field.name}', row $row of the batch: cannot open the file of its value ($what): ${e.getMessage}", e)
    }

  override protected def decode(fields: Seq[LanceField], ranges: IndexedSeq[(Long, Long)], allocator: BufferAllocator,
                                reads: CoalescedReads, batch: BatchOutput, itemsOnly: Set[Int]): Unit = {
    dictionaries.clear()
    val io = new PageIO(reads, source)
    val rows = RowRangeSums.rows(ranges)
    fields.foreach { f =>
      batch.at(s"field '${f.name}' (id ${f.id}): ")
      val leaves = leavesOf(f).map(l => l.field.id -> unravel(l, decodeLeaf(l, ranges, io))).toMap
      val vec = f.toArrow.createVector(allocator)
      batch.add(vec)
      val dictionary = dictionaryColumn(f, leaves, rows)
      dictionary.foreach(d => dictionaries.put(vec, d))
      val loader = new VectorLoader(vec.getAllocator, p => fail(s"field '${f.name}' (id ${f.id}): $p"))
      val top = leaves.values.head.layers.head.count
      if (top != rows) fail(s"field '${f.name}' (id ${f.id}): decoded $top rows, expected $rows")
      fill(f, vec, 0, leaves, loader, hollow = dictionary.isDefined && itemsOnly(f.id))
    }
    // every value is in the batch's vectors now (copied; a dictionary column
    // holds its index arrays and the page's items, neither decompressed into
    // lent arrays): the chunks' arrays go back to the thread's pool
    io.release()
  }

  /** Decoders of 2.1+ pages also take a missing element for corrupt data. */
  override protected def isCorruption(e: Throwable): Boolean =
    super.isCorruption(e) || e.isInstanceOf[NoSuchElementException]

  private val dictionaries = new java.util.IdentityHashMap[FieldVector, DictionaryColumn]()

  override def dictionaryOf(vector: FieldVector): Option[DictionaryColumn] = Option(dictionaries.get(vector))

  /** A top-level column whose rows in this batch all come from one page
    * dictionary: a string column of fewer items than a quarter of the batch's
    * rows (so that working per item pays: a vocabulary of words whose items
    * mostly occur once a batch is read as plain strings), or an integer-like
    * one (`DictionaryColumn.fixedItems`) of any number of items (a reader
    * takes each row's value from its item rather than from a copy of it per
    * row; a filter tests each item once where they are at most as many as the
    * rows, see `RowEvaluator`). The chunks' index arrays are referenced, not copied. */
  private def dictionaryColumn(f: LanceField, leaves: Map[Int, Unravelled], rows: Long): Option[DictionaryColumn] = {
    val strings = f.arrowType == ArrowType.Utf8.INSTANCE
    if (f.isStruct || f.isList || f.isMap || isPacked(f) || !(strings || DictionaryColumn.fixedItems(f.arrowType))) None
    else leaves.get(f.id).filter(_.layers.size == 1).flatMap { u =>
      val blocks: Seq[(Array[Int], DictionaryValues)] = u.values.collect {
        case Slice(d: DictBlock, _, _) if strings => d.which -> d.items
        case Slice(d: FixedDictBlock, _, _) if !strings => d.which -> d.items
      }
      val items = if (blocks.isEmpty) 0 else DictionaryColumn.itemCount(blocks.head._2)
      var total = 0L
      u.values.foreach(s => total += s.count)
      if (blocks.isEmpty || blocks.size != u.values.size || blocks.exists(_._2 ne blocks.head._2) || total != rows ||
          (strings && 4L * items > rows)) None
      else {
        val segments = blocks.size
        val which = new Array[Array[Int]](segments)
        val starts = new Array[Int](segments)
        val counts = new Array[Int](segments)
        var k = 0
        u.values.zip(blocks).foreach { case (s, (w, _)) =>
          which(k) = w; starts(k) = s.start.toInt; counts(k) = s.count.toInt; k += 1
        }
        Some(new DictionaryColumn(which, starts, counts, rows.toInt, blocks.head._2))
      }
    }
  }
}

object V21FileReader {

  /** A data file of a dataset: `schema` is the dataset's, `fieldColumns` the
    * manifest's field id -> column index mapping. */
  def open(source: RandomAccessSource, schema: LanceSchema, fieldColumns: Map[Int, Int]): V21FileReader =
    new V21FileReader(container(source), Some(schema), Some(fieldColumns), BlobSources.none)

  /** Like `open`, for a file the manifest says is 2.`minor`: a footer that
    * says otherwise is an error naming both (the two minors decode differently). */
  def open(source: RandomAccessSource, schema: LanceSchema, fieldColumns: Map[Int, Int], minor: Int): V21FileReader =
    open(source, schema, fieldColumns, minor, BlobSources.none)

  /** Like `open`, with the blob files and external files of 2.2 blob values. */
  def open(source: RandomAccessSource, schema: LanceSchema, fieldColumns: Map[Int, Int], minor: Int,
           blobs: BlobSources): V21FileReader =
    new V21FileReader(FileContainer.open(source, f => f.major == 2 && f.minor == minor,
      s"2.$minor, the version the dataset's manifest records for it"), Some(schema), Some(fieldColumns), blobs)

  /** A standalone file: schema and leaf columns (depth first) from the file. */
  def openStandalone(source: RandomAccessSource): V21FileReader =
    new V21FileReader(container(source), None, None, BlobSources.none)

  /** Whether a footer is of a version this reader reads (2.1, 2.2). */
  def accepts(f: Footer): Boolean = f.major == 2 && (f.minor == 1 || f.minor == 2)

  private def container(source: RandomAccessSource): FileContainer =
    FileContainer.open(source, accepts, "2.1 or 2.2")

  /** A blob column of file version 2.2. */
  def isBlobV2(f: LanceField): Boolean = f.metadata.get("ARROW:extension:name").contains("lance.blob.v2")

  /** A blob column of file version 2.1 (`lance-encoding:blob`). */
  def isBlobV1(f: LanceField): Boolean = layout.BlobPage.isBlobV1(f)

  /** The fields of a field that have columns in 2.1+ files: the leaves. */
  def leaves(f: LanceField): Vector[LanceField] =
    if (f.metadata.get("lance-encoding:packed").isDefined || isBlobV2(f)) Vector(f)
    else if (f.isStruct || f.isList || f.isMap) f.children.flatMap(leaves) else Vector(f)
}
