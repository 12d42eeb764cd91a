package io.lancespark.table.scan

import scala.collection.mutable

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.types.pojo.ArrowType
import org.roaringbitmap.RoaringBitmap

import io.lancespark.format.DataFileReader
import io.lancespark.format.arrow.DictionaryColumn
import io.lancespark.format.input.{IntArrayBuilder, RowRangeSums}
import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.table.filter.{Filter, RowEvaluator}
import io.lancespark.table.model.{DataFileRef, FragmentInfo, RowIdSequence}
import io.lancespark.table.storage.{DataFiles, DatasetStorage, DeletionVector, Snapshot}

/** Rows of one fragment, read in ranges: the requested (possibly pruned)
  * top-level fields, with fields absent from every data file read as nulls and
  * deleted rows removed. `offsets` gives each returned row's physical offset.
  * With a `selection`, the batch's rows are those positions of the vectors
  * (ascending), which hold every row of the range read; without, all their rows. */
final class FragmentBatch(val vectors: Seq[FieldVector], offsetsOf: () => Array[Int], val rowCount: Int,
                          dictionaries: Seq[Option[DictionaryColumn]] = Nil,
                          val selection: Option[Array[Int]] = None)
    extends AutoCloseable {
  /** Each row's physical offset in the fragment (made when first asked for:
    * most scans never ask). */
  lazy val offsets: Array[Int] = offsetsOf()

  /** Vector `i`'s rows as items of one page dictionary, where the file reader
    * saw them so (string columns whose batch rows all come from one page). */
  def dictionary(i: Int): Option[ColumnDictionary] =
    dictionaryColumn(i).filter(!_.isFixed).map(new ColumnDictionary(_))

  /** Vector `i`'s rows as fixed-width items of one page dictionary (integers,
    * dates, decimals of at most 18 digits), where the file reader saw them so.
    * With `itemsOnly` the vector's values may then be hollow: read them through
    * the items. */
  def fixedDictionary(i: Int): Option[ColumnDictionary] =
    dictionaryColumn(i).filter(_.isFixed).map(new ColumnDictionary(_))

  /** Vector `i`'s dictionary items of either kind. */
  private[scan] def dictionaryColumn(i: Int): Option[DictionaryColumn] = dictionaries.lift(i).flatten

  override def close(): Unit = vectors.foreach(_.close())
}

final class FragmentScanner(
    storage: DatasetStorage,
    version: Long,
    val fragment: FragmentInfo,
    fields: Seq[LanceField],
    allocator: BufferAllocator,
    openFile: DataFileRef => DataFileReader,
    filter: Option[Filter] = None,
    filterFields: Seq[LanceField] = Nil,
    itemsOnly: Boolean = false)
    extends AutoCloseable {

  private val where = s"${storage.uri} (version $version, fragment ${fragment.id})"

  /** Fields the filter needs that the output does not already carry as they are. */
  private val extraFields: Seq[LanceField] = filter.toSeq.flatMap(_ => filterFields.filterNot(fields.contains))
  private val readFields: Seq[LanceField] = fields ++ extraFields

  /** For each field read: the data file holding it (the last one that lists its id). */
  private val fileOf: Seq[Option[DataFileRef]] = readFields.map { f =>
    fragment.files.reverse.find(_.stores(f))
  }

  private val readers = mutable.Map.empty[DataFileRef, DataFileReader]

  /** With `itemsOnly` (a caller that reads a batch's columns through
    * `FragmentBatch.dictionary` and `fixedDictionary` wherever it has them):
    * the ids of the output's string fields the filter does not read and of its
    * integer-like fields, whose rows the file readers may then leave as
    * dictionary items, not copied into the vectors. */
  private val itemsOnlyIds: Set[Int] = {
    val strings =
      if (!itemsOnly) Nil
      else fields.filter(f => f.arrowType == ArrowType.Utf8.INSTANCE && !filterFields.exists(_.id == f.id))
    // integer-like columns: a filter tests their dictionary items (never their vectors' values), so
    // the output's such columns (the caller reads them through the items) and the filter's own
    val fixed = (if (itemsOnly) fields else Nil) ++ extraFields
    (strings ++ fixed.filter(f => DictionaryColumn.fixedItems(f.arrowType))).map(_.id).toSet
  }

  private val deleted: RoaringBitmap = fragment.deletion match {
    case Some(d) => DeletionVector.read(storage, fragment.id, d, fragment.physicalRows)
    case None    => new RoaringBitmap()
  }

  /** The rows of physical ranges `ranges` that are not deleted. */
  def liveRows(ranges: Iterable[(Long, Long)]): Long =
    ranges.iterator.map { case (from, until) => (until - from) - deleted.rangeCardinality(from, until) }.sum

  private def reader(ref: DataFileRef): DataFileReader = readers.getOrElseUpdate(ref, {
    val r = openFile(ref)
    if (r.numRows != fragment.physicalRows)
      throw new LanceFormatException(
        s"$where: data file ${ref.path} has ${r.numRows} rows but the manifest says ${fragment.physicalRows}")
    r
  })

  /** Reads physical rows [from, until), drops the deleted ones and, with a
    * filter, the rows it does not select (evaluated exactly, with Spark's semantics). */
  def read(from: Long, until: Long): FragmentBatch = read(from, until, None)

  /** Like `read(from, until)`; `next` is the physical range the caller reads
    * next, whose storage reads then run while this one decodes. */
  def read(from: Long, until: Long, next: Option[(Long, Long)]): FragmentBatch = compacted(readView(from, until, next))

  /** `b` with only the rows of its selection (copied), if it has one. */
  private def compacted(b: FragmentBatch): FragmentBatch = b.selection match {
    case None => b
    case Some(rows) =>
      val keep = b.offsets
      val selected = b.vectors.map(v => VectorSelection.select(v, rows, allocator))
      new FragmentBatch(selected, () => keep, keep.length,
        b.vectors.indices.map(i => b.dictionaryColumn(i).map(_.select(rows, 0))))
  }

  /** Like `read`, but the rows dropped (deleted, or not selected by the
    * filter) stay in the vectors: the batch's `selection` names the rows kept,
    * which a reader can then read in place instead of copying them. */
  def readView(from: Long, until: Long, next: Option[(Long, Long)]): FragmentBatch =
    readView(Vector((from, until)), next.map(Vector(_)))

  /** Like `readView(from, until, next)` for the rows of several ranges
    * (sorted, disjoint) at once: the batch's vectors hold their rows one after
    * the other (its `offsets` say which physical row each is), and every page
    * or chunk that holds rows of several of them is fetched and decoded once
    * (a scan of rows an index selected reads each page once, not once per
    * selected row). `next`: the ranges the caller reads next. */
  def readView(ranges: IndexedSeq[(Long, Long)], next: Option[IndexedSeq[(Long, Long)]]): FragmentBatch = {
    val bytesBefore = bytesRead
    try readRanges(ranges, next)
    finally largestRead = math.max(largestRead, bytesRead - bytesBefore)
  }

  /** Like `read(from, until)` for the rows of several ranges (see `readView`). */
  def read(ranges: IndexedSeq[(Long, Long)]): FragmentBatch = compacted(readView(ranges, None))

  private var largestRead: Long = 0L

  /** The filter's leaves, bound once for all the batches. */
  private val binds = new RowEvaluator.Binds

  /** Heap memory for the reads of one batch: the most bytes read from storage
    * for one `read` call, or the readers' reusable read buffers if larger. */
  def batchReadMemory: Long = math.max(largestRead, readers.values.map(_.scratchBytes).sum)

  private def readRanges(ranges: IndexedSeq[(Long, Long)], next: Option[IndexedSeq[(Long, Long)]]): FragmentBatch = {
    val n = RowRangeSums.rows(ranges).toInt
    val read: Seq[(FieldVector, Option[DictionaryColumn])] = readFields.zip(fileOf).groupBy(_._2).toSeq.flatMap {
      case (Some(ref), group) =>
        val fs = group.map(_._1)
        // a struct's sub-fields added after the file was written (mergeSchema) are not in it: read
        // what it stores, then give the vector the whole type (the added sub-fields NULL)
        val stored = fs.map(f => FragmentScanner.storedPart(f, ref))
        val file = reader(ref)
        val items = stored.iterator.map(_.id).filter(itemsOnlyIds).toSet
        val vectors =
          if (items.nonEmpty) file.readRanges(stored, ranges, allocator, next, items)
          else if (ranges.size == 1 && next.forall(_.size == 1))
            file.read(stored, ranges.head._1, ranges.head._2, allocator, next.map(_.head))
          else file.readRanges(stored, ranges, allocator, next)
        fs.zip(stored).zip(vectors).map { case ((f, part), v) =>
          if (part eq f) f -> (v -> file.dictionaryOf(v)) else f -> (FragmentScanner.widen(f, v, allocator) -> None)
        }
      case (None, group) => group.map { case (f, _) => f -> (nulls(f, n) -> None) }
    }.sortBy { case (f, _) => readFields.indexOf(f) }.map(_._2)
    val raw = read.map(_._1)
    val (out, extra) = raw.splitAt(fields.size)

    val matches: Option[java.util.BitSet] = filter.map { f =>
      val at = filterFields.map(readFields.indexOf(_))
      try RowEvaluator.evaluate(f, at.map(raw), n, binds, at.map(read(_)._2))
      finally extra.foreach(_.close())
    }
    val dictionaries = read.take(fields.size).map(_._2)
    val noDeletes = deleted.isEmpty || ranges.forall { case (from, until) => deleted.rangeCardinality(from, until) == 0 }
    if (noDeletes && matches.forall(_.cardinality() == n)) new FragmentBatch(out, () => consecutive(ranges, n), n, dictionaries)
    else if (ranges.size == 1) {
      val (from, until) = ranges.head
      val base = from.toInt
      val rows = keptPositions(base, (until - from).toInt, noDeletes, matches)
      val offsets = () => {
        val keep = new Array[Int](rows.length)
        var i = 0
        while (i < rows.length) { keep(i) = base + rows(i); i += 1 }
        keep
      }
      new FragmentBatch(out, offsets, rows.length, dictionaries, Some(rows))
    } else {
      val all = consecutive(ranges, n)
      val rows = new IntArrayBuilder
      var i = 0
      while (i < n) {
        if (matches.forall(_.get(i)) && (noDeletes || !deleted.contains(all(i)))) rows.add(i)
        i += 1
      }
      val kept = rows.result()
      val keep = kept.map(all(_))
      new FragmentBatch(out, () => keep, keep.length, dictionaries, Some(kept))
    }
  }

  /** The physical offsets of the ranges' rows, in order. */
  private def consecutive(ranges: IndexedSeq[(Long, Long)], n: Int): Array[Int] = {
    val all = new Array[Int](n)
    var i = 0
    ranges.foreach { case (from, until) =>
      var r = from.toInt
      while (r < until) { all(i) = r; i += 1; r += 1 }
    }
    all
  }

  /** The positions in the batch of rows [base, base + n) of the fragment it
    * keeps: those `matches` holds (all without a filter), deleted rows left
    * out. The filter's bits are walked a word at a time (`BitSet.nextSetBit`
    * a bit at a time cost 6% of a scan filtering on nullable keys). */
  private def keptPositions(base: Int, n: Int, noDeletes: Boolean, matches: Option[java.util.BitSet]): Array[Int] =
    matches match {
      case Some(m) =>
        val words = m.toLongArray
        val out = new Array[Int](m.cardinality())
        var k = 0
        var w = 0
        while (w < words.length) {
          var bits = words(w)
          while (bits != 0L) {
            val j = (w << 6) + java.lang.Long.numberOfTrailingZeros(bits)
            if (j < n && (noDeletes || !deleted.contains(base + j))) { out(k) = j; k += 1 }
            bits &= bits - 1
          }
          w += 1
        }
        if (k == out.length) out else java.util.Arrays.copyOf(out, k)
      case None =>
        val out = new IntArrayBuilder
        var j = 0
        while (j < n) {
          if (noDeletes || !deleted.contains(base + j)) out.add(j)
          j += 1
        }
        out.result()
    }

  private def nulls(f: LanceField, n: Int): FieldVector = {
    val v = f.toArrow.createVector(allocator)
    v.allocateNew()
    v.setValueCount(n)
    v
  }

  /** Pages decoded by this fragment's data file readers so far. */
  def pagesDecoded: Long = readers.values.map(_.pagesDecoded).sum

  /** Bytes read from this fragment's data files so far. */
  def bytesRead: Long = readers.values.map(_.bytesRead).sum

  /** Read requests made to this fragment's data files so far. */
  def readRequests: Long = readers.values.map(_.readRequests).sum

  /** Nanoseconds the reads of this fragment waited for storage so far. */
  /** The fragment's stable row ids (inline in the manifest or in a row id
    * file), when the dataset has them. */
  def rowIds(stableRowIds: Boolean): Option[RowIdSequence] =
    if (!stableRowIds) None else io.lancespark.table.storage.RowIdFiles.load(storage, fragment)

  def storageWaitNanos: Long = readers.values.map(_.storageWaitNanos).sum

  override def close(): Unit = readers.values.foreach(_.close())
}

object FragmentScanner {

  /** A scanner of `fragment` of `snapshot` reading `fields`, its data files
    * opened with the snapshot's schema; `filter` (if any) evaluated over its
    * columns ([[filterFields]]: each required in the schema), read beside `fields`. */
  def of(snapshot: Snapshot, fragment: FragmentInfo, fields: Seq[LanceField], filter: Option[Filter],
      allocator: BufferAllocator): FragmentScanner =
    of(snapshot, fragment, fields, filter, allocator, filterFields(snapshot, _))

  /** Like the other `of`, the filter evaluated over the fields `filterOn` gives. */
  def of(snapshot: Snapshot, fragment: FragmentInfo, fields: Seq[LanceField], filter: Option[Filter],
      allocator: BufferAllocator, filterOn: Filter => Seq[LanceField]): FragmentScanner = {
    val storage = snapshot.storage
    new FragmentScanner(storage, snapshot.version, fragment, fields, allocator,
      ref => DataFiles.open(storage, snapshot.schema, ref), filter, filter.toSeq.flatMap(filterOn))
  }

  /** The top-level fields `filter` reads; a column the schema lacks is an error naming it. */
  def filterFields(snapshot: Snapshot, filter: Filter): Seq[LanceField] =
    filter.columns.toSeq.map(_.head).distinct.map(c => snapshot.schema.field(c).getOrElse(
      throw new IllegalArgumentException(s"${snapshot.storage.uri}: the filter names a column '$c' that does not exist")))

  /** `f` less the sub-fields (of structs, also inside lists) that data file
    * `ref` does not store; `f` itself (the same instance) when it stores them all. */
  private[scan] def storedPart(f: LanceField, ref: DataFileRef): LanceField =
    if (f.isStruct) {
      val kids = f.children.filter(ref.stores).map(storedPart(_, ref))
      if (kids.isEmpty || (kids.size == f.children.size && kids.zip(f.children).forall { case (a, b) => a eq b })) f
      else f.copy(children = kids)
    } else if (f.isList && f.children.size == 1) {
      val item = storedPart(f.children.head, ref)
      if (item eq f.children.head) f else f.copy(children = Vector(item))
    } else f

  /** Vector `v` of a part of `f` as a vector of `f`'s whole type: its buffers
    * moved over, the sub-fields it lacks all NULL. */
  private[scan] def widen(f: LanceField, v: FieldVector, allocator: BufferAllocator): FieldVector = {
    val n = v.getValueCount
    val full = f.toArrow.createVector(allocator)
    try {
      full.allocateNew()
      v.makeTransferPair(full).transfer()
      full.setValueCount(n)
      full
    } catch {
      case e: Throwable => full.close(); throw e
    } finally v.close()
  }
}
