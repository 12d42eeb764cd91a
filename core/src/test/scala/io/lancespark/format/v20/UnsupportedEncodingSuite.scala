package io.lancespark.format.v20

import com.google.protobuf.ByteString
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.arrow.DictionaryCache
import io.lancespark.format.file.{ColumnMeta, PageMeta, Region}
import io.lancespark.format.input.LocalFileSource
import io.lancespark.format.v20.codec.PageContext
import io.lancespark.proto.encodings._

/** Encodings Lance 2.0 writers do not produce (or this reader does not
  * implement) are refused with a message naming file, column and encoding. */
class UnsupportedEncodingSuite extends AnyFunSuite {
  import ArrowCompare.fixtures

  private val file = fixtures.resolve("v2_0").resolve("rich_one_page.lance")

  private def pageBuffer: Buffer = Buffer.newBuilder.setBufferIndex(0).setBufferType(Buffer.BufferType.page).build

  private def refuse(enc: ArrayEncoding, expected: String): Unit = {
    val src = new LocalFileSource(file)
    try {
      val meta = PageMeta(0, Vector(Region(0, 4096)), 10, 0, 0, V20Column.EncodingType, enc.toByteString)
      val col = V20Column(ColumnMeta(5, Vector(meta), Vector.empty), src.path)
      val page = col.pages.head
      val ctx = new PageContext(src, meta.buffers, Vector.empty, Vector.empty, 5, 0, "column 5 (field 'x', id 7)",
        directDictionary = false, new DictionaryCache)
      val e = intercept[LanceFormatException](page.decode(0, 10, ctx))
      assert(e.getMessage.contains(file.toString), e.getMessage)
      assert(e.getMessage.contains("column 5"), e.getMessage)
      assert(e.getMessage.contains(expected), e.getMessage)
    } finally src.close()
  }

  private def flat(bits: Int) = Flat.newBuilder.setBitsPerValue(bits).setBuffer(pageBuffer)

  test("refused encodings name themselves") {
    refuse(ArrayEncoding.newBuilder.setFsst(Fsst.newBuilder.setSymbolTable(ByteString.EMPTY)).build, "fsst")
    refuse(ArrayEncoding.newBuilder.setBitpacked(Bitpacked.newBuilder.setCompressedBitsPerValue(3)
      .setUncompressedBitsPerValue(32).setBuffer(pageBuffer)).build, "bitpacked")
    refuse(ArrayEncoding.newBuilder.setBitpackedForNonNeg(BitpackedForNonNeg.newBuilder
      .setCompressedBitsPerValue(3).setUncompressedBitsPerValue(32).setBuffer(pageBuffer)).build, "bitpacked_for_non_neg")
    refuse(ArrayEncoding.newBuilder.setConstant(Constant.newBuilder.setValue(ByteString.copyFrom(Array[Byte](1)))).build, "constant")
    refuse(ArrayEncoding.newBuilder.setPackedStruct(PackedStruct.newBuilder.setBuffer(pageBuffer)).build, "packed_struct")
    refuse(ArrayEncoding.newBuilder.setPackedStruct(PackedStruct.newBuilder.setBuffer(pageBuffer)
      .addInner(ArrayEncoding.newBuilder.setFlat(flat(3)))).build, "packed_struct field")
    refuse(ArrayEncoding.newBuilder.setFlat(flat(32).setCompression(Compression.newBuilder.setScheme("zstd"))).build, "zstd")
    refuse(ArrayEncoding.newBuilder.setFlat(flat(3)).build, "3 bits")
    refuse(ArrayEncoding.newBuilder.setFixedSizeList(FixedSizeList.newBuilder.setDimension(2)
      .setHasValidity(true).setItems(ArrayEncoding.newBuilder.setFlat(flat(32)))).build, "has_validity")
    refuse(ArrayEncoding.newBuilder.setRle(Rle.newBuilder.setBitsPerValue(8)).build, "rle")
  }

  test("a buffer reference outside the page's buffers is refused") {
    val bad = Buffer.newBuilder.setBufferIndex(3).setBufferType(Buffer.BufferType.page).build
    refuse(ArrayEncoding.newBuilder.setFlat(Flat.newBuilder.setBitsPerValue(32).setBuffer(bad)).build, "buffer 3")
  }

  test("a 2.1 file is refused by the 2.0 reader, naming the path and version") {
    val p = fixtures.resolve("v2_other_versions").resolve("v2_1.lance")
    val e = intercept[LanceFormatException](V20FileReader.openStandalone(new LocalFileSource(p)))
    assert(e.getMessage.contains(p.toString) && e.getMessage.contains("2.1"), e.getMessage)
  }
}
