package io.lancespark.format.v20

import io.lancespark.proto.encodings.{ArrayEncoding, Blob, Buffer => PbBuffer, ColumnEncoding, PackedStruct}

/** A 2.0 blob column (`large_binary` with `lance-encoding:blob`), as
  * pylance writes it. Its column encoding is `blob { inner { values } }`;
  * each page holds one description per row, a packed struct of
  * (position u64, size u64) in one page buffer; the values' bytes are
  * elsewhere in the file (64-byte aligned, written as their batch arrives).
  * A null is (1, 0), an empty value (0, 0). Read by
  * [[V20FileReader]] (`blobValues`); written by [[BlobEncoder]]. */
private[v20] object BlobColumn {

  /** The column encoding of a blob column. */
  val columnEncoding: ColumnEncoding = ColumnEncoding.newBuilder()
    .setBlob(Blob.newBuilder().setInner(ColumnEncoding.newBuilder().setValues(
      com.google.protobuf.Empty.getDefaultInstance))).build()

  /** A page of descriptions: two u64 fields packed row by row in page buffer 0. */
  val pageEncoding: ArrayEncoding = {
    val field = Encodings.noNulls(Encodings.flat(64, 0))
    ArrayEncoding.newBuilder().setPackedStruct(PackedStruct.newBuilder().addInner(field).addInner(field)
      .setBuffer(PbBuffer.newBuilder().setBufferIndex(0).setBufferType(PbBuffer.BufferType.page))).build()
  }

  /** The description of a null. */
  val NullPosition: Long = 1L
}
