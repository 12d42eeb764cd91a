package io.lancespark.schema

import scala.jdk.CollectionConverters._

import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}

import com.google.protobuf.ByteString

import io.lancespark.proto.file.{Encoding => PbEncoding, Field => PbField}

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
  /** A map (file version 2.2): a list of its one child, the entries struct (key, value). */
  def isMap: Boolean = logicalType == "map"

  /** This field and all its descendants, depth first. */
  def allFields: Vector[LanceField] = this +: children.flatMap(_.allFields)

  /** The Arrow field. A Lance fixed-size list has no child field; its item is
    * named "item" and is nullable, as pylance reports it. */
  def toArrow: Field = {
    val kids: java.util.List[Field] =
      if (isFixedSizeList) {
        val itemType = LogicalType.fixedSizeListItem(logicalType)
        java.util.Collections.singletonList(new Field("item",
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

  /** All fields depth first (the order of a 2.0 file's columns). */
  def allFields: Vector[LanceField] = fields.flatMap(_.allFields)

  /** The depth-first protobuf field list, as manifests and file descriptors hold it. */
  def toProto: Seq[PbField] = allFields.map(_.proto)

  /** Schema metadata as protobuf bytes. */
  def metadataProto: Map[String, ByteString] = metadata.map { case (k, v) => k -> ByteString.copyFromUtf8(v) }
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

  /** A Lance schema for an Arrow schema: field ids depth first from `firstId`,
    * logical types, nullability, metadata and (0.1-style) encodings as pylance
    * writes them. Arrow types Lance 2.0 cannot store throw a
    * [[LanceFormatException]] naming the column. */
  def fromArrow(schema: Schema, firstId: Int = 0): LanceSchema = {
    var next = firstId
    def build(f: Field, parentId: Int, path: String): LanceField = {
      val where = s"column '$path'"
      val logical = LogicalType.fromArrow(f, where)
      val id = next
      next += 1
      val md: Map[String, String] =
        Option(f.getMetadata).map(_.asScala.toMap).getOrElse(Map.empty)
      val kids: Vector[LanceField] = f.getType match {
        case _: ArrowType.FixedSizeList => Vector.empty
        case _: ArrowType.Struct | _: ArrowType.List | _: ArrowType.LargeList | _: ArrowType.Map =>
          f.getChildren.asScala.toVector.map(c => build(c, id, s"$path.${c.getName}"))
        case _ => Vector.empty
      }
      val encoding = f.getType match {
        case _: ArrowType.Struct => PbEncoding.NONE
        case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 | _: ArrowType.Binary | _: ArrowType.LargeBinary =>
          PbEncoding.VAR_BINARY
        case _ => PbEncoding.PLAIN
      }
      val pb = PbField.newBuilder()
        .setId(id).setParentId(parentId).setName(f.getName).setLogicalType(logical)
        .setNullable(f.isNullable).setEncoding(encoding)
      md.foreach { case (k, v) => pb.putMetadata(k, ByteString.copyFromUtf8(v)) }
      md.get("ARROW:extension:name").foreach(pb.setExtensionName)
      LanceField(id, f.getName, logical, f.isNullable, kids, md, pb.build())
    }
    val top = schema.getFields.asScala.toVector.map(f => build(f, -1, f.getName))
    val names = top.map(_.name)
    names.diff(names.distinct).headOption.foreach { n =>
      throw new LanceFormatException(s"column '$n' appears more than once in the schema")
    }
    val md = Option(schema.getCustomMetadata).map(_.asScala.toMap).getOrElse(Map.empty[String, String])
    LanceSchema(top, md)
  }
}
