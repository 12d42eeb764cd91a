package io.lancespark.spark

import java.util

import org.apache.spark.sql.{DataFrame, SaveMode, SQLContext}
import org.apache.spark.sql.connector.catalog.{Table, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.sources.{BaseRelation, CreatableRelationProvider, DataSourceRegister}
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import scala.jdk.CollectionConverters._

import io.lancespark.spark.options.{ChangeFeedOptions, NearestOptions, ReadOptions, ReadTarget}
import io.lancespark.spark.read.ChangeFeedColumns
import io.lancespark.spark.shim.WritableTypes
import io.lancespark.spark.write.LanceWriteJob
import io.lancespark.table.maintenance.Tags
import io.lancespark.table.storage.{Dataset, DatasetStorage}
import io.lancespark.table.storage.Snapshot

/** `spark.read.format("lance")` and `df.write.format("lance")`: the entry point
  * Spark finds through META-INF/services and the short name "lance".
  *
  * Reads are DataSourceV2 scans. `DataFrameWriter` saves go through
  * CreatableRelationProvider, the one route Spark offers path-based sources for
  * every save mode (error-if-exists, ignore, append, overwrite); the write
  * itself is a Spark job of ours that commits one Lance version. */
final class LanceDataSource extends TableProvider with DataSourceRegister with CreatableRelationProvider
    with WritableTypes {

  override def shortName(): String = "lance"

  /** The snapshot inferSchema opened, handed to the getTable call Spark makes
    * right after it on this instance (DataSourceV2Utils.loadV2Source), so that
    * a `load()` opens the latest version once, not twice. Taken once: a later
    * getTable opens again, as does one where no dataset existed yet (a stream's
    * sink may create it). */
  private val inferred = new java.util.concurrent.atomic.AtomicReference[Option[(ReadTarget, Snapshot)]](None)

  override def inferSchema(options: CaseInsensitiveStringMap): StructType = {
    val asked = options.asCaseSensitiveMap().asScala.toMap
    // a stream's sink may create the dataset: no schema yet (a read of the table still fails, naming the path)
    val target = ReadOptions.target(asked)
    if (ChangeFeedOptions.requested(asked))  // the table's columns and the change columns
      ChangeFeedColumns.schema(TypeMapping.forActiveSession().toSpark(LanceDataSource.snapshot(target).schema), target.path)
    else {
      val opened = LanceDataSource.snapshotIfExists(target)
      inferred.set(opened.map(target -> _))
      opened.fold(new StructType())(s =>
        LanceTable.withDistance(TypeMapping.forActiveSession().toSpark(s.schema), NearestOptions.parse(asked).isDefined))
    }
  }

  /** Lets DataFrameWriter hand us the DataFrame's schema instead of inferring
    * one from a dataset that may not exist yet. */
  override def supportsExternalMetadata(): Boolean = true

  override def getTable(
      schema: StructType,
      partitioning: Array[Transform],
      properties: util.Map[String, String]): Table = {
    val options = properties.asScala.toMap
    val target = ReadOptions.target(options)
    val opened = inferred.getAndSet(None).collect { case (t, snapshot) if t == target => Some(snapshot) }
    new LanceTable(target, options, opened = opened)
  }

  override def createRelation(
      ctx: SQLContext,
      mode: SaveMode,
      parameters: Map[String, String],
      data: DataFrame): BaseRelation = {
    LanceWriteJob.run(data, parameters, mode)
    new BaseRelation {
      override def sqlContext: SQLContext = ctx
      override def schema: StructType = data.schema
    }
  }
}

object LanceDataSource {
  /** The target's snapshot; None where the path holds no dataset yet (an unpinned target only). */
  def snapshotIfExists(target: ReadTarget): Option[Snapshot] =
    if (target.pinned) Some(snapshot(target))
    else Dataset.openLatestIfExists(DatasetStorage(target.path, HadoopConfs.active))

  def snapshot(target: ReadTarget): Snapshot = {
    val storage = DatasetStorage(target.path, HadoopConfs.active)
    Dataset.open(storage, target.tag.map(Tags.versionOf(storage, _)).orElse(target.version))
  }
}
