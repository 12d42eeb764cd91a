package io.lancespark.format.v21

import java.nio.file.{Files, Path}

import scala.util.Random

import com.google.protobuf.ByteString
import org.apache.arrow.memory.RootAllocator
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.format.file.{PageMeta, Region}
import io.lancespark.format.input.LocalFileSource
import io.lancespark.format.v20.ArrowCompare
import io.lancespark.format.v21.layout.{PageIO, StructuralPage}
import io.lancespark.proto.encodings21._
import io.lancespark.proto.file.{Field => PbField}

/** Bad 2.1/2.2 input gives a [[LanceFormatException]] naming the file (and the
  * column where one is involved): never another exception, a hang or wrong
  * values where the format can tell. */
class V21BadInputSuite extends AnyFunSuite with BeforeAndAfterAll {
  import ArrowCompare.fixtures

  private val allocator = new RootAllocator()
  private val tmp = Files.createTempDirectory("v21-bad")

  override def afterAll(): Unit = allocator.close()

  private def readAll(p: Path): Unit = {
    val r = V21FileReader.openStandalone(new LocalFileSource(p))
    try r.read(r.fileSchema.fields, 0, r.numRows, allocator).foreach(_.close()) finally r.close()
  }

  private def expectClear(p: Path)(body: => Unit): LanceFormatException = {
    val e = intercept[LanceFormatException](body)
    assert(e.getMessage.contains(p.toString), e.getMessage)
    e
  }

  test("truncated copies are refused naming the file") {
    val src = fixtures.resolve("v2_1").resolve("shapes-2.2.lance")
    val bytes = Files.readAllBytes(src)
    val rnd = new Random(1)
    (Seq(0, 10, 39, bytes.length - 1, bytes.length - 40) ++ Seq.fill(8)(rnd.nextInt(bytes.length))).foreach { len =>
      val p = tmp.resolve(s"trunc-$len.lance")
      Files.write(p, java.util.Arrays.copyOf(bytes, len))
      expectClear(p)(readAll(p))
    }
  }

  test("corrupted page bytes fail with a LanceFormatException or read, never anything else") {
    Seq("shapes-2.2", "nested-2.1", "wide-2.2", "compressed-2.1").foreach { name =>
      val src = fixtures.resolve("v2_1").resolve(s"$name.lance")
      val bytes = Files.readAllBytes(src)
      // the page data: before the column metadata (the footer says where it starts)
      val metaStart = java.nio.ByteBuffer.wrap(bytes, bytes.length - 40, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong.toInt
      val rnd = new Random(name.hashCode)
      (0 until 12).foreach { k =>
        val bad = bytes.clone()
        (0 until 1 + rnd.nextInt(8)).foreach { _ => bad(rnd.nextInt(metaStart)) = rnd.nextInt(256).toByte }
        val p = tmp.resolve(s"$name-corrupt-$k.lance")
        Files.write(p, bad)
        try readAll(p)
        catch {
          case e: LanceFormatException => assert(e.getMessage.contains(p.toString), e.getMessage)
        }
      }
    }
  }

  // ---- pages crafted by hand, over bytes of our own

  private val leafField = LanceField(7, "x", "int32", nullable = true, Vector.empty, Map.empty)
  private val leaf = LeafColumn(leafField, 3, Vector(LayerKind.Item), "column 3 (field 'x', id 7)")

  private def withPage(layout: PageLayout, buffers: Vector[Region], rows: Long, file: Array[Byte])
                      (f: (StructuralPage, PageIO, Path) => Unit): Unit = {
    val p = Files.createTempFile(tmp, "page", ".bin")
    Files.write(p, file)
    val src = new LocalFileSource(p)
    try {
      val meta = PageMeta(0, buffers, rows, 0, 0, StructuralPage.LayoutType, layout.toByteString)
      f(StructuralPage.of(meta, leaf, p.toString), new PageIO(src, src), p)
    } finally src.close()
  }

  private def flat(bits: Int): CompressiveEncoding =
    CompressiveEncoding.newBuilder.setFlat(Flat.newBuilder.setBitsPerValue(bits)).build

  private def miniBlock(items: Long): MiniBlockLayout.Builder = MiniBlockLayout.newBuilder
    .setValueCompression(flat(32)).addLayers(RepDefLayer.REPDEF_ALL_VALID_ITEM).setNumBuffers(1).setNumItems(items)

  test("a chunk word pointing past the chunk buffer names the file, column and chunk") {
    val file = new Array[Byte](256)
    file(0) = 0xf0.toByte; file(1) = 0x00 // one chunk of (0x0f + 1) * 8 = 128 bytes; the buffer has 64
    val layout = PageLayout.newBuilder.setMiniBlockLayout(miniBlock(10)).build
    withPage(layout, Vector(Region(0, 2), Region(64, 64)), 10, file) { (page, io, p) =>
      val e = intercept[LanceFormatException](page.decode(0, 10, io))
      assert(e.getMessage.contains(p.toString) && e.getMessage.contains("column 3") && e.getMessage.contains("chunk 0"),
        e.getMessage)
    }
  }

  test("definition levels out of range are refused") {
    val file = new Array[Byte](64)
    // constant layout, all null with levels: raw u16 definition levels 0, 1, 9
    file(2) = 1; file(4) = 9
    val layout = PageLayout.newBuilder.setConstantLayout(ConstantLayout.newBuilder
      .addLayers(RepDefLayer.REPDEF_NULLABLE_ITEM)).build
    withPage(layout, Vector(Region(0, 0), Region(0, 6)), 3, file) { (page, io, p) =>
      val e = intercept[LanceFormatException](page.decode(0, 3, io))
      assert(e.getMessage.contains(p.toString) && e.getMessage.contains("definition level 9"), e.getMessage)
    }
  }

  test("layers that do not match the field are refused") {
    val layout = PageLayout.newBuilder.setMiniBlockLayout(miniBlock(1)
      .addLayers(RepDefLayer.REPDEF_NULLABLE_LIST)).build
    withPage(layout, Vector(Region(0, 2), Region(8, 8)), 1, new Array[Byte](16)) { (page, io, p) =>
      val e = intercept[LanceFormatException](page.decode(0, 1, io))
      assert(e.getMessage.contains(p.toString) && e.getMessage.contains("nesting layers"), e.getMessage)
    }
  }

  test("unknown layouts and encodings name themselves") {
    def refusedAt(layout: PageLayout, expected: String): Unit = {
      val p = tmp.resolve("unknown.bin")
      Files.write(p, new Array[Byte](64))
      val src = new LocalFileSource(p)
      try {
        val meta = PageMeta(0, Vector(Region(0, 2), Region(8, 56)), 4, 0, 0, StructuralPage.LayoutType, layout.toByteString)
        val e = intercept[LanceFormatException] {
          StructuralPage.of(meta, leaf, p.toString).decode(0, 4, new PageIO(src, src))
        }
        assert(e.getMessage.contains(p.toString) && e.getMessage.contains("column 3") && e.getMessage.contains(expected),
          e.getMessage)
      } finally src.close()
    }
    refusedAt(PageLayout.newBuilder.build, "unsupported page layout")
    refusedAt(PageLayout.newBuilder.setMiniBlockLayout(miniBlock(4)
      .setValueCompression(CompressiveEncoding.newBuilder)).build, "an empty encoding description")
    // a message of another kind where a page layout belongs
    val p = tmp.resolve("other.bin")
    Files.write(p, new Array[Byte](8))
    val meta = PageMeta(0, Vector.empty, 1, 0, 0, "lance.encodings.ArrayEncoding", ByteString.EMPTY)
    val e = intercept[LanceFormatException](StructuralPage.of(meta, leaf, p.toString))
    assert(e.getMessage.contains("lance.encodings.ArrayEncoding"), e.getMessage)
  }
}
