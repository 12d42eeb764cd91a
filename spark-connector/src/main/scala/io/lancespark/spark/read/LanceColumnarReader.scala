package io.lancespark.spark.read

import org.apache.arrow.memory.BufferAllocator
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector
import org.apache.spark.sql.types.{IntegerType, LongType}
import org.apache.spark.sql.vectorized.{ColumnVector, ColumnarBatch}

import io.lancespark.spark.MetadataColumns
import io.lancespark.table.scan.{BlobColumns, FragmentBatch, FragmentScanner}
import io.lancespark.table.storage.{DataFiles, DatasetStorage}
import io.lancespark.table.plan.FragmentPiece

/** Reads one piece of a partition (row ranges of a fragment) as columnar
  * batches, at most `limit` rows when a LIMIT is pushed. `itemsOnly`: the
  * caller reads the batches only through [[get]]'s column vectors, which read
  * a string column held as dictionary items from the items, so the scanner
  * need not copy them into its vectors ([[currentBatch]]'s vectors of such
  * columns are then hollow). */
final class LanceColumnarReader(factory: LanceReaderFactory, val piece: FragmentPiece, limit: Option[Long],
                                itemsOnly: Boolean = false)
    extends org.apache.spark.sql.connector.read.PartitionReader[ColumnarBatch] {

  private val fragment = piece.fragment
  private val allocator: BufferAllocator =
    ArrowAllocators.root.newChildAllocator(s"lance-fragment-${fragment.id}", 0, Long.MaxValue)
  private val storage = DatasetStorage(factory.uri, factory.hadoopConf.conf)
  private val scanner = new FragmentScanner(storage, factory.version, fragment, factory.fields, allocator,
    ref => DataFiles.open(storage, factory.schema, ref), factory.filter, factory.filterFields, itemsOnly)

  private lazy val rowIds = scanner.rowIds(factory.stableRowIds)

  /** Rows per batch: the batchSize option, or for a scan reading blob values
    * without one, at most [[BlobColumns.BatchRows]] (docs/blobs.md). */
  private val batchRows: Int =
    if (!factory.read.batchSizeGiven && BlobColumns.readsBytes(factory.fields))
      math.min(factory.read.batchSize, BlobColumns.BatchRows)
    else factory.read.batchSize

  /** Reads on the read pool ahead of the decode: asked for, or storage that is not local. */
  private val readAhead: Boolean = factory.read.readAhead.getOrElse(!storage.isLocal)

  private val ranges = piece.ranges.iterator
  private var range: (Long, Long) = (0L, 0L)
  private var position: Long = 0L
  private var returned: Long = 0L
  private var current: Option[(FragmentBatch, ColumnarBatch)] = None
  private var batchRanges: IndexedSeq[(Long, Long)] = Vector.empty
  /** The next batch's ranges, taken (and their reads issued) ahead of it. */
  private var pending: Option[IndexedSeq[(Long, Long)]] = None

  /** The physical rows [from, until) of the fragment that [[get]]'s batch was
    * read from (its rows are the kept ones among the rows of [[currentRanges]], in order). */
  def currentSpan: (Long, Long) =
    if (batchRanges.isEmpty) (0L, 0L) else (batchRanges.head._1, batchRanges.last._2)

  /** The ranges of physical rows [[get]]'s batch was read from, in order. */
  def currentRanges: IndexedSeq[(Long, Long)] = batchRanges

  /** How many of the rows read for [[get]]'s batch (positions in its
    * vectors) lie before physical row `row`. */
  def positionsBefore(row: Long): Int =
    batchRanges.iterator.map { case (from, until) => math.max(0L, math.min(until, row) - from) }.sum.toInt

  override def next(): Boolean = {
    closeCurrent()
    var found = false
    while (!found && limit.forall(returned < _)) {
      val taken = pending.getOrElse(take())
      pending = None
      if (taken.isEmpty) return false
      if (readAhead) pending = Some(take()).filter(_.nonEmpty)
      val batch = scanner.readView(taken, pending)
      batchRanges = taken
      if (batch.rowCount > 0) {
        current = Some(batch -> toColumnar(batch))
        returned += batch.rowCount
        found = true
      } else batch.close()
    }
    found
  }

  /** The next batch's rows: the piece's next ranges, at most [[batchRows]]
    * rows (fewer when a LIMIT needs fewer) in at most
    * [[LanceColumnarReader.MaxRanges]] ranges. A batch of many short ranges
    * (rows an index or row addresses selected) is read in one call, which
    * fetches and decodes each page or chunk holding its rows once. */
  private def take(): IndexedSeq[(Long, Long)] = {
    val cap: Long = limit.fold(batchRows.toLong)(l =>
      math.min(batchRows.toLong, math.max(l - returned, LanceColumnarReader.LimitBatchRows)))
    val out = Vector.newBuilder[(Long, Long)]
    var rows = 0L
    var count = 0
    while (rows < cap && count < LanceColumnarReader.MaxRanges && (position < range._2 || ranges.hasNext)) {
      if (position >= range._2) { range = ranges.next(); position = range._1 }
      val end = math.min(range._2, position + (cap - rows))
      if (end > position) { out += ((position, end)); rows += end - position; count += 1 }
      position = end
    }
    out.result()
  }

  override def get(): ColumnarBatch = current.map(_._2).getOrElse(throw new NoSuchElementException)

  /** The rows of [[get]] as the scanner read them (Arrow vectors, selection, dictionaries). */
  def currentBatch: FragmentBatch = current.map(_._1).getOrElse(throw new NoSuchElementException)

  private val dictionaryStrings: Array[DictionaryStrings] =
    Array.fill(factory.dataSchema.fields.length)(DictionaryStrings.perColumn())

  private def toColumnar(b: FragmentBatch): ColumnarBatch = {
    val data = factory.dataSchema.fields.indices.map { i =>
      new LanceColumnVector(factory.dataSchema.fields(i).dataType, b.vectors(i), b.dictionary(i), dictionaryStrings(i),
        b.selection, b.fixedDictionary(i))
    }
    val byName: Map[String, ColumnVector] = factory.dataSchema.fieldNames.zip(data).toMap ++
      factory.metadataColumns.map(m => m -> metadata(m, b)).toMap
    val cols: Array[ColumnVector] = factory.outputSchema.fieldNames.map(byName)
    new ColumnarBatch(cols, b.rowCount)
  }

  private def metadata(name: String, b: FragmentBatch): ColumnVector = name match {
    case MetadataColumns.FragId =>
      val v = new OnHeapColumnVector(b.rowCount, IntegerType)
      v.putInts(0, b.rowCount, fragment.id.toInt)
      v
    case MetadataColumns.RowAddr => longs(b.offsets.map(o => (fragment.id << 32) | o.toLong))
    case MetadataColumns.RowId =>
      rowIds match {
        case Some(seq) =>
          val ids = seq.slice(b.offsets.head.toLong, b.offsets.last.toLong + 1)
          longs(b.offsets.map(o => ids(o - b.offsets.head)))
        case None => longs(b.offsets.map(o => (fragment.id << 32) | o.toLong))
      }
    case MetadataColumns.CreatedAt => longs(b.offsets.map(o => createdAt(o)))
    case MetadataColumns.LastUpdatedAt => longs(b.offsets.map(o => lastUpdatedAt(o)))
  }

  private def where: String = s"${factory.uri} (version ${factory.version}, fragment ${fragment.id})"
  private lazy val createdAt: Array[Long] = io.lancespark.table.model.RowVersions.createdAt(fragment, where)
  private lazy val lastUpdatedAt: Array[Long] = io.lancespark.table.model.RowVersions.lastUpdatedAt(fragment, where)

  private def longs(values: Array[Long]): ColumnVector = {
    val v = new OnHeapColumnVector(values.length, LongType)
    v.putLongs(0, values.length, values, 0)
    v
  }

  private def closeCurrent(): Unit = {
    current.foreach { case (fb, cb) => cb.close(); fb.close() }
    current = None
  }

  override def currentMetricsValues(): Array[org.apache.spark.sql.connector.metric.CustomTaskMetric] = Array(
    ScanMetrics.value(ScanMetrics.PagesRead, scanner.pagesDecoded),
    ScanMetrics.value(ScanMetrics.BytesRead, scanner.bytesRead),
    ScanMetrics.value(ScanMetrics.ReadRequests, scanner.readRequests),
    ScanMetrics.value(ScanMetrics.StorageWait, scanner.storageWaitNanos / 1000000L),
    ScanMetrics.value(ScanMetrics.FragmentsScanned, if (piece.first) 1L else 0L),
    ScanMetrics.value(ScanMetrics.PeakTaskMemory, peakMemory))

  /** Peak bytes of this reader's Arrow allocator (the batch being built and
    * the one Spark holds) plus the heap buffers of one batch's reads. */
  def peakMemory: Long = allocator.getPeakMemoryAllocation + scanner.batchReadMemory

  override def close(): Unit = {
    closeCurrent()
    scanner.close()
    allocator.close()
  }
}

object LanceColumnarReader {
  /** Most ranges of rows read in one batch: bounds the bytes a batch of
    * scattered rows holds in memory (about one chunk per range and column). */
  val MaxRanges: Int = 1024

  /** With a pushed LIMIT, a batch still reads up to this many rows (rows the
    * filter drops would otherwise make many tiny batches). */
  val LimitBatchRows: Long = 1024L
}
