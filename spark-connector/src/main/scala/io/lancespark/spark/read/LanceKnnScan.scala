package io.lancespark.spark.read

import scala.collection.mutable

import org.apache.arrow.memory.BufferAllocator
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.read.{Batch, InputPartition, PartitionReader, PartitionReaderFactory, Scan, Statistics,
  SupportsReportStatistics}
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector
import org.apache.spark.sql.types.{FloatType, StructType}
import org.apache.spark.sql.vectorized.{ColumnVector, ColumnarBatch}

import io.lancespark.schema.{LanceField, LanceSchema}
import io.lancespark.spark.SerializableHadoopConf
import io.lancespark.spark.options.NearestConf
import io.lancespark.table.filter.Filter
import io.lancespark.table.index.vector.{Neighbour, SearchOutcome, VectorQuery, VectorSearch}
import io.lancespark.table.scan.{FragmentBatch, FragmentScanner}
import io.lancespark.table.storage.{DataFiles, Dataset, DatasetStorage}

/** A nearest-neighbour search as a scan: one task runs the search (see
  * [[VectorSearch]]) with the pushed predicates as its prefilter, then reads
  * the rows found and returns them nearest first, with their `_distance`. */
final class LanceKnnScan(uri: String, version: Long, schema: LanceSchema, fields: Seq[LanceField],
    dataSchema: StructType, outputSchema: StructType, nearest: NearestConf, filter: Option[Filter],
    fragments: Int) extends Scan with SupportsReportStatistics {

  override def readSchema(): StructType = outputSchema

  /** At most k rows (fewer where the prefilter keeps fewer), sized by Spark's
    * per-row estimate: a join of the neighbours with another table is
    * planned for k rows (a broadcast of them where k is small), not for
    * `spark.sql.defaultSizeInBytes` (no end of bytes) as a scan without
    * statistics is. */
  override def estimateStatistics(): Statistics =
    LanceScan.statistics(nearest.k.toLong, math.ceil(nearest.k * LanceScan.rowSize(outputSchema)).toLong)

  override def supportedCustomMetrics(): Array[org.apache.spark.sql.connector.metric.CustomMetric] =
    Array(new VectorIndexSearchesMetric, new VectorPartitionsProbedMetric, new VectorCandidatesScoredMetric)

  override def description(): String =
    s"LanceKnnScan($uri, version=$version, column=${nearest.column}, k=${nearest.k}, metric=${nearest.metric.name}" +
      filter.fold("")(f => s", prefilter=[$f]") + s", columns=[${outputSchema.fieldNames.mkString(", ")}])"

  override def toBatch: Batch = new Batch {
    override def planInputPartitions(): Array[InputPartition] = Array(LanceKnnPartition(fragments))
    override def createReaderFactory(): PartitionReaderFactory = {
      val conf = SerializableHadoopConf.broadcast(SparkSession.active)
      LanceKnnReaderFactory(uri, version, schema, fields, dataSchema, outputSchema, nearest, filter, conf)
    }
  }
}

final case class LanceKnnPartition(fragments: Int) extends InputPartition

final case class LanceKnnReaderFactory(uri: String, version: Long, schema: LanceSchema, fields: Seq[LanceField],
    dataSchema: StructType, outputSchema: StructType, nearest: NearestConf, filter: Option[Filter],
    hadoopConf: Broadcast[SerializableHadoopConf]) extends PartitionReaderFactory {

  override def supportColumnarReads(partition: InputPartition): Boolean = true

  override def createReader(partition: InputPartition): PartitionReader[InternalRow] =
    throw new UnsupportedOperationException("Lance nearest-neighbour scans are columnar")

  override def createColumnarReader(partition: InputPartition): PartitionReader[ColumnarBatch] =
    new LanceKnnReader(this)

  def query: VectorQuery = VectorQuery(nearest.column, nearest.vector.toArray, nearest.k, nearest.metric,
    nearest.nprobes, nearest.refineFactor, nearest.useIndex, filter, prefilter = true)
}

/** Returns the neighbours one row per batch, nearest first. */
final class LanceKnnReader(factory: LanceKnnReaderFactory) extends PartitionReader[ColumnarBatch] {
  private val allocator: BufferAllocator = ArrowAllocators.root.newChildAllocator("lance-knn", 0, Long.MaxValue)
  private val storage = DatasetStorage(factory.uri, factory.hadoopConf.value.value)
  private val snapshot = Dataset.open(storage, Some(factory.version))
  private lazy val outcome: SearchOutcome = VectorSearch.run(snapshot, factory.query, allocator)
  private lazy val found: Iterator[Neighbour] = outcome.neighbours.iterator
  private var searched = false
  private val scanners = mutable.Map.empty[Long, FragmentScanner]
  private var current: Option[(FragmentBatch, ColumnarBatch)] = None
  private val dictionaryStrings: Array[DictionaryStrings] =
    Array.fill(factory.dataSchema.fields.length)(DictionaryStrings.perColumn())

  private def scanner(fragmentId: Long): FragmentScanner = scanners.getOrElseUpdate(fragmentId, {
    val fragment = snapshot.fragments.find(_.id == fragmentId).getOrElse(
      throw new IllegalStateException(s"${factory.uri}: no fragment $fragmentId in version ${factory.version}"))
    new FragmentScanner(storage, factory.version, fragment, factory.fields, allocator,
      ref => DataFiles.open(storage, factory.schema, ref))
  })

  override def next(): Boolean = {
    closeCurrent()
    searched = true
    if (!found.hasNext) false
    else {
      val n = found.next()
      val b = scanner(n.fragmentId).read(n.offset.toLong, n.offset.toLong + 1)
      val data = factory.dataSchema.fields.indices.map { i =>
        new LanceColumnVector(factory.dataSchema.fields(i).dataType, b.vectors(i), b.dictionary(i),
          dictionaryStrings(i), b.selection)
      }
      val distance = new OnHeapColumnVector(1, FloatType)
      distance.putFloat(0, n.distance)
      val byName: Map[String, ColumnVector] =
        factory.dataSchema.fieldNames.zip(data).toMap + (LanceKnnScan.Distance -> distance)
      current = Some(b -> new ColumnarBatch(factory.outputSchema.fieldNames.map(byName), 1))
      true
    }
  }

  /** Whether the search used a vector index, the IVF partitions it probed
    * and the rows of them it scored (the scan node's metrics in the Spark UI). */
  override def currentMetricsValues(): Array[org.apache.spark.sql.connector.metric.CustomTaskMetric] =
    if (!searched) Array.empty
    else Array(
      ScanMetrics.value(LanceKnnScan.IndexSearches, if (outcome.index.isDefined) 1L else 0L),
      ScanMetrics.value(LanceKnnScan.PartitionsProbed, outcome.partitionsProbed.toLong),
      ScanMetrics.value(LanceKnnScan.CandidatesScored, outcome.candidatesScored))

  override def get(): ColumnarBatch = current.map(_._2).getOrElse(throw new NoSuchElementException)

  private def closeCurrent(): Unit = {
    current.foreach { case (fb, cb) => cb.close(); fb.close() }
    current = None
  }

  override def close(): Unit = {
    closeCurrent()
    scanners.values.foreach(_.close())
    allocator.close()
  }
}

object LanceKnnScan {
  /** The column a nearest-neighbour search adds: each row's distance to the query. */
  val Distance: String = "_distance"
  val IndexSearches: String = "vectorIndexSearches"
  val PartitionsProbed: String = "vectorPartitionsProbed"
  val CandidatesScored: String = "vectorCandidatesScored"
}

final class VectorIndexSearchesMetric
    extends LanceSumMetric(LanceKnnScan.IndexSearches, "nearest-neighbour searches that used a vector index")
final class VectorPartitionsProbedMetric
    extends LanceSumMetric(LanceKnnScan.PartitionsProbed, "vector index partitions probed")
final class VectorCandidatesScoredMetric
    extends LanceSumMetric(LanceKnnScan.CandidatesScored, "vector index rows scored")
