package io.lancespark.spark.metadata

import java.util

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.util.{ArrayBasedMapData, GenericArrayData}
import org.apache.spark.sql.connector.catalog.{SupportsRead, TableCapability}
import org.apache.spark.sql.connector.read.{LocalScan, Scan, ScanBuilder}
import org.apache.spark.sql.types._
import org.apache.spark.sql.util.CaseInsensitiveStringMap
import org.apache.spark.unsafe.types.UTF8String

import io.lancespark.table.maintenance.{History, Tags}
import io.lancespark.table.storage.{Dataset, DatasetStorage}
import io.lancespark.table.storage.Snapshot

/** A read-only table computed on the driver from a dataset's metadata
  * (`lance.db.t.history`, `.tags`, `.fragments`), read as a local scan. */
final class MetadataTable(tableName: String, kind: String, storage: DatasetStorage) extends SupportsRead {
  private val schemaOf: StructType = MetadataTables.schema(kind)

  override def name(): String = s"$tableName.$kind"
  override def schema(): StructType = schemaOf
  override def capabilities(): util.Set[TableCapability] = util.EnumSet.of(TableCapability.BATCH_READ)

  override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder = new ScanBuilder {
    override def build(): Scan = new LocalScan {
      override def readSchema(): StructType = schemaOf
      override def rows(): Array[InternalRow] = MetadataTables.rows(kind, storage)
      override def description(): String = s"lance metadata table ${name()}"
    }
  }
}

object MetadataTables {
  val Kinds: Set[String] = Set("history", "tags", "fragments", "indices")

  private val stringMap = MapType(StringType, StringType, valueContainsNull = false)

  def schema(kind: String): StructType = kind match {
    case "history" => new StructType()
      .add("version", LongType, nullable = false).add("timestamp", TimestampType).add("operation", StringType)
      .add("read_version", LongType).add("rows_added", LongType).add("rows_deleted", LongType)
      .add("fragments_added", IntegerType).add("fragments_removed", IntegerType)
      .add("total_rows", LongType, nullable = false).add("total_fragments", IntegerType, nullable = false)
      .add("data_files", IntegerType, nullable = false).add("deletion_files", IntegerType, nullable = false)
      .add("data_bytes", LongType, nullable = false).add("operation_details", stringMap, nullable = false)
      .add("transaction_properties", stringMap, nullable = false).add("writer", StringType)
      .add("tags", ArrayType(StringType, containsNull = false), nullable = false)
    case "tags" => new StructType()
      .add("tag", StringType, nullable = false).add("version", LongType, nullable = false).add("branch", StringType)
      .add("manifest_size", LongType, nullable = false).add("created_at", TimestampType).add("updated_at", TimestampType)
      .add("metadata", stringMap, nullable = false)
    case "fragments" => new StructType()
      .add("version", LongType, nullable = false).add("fragment_id", LongType, nullable = false)
      .add("physical_rows", LongType, nullable = false).add("deleted_rows", LongType, nullable = false)
      .add("num_rows", LongType, nullable = false).add("data_files", IntegerType, nullable = false)
      .add("data_bytes", LongType, nullable = false).add("file_version", StringType)
      .add("deletion_file", StringType).add("paths", ArrayType(StringType, containsNull = false), nullable = false)
    case "indices" => new StructType()
      .add("name", StringType, nullable = false).add("index_type", StringType, nullable = false)
      .add("columns", ArrayType(StringType, containsNull = false), nullable = false)
      .add("fragments", ArrayType(LongType, containsNull = false), nullable = false)
      .add("unindexed_fragments", ArrayType(LongType, containsNull = false), nullable = false)
      .add("dataset_version", LongType, nullable = false).add("index_version", IntegerType, nullable = false)
      .add("uuid", StringType, nullable = false).add("created_at", TimestampType)
    case other => throw new IllegalArgumentException(s"no metadata table '$other' (there are ${Kinds.mkString(", ")})")
  }

  private def s(v: String): UTF8String = UTF8String.fromString(v)
  private def map(m: Map[String, String]): ArrayBasedMapData = {
    val sorted = m.toSeq.sortBy(_._1)
    new ArrayBasedMapData(new GenericArrayData(sorted.map(kv => s(kv._1)).toArray[Any]),
      new GenericArrayData(sorted.map(kv => s(kv._2)).toArray[Any]))
  }
  private def strings(xs: Seq[String]): GenericArrayData = new GenericArrayData(xs.map(s).toArray[Any])
  private def micros(i: java.time.Instant): Long = org.apache.spark.sql.catalyst.util.DateTimeUtils.instantToMicros(i)
  private def boxed[T](o: Option[T]): Any = o.getOrElse(null)

  def rows(kind: String, storage: DatasetStorage): Array[InternalRow] = kind match {
    case "history" => History.list(storage).map { e =>
      InternalRow(e.version, boxed(e.timestamp.map(micros)), e.operation.map(s).orNull, boxed(e.readVersion),
        boxed(e.rowsAdded), boxed(e.rowsDeleted), boxed(e.fragmentsAdded), boxed(e.fragmentsRemoved),
        e.totalRows, e.totalFragments, e.dataFiles, e.deletionFiles, e.dataBytes, map(e.details),
        map(e.transactionProperties), s(e.writer), strings(e.tags))
    }.toArray
    case "tags" => Tags.list(storage).map { t =>
      InternalRow(s(t.name), t.version, t.branch.map(s).orNull, t.manifestSize, boxed(t.createdAt.map(micros)),
        boxed(t.updatedAt.map(micros)), map(t.metadata))
    }.toArray
    case "fragments" =>
      val snap: Snapshot = Dataset.open(storage, None)
      snap.fragments.map { f =>
        InternalRow(snap.version, f.id, f.physicalRows, f.deletedRows, f.numRows, f.files.size,
          f.files.map(_.sizeBytes).sum, s(f.files.headOption.map(_.versionName).getOrElse("")),
          f.deletionFile.map(s).orNull,
          strings(f.files.map(_.relativePath)))
      }.toArray
    case "indices" =>
      val snap: Snapshot = Dataset.open(storage, None)
      val all = snap.fragments.map(_.id)
      io.lancespark.table.index.IndexCatalog.load(snap).map { e =>
        val covered = e.covered.toArray.toSeq.map(_.toLong)
        InternalRow(s(e.name), s(IndexTypes.name(e.kind)), strings(e.fields.map(_.mkString("."))),
          new GenericArrayData(covered.map(Long.box).toArray[Any]),
          new GenericArrayData(all.filterNot(covered.toSet).map(Long.box).toArray[Any]),
          e.datasetVersion, e.indexVersion, s(e.uuid),
          e.createdAtMillis.map(java.lang.Long.valueOf).orNull)
      }.toArray
    case other => throw new IllegalArgumentException(s"no metadata table '$other'")
  }
}

/** Index types by pylance's names ("BTree", "Bitmap", ...) from the last part of their details' type URL. */
object IndexTypes {
  def name(kind: String): String =
    if (kind.isEmpty) "unknown" else if (kind.endsWith("IndexDetails")) kind.stripSuffix("IndexDetails") else kind
}
