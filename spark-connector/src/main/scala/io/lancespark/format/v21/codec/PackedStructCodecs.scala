package io.lancespark.format.v21.codec

import io.lancespark.proto.encodings21.{PackedStruct, VariablePackedStruct}

import scala.jdk.CollectionConverters._

/** A struct of fixed-width fields stored row by row (opt-in with the field
  * metadata `lance-encoding:packed`). */
final case class PackedStructCodec(packed: PackedStruct) extends Codec {
  def describe: String = s"packed-struct(${packed.getBitsPerValueList.asScala.mkString(", ")} bits)"
}

/** A struct stored row by row, each field compressed on its own (2.2). */
final case class VariablePackedStructCodec(packed: VariablePackedStruct) extends Codec {
  def describe: String =
    s"packed-struct(${packed.getFieldsList.asScala.map(f => Codec.of(f.getValue).describe).mkString(", ")})"
}
