package io.lancespark.spark.procedures

import java.time.Duration

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.util.GenericArrayData
import org.apache.spark.sql.types._

import io.lancespark.spark.procedures.LanceProcedure._
import io.lancespark.table.maintenance.{Cleanup, CleanupPolicy, Restore, Tags}
import io.lancespark.table.storage.Dataset

/** `CALL lance.system.vacuum(table => 'db.t', retain_hours => 0, dry_run => true)`:
  * the reference's cleanup_old_versions. */
final class VacuumProcedure(tables: TableResolver) extends LanceProcedure(tables) {
  override def name(): String = "vacuum"
  override def description(): String =
    "Removes versions older than the retention (default 14 days; never the latest or a tagged one) and the files only they reference"

  override val params: Seq[ProcParam] = Seq(
    required("table", StringType, "db.t, lance.db.t or `/path/to/dataset.lance`"),
    optional("retain_hours", DoubleType, "versions committed more than this many hours ago are removed (default 336 = 14 days)"),
    optional("older_than", TimestampType, "versions committed before this time are removed (instead of retain_hours)"),
    optional("dry_run", BooleanType, "list what would be removed, remove nothing", "false"),
    optional("delete_unverified", BooleanType,
      "remove files no version references at any age, not only past 7 days (only when nothing else writes)", "false"),
    optional("error_if_tagged_old_versions", BooleanType,
      "fail when a tagged version is older than the retention (false: keep it silently)", "true"))

  private val fileType = new StructType().add("path", StringType).add("kind", StringType).add("size_bytes", LongType)

  override val outputType: StructType = new StructType()
    .add("old_versions_removed", LongType).add("manifests_removed", LongType).add("data_files_removed", LongType)
    .add("deletion_files_removed", LongType).add("transaction_files_removed", LongType)
    .add("index_files_removed", LongType).add("bytes_removed", LongType).add("dry_run", BooleanType)
    .add("removed_versions", ArrayType(LongType, containsNull = false))
    .add("kept_tagged_versions", ArrayType(LongType, containsNull = false))
    .add("files", ArrayType(fileType, containsNull = false))

  override protected def run(args: Args): InternalRow = {
    val s = storage(args)
    val now = java.time.Instant.now()
    val hours = args.double("retain_hours")
    hours.filter(h => h < 0 || h.isNaN).foreach(h =>
      throw new IllegalArgumentException(s"vacuum of ${s.uri}: retain_hours must be >= 0, got $h"))
    val before = (hours, args.timestamp("older_than")) match {
      case (Some(_), Some(_)) =>
        throw new IllegalArgumentException(s"vacuum of ${s.uri}: give retain_hours or older_than, not both")
      case (Some(h), None) => now.minus(Duration.ofMillis(math.round(h * 3600000d)))
      case (None, Some(t)) => t
      case (None, None) => now.minus(Cleanup.DefaultRetention)
    }
    val r = Cleanup.run(s, CleanupPolicy(before,
      deleteUnverified = args.boolean("delete_unverified").getOrElse(false),
      errorIfTaggedOldVersions = args.boolean("error_if_tagged_old_versions").getOrElse(true),
      dryRun = args.boolean("dry_run").getOrElse(false)), now)
    val files = new GenericArrayData(r.files.map(f => InternalRow(utf8(f.path), utf8(f.kind), f.sizeBytes)).toArray[Any])
    InternalRow(r.removedVersions.size.toLong, r.count("manifest").toLong, r.count("data").toLong,
      r.count("deletion").toLong, r.count("transaction").toLong, r.count("index").toLong, r.bytesRemoved, r.dryRun,
      longs(r.removedVersions), longs(r.keptTaggedVersions), files)
  }
}

/** `CALL lance.system.restore(table => 'db.t', version => 3)` (or `timestamp =>`, `tag =>`). */
final class RestoreProcedure(tables: TableResolver) extends LanceProcedure(tables) {
  override def name(): String = "restore"
  override def description(): String =
    "Commits a new version whose content is that of an older version (by number, timestamp or tag)"

  override val params: Seq[ProcParam] = Seq(
    required("table", StringType, "db.t, lance.db.t or `/path/to/dataset.lance`"),
    optional("version", LongType, "the version to restore"),
    optional("timestamp", TimestampType, "restore the newest version committed at or before this time"),
    optional("tag", StringType, "restore the version this tag names"))

  override val outputType: StructType = new StructType()
    .add("restored_version", LongType).add("previous_version", LongType).add("new_version", LongType)
    .add("total_rows", LongType).add("total_fragments", LongType)

  override protected def run(args: Args): InternalRow = {
    val s = storage(args)
    val r = (args.long("version"), args.timestamp("timestamp"), args.string("tag")) match {
      case (Some(v), None, None) => Restore.toVersion(s, v)
      case (None, Some(t), None) => Restore.toTimestamp(s, t)
      case (None, None, Some(t)) => Restore.toTag(s, t)
      case _ => throw new IllegalArgumentException(
        s"restore of ${s.uri}: give exactly one of version, timestamp or tag")
    }
    InternalRow(r.restoredVersion, r.previousVersion, r.newVersion, r.rows, r.fragments.toLong)
  }
}

/** create_tag, move_tag and delete_tag. */
final class TagProcedure(tables: TableResolver, action: String) extends LanceProcedure(tables) {
  require(Set("create", "move", "delete").contains(action))
  override def name(): String = s"${action}_tag"
  override def description(): String = action match {
    case "create" => "Creates a tag naming a version (default: the latest)"
    case "move" => "Points an existing tag at another version (default: the latest)"
    case _ => "Deletes a tag (the version stays)"
  }

  override val params: Seq[ProcParam] = Seq(
    required("table", StringType, "db.t, lance.db.t or `/path/to/dataset.lance`"),
    required("tag", StringType, "the tag's name: letters, digits, '.', '-', '_'")) ++
    (if (action == "delete") Nil else Seq(optional("version", LongType, "the version to tag (default: the latest)")))

  override val outputType: StructType = new StructType()
    .add("tag", StringType).add("version", LongType).add("previous_version", LongType)

  override protected def run(args: Args): InternalRow = {
    val s = storage(args)
    val tag = args.need("tag", args.string("tag"))
    def version: Long = args.long("version").getOrElse(Dataset.latest(s).map(_.version).getOrElse(
      throw new IllegalArgumentException(s"${s.uri}: not a Lance dataset")))
    action match {
      case "create" =>
        val t = Tags.create(s, tag, version)
        InternalRow(utf8(tag), t.version, null)
      case "move" =>
        val before = Tags.get(s, tag).version
        val t = Tags.move(s, tag, version)
        InternalRow(utf8(tag), t.version, before)
      case _ =>
        val t = Tags.delete(s, tag)
        InternalRow(utf8(tag), null, t.version)
    }
  }
}

/** The procedures of the `system` namespace. */
object LanceProcedures {
  val Namespace: String = "system"

  def names: Seq[String] = Seq("compact", "vacuum", "restore", "create_tag", "move_tag", "delete_tag", "create_index", "drop_index", "add_columns", "update_columns",
    "optimize_indices")

  def load(name: String, tables: TableResolver): Option[LanceProcedure] = name.toLowerCase(java.util.Locale.ROOT) match {
    case "compact" => Some(new CompactProcedure(tables))
    case "vacuum" => Some(new VacuumProcedure(tables))
    case "restore" => Some(new RestoreProcedure(tables))
    case "create_tag" => Some(new TagProcedure(tables, "create"))
    case "move_tag" => Some(new TagProcedure(tables, "move"))
    case "delete_tag" => Some(new TagProcedure(tables, "delete"))
    case "create_index" => Some(new CreateIndexProcedure(tables))
    case "drop_index" => Some(new DropIndexProcedure(tables))
    case "optimize_indices" => Some(new OptimizeIndicesProcedure(tables))
    case "add_columns" => Some(new AddColumnsProcedure(tables))
    case "update_columns" => Some(new UpdateColumnsProcedure(tables))
    case _ => None
  }
}
