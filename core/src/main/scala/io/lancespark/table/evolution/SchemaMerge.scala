package io.lancespark.table.evolution

import scala.jdk.CollectionConverters._

import org.apache.arrow.vector.types.pojo.{ArrowType, Field, Schema}

import io.lancespark.schema.{LanceField, LanceSchema}

/** The schema of an append that evolves it (mergeSchema): the dataset's
  * fields kept as they are (ids, types, metadata), plus the fields of the
  * incoming data it lacks, matched by name: new top-level columns after the
  * existing ones, new sub-fields of a struct after the struct's own (also a
  * struct that is the item of a list), each with an id from `firstId` up
  * (depth first). Types of fields both have are not compared here. */
object SchemaMerge {

  def merge(existing: LanceSchema, incoming: Schema, firstId: Int): LanceSchema = {
    var next = firstId
    def fresh(f: Field): LanceField = {
      val lf = LanceSchema.fromArrow(new Schema(java.util.Collections.singletonList(f)), next).fields.head
      next += lf.allFields.size
      lf
    }
    def isList(t: ArrowType): Boolean = t.isInstanceOf[ArrowType.List] || t.isInstanceOf[ArrowType.LargeList]
    def mergeField(o: LanceField, f: Field): LanceField =
      if (o.isStruct && f.getType.isInstanceOf[ArrowType.Struct]) {
        val kids = f.getChildren.asScala.toVector
        val kept = o.children.map(c => kids.find(_.getName == c.name).fold(c)(mergeField(c, _)))
        val added = kids.filterNot(k => o.children.exists(_.name == k.getName)).map(fresh)
        o.copy(children = kept ++ added)
      } else if (o.isList && isList(f.getType) && o.children.size == 1 && f.getChildren.size == 1)
        o.copy(children = Vector(mergeField(o.children.head, f.getChildren.get(0))))
      else o
    val in = incoming.getFields.asScala.toVector
    val top = existing.fields.map(o => in.find(_.getName == o.name).fold(o)(mergeField(o, _)))
    val added = in.filterNot(f => existing.fields.exists(_.name == f.getName)).map(fresh)
    LanceSchema(top ++ added, existing.metadata)
  }

  /** The dotted paths of the fields `merged` has and `existing` has not. */
  def addedPaths(existing: LanceSchema, merged: LanceSchema): Seq[String] = {
    val have = existing.allFields.map(_.id).toSet
    def walk(f: LanceField, prefix: String): Vector[String] = {
      val path = if (prefix.isEmpty) f.name else if (f.name == "item" || f.name == "element") s"$prefix[]" else s"$prefix.${f.name}"
      if (!have.contains(f.id)) Vector(path) else f.children.flatMap(walk(_, path))
    }
    merged.fields.flatMap(walk(_, ""))
  }
}
