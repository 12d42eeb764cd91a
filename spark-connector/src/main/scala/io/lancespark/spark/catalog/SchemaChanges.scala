package io.lancespark.spark.catalog

import org.apache.spark.sql.connector.catalog.TableChange
import org.apache.spark.sql.types.{StructField, StructType}

import io.lancespark.schema.LanceSchema
import io.lancespark.spark.write.SparkToArrow
import io.lancespark.table.model.{DataFileVersion, FieldList}

/** ALTER TABLE changes (ADD COLUMNS at the top level, DROP COLUMN, RENAME
  * COLUMN) applied to the dataset's field list; see FieldList. */
object SchemaChanges {

  /** `version`: the dataset's file version (None: one this connector does not write). */
  def apply(schema: LanceSchema, changes: Seq[TableChange], table: String, version: Option[DataFileVersion]): FieldList =
    changes.foldLeft(FieldList(schema, table))(applyOne(version))

  private def applyOne(version: Option[DataFileVersion])(fields: FieldList, change: TableChange): FieldList = change match {
    case add: TableChange.AddColumn =>
      if (add.fieldNames().length != 1)
        throw new UnsupportedOperationException(s"${fields.table}: only top-level columns can be added")
      val name = add.fieldNames().head
      if (!add.isNullable)
        throw new IllegalArgumentException(
          s"${fields.table}: an added column must be nullable (existing rows read it as NULL)")
      if (add.defaultValue() != null)
        throw new UnsupportedOperationException(
          s"${fields.table}: column DEFAULT values are not supported by Lance tables (column '$name'); " +
            "add it without DEFAULT")
      // (CHAR/VARCHAR arrive as STRING with Spark's type-string metadata; see SparkToArrow)
      // (a legacy dataset's maps are lists of entries, as in 2.0)
      val typesOf = version.getOrElse(DataFileVersion.V2_0)
      fields.add(SparkToArrow.schema(StructType(Seq(StructField(name, add.dataType(), nullable = true))), Map.empty,
        typesOf).getFields.get(0))
    case drop: TableChange.DeleteColumn => fields.drop(drop.fieldNames().toSeq, drop.ifExists())
    case rename: TableChange.RenameColumn => fields.rename(rename.fieldNames().toSeq, rename.newName())
    case other =>
      throw new UnsupportedOperationException(
        s"${fields.table}: ALTER TABLE ${other.getClass.getSimpleName} is not supported for Lance tables " +
          "(supported: ADD COLUMNS, DROP COLUMN, RENAME COLUMN, ALTER COLUMN ... TYPE)")
  }
}
