package io.lancespark.spark

import java.util

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.catalog.{MetadataColumn, SupportsDeleteV2, SupportsMetadataColumns, SupportsRead, SupportsRowLevelOperations, SupportsWrite, TableCapability}
import org.apache.spark.sql.connector.catalog.index.{SupportsIndex, TableIndex}
import org.apache.spark.sql.connector.expressions.{Expressions, NamedReference}
import org.apache.spark.sql.connector.expressions.filter.Predicate
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.connector.write.{LogicalWriteInfo, RowLevelOperationBuilder, RowLevelOperationInfo, WriteBuilder}
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import io.lancespark.spark.options.{ChangeFeedOptions, NearestConf, NearestOptions, OptionSource, ReadConf, ReadOptions, ReadTarget}
import io.lancespark.spark.read.{ChangeFeedColumns, LanceChangeFeedScanBuilder, LanceScanBuilder}
import io.lancespark.spark.write.{LanceDeltaOperation, LanceWriteBuilder, MetadataDelete}
import io.lancespark.table.storage.Snapshot

/** One version of a Lance dataset as a Spark table, opened on first use (a
  * DataFrameWriter asks for the table of a path that may not exist yet).
  *
  * Tables from the catalog are writable through DataSourceV2 (INSERT INTO,
  * INSERT OVERWRITE, CTAS). Tables from `format("lance")` paths report read
  * capabilities only, which sends DataFrameWriter saves to the
  * CreatableRelationProvider route that handles every save mode.
  *
  * `tableOptions`: the options the table was opened with (a DataFrame read's);
  * each scan adds its own, and the session and the dataset's properties fill
  * in the rest (see OptionSource).
  *
  * `acceptAnySchema`: a catalog table in a session with the connector's
  * extension reports ACCEPT_ANY_SCHEMA, so that Spark leaves a write's
  * columns to the extension's CatalogWriteSchema rule, which hands the write
  * back to Spark against `writeTarget` (the same columns, or with mergeSchema
  * the columns the write adds: `evolved`). `opened`: the snapshot a
  * writeTarget shares with the table it comes from. */
final class LanceTable(val target: ReadTarget, tableOptions: Map[String, String] = Map.empty,
    writable: Boolean = false, acceptAnySchema: Boolean = false,
    evolved: Option[io.lancespark.schema.LanceSchema] = None, opened: Option[Option[Snapshot]] = None)
    extends SupportsRead with SupportsWrite with SupportsMetadataColumns
    with SupportsRowLevelOperations with SupportsDeleteV2 with SupportsIndex
    with io.lancespark.spark.shim.SchemaEvolutionShim {

  /** None where the path holds no dataset yet (a stream's sink may create it). */
  private lazy val existing: Option[Snapshot] = opened.getOrElse(LanceDataSource.snapshotIfExists(target))

  lazy val snapshot: Snapshot = existing.getOrElse(LanceDataSource.snapshot(target))

  private def path: String = target.path

  /** The settings of a scan given its own options. */
  def readConf(scanOptions: Map[String, String]): ReadConf =
    ReadOptions.conf(tableOptions ++ scanOptions, OptionSource.activeSession, snapshot.config)

  override def name(): String = s"lance.`$path`"

  /** The read's nearest-neighbour search (`nearest.*` options), if any. */
  private lazy val nearest: Option[NearestConf] = NearestOptions.parse(tableOptions)

  /** Whether the read is a change feed's (`readChangeFeed`; its other options are read by its scan). */
  private lazy val changeFeed: Boolean = ChangeFeedOptions.requested(tableOptions)

  /** The table's own columns. */
  private lazy val dataSchema: StructType =
    existing.fold(new StructType())(s => TypeMapping.forActiveSession().toSpark(evolved.getOrElse(s.schema)))

  /** Whether Spark leaves a write's columns to the connector (see the class comment). */
  def acceptsAnySchema: Boolean = writable && acceptAnySchema && evolved.isEmpty

  /** This table as the target Spark resolves a write's columns against: its
    * own schema, or `evolvedSchema` (the dataset's plus the columns and
    * struct fields a mergeSchema write adds, committed with the write). */
  def writeTarget(evolvedSchema: Option[io.lancespark.schema.LanceSchema]): LanceTable =
    new LanceTable(target, tableOptions, writable, acceptAnySchema = false, evolvedSchema, Some(existing))

  /** The schema a write of `incoming` columns evolves the dataset to, when
    * mergeSchema is set (write option, session conf or table property) and
    * the write brings columns or struct fields the dataset lacks. */
  def evolvedBy(incoming: StructType, writeOptions: Map[String, String], overwrite: Boolean)
      : Option[io.lancespark.schema.LanceSchema] = existing.flatMap { s =>
    val opts = io.lancespark.spark.options.WriteOptions.conf(writeOptions, OptionSource.activeSession, s.config)
    if (!opts.mergeSchema) None
    else {
      val (merged, added) = io.lancespark.spark.write.LanceWriteJob.evolve(s, incoming, opts,
        opts.versionFor(Some(s), overwrite))
      if (added.isEmpty) None else Some(merged)
    }
  }

  /** A table at a path with no dataset yet has no columns: a stream's sink
    * creates it with its first batch. Reads still fail, naming the path, when
    * their scan opens the snapshot. A change feed read adds its change columns. */
  override lazy val schema: StructType =
    if (changeFeed) ChangeFeedColumns.schema(dataSchema, snapshot.storage.uri)
    else if (existing.isEmpty) dataSchema
    else LanceTable.withDistance(dataSchema, nearest.isDefined)

  override def capabilities(): util.Set[TableCapability] =
    if (writable) {
      val caps = util.EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE, TableCapability.TRUNCATE,
        TableCapability.STREAMING_WRITE, TableCapability.MICRO_BATCH_READ)
      schemaEvolutionCapabilities.foreach(caps.add)
      if (acceptsAnySchema) caps.add(TableCapability.ACCEPT_ANY_SCHEMA)
      caps
    }
    else util.EnumSet.of(TableCapability.BATCH_READ, TableCapability.STREAMING_WRITE, TableCapability.MICRO_BATCH_READ)

  override def properties(): util.Map[String, String] = (Map(
    "provider" -> "lance",
    "location" -> snapshot.storage.uri,
    "lance.version" -> snapshot.version.toString,
    "lance.file_version" -> snapshot.fileVersion) ++ snapshot.config).asJava

  override def metadataColumns(): Array[MetadataColumn] = MetadataColumns.all

  override def newScanBuilder(opts: CaseInsensitiveStringMap): ScanBuilder = {
    val scanOptions = opts.asCaseSensitiveMap().asScala.toMap
    // a catalog table's schema is fixed before the scan's options are seen: it cannot add the change columns
    if (!changeFeed && ChangeFeedOptions.requested(scanOptions))
      throw new IllegalArgumentException(s"${name()}: readChangeFeed is read by " +
        "spark.read.format(\"lance\").option(\"readChangeFeed\", \"true\").option(\"startingVersion\", n).load(<path>), " +
        "the SQL function lance_table_changes('<table>', <start> [, <end>]) or, as a stream, " +
        "spark.readStream.format(\"lance\").option(\"readChangeFeed\", \"true\").load(<path>) " +
        s"(the table's path: ${snapshot.storage.uri}), not by reads of catalog tables")
    if (changeFeed) {
      if (nearest.isDefined)
        throw new IllegalArgumentException(s"${name()}: a change feed read takes no nearest-neighbour options")
      if (target.pinned) throw new IllegalArgumentException(s"${name()}: a change feed read takes no version or " +
        "tag option: give startingVersion and endingVersion")
      new LanceChangeFeedScanBuilder(snapshot, dataSchema, tableOptions ++ scanOptions, readConf(scanOptions))
    } else scanBuilder(scanOptions)
  }

  private def scanBuilder(scanOptions: Map[String, String]): ScanBuilder = {
    // a catalog table's schema is fixed before the scan's options are seen: it cannot add _distance
    if (nearest.isEmpty && NearestOptions.parse(scanOptions).isDefined)
      throw new IllegalArgumentException(s"${name()}: nearest-neighbour options are read by " +
        "spark.read.format(\"lance\").load(<path>) or the SQL function lance_vector_search('<table>', ...), " +
        "not by reads of catalog tables")
    new LanceScanBuilder(snapshot, schema, readConf(scanOptions), nearest, tableOptions ++ scanOptions)
  }

  private def hadoopConf = new SerializableHadoopConf(HadoopConfs.active)

  private def requireWritable(): Unit = {
    if (!writable)
      throw new UnsupportedOperationException(
        s"$path: row-level changes go through the Lance catalog: use lance.`$path`")
    if (target.pinned)
      throw new IllegalArgumentException(s"$path: cannot change an old version (${target.describe})")
  }

  override def newRowLevelOperationBuilder(info: RowLevelOperationInfo): RowLevelOperationBuilder = {
    requireWritable()
    () => new LanceDeltaOperation(this, info.command(), hadoopConf)
  }

  private var metadataDelete: Option[Seq[io.lancespark.table.model.FragmentInfo]] = None

  override def canDeleteWhere(predicates: Array[Predicate]): Boolean = {
    metadataDelete = if (writable && !target.pinned) MetadataDelete.fragmentsToDrop(snapshot, predicates) else None
    metadataDelete.isDefined
  }

  override def deleteWhere(predicates: Array[Predicate]): Unit = {
    requireWritable()
    val drop = metadataDelete.orElse(MetadataDelete.fragmentsToDrop(snapshot, predicates)).getOrElse(
      throw new IllegalStateException(s"$path: the DELETE condition does not cover whole fragments"))
    MetadataDelete.commit(snapshot, drop)
  }

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder = {
    if (target.pinned)
      throw new IllegalArgumentException(s"$path: cannot write to an old version (${target.describe})")
    // opened when a batch write needs it: a stream's sink may create the dataset
    new LanceWriteBuilder(() => snapshot, LanceTable.uriOf(path), info, hadoopConf, evolved)
  }

  // --- CREATE INDEX name ON t [USING btree|bitmap] (col) / DROP INDEX name ON t (catalog tables) ---

  override def createIndex(indexName: String, columns: Array[NamedReference],
      columnsProperties: util.Map[NamedReference, util.Map[String, String]],
      properties: util.Map[String, String]): Unit = {
    requireWritable()
    if (columns.length != 1)
      throw new IllegalArgumentException(s"$path: an index is built over one column, not ${columns.length} " +
        s"(${columns.map(_.fieldNames().mkString(".")).mkString(", ")})")
    val kind = Option(properties.get(SupportsIndex.PROP_TYPE)).map(_.trim).filter(_.nonEmpty).getOrElse("btree")
    if (io.lancespark.table.index.vector.VectorIndexTypes.isVector(kind)) {
      val options = properties.asScala.toMap - SupportsIndex.PROP_TYPE
      io.lancespark.spark.procedures.VectorIndexBuildJob.run(SparkSession.active, snapshot.storage,
        columns.head.fieldNames().mkString("."), kind, Some(indexName), options)
    } else
    io.lancespark.spark.procedures.IndexBuildJob.run(SparkSession.active, snapshot.storage,
      columns.head.fieldNames().mkString("."), io.lancespark.table.index.BuiltIndexType.parse(kind), Some(indexName),
      properties.asScala.toMap - SupportsIndex.PROP_TYPE)
    ()
  }

  override def dropIndex(indexName: String): Unit = {
    requireWritable()
    io.lancespark.table.index.IndexBuild.drop(latest, indexName)
    ()
  }

  override def indexExists(indexName: String): Boolean =
    io.lancespark.table.index.IndexCatalog.load(latest).exists(_.name == indexName)

  override def listIndexes(): Array[TableIndex] =
    io.lancespark.table.index.IndexCatalog.load(latest).map { e =>
      val kind = io.lancespark.spark.metadata.IndexTypes.name(e.kind)
      new TableIndex(e.name, kind, e.fields.map(f =>
        Expressions.column(f.map(n => "`" + n.replace("`", "``") + "`").mkString("."))).toArray,
        new util.HashMap[NamedReference, java.util.Properties](), new java.util.Properties())
    }.toArray

  private def latest: Snapshot = io.lancespark.table.storage.Dataset.open(snapshot.storage, None)
}

object LanceTable {
  /** The dataset's URI as storage names it (the path may not be a dataset yet). */
  def uriOf(path: String): String =
    io.lancespark.table.storage.DatasetStorage(path, HadoopConfs.active).uri

  /** `schema` plus the `_distance` column of a nearest-neighbour search, when `nearest`. */
  def withDistance(schema: StructType, nearest: Boolean): StructType =
    if (!nearest) schema
    else if (schema.fieldNames.contains(io.lancespark.spark.read.LanceKnnScan.Distance))
      throw new IllegalArgumentException(s"the table has a column named ${io.lancespark.spark.read.LanceKnnScan.Distance}, " +
        "which a nearest-neighbour search adds")
    else schema.add(io.lancespark.spark.read.LanceKnnScan.Distance, org.apache.spark.sql.types.FloatType, nullable = false)
}
