package io.lancespark.spark

import java.util

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.catalog.{MetadataColumn, SupportsMetadataColumns, SupportsRead, SupportsWrite, TableCapability}
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.connector.write.{LogicalWriteInfo, WriteBuilder}
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import io.lancespark.spark.read.LanceScanBuilder
import io.lancespark.spark.write.LanceWriteBuilder
import io.lancespark.table.Snapshot

/** One version of a Lance dataset as a Spark table, opened on first use (a
  * DataFrameWriter asks for the table of a path that may not exist yet).
  *
  * Tables from the catalog are writable through DataSourceV2 (INSERT INTO,
  * INSERT OVERWRITE, CTAS). Tables from `format("lance")` paths report read
  * capabilities only, which sends DataFrameWriter saves to the
  * CreatableRelationProvider route that handles every save mode. */
final class LanceTable(val options: LanceOptions, writable: Boolean = false)
    extends SupportsRead with SupportsWrite with SupportsMetadataColumns {

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

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder = {
    if (options.version.isDefined)
      throw new IllegalArgumentException(s"${options.path}: cannot write to an old version (version ${options.version.get})")
    new LanceWriteBuilder(snapshot, info,
      new SerializableHadoopConf(SparkSession.active.sessionState.newHadoopConf()))
  }
}
