package io.lancespark.spark

import java.util

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.catalog.{MetadataColumn, SupportsDeleteV2, SupportsMetadataColumns, SupportsRead, SupportsRowLevelOperations, SupportsWrite, TableCapability}
import org.apache.spark.sql.connector.expressions.filter.Predicate
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.connector.write.{LogicalWriteInfo, RowLevelOperationBuilder, RowLevelOperationInfo, WriteBuilder}
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import io.lancespark.spark.read.LanceScanBuilder
import io.lancespark.spark.write.{LanceDeltaOperation, LanceWriteBuilder, MetadataDelete}
import io.lancespark.table.Snapshot

/** One version of a Lance dataset as a Spark table, opened on first use (a
  * DataFrameWriter asks for the table of a path that may not exist yet).
  *
  * Tables from the catalog are writable through DataSourceV2 (INSERT INTO,
  * INSERT OVERWRITE, CTAS). Tables from `format("lance")` paths report read
  * capabilities only, which sends DataFrameWriter saves to the
  * CreatableRelationProvider route that handles every save mode. */
final class LanceTable(val options: LanceOptions, writable: Boolean = false)
    extends SupportsRead with SupportsWrite with SupportsMetadataColumns
    with SupportsRowLevelOperations with SupportsDeleteV2 {

  lazy val snapshot: Snapshot = LanceDataSource.snapshot(options)

  override def name(): String = s"lance.`${options.path}`"

  override lazy val schema: StructType = TypeMapping.forActiveSession().toSpark(snapshot.schema)

  override def capabilities(): util.Set[TableCapability] =
    if (writable) util.EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE, TableCapability.TRUNCATE)
    else util.EnumSet.of(TableCapability.BATCH_READ)

  override def properties(): util.Map[String, String] = Map(
    "provider" -> "lance",
    "location" -> snapshot.storage.uri,
    "lance.version" -> snapshot.version.toString,
    "lance.file_version" -> snapshot.fileVersion).asJava

  override def metadataColumns(): Array[MetadataColumn] = MetadataColumns.all

  override def newScanBuilder(opts: CaseInsensitiveStringMap): ScanBuilder =
    new LanceScanBuilder(snapshot, schema, options)

  private def hadoopConf = new SerializableHadoopConf(SparkSession.active.sessionState.newHadoopConf())

  private def requireWritable(): Unit = {
    if (!writable)
      throw new UnsupportedOperationException(
        s"${options.path}: row-level changes go through the Lance catalog: use lance.`${options.path}`")
    if (options.version.isDefined)
      throw new IllegalArgumentException(s"${options.path}: cannot change an old version (version ${options.version.get})")
  }

  override def newRowLevelOperationBuilder(info: RowLevelOperationInfo): RowLevelOperationBuilder = {
    requireWritable()
    () => new LanceDeltaOperation(this, info.command(), hadoopConf)
  }

  private var metadataDelete: Option[Seq[io.lancespark.table.FragmentInfo]] = None

  override def canDeleteWhere(predicates: Array[Predicate]): Boolean = {
    metadataDelete = if (writable && options.version.isEmpty) MetadataDelete.plan(snapshot, predicates) else None
    metadataDelete.isDefined
  }

  override def deleteWhere(predicates: Array[Predicate]): Unit = {
    requireWritable()
    val drop = metadataDelete.orElse(MetadataDelete.plan(snapshot, predicates)).getOrElse(
      throw new IllegalStateException(s"${options.path}: the DELETE condition does not cover whole fragments"))
    MetadataDelete.commit(snapshot, drop)
  }

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder = {
    if (options.version.isDefined)
      throw new IllegalArgumentException(s"${options.path}: cannot write to an old version (version ${options.version.get})")
    new LanceWriteBuilder(snapshot, info, hadoopConf)
  }
}
