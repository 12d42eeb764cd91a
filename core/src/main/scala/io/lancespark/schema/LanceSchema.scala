package io.lancespark.schema

import scala.jdk.CollectionConverters._

import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}

import com.google.protobuf.ByteString

import io.lancespark.proto.file.{Field => PbField}

/** One field of a Lance schema: a tree rebuilt from the depth-first list of
  * protobuf Fields (see [[SchemaProto]], the only place that converts).
  * `logicalType` is Lance's name of the Arrow type; `encoding` is the 0.1
  * file encoding the field declares (meaningless for 2.x files);
  * `extensionName` the Arrow extension type's name, if any; `primaryKey`
  * whether the field is part of the unenforced primary key. */
final case class LanceField(
    id: Int,
    name: String,
    logicalType: String,
    nullable: Boolean,
    children: Vector[LanceField],
    metadata: Map[String, String],
    encoding: FieldEncoding = FieldEncoding.Plain,
    extensionName: Option[String] = None,
    primaryKey: Boolean = false) {

  /** Arrow type (worked out once: scans ask for it every batch). */
  @transient lazy val arrowType: ArrowType = LogicalType.toArrow(logicalType, s"column '$name' (field id $id)")

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

  /** The depth-first protobuf field list, as file descriptors hold it (see
    * [[SchemaProto.encode]] to keep a manifest's attributes this type does not model). */
  def toProto: Seq[PbField] = SchemaProto.encode(this, Nil)

  /** Schema metadata as protobuf bytes. */
  def metadataProto: Map[String, ByteString] = metadata.map { case (k, v) => k -> ByteString.copyFromUtf8(v) }
}

object LanceSchema {

  /** Rebuilds the tree from Lance's depth-first field list (children name their
    * parent by id; top-level fields have parent -1). */
  def fromProto(pb: Seq[PbField], metadata: Map[String, Array[Byte]], where: String): LanceSchema =
    SchemaProto.decode(pb, metadata, where)

  /** A Lance schema for an Arrow schema: field ids depth first from `firstId`,
    * logical types, nullability, metadata and (0.1-style) encodings as pylance
    * writes them. Arrow types Lance 2.0 cannot store throw a
    * [[LanceFormatException]] naming the column. */
  def fromArrow(schema: Schema, firstId: Int = 0): LanceSchema = {
    var next = firstId
    def build(f: Field, path: String): LanceField = {
      val where = s"column '$path'"
      val logical = LogicalType.fromArrow(f, where)
      val id = next
      next += 1
      val md: Map[String, String] =
        Option(f.getMetadata).map(_.asScala.toMap).getOrElse(Map.empty)
      val kids: Vector[LanceField] = f.getType match {
        case _: ArrowType.FixedSizeList => Vector.empty
        case _: ArrowType.Struct | _: ArrowType.List | _: ArrowType.LargeList | _: ArrowType.Map =>
          f.getChildren.asScala.toVector.map(c => build(c, s"$path.${c.getName}"))
        case _ => Vector.empty
      }
      val encoding = f.getType match {
        case _: ArrowType.Struct => FieldEncoding.None
        case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 | _: ArrowType.Binary | _: ArrowType.LargeBinary =>
          FieldEncoding.VarBinary
        case _ => FieldEncoding.Plain
      }
      LanceField(id, f.getName, logical, f.isNullable, kids, md, encoding, md.get("ARROW:extension:name"))
    }
    val top = schema.getFields.asScala.toVector.map(f => build(f, f.getName))
    val names = top.map(_.name)
    names.diff(names.distinct).headOption.foreach { n =>
      throw new LanceFormatException(s"column '$n' appears more than once in the schema")
    }
    val md = Option(schema.getCustomMetadata).map(_.asScala.toMap).getOrElse(Map.empty[String, String])
    LanceSchema(top, md)
  }
}
