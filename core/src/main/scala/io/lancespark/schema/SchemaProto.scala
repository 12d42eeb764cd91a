package io.lancespark.schema

import scala.jdk.CollectionConverters._

import com.google.protobuf.ByteString

import io.lancespark.proto.file.{Encoding => PbEncoding, Field => PbField}

/** The one conversion between [[LanceSchema]] and the protobuf field list
  * (depth first, children naming their parent by id) that manifests and file
  * descriptors hold. */
object SchemaProto {

  /** Rebuilds the tree from Lance's depth-first field list (top-level fields
    * have parent -1, or an id not in the list, as old writers left it). */
  def decode(pb: Seq[PbField], metadata: Map[String, Array[Byte]], where: String): LanceSchema = {
    val ids = pb.map(_.getId).toSet
    val byParent: Map[Int, Seq[PbField]] = pb.groupBy { f =>
      if (f.getParentId >= 0 && ids.contains(f.getParentId)) f.getParentId else -1
    }
    def build(f: PbField, depth: Int): LanceField = {
      if (depth > 64) throw new LanceFormatException(s"$where: schema nests deeper than 64 levels")
      val kids = byParent.getOrElse(f.getId, Nil).map(build(_, depth + 1)).toVector
      LanceField(f.getId, f.getName, f.getLogicalType, f.getNullable, kids, strings(f.getMetadataMap.asScala.toMap),
        encoding(f), Option(f.getExtensionName).filter(_.nonEmpty), f.getUnenforcedPrimaryKey)
    }
    val top = byParent.getOrElse(-1, Nil).map(build(_, 0)).toVector
    LanceSchema(top, metadata.map { case (k, v) => k -> new String(v, "UTF-8") })
  }

  /** The depth-first protobuf list of `schema`. A field whose id is in
    * `previous` (the list this schema was read from) starts from that entry,
    * so what this model does not hold (a 0.1 dictionary's location, fields of
    * newer writers, metadata bytes that are not UTF-8) is kept unchanged. */
  def encode(schema: LanceSchema, previous: Seq[PbField]): Seq[PbField] = {
    val before: Map[Int, PbField] = previous.map(f => f.getId -> f).toMap
    def walk(f: LanceField, parent: Int): Vector[PbField] = {
      val b = before.get(f.id).map(_.toBuilder).getOrElse(PbField.newBuilder())
      b.setId(f.id).setParentId(parent).setName(f.name).setLogicalType(f.logicalType).setNullable(f.nullable)
        .setUnenforcedPrimaryKey(f.primaryKey)  // `type` left as read (the reference writes 0 for every field)
      f.encoding match {
        case FieldEncoding.Unknown(v) => b.setEncodingValue(v)
        case e => b.setEncoding(pbEncoding(e))
      }
      f.extensionName match {
        case Some(n) => b.setExtensionName(n)
        case scala.None => b.clearExtensionName()
      }
      val kept = before.get(f.id).exists(p => strings(p.getMetadataMap.asScala.toMap) == f.metadata)
      if (!kept) {
        b.clearMetadata()
        f.metadata.foreach { case (k, v) => b.putMetadata(k, ByteString.copyFromUtf8(v)) }
      }
      b.build() +: f.children.flatMap(walk(_, f.id))
    }
    schema.fields.flatMap(walk(_, -1))
  }

  private def strings(m: Map[String, ByteString]): Map[String, String] = m.map { case (k, v) => k -> v.toStringUtf8 }

  private def encoding(f: PbField): FieldEncoding = f.getEncoding match {
    case PbEncoding.NONE => FieldEncoding.None
    case PbEncoding.PLAIN => FieldEncoding.Plain
    case PbEncoding.VAR_BINARY => FieldEncoding.VarBinary
    case PbEncoding.DICTIONARY => FieldEncoding.Dictionary
    case PbEncoding.RLE => FieldEncoding.Rle
    case _ => FieldEncoding.Unknown(f.getEncodingValue)
  }

  private def pbEncoding(e: FieldEncoding): PbEncoding = e match {
    case FieldEncoding.None => PbEncoding.NONE
    case FieldEncoding.Plain => PbEncoding.PLAIN
    case FieldEncoding.VarBinary => PbEncoding.VAR_BINARY
    case FieldEncoding.Dictionary => PbEncoding.DICTIONARY
    case FieldEncoding.Rle => PbEncoding.RLE
    case FieldEncoding.Unknown(_) => PbEncoding.UNRECOGNIZED
  }
}
