package io.lancespark.spark.read

import java.math.{BigDecimal => JBigDecimal, BigInteger}

import org.apache.arrow.vector.ValueVector
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.connector.metric.{CustomMetric, CustomTaskMetric}
import org.apache.spark.sql.connector.read.{Batch, InputPartition, PartitionReader, PartitionReaderFactory, Scan, Statistics,
  SupportsReportStatistics}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import io.lancespark.table.aggregate.{Aggregation, Aggregator}
import io.lancespark.table.filter.Filter
import io.lancespark.table.scan.ColumnDictionary
import io.lancespark.table.plan.Clustering

/** A scan that returns aggregates: each task aggregates the rows it reads
  * (`rows`, a scan of the aggregation's columns with the filter, plans the
  * input partitions and reads them) and returns rows per group. Partial
  * results, which Spark's final aggregation merges; or, with `clustering`
  * (of a grouping column), the final results: the partitions are cut where
  * no group has rows on both sides, so each task holds all of its groups'
  * rows, and it hands out its groups only at such cuts. */
final class LanceAggregateScan(val rows: LanceScan, snapshotUri: String, version: Long,
                               val aggregation: Aggregation, val output: StructType, filter: Option[Filter],
                               clustering: Option[Clustering] = None)
    extends Scan with SupportsReportStatistics {

  /** Whether the rows are the final results (one per group). */
  def complete: Boolean = clustering.isDefined

  override def readSchema(): StructType = output
  override def toBatch: Batch =
    new LanceBatch(this, clustering.fold(rows.partitions)(rows.clusteredPartitions), factory)
  override def supportedCustomMetrics(): Array[CustomMetric] = ScanMetrics.all
  override def reportDriverMetrics(): Array[CustomTaskMetric] = rows.reportDriverMetrics()

  override def description(): String =
    s"LanceAggregateScan($snapshotUri, version=$version, aggregates=$aggregation" +
      (if (complete) ", complete" else "") +
      filter.fold("")(f => s", pushedFilters=[$f]") + ")"

  private lazy val factory: PartitionReaderFactory = LanceAggregateReaderFactory(rows.readerFactory, aggregation, output, complete)

  /** What Spark would estimate for its own aggregation over `rows` (the scan
    * of the aggregation's columns), so that the plan around the pushed
    * aggregation is the one Spark would make without it: with GROUP BY the
    * scan's bytes scaled by the per-row sizes of the aggregates' rows and of
    * the scanned rows (`SizeInBytesOnlyStatsPlanVisitor`'s rule for an
    * aggregate), at most the scan's rows; without, one row per task. Without
    * statistics Spark takes a scan for `spark.sql.defaultSizeInBytes` (no end),
    * and a small table's aggregate (an `IN` subquery's keys) was then joined
    * by sort-merge joins that shuffled both sides, where Parquet's rows were
    * broadcast (TPC-H Q18 at scale factor 0.3: 1.2-1.5x Parquet). */
  override def estimateStatistics(): Statistics = {
    val rowBytes = LanceScan.rowSize(output)
    if (aggregation.groupBy.isEmpty) {
      val tasks = math.max(1, rows.partitions.size).toLong
      LanceScan.statistics(tasks, math.ceil(tasks * rowBytes).toLong)
    } else {
      val input = rows.estimateStatistics()
      // (a double beyond a long's range converts to Long.MaxValue)
      val bytes = input.sizeInBytes().orElse(Long.MaxValue).toDouble * rowBytes / LanceScan.rowSize(rows.readSchema())
      LanceScan.statistics(input.numRows().orElse(Long.MaxValue), math.ceil(bytes).toLong)
    }
  }

  override def equals(other: Any): Boolean = other match {
    case that: LanceAggregateScan =>
      that.rows == rows && that.aggregation == aggregation && that.output == output && that.complete == complete
    case _ => false
  }

  override def hashCode(): Int = (rows, aggregation, output, complete).hashCode()
}

/** `rows` reads the rows the aggregation takes (columnar, filtered). */
final case class LanceAggregateReaderFactory(rows: LanceReaderFactory, aggregation: Aggregation, output: StructType,
                                             complete: Boolean)
    extends PartitionReaderFactory {

  override def createReader(partition: InputPartition): PartitionReader[InternalRow] =
    new LanceAggregateReader(this, partition.asInstanceOf[LanceInputPartition])
}

/** Aggregates a partition's batches, then returns its rows (partial, or final when `complete`). */
final class LanceAggregateReader(factory: LanceAggregateReaderFactory, partition: LanceInputPartition)
    extends PartitionReader[InternalRow] {

  private val batches = new LancePartitionReader(factory.rows, partition)
  private val names = factory.rows.fields.map(_.name)
  private val convert: Array[Any => Any] = factory.output.fields.map(f => LanceAggregateReader.converter(f.dataType))

  private var done = false
  private var out: Iterator[InternalRow] = Iterator.empty
  /** Rows of the batch last read that belong to the next chunk (a complete
    * aggregation hands out its groups at a cut inside a batch). */
  private var pending: Option[(Map[String, ValueVector], Map[String, Option[ColumnDictionary]], Array[Int])] = None

  /** 0 until n, the same array for each batch of n rows (the aggregator only reads it). */
  private var identity: Array[Int] = Array.emptyIntArray
  private def allRows(n: Int): Array[Int] = {
    if (identity.length != n) identity = Array.range(0, n)
    identity
  }

  /** Aggregates batches until the partition ends or the aggregator holds
    * [[LanceAggregateReader.MaxRows]] rows, then returns its rows. Partial:
    * a group may then have rows in several chunks (Spark's final aggregation
    * merges them). Complete: once that full, it reads on to the next cut of
    * the partition's pieces, where no group goes on, and returns its groups
    * before it. */
  private def aggregateChunk(): Iterator[InternalRow] = {
    val aggregator = new Aggregator(factory.aggregation, factory.complete)
    pending.foreach { case (v, d, r) => aggregator.add(v, d, r) }
    pending = None
    var full = false
    while (!full && !done) {
      if (batches.next()) {
        val b = batches.currentBatch
        val rows = b.selection.getOrElse(allRows(b.rowCount))
        val byName = names.zip(b.vectors).toMap
        val dictionaries = names.indices.map(i => names(i) -> b.dictionary(i)).toMap
        if (!factory.complete) {
          aggregator.add(byName, dictionaries, rows)
          full = aggregator.size >= LanceAggregateReader.MaxRows
        } else if (aggregator.size < LanceAggregateReader.MaxRows) aggregator.add(byName, dictionaries, rows)
        else {
          val (from, until) = batches.currentSpan
          batches.currentPiece.cuts.find(c => c >= from && c < until) match {
            case None => aggregator.add(byName, dictionaries, rows)
            case Some(cut) =>
              // rows are positions in the batch's vectors, which hold the rows of its ranges in order
              val at = batches.positionsBefore(cut)
              val (before, after) = rows.partition(_ < at)
              if (before.nonEmpty) aggregator.add(byName, dictionaries, before)
              if (after.nonEmpty) pending = Some((byName, dictionaries, after))
              full = true
          }
        }
      } else done = true
    }
    aggregator.rows.map { values =>
      var i = 0
      while (i < values.length) { if (values(i) != null) values(i) = convert(i)(values(i)); i += 1 }
      new GenericInternalRow(values)
    }
  }

  private var current: InternalRow = _

  override def next(): Boolean = {
    while (!out.hasNext && !done) out = aggregateChunk()
    if (out.hasNext) { current = out.next(); true } else false
  }

  override def get(): InternalRow = current

  override def currentMetricsValues(): Array[CustomTaskMetric] = batches.currentMetricsValues()

  override def close(): Unit = batches.close()
}

object LanceAggregateReader {
  /** Most groups (and set-aside sums) a task holds before it returns them and
    * starts again: bounds its memory when the groups are many (GROUP BY an id). */
  val MaxRows: Int = 1 << 18

  /** A grouping value or partial result (see [[Aggregator.rows]]) as Spark holds a value of `t`. */
  def converter(t: DataType): Any => Any = t match {
    case StringType => { case b: Array[Byte] => UTF8String.fromBytes(b) }
    case LongType | TimestampType | TimestampNTZType => {
      case l: java.lang.Long => l
      case b: BigInteger => b.longValueExact
    }
    case IntegerType | DateType => integral(t)(_.intValueExact)(_.toInt)
    case ShortType => integral(t)(_.shortValueExact)(_.toShort)
    case ByteType => integral(t)(_.byteValueExact)(_.toByte)
    case BooleanType => { case l: java.lang.Long => l.longValue == 1L }
    case d: DecimalType => {
      case l: java.lang.Long => Decimal(l.longValue, d.precision, d.scale)
      case b: BigInteger => Decimal(new JBigDecimal(b, d.scale), d.precision, d.scale)
    }
    case other => v => throw new IllegalStateException(s"aggregate value ${v.getClass.getSimpleName} for Spark type $other")
  }

  private def integral(t: DataType)(fromBig: BigInteger => Any)(fromLong: Long => Any): Any => Any = {
    case l: java.lang.Long => fromLong(l.longValue)
    case b: BigInteger => fromBig(b)
    case v => throw new IllegalStateException(s"aggregate value ${v.getClass.getSimpleName} for Spark type $t")
  }
}
