package io.lancespark.table.model

import org.apache.arrow.vector.types.pojo.{Field, Schema}

import io.lancespark.proto.file.{Field => PbField}
import io.lancespark.schema.LanceSchema

/** A dataset's field list (the manifest's depth-first `fields`) as schema
  * changes edit it. Field ids are never reused: added columns get ids above
  * every existing one, so data files that still hold a dropped column's
  * values are not mistaken for a new column. `table` names the table in errors. */
final case class FieldList(fields: Seq[PbField], table: String) {

  /** A new top-level column (nullable: existing rows read it as NULL). */
  def add(column: Field): FieldList = {
    val name = column.getName
    if (fields.exists(f => f.getParentId < 0 && f.getName == name))
      throw new IllegalArgumentException(s"$table: column '$name' already exists")
    if (!column.isNullable)
      throw new IllegalArgumentException(s"$table: an added column must be nullable (existing rows read it as NULL)")
    val nextId = if (fields.isEmpty) 0 else fields.map(_.getId).max + 1
    copy(fields = fields ++ LanceSchema.fromArrow(new Schema(java.util.Collections.singletonList(column)), nextId).toProto)
  }

  /** Drops the column at `path` with everything under it. */
  def drop(path: Seq[String], ifExists: Boolean): FieldList = find(path) match {
    case None if ifExists => this
    case None => throw new IllegalArgumentException(s"$table: no column ${path.mkString(".")}")
    case Some(target) =>
      val gone = descendants(target.getId) + target.getId
      copy(fields = fields.filterNot(f => gone.contains(f.getId)))
  }

  def rename(path: Seq[String], newName: String): FieldList = {
    val target = find(path).getOrElse(throw new IllegalArgumentException(s"$table: no column ${path.mkString(".")}"))
    if (fields.exists(f => f.getParentId == target.getParentId && f.getName == newName))
      throw new IllegalArgumentException(s"$table: column '$newName' already exists")
    copy(fields = fields.map(f => if (f.getId == target.getId) f.toBuilder.setName(newName).build() else f))
  }

  private def find(path: Seq[String]): Option[PbField] =
    path.foldLeft(Option(-1 -> Option.empty[PbField])) { case (acc, name) =>
      acc.flatMap { case (parent, _) =>
        fields.find(f => (if (parent < 0) f.getParentId < 0 else f.getParentId == parent) && f.getName == name)
          .map(f => f.getId -> Some(f))
      }
    }.flatMap(_._2)

  private def descendants(id: Int): Set[Int] = {
    val kids = fields.filter(_.getParentId == id).map(_.getId).toSet
    kids ++ kids.flatMap(descendants)
  }
}

object FieldList {
  def apply(schema: LanceSchema, table: String): FieldList = FieldList(schema.toProto, table)
}
