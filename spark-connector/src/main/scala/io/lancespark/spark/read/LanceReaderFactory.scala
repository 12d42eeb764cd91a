package io.lancespark.spark.read

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReader, PartitionReaderFactory}
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.vectorized.ColumnarBatch

import io.lancespark.schema.{LanceField, LanceSchema}
import io.lancespark.spark.ConfSource
import io.lancespark.spark.options.ReadConf

/** Serialized to executors; creates columnar readers for Lance partitions.
  * The Hadoop configuration is a broadcast, as Spark's own file sources ship
  * it: deserialized once per executor, not once per task (a session's
  * configuration takes milliseconds to parse, which short tasks notice). */
final case class LanceReaderFactory(
    uri: String,
    version: Long,
    schema: LanceSchema,
    fields: Seq[LanceField],
    dataSchema: StructType,
    metadataColumns: Seq[String],
    outputSchema: StructType,
    stableRowIds: Boolean,
    read: ReadConf,
    hadoopConf: ConfSource,
    filter: Option[io.lancespark.table.filter.Filter] = None,
    filterFields: Seq[LanceField] = Nil,
    limit: Option[Int] = None)
    extends PartitionReaderFactory {

  override def supportColumnarReads(partition: InputPartition): Boolean = true

  override def createReader(partition: InputPartition): PartitionReader[InternalRow] =
    throw new UnsupportedOperationException("Lance scans are columnar")

  override def createColumnarReader(partition: InputPartition): PartitionReader[ColumnarBatch] = {
    val p = partition.asInstanceOf[LanceInputPartition]
    // Spark reads the batches through their column vectors alone
    new LancePartitionReader(p.runtime.fold(this)(withRuntime), p, itemsOnly = true)
  }

  /** This factory with `r`'s predicates ANDed to its filter. */
  private def withRuntime(r: RuntimeFilter): LanceReaderFactory =
    copy(filter = Some(io.lancespark.table.filter.Filter.and(filter.toSeq :+ r.filter)),
      filterFields = (filterFields ++ r.fields).distinct)
}
