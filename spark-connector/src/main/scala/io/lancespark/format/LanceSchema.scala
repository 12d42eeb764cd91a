package io.lancespark.format

import scala.jdk.CollectionConverters._

import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}

import io.lancespark.proto.file.{Field => PbField}

/** One field of a Lance schema: a tree rebuilt from the depth-first list of
  * protobuf Fields. `logicalType` is Lance's name of the Arrow type. */
final case class LanceField(
    id: Int,
    name: String,
    logicalType: String,
    nullable: Boolean,
    children: Vector[LanceField],
    metadata: Map[String, String],
    proto: PbField) {

  /** Arrow type, for errors naming `path`. */
  def arrowType: ArrowType = LogicalType.toArrow(logicalType, s"column '$name' (field id $id)")

  def isStruct: Boolean = logicalType == "struct"
  def isList: Boolean = logicalType.startsWith("list") || logicalType.startsWith("large_list")
  def isFixedSizeList: Boolean = logicalType.startsWith("fixed_size_list:")

  /** This field and all its descendants, depth first. */
  def allFields: Vector[LanceField] = this +: children.flatMap(_.allFields)

  /** The Arrow field. A Lance fixed-size list has no child field; its item is
    * named "item" and is nullable, as pylance reports it. */
  def toArrow: Field = {
    val kids: java.util.List[Field] =
      if (isFixedSizeList) {
        val itemType = LogicalType.fixedSizeListItem(logicalType)
        java.util.List.of(new Field("item",
          new FieldType(true, LogicalType.toArrow(itemType, s"column '$name'"), null), null))
      } else children.map(_.toArrow).asJava
    val md = if (metadata.isEmpty) null else metadata.asJava
    new Field(name, new FieldType(nullable, arrowType, null, md), kids)
  }

  /** Keeps only the listed child paths (struct children); lists keep their item. */
  def withChildren(keep: Vector[LanceField]): LanceField = copy(children = keep)
}

final case class LanceSchema(fields: Vector[LanceField], metadata: Map[String, String]) {

  lazy val byId: Map[Int, LanceField] = fields.flatMap(_.allFields).map(f => f.id -> f).toMap

  def field(name: String): Option[LanceField] = fields.find(_.name == name)

  def toArrow: Schema = new Schema(fields.map(_.toArrow).asJava,
    if (metadata.isEmpty) null else metadata.asJava)

  def maxFieldId: Int = if (byId.isEmpty) -1 else byId.keys.max
}

object LanceSchema {

  /** Rebuilds the tree from Lance's depth-first field list (children name their
    * parent by id; top-level fields have parent -1). */
  def fromProto(pb: Seq[PbField], metadata: Map[String, Array[Byte]], where: String): LanceSchema = {
    val ids = pb.map(_.getId).toSet
    val byParent: Map[Int, Seq[PbField]] = pb.groupBy { f =>
      if (f.getParentId >= 0 && ids.contains(f.getParentId)) f.getParentId else -1
    }
    def build(f: PbField, depth: Int): LanceField = {
      if (depth > 64) throw new LanceFormatException(s"$where: schema nests deeper than 64 levels")
      val kids = byParent.getOrElse(f.getId, Nil).map(build(_, depth + 1)).toVector
      val md = f.getMetadataMap.asScala.map { case (k, v) => k -> v.toStringUtf8 }.toMap
      LanceField(f.getId, f.getName, f.getLogicalType, f.getNullable, kids, md, f)
    }
    val top = byParent.getOrElse(-1, Nil).map(build(_, 0)).toVector
    LanceSchema(top, metadata.map { case (k, v) => k -> new String(v, "UTF-8") })
  }
}
