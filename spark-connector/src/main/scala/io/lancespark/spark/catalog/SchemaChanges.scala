package io.lancespark.spark.catalog

import org.apache.spark.sql.connector.catalog.TableChange
import org.apache.spark.sql.types.{StructField, StructType}

import io.lancespark.format.LanceSchema
import io.lancespark.proto.file.{Field => PbField}
import io.lancespark.spark.write.SparkToArrow

/** ALTER TABLE changes as a new Lance field list. Field ids are never reused:
  * added columns get ids above every existing one, so data files that still
  * hold a dropped column's values are not mistaken for a new column. */
object SchemaChanges {

  def apply(schema: LanceSchema, changes: Seq[TableChange], table: String): Seq[PbField] =
    changes.foldLeft(schema.toProto) { (fields, change) => applyOne(fields, change, table) }

  private def applyOne(fields: Seq[PbField], change: TableChange, table: String): Seq[PbField] = change match {
    case add: TableChange.AddColumn =>
      if (add.fieldNames().length != 1)
        throw new UnsupportedOperationException(s"$table: only top-level columns can be added")
      val name = add.fieldNames().head
      if (fields.exists(f => f.getParentId < 0 && f.getName == name))
        throw new IllegalArgumentException(s"$table: column '$name' already exists")
      if (!add.isNullable)
        throw new IllegalArgumentException(s"$table: an added column must be nullable (existing rows read it as NULL)")
      if (add.defaultValue() != null)
        throw new UnsupportedOperationException(
          s"$table: column DEFAULT values are not supported by Lance tables (column '$name'); add it without DEFAULT")
      val nextId = if (fields.isEmpty) 0 else fields.map(_.getId).max + 1
      val added = LanceSchema.fromArrow(
        SparkToArrow.schema(StructType(Seq(StructField(name, add.dataType(), nullable = true))), Map.empty), nextId)
      // (CHAR/VARCHAR arrive as STRING with Spark's type-string metadata; see SparkToArrow)
      fields ++ added.toProto
    case drop: TableChange.DeleteColumn =>
      find(fields, drop.fieldNames().toSeq) match {
        case None if drop.ifExists() => fields
        case None => throw new IllegalArgumentException(s"$table: no column ${drop.fieldNames().mkString(".")}")
        case Some(target) =>
          val gone = descendants(fields, target.getId) + target.getId
          fields.filterNot(f => gone.contains(f.getId))
      }
    case rename: TableChange.RenameColumn =>
      val target = find(fields, rename.fieldNames().toSeq).getOrElse(
        throw new IllegalArgumentException(s"$table: no column ${rename.fieldNames().mkString(".")}"))
      if (fields.exists(f => f.getParentId == target.getParentId && f.getName == rename.newName()))
        throw new IllegalArgumentException(s"$table: column '${rename.newName()}' already exists")
      fields.map(f => if (f.getId == target.getId) f.toBuilder.setName(rename.newName()).build() else f)
    case other =>
      throw new UnsupportedOperationException(
        s"$table: ALTER TABLE ${other.getClass.getSimpleName} is not supported for Lance tables " +
          "(supported: ADD COLUMNS, DROP COLUMN, RENAME COLUMN)")
  }

  private def find(fields: Seq[PbField], path: Seq[String]): Option[PbField] =
    path.foldLeft(Option(-1 -> Option.empty[PbField])) { case (acc, name) =>
      acc.flatMap { case (parent, _) =>
        fields.find(f => (if (parent < 0) f.getParentId < 0 else f.getParentId == parent) && f.getName == name)
          .map(f => f.getId -> Some(f))
      }
    }.flatMap(_._2)

  private def descendants(fields: Seq[PbField], id: Int): Set[Int] = {
    val kids = fields.filter(_.getParentId == id).map(_.getId).toSet
    kids ++ kids.flatMap(descendants(fields, _))
  }

}
