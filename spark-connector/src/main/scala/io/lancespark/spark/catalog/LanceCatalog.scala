package io.lancespark.spark.catalog

import java.util

import scala.jdk.CollectionConverters._

import org.apache.hadoop.fs.Path
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.analysis.{NamespaceAlreadyExistsException, NoSuchNamespaceException, NoSuchTableException, TableAlreadyExistsException}
import org.apache.spark.sql.connector.catalog._
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import io.lancespark.schema.LanceSchema
import io.lancespark.spark.{HadoopConfs, LanceTable}
import io.lancespark.spark.metadata.{MetadataTable, MetadataTables}
import io.lancespark.spark.procedures.{LanceProcedure, LanceProcedures, TableResolver}
import io.lancespark.spark.options.{OptionSource, ReadTarget, WriteOptions}
import io.lancespark.spark.shim.ProcedureCatalogShim
import io.lancespark.spark.write.SparkToArrow
import io.lancespark.table.commit.{CommitSettings, Committer, OverwriteDataset, ReplaceSchema}
import io.lancespark.table.maintenance.Tags
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.{Dataset, DatasetStorage, Snapshot, VersionLookup}

/** A Spark catalog of Lance datasets under a warehouse directory
  * (`spark.sql.catalog.lance.warehouse`): namespaces are directories, tables
  * are `<namespace>/<name>.lance` datasets. Any dataset is also reachable by
  * path, like Delta's: ``lance.`/abs/path/to/dataset` ``. */
final class LanceCatalog extends TableCatalog with SupportsNamespaces with ProcedureCatalogShim with TableResolver {

  private var catalogName: String = "lance"
  private var warehouse: Path = _

  override def initialize(name: String, options: CaseInsensitiveStringMap): Unit = {
    catalogName = name
    val dir = Option(options.get("warehouse")).getOrElse(
      new Path(SparkSession.active.conf.get("spark.sql.warehouse.dir"), "lance").toString)
    warehouse = new Path(DatasetStorage.normalize(dir))
  }

  override def name(): String = catalogName

  override def defaultNamespace(): Array[String] = Array("default")

  private def conf = HadoopConfs.active
  private def fs = warehouse.getFileSystem(conf)

  /** A path identifier (``lance.`/abs/path` `` or a URI) or a warehouse table. */
  private def location(ident: Identifier): String =
    if (LanceCatalog.isPath(ident)) ident.name()
    else new Path(namespaceDir(ident.namespace()), s"${ident.name()}.lance").toString

  private def namespaceDir(ns: Array[String]): Path =
    ns.foldLeft(warehouse)((p, part) => new Path(p, part))

  private def exists(ident: Identifier): Boolean = Dataset.isDataset(location(ident), conf)

  override def loadTable(ident: Identifier): Table =
    metadataTable(ident).getOrElse(load(ident, None))

  /** VERSION AS OF: a version number, or a tag's name. */
  override def loadTable(ident: Identifier, version: String): Table = scala.util.Try(version.toLong).toOption match {
    case Some(v) => load(ident, Some(v))
    case None =>
      if (!LanceCatalog.isPath(ident) && !exists(ident)) throw new NoSuchTableException(ident)
      load(ident, Some(Tags.versionOf(DatasetStorage(location(ident), conf), version)))
  }

  /** `db.t.history`, `db.t.tags`, `db.t.fragments` (and the same after a path
    * table): metadata tables of table `db.t`, unless a table of that name exists. */
  private def metadataTable(ident: Identifier): Option[Table] = {
    val ns = ident.namespace()
    val kind = ident.name().toLowerCase(java.util.Locale.ROOT)
    if (ns.isEmpty || !MetadataTables.Kinds.contains(kind) || LanceCatalog.isPath(ident) || exists(ident)) None
    else {
      val parent = Identifier.of(ns.init, ns.last)
      if (LanceCatalog.isPath(parent) || exists(parent)) {
        val storage = DatasetStorage(location(parent), conf)
        Dataset.open(storage, None)  // a path that holds no dataset: an error naming it
        Some(new MetadataTable(s"$catalogName.${(ns.init :+ ns.last).map(quote).mkString(".")}", kind, storage))
      } else None
    }
  }

  private def quote(part: String): String =
    if (part.matches("[A-Za-z_][A-Za-z0-9_]*")) part else "`" + part.replace("`", "``") + "`"

  // --- procedures (namespace `system`; Spark's ProcedureCatalog on 4.x, the CALL extension on 3.5) ---

  override def procedure(ident: Identifier): LanceProcedure =
    (if (ident.namespace().sameElements(Array(LanceProcedures.Namespace))) LanceProcedures.load(ident.name(), this)
     else None).getOrElse(throw new IllegalArgumentException(
      s"$catalogName has no procedure ${(ident.namespace() :+ ident.name()).mkString(".")}; its procedures are " +
        LanceProcedures.names.map(n => s"$catalogName.${LanceProcedures.Namespace}.$n").mkString(", ")))

  override def procedureIds(namespace: Array[String]): Array[Identifier] =
    if (namespace.sameElements(Array(LanceProcedures.Namespace)))
      LanceProcedures.names.map(n => Identifier.of(namespace, n)).toArray
    else Array.empty

  /** A procedure's `table` argument: `db.t`, `lance.db.t`, `t` (default
    * namespace), `` `/path/to/ds.lance` `` or an unquoted absolute path or URI. */
  override def storageFor(table: String): DatasetStorage = {
    val trimmed = table.trim
    val ident =
      if (trimmed.startsWith("/") || (trimmed.contains("://") && !trimmed.contains("`"))) Identifier.of(Array.empty, trimmed)
      else {
        val parts = SparkSession.active.sessionState.sqlParser.parseMultipartIdentifier(trimmed)
        val rest = if (parts.size >= 3 && parts.head.equalsIgnoreCase(catalogName)) parts.tail else parts
        if (rest.size == 1 && LanceCatalog.isPath(Identifier.of(Array.empty, rest.head))) Identifier.of(Array.empty, rest.head)
        else if (rest.size == 1) Identifier.of(defaultNamespace(), rest.head)
        else Identifier.of(rest.init.toArray, rest.last)
      }
    if (!LanceCatalog.isPath(ident) && !exists(ident)) throw new NoSuchTableException(ident)
    val storage = DatasetStorage(location(ident), conf)
    Dataset.open(storage, None)  // a path that holds no dataset: an error naming it
    storage
  }

  /** TIMESTAMP AS OF: the newest version committed at or before `timestamp` (microseconds). */
  override def loadTable(ident: Identifier, timestamp: Long): Table = {
    if (!LanceCatalog.isPath(ident) && !exists(ident)) throw new NoSuchTableException(ident)
    val storage = DatasetStorage(location(ident), conf)
    // a path that holds no dataset: an error naming it; else a bisection by manifest time
    // (about log2(versions) manifest reads), compared in microseconds
    val target = java.time.Instant.ofEpochSecond(Math.floorDiv(timestamp, 1000000L), Math.floorMod(timestamp, 1000000L) * 1000L)
    val at = VersionLookup.versionAt(storage, target, t => t.getEpochSecond * 1000000L + t.getNano / 1000 <= timestamp)
      .getOrElse(throw new IllegalArgumentException(
        s"${storage.uri}: no version was committed at or before the requested timestamp"))
    load(ident, Some(at))
  }

  /** A warehouse table that does not exist is Spark's NoSuchTableException. A
    * path that holds no dataset is an error naming the path: were it
    * NoSuchTableException, Spark would go on to try the name as a file query
    * and report "Unsupported data source type for direct query on files". */
  private def load(ident: Identifier, version: Option[Long]): Table = {
    // a warehouse table's latest version is opened once: the lookup that finds it is the check that it exists
    val opened: Option[Option[Snapshot]] =
      if (LanceCatalog.isPath(ident)) None
      else if (version.isEmpty)
        Some(Some(Dataset.openLatestIfExists(DatasetStorage(location(ident), conf))
          .getOrElse(throw new NoSuchTableException(ident))))
      else if (!exists(ident)) throw new NoSuchTableException(ident)
      else None
    val table = new LanceTable(ReadTarget(location(ident), version), writable = true,
      acceptAnySchema = io.lancespark.spark.extensions.CatalogWriteSchema.installed(SparkSession.active),
      opened = opened)
    table.snapshot
    table
  }

  override def tableExists(ident: Identifier): Boolean = exists(ident)

  override def createTable(ident: Identifier, schema: StructType, partitions: Array[Transform],
      properties: util.Map[String, String]): Table = {
    if (partitions.nonEmpty)
      throw new UnsupportedOperationException("Lance tables are not partitioned; remove PARTITIONED BY")
    if (!LanceCatalog.isPath(ident) && !namespaceExists(ident.namespace()))
      throw new NoSuchNamespaceException(ident.namespace())
    if (exists(ident)) throw new TableAlreadyExistsException(ident)
    // TBLPROPERTIES and OPTIONS (which Spark prefixes with "option.") alike: known write options only
    val kept = WriteOptions.tableProperties(properties.asScala.toMap.map { case (k, v) => k.stripPrefix("option.") -> v })
    val opts = WriteOptions.conf(kept, OptionSource.activeSession, Map.empty)
    val version = opts.versionFor(None, overwrite = true)
    val lance = LanceSchema.fromArrow(SparkToArrow.schema(schema, opts.vectorColumns, version, opts.blobColumns))
    val storage = DatasetStorage(location(ident), conf)
    Committer.commit(storage, None, OverwriteDataset(Nil, lance, version, kept),
      CommitSettings(stableRowIds = opts.enableStableRowIds, v2ManifestNaming = opts.v2ManifestPaths))
    loadTable(ident)
  }

  /** ADD COLUMNS (top level, nullable), DROP COLUMN and RENAME COLUMN: each a
    * metadata-only version with a Project transaction. */
  override def alterTable(ident: Identifier, changes: TableChange*): Table = {
    if (!exists(ident)) throw new NoSuchTableException(ident)
    val storage = DatasetStorage(location(ident), conf)
    val (types, others) = changes.partition(_.isInstanceOf[TableChange.UpdateColumnType])
    if (changes.isEmpty) loadTable(ident)  // e.g. ALTER COLUMN c TYPE <its own type>: nothing to commit
    else if (types.nonEmpty) {
      if (others.nonEmpty)
        throw new UnsupportedOperationException(s"$ident: change column types in an ALTER TABLE statement of " +
          "their own (a type change rewrites the column's values; the other changes are metadata)")
      alterColumnTypes(ident, storage, types.map(_.asInstanceOf[TableChange.UpdateColumnType]))
    } else alterSchema(ident, storage, changes)
  }

  /** ALTER COLUMN TYPE: a lossless widening, written as the column alone
    * rewritten (see AlterColumnTypeJob); a column of the same type is left as it is. */
  private def alterColumnTypes(ident: Identifier, storage: DatasetStorage,
      changes: Seq[TableChange.UpdateColumnType]): Table = {
    val current = loadTable(ident).schema()
    val wanted = changes.map { c =>
      if (c.fieldNames().length != 1)
        throw new UnsupportedOperationException(s"$ident: cannot change the type of nested field " +
          s"${c.fieldNames().mkString(".")}: only top-level columns' types can be changed (replace the whole " +
          "struct with update_columns)")
      c.fieldNames().head -> c.newDataType()
    }.filterNot { case (n, t) => current.fieldNames.contains(n) && current(n).dataType == t }
    if (wanted.nonEmpty)
      io.lancespark.spark.procedures.AlterColumnTypeJob.run(SparkSession.active, storage, ident.toString, wanted)
    loadTable(ident)
  }

  private def alterSchema(ident: Identifier, storage: DatasetStorage, changes: Seq[TableChange]): Table = {
    val snapshot = Dataset.open(storage, None)
    val fields = SchemaChanges.apply(snapshot.schema, changes, ident.toString, DataFileVersion.ofDataset(snapshot.fileVersion))
    Committer.commit(storage, Some(snapshot.version), ReplaceSchema(fields.schema),
      CommitSettings())
    loadTable(ident)
  }

  override def dropTable(ident: Identifier): Boolean = {
    if (LanceCatalog.isPath(ident))
      throw new UnsupportedOperationException(
        s"refusing to DROP a path table (${ident.name()}): delete the directory yourself if you mean it")
    if (!exists(ident)) false
    else fs.delete(new Path(location(ident)), true)
  }

  override def renameTable(oldIdent: Identifier, newIdent: Identifier): Unit = {
    if (LanceCatalog.isPath(oldIdent) || LanceCatalog.isPath(newIdent))
      throw new UnsupportedOperationException("path tables cannot be renamed")
    if (!exists(oldIdent)) throw new NoSuchTableException(oldIdent)
    if (exists(newIdent)) throw new TableAlreadyExistsException(newIdent)
    if (!fs.rename(new Path(location(oldIdent)), new Path(location(newIdent))))
      throw new IllegalStateException(s"could not rename $oldIdent to $newIdent")
  }

  override def listTables(namespace: Array[String]): Array[Identifier] = {
    val dir = namespaceDir(namespace)
    if (!fs.exists(dir)) throw new NoSuchNamespaceException(namespace)
    fs.listStatus(dir).filter(s => s.isDirectory && s.getPath.getName.endsWith(".lance") &&
        Dataset.isDataset(s.getPath.toString, conf))
      .map(s => Identifier.of(namespace, s.getPath.getName.stripSuffix(".lance")))
  }

  override def listNamespaces(): Array[Array[String]] = {
    if (!fs.exists(warehouse)) fs.mkdirs(new Path(warehouse, "default"))
    fs.listStatus(warehouse).filter(s => s.isDirectory && !s.getPath.getName.endsWith(".lance"))
      .map(s => Array(s.getPath.getName))
  }

  override def listNamespaces(namespace: Array[String]): Array[Array[String]] = {
    val dir = namespaceDir(namespace)
    if (!fs.exists(dir)) throw new NoSuchNamespaceException(namespace)
    fs.listStatus(dir).filter(s => s.isDirectory && !s.getPath.getName.endsWith(".lance"))
      .map(s => namespace :+ s.getPath.getName)
  }

  override def namespaceExists(namespace: Array[String]): Boolean =
    namespace.isEmpty || fs.exists(namespaceDir(namespace)) ||
      (namespace.sameElements(Array("default")) && fs.mkdirs(namespaceDir(namespace)))

  override def loadNamespaceMetadata(namespace: Array[String]): util.Map[String, String] = {
    if (!namespaceExists(namespace)) throw new NoSuchNamespaceException(namespace)
    Map("location" -> namespaceDir(namespace).toString).asJava
  }

  override def createNamespace(namespace: Array[String], metadata: util.Map[String, String]): Unit = {
    if (fs.exists(namespaceDir(namespace))) throw new NamespaceAlreadyExistsException(namespace)
    fs.mkdirs(namespaceDir(namespace))
  }

  override def alterNamespace(namespace: Array[String], changes: NamespaceChange*): Unit =
    throw new UnsupportedOperationException("namespaces have no properties in the Lance catalog")

  override def dropNamespace(namespace: Array[String], cascade: Boolean): Boolean = {
    val dir = namespaceDir(namespace)
    if (!fs.exists(dir)) false
    else {
      if (!cascade && fs.listStatus(dir).nonEmpty)
        throw new IllegalStateException(s"namespace ${namespace.mkString(".")} is not empty; use CASCADE")
      fs.delete(dir, true)
    }
  }
}

object LanceCatalog {
  /** ``lance.`/abs/path` `` and ``lance.`s3://bucket/t` ``: a single-part name that is a path. */
  def isPath(ident: Identifier): Boolean =
    ident.namespace().isEmpty && (ident.name().startsWith("/") || ident.name().contains(":/"))
}
