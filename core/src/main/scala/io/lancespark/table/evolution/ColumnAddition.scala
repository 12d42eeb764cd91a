package io.lancespark.table.evolution

import scala.jdk.CollectionConverters._

import org.apache.arrow.vector.types.pojo.Schema
import org.roaringbitmap.RoaringBitmap

import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.table.commit.{AddColumnFiles, CommitSettings, Commits, FragmentColumns}
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.{DatasetStorage, DeletionVector, FragmentState}
import io.lancespark.table.storage.Snapshot

/** Adding columns to a version without rewriting it (the format's Merge
  * operation, as pylance's `add_columns` / `merge`): each fragment gains a
  * data file holding only the new columns beside its existing files, which
  * are never touched. Planned on the driver (field ids above every id the
  * version uses, the file version the dataset stores), shipped to the tasks
  * that write the files, committed as one version.
  *
  * `columns`: the new top-level fields with their final ids (the schema the
  * new files are written with); `schema`: the dataset's schema with them;
  * `fragments`: every fragment of the read version, each of which must get a
  * file (rows the source does not give, and deleted rows, are NULL). */
final case class ColumnAddition(
    uri: String,
    readVersion: Long,
    fileVersion: DataFileVersion,
    columns: LanceSchema,
    schema: LanceSchema,
    fragments: Map[Long, FragmentState],
    replaces: Set[Int] = Set.empty) {

  /** Whether this replaces existing columns' values (update_columns): each
    * fragment's file then holds the columns' full values (the old value where
    * the source has no row), and the old files tombstone them. */
  def isUpdate: Boolean = replaces.nonEmpty

  /** The deleted row offsets of `fragmentId` at the read version (empty when none). */
  def deletedRows(storage: DatasetStorage, fragmentId: Long): RoaringBitmap = {
    val state = fragment(fragmentId)
    state.deletion.map(d => DeletionVector.read(storage, fragmentId, d, state.physicalRows)).getOrElse(new RoaringBitmap())
  }

  /** The fragment `fragmentId` of the read version; a row address naming
    * another fragment is an error. */
  def fragment(fragmentId: Long): FragmentState = fragments.getOrElse(fragmentId, throw new IllegalArgumentException(
    s"$uri: the source names fragment $fragmentId (row address ${fragmentId << 32} and up), which version " +
      s"$readVersion does not have; its fragments are ${fragments.keys.toSeq.sorted.mkString(", ")}"))
}

object ColumnAddition {

  /** Plans adding `newColumns` (top-level, nullable: rows without a value read
    * NULL) to `snapshot`. Names already in the dataset are refused. */
  def plan(snapshot: Snapshot, newColumns: Schema): ColumnAddition = {
    val uri = snapshot.storage.uri
    val version = DataFileVersion.ofDataset(snapshot.fileVersion).getOrElse(throw new LanceFormatException(
      s"$uri: the dataset stores Lance file version ${snapshot.fileVersion}, which this connector reads but does " +
        s"not write (it writes ${DataFileVersion.Written.mkString(", ")}); columns cannot be added to it"))
    val names = newColumns.getFields.asScala.toVector.map(_.getName)
    if (names.isEmpty)
      throw new IllegalArgumentException(s"$uri: no columns to add: the source has only the row key")
    val existing = snapshot.schema.fields.map(_.name).toSet
    val clash = names.filter(existing.contains)
    if (clash.nonEmpty)
      throw new IllegalArgumentException(
        s"$uri: cannot add column${if (clash.size == 1) "" else "s"} ${clash.mkString(", ")}: already in the dataset " +
          s"(version ${snapshot.version}); rename them in the source (replacing a column's values is update_columns)")
    newColumns.getFields.asScala.find(!_.isNullable).foreach { f =>
      throw new IllegalArgumentException(
        s"$uri: an added column must be nullable (rows the source does not give read NULL); '${f.getName}' is not")
    }
    val columns = LanceSchema.fromArrow(newColumns, maxFieldId(snapshot) + 1)
    ColumnAddition(uri, snapshot.version, version, columns,
      LanceSchema(snapshot.schema.fields ++ columns.fields, snapshot.schema.metadata),
      snapshot.fragments.map(f => f.id -> FragmentState(f)).toMap)
  }

  /** Plans replacing the values of the existing top-level columns `names`
    * of `snapshot` (update_columns): the files are written with the columns'
    * own fields (same ids and types) and committed with those ids tombstoned
    * in the fragments' older files. Metadata columns, unknown names, repeated
    * names and an empty list are refused. */
  def planUpdate(snapshot: Snapshot, names: Seq[String]): ColumnAddition = {
    val uri = snapshot.storage.uri
    val version = DataFileVersion.ofDataset(snapshot.fileVersion).getOrElse(throw new LanceFormatException(
      s"$uri: the dataset stores Lance file version ${snapshot.fileVersion}, which this connector reads but does " +
        s"not write (it writes ${DataFileVersion.Written.mkString(", ")}); its columns cannot be updated"))
    if (names.isEmpty)
      throw new IllegalArgumentException(s"$uri: no columns to update: the source has only the row key")
    names.diff(names.distinct).headOption.foreach { n =>
      throw new IllegalArgumentException(s"$uri: column '$n' is given twice in the source")
    }
    val fields = names.map { n =>
      if (MetadataColumns.contains(n))
        throw new IllegalArgumentException(s"$uri: '$n' is a metadata column; it cannot be updated")
      snapshot.schema.field(n).getOrElse(throw new IllegalArgumentException(
        s"$uri: cannot update column '$n': the dataset (version ${snapshot.version}) has no such top-level column; " +
          s"its columns are ${snapshot.schema.fields.map(_.name).mkString(", ")} (adding columns is add_columns)"))
    }.toVector
    val ids = fields.flatMap(_.allFields.map(_.id)).toSet
    io.lancespark.table.storage.Indices.of(snapshot).find(_.getFieldsList.asScala.exists(i => ids.contains(i.intValue)))
      .foreach { i =>
        throw new IllegalArgumentException(s"$uri: cannot update column${if (fields.size == 1) "" else "s"} " +
          s"${fields.map(_.name).mkString(", ")}: index '${i.getName}' covers it and would keep the old values; " +
          "drop the index, update, and build it again")
      }
    ColumnAddition(uri, snapshot.version, version, LanceSchema(fields, Map.empty), snapshot.schema,
      snapshot.fragments.map(f => f.id -> FragmentState(f)).toMap, fields.flatMap(_.allFields.map(_.id)).toSet)
  }

  /** Plans changing the types of existing top-level columns (ALTER COLUMN
    * TYPE), as pylance's `alter_columns` with a `data_type` does: each changed
    * column becomes a new field (same name, place and nullability; the new
    * type; an id above every id the version uses) whose values are written to
    * one new data file per fragment; the old field id stays in the older files
    * but no longer in the schema, so time travel reads the old type. Committed
    * as a Merge. `newTypes`: the columns with their new Arrow types (names of
    * existing top-level columns). A column some index covers is refused. */
  def planTypeChange(snapshot: Snapshot, newTypes: Schema): ColumnAddition = {
    val uri = snapshot.storage.uri
    val version = DataFileVersion.ofDataset(snapshot.fileVersion).getOrElse(throw new LanceFormatException(
      s"$uri: the dataset stores Lance file version ${snapshot.fileVersion}, which this connector reads but does " +
        s"not write (it writes ${DataFileVersion.Written.mkString(", ")}); its column types cannot be changed"))
    val changed = newTypes.getFields.asScala.toVector
    if (changed.isEmpty) throw new IllegalArgumentException(s"$uri: no column type to change")
    val old = changed.map { f =>
      snapshot.schema.field(f.getName).getOrElse(throw new IllegalArgumentException(
        s"$uri: cannot change the type of column '${f.getName}': the dataset (version ${snapshot.version}) has no " +
          s"such top-level column; its columns are ${snapshot.schema.fields.map(_.name).mkString(", ")}"))
    }
    val ids = old.flatMap(_.allFields.map(_.id)).toSet
    io.lancespark.table.storage.Indices.of(snapshot).find(_.getFieldsList.asScala.exists(i => ids.contains(i.intValue)))
      .foreach { i =>
        throw new IllegalArgumentException(s"$uri: cannot change the type of column " +
          s"${old.map(_.name).mkString(", ")}: index '${i.getName}' covers it and indexes the old values; " +
          "drop the index, change the type, and build it again")
      }
    val keepNullability = new Schema(changed.zip(old).map { case (f, o) =>
      new org.apache.arrow.vector.types.pojo.Field(f.getName,
        new org.apache.arrow.vector.types.pojo.FieldType(o.nullable, f.getType, null, f.getMetadata), f.getChildren)
    }.asJava)
    val columns = LanceSchema.fromArrow(keepNullability, maxFieldId(snapshot) + 1)
    val byName = columns.fields.map(f => f.name -> f).toMap
    val schema = snapshot.schema.fields.map(f => byName.getOrElse(f.name, f))
    ColumnAddition(uri, snapshot.version, version, columns, LanceSchema(schema, snapshot.schema.metadata),
      snapshot.fragments.map(f => f.id -> FragmentState(f)).toMap)
  }

  /** Names of the row metadata columns a source may carry but never update. */
  val MetadataColumns: Set[String] =
    Set("_rowid", "_rowaddr", "_rowoffset", "_row_created_at_version", "_row_last_updated_at_version")

  /** The highest field id the version uses: in its schema or in any data file
    * (a dropped column's values may still be in files; ids are never reused). */
  def maxFieldId(snapshot: Snapshot): Int = {
    val inFiles = snapshot.fragments.iterator.flatMap(_.files.iterator.flatMap(_.fieldIds))
    (Iterator(snapshot.schema.maxFieldId) ++ inFiles).max
  }

  /** Commits the added columns' files as one version (a Merge transaction).
    * Every fragment of the plan needs exactly one file of its physical row
    * count. On any failure, the files are removed. See
    * [[io.lancespark.table.commit.ConflictChecker]] for what concurrent
    * commits it can be rebased onto. */
  def commit(storage: DatasetStorage, plan: ColumnAddition, files: Seq[FragmentColumns],
      settings: CommitSettings = CommitSettings()): Snapshot = {
    val op = AddColumnFiles(files, plan.schema, plan.replaces)
    try {
      val byFragment = files.groupBy(_.fragmentId)
      byFragment.find(_._2.size > 1).foreach { case (id, fs) =>
        throw new IllegalStateException(s"${plan.uri}: fragment $id got ${fs.size} files of added columns; expected one")
      }
      val missing = plan.fragments.keySet -- byFragment.keySet
      if (missing.nonEmpty)
        throw new IllegalStateException(
          s"${plan.uri}: no file of added columns for fragment${if (missing.size == 1) "" else "s"} " +
            missing.toSeq.sorted.mkString(", "))
      files.foreach { f =>
        val rows = plan.fragment(f.fragmentId).physicalRows
        if (f.file.physicalRows != rows)
          throw new IllegalStateException(s"${plan.uri}: ${f.file.path} has ${f.file.physicalRows} rows; fragment " +
            s"${f.fragmentId} has $rows physical rows")
        if (f.file.version != plan.fileVersion)
          throw new IllegalStateException(s"${plan.uri}: ${f.file.path} is a ${f.file.version} file; the dataset " +
            s"stores ${plan.fileVersion}")
      }
    } catch {
      case e: Throwable =>
        Commits.discard(storage, op)
        throw e
    }
    Commits.commitOrDiscard(storage, Some(plan.readVersion), op, settings)
  }
}
