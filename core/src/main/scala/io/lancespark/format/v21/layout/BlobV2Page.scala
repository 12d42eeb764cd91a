package io.lancespark.format.v21.layout

import io.lancespark.format.file.ByteBuilder
import io.lancespark.format.v21.codec.{FlatCodec, VariableCodec}
import io.lancespark.format.v21.write.{BlobV2Description, LeafBuffer}
import io.lancespark.proto.encodings21.{CompressiveEncoding, VariablePackedStruct}
import io.lancespark.schema.LanceField

/** The page of a 2.2 blob column (`lance.blob.v2`) as pylance 14 writes it
  * (docs/blobs.md): one description per value, a full-zip page whose values
  * are a variable packed struct of five fields: kind (u8), position (u64),
  * size (u64), blob id (u32), uri (a u32 length and its UTF-8 bytes; empty
  * unless the value is external). A null value is a null entry (no
  * description); a page of nulls only is a constant page. Where the values
  * themselves go is [[io.lancespark.format.v21.write.BlobV2Files]]'s part. */
private[v21] object BlobV2Page {

  /** The extension name of a 2.2 blob column's field. */
  val ExtensionName: String = "lance.blob.v2"

  /** Whether a field is a 2.2 blob column (a struct with the extension name). */
  def isBlobV2(f: LanceField): Boolean = f.metadata.get("ARROW:extension:name").contains(ExtensionName)

  def putDescription(out: ByteBuilder, d: BlobV2Description): Unit = {
    out.putByte(d.kind)
    out.putLong(d.position)
    out.putLong(d.size)
    out.putInt(d.blobId)
    out.putInt(0) // no uri
  }

  /** The descriptions' encoding: each field flat, the uri variable with 32-bit offsets. */
  val encoding: CompressiveEncoding = {
    def fixed(bits: Int): VariablePackedStruct.FieldEncoding =
      VariablePackedStruct.FieldEncoding.newBuilder().setValue(FlatCodec.encoding(bits.toLong)).setBitsPerValue(bits.toLong).build()
    val uri = VariablePackedStruct.FieldEncoding.newBuilder().setValue(VariableCodec.encoding(32)).setBitsPerLength(32L).build()
    CompressiveEncoding.newBuilder().setVariablePackedStruct(VariablePackedStruct.newBuilder()
      .addFields(fixed(8)).addFields(fixed(64)).addFields(fixed(64)).addFields(fixed(32)).addFields(uri)).build()
  }

  /** The page of a leaf's buffered descriptions. */
  def write(lb: LeafBuffer, levels: PageLevels): EncodedPage =
    if (levels.validValues == 0) ConstantPage.allNull(lb, levels)
    else FullZipPage.write(lb, levels, _ => (lb.fixed.arr, (i: Int) => lb.ends.getLong(i), encoding))
}
