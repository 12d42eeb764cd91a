package io.lancespark.table.model

import org.apache.arrow.vector.types.pojo.{Field, Schema}

import io.lancespark.schema.{LanceField, LanceSchema}

/** A dataset's schema as schema changes (ALTER TABLE ADD/DROP/RENAME COLUMN)
  * edit it. Added columns get ids above every existing one, so data files
  * that still hold a dropped column's values are not mistaken for a new
  * column. `table` names the table in errors. */
final case class FieldList(schema: LanceSchema, table: String) {

  /** A new top-level column (nullable: existing rows read it as NULL). */
  def add(column: Field): FieldList = {
    val name = column.getName
    if (schema.fields.exists(_.name == name))
      throw new IllegalArgumentException(s"$table: column '$name' already exists")
    if (!column.isNullable)
      throw new IllegalArgumentException(s"$table: an added column must be nullable (existing rows read it as NULL)")
    val added = LanceSchema.fromArrow(new Schema(java.util.Collections.singletonList(column)), schema.maxFieldId + 1)
    copy(schema = schema.copy(fields = schema.fields ++ added.fields))
  }

  /** Drops the column at `path` with everything under it. */
  def drop(path: Seq[String], ifExists: Boolean): FieldList = find(path) match {
    case None if ifExists => this
    case None => throw new IllegalArgumentException(s"$table: no column ${path.mkString(".")}")
    case Some(target) => copy(schema = schema.copy(fields = edit(schema.fields, target.id, _ => None)))
  }

  def rename(path: Seq[String], newName: String): FieldList = {
    val target = find(path).getOrElse(throw new IllegalArgumentException(s"$table: no column ${path.mkString(".")}"))
    val siblings = if (path.size == 1) schema.fields else find(path.init).map(_.children).getOrElse(Vector.empty)
    if (siblings.exists(_.name == newName))
      throw new IllegalArgumentException(s"$table: column '$newName' already exists")
    copy(schema = schema.copy(fields = edit(schema.fields, target.id, f => Some(f.copy(name = newName)))))
  }

  private def find(path: Seq[String]): Option[LanceField] =
    path.foldLeft(Option.empty[LanceField] -> true) { case ((at, first), name) =>
      val candidates = if (first) schema.fields else at.map(_.children).getOrElse(Vector.empty)
      candidates.find(_.name == name) -> false
    }._1

  /** `fields` with the field of id `id` replaced by what `change` gives (None: removed). */
  private def edit(fields: Vector[LanceField], id: Int, change: LanceField => Option[LanceField]): Vector[LanceField] =
    fields.flatMap { f =>
      if (f.id == id) change(f).toVector
      else Vector(f.copy(children = edit(f.children, id, change)))
    }
}
