package io.lancespark.format.v01

import java.nio.file.{Files, Path}
import java.nio.ByteBuffer

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.FieldVector
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.{LanceField, LanceFormatException, LanceSchema}
import io.lancespark.format.input.LocalFileSource
import io.lancespark.proto.file.Encoding

class LegacyFileReaderSuite extends AnyFunSuite with BeforeAndAfterAll {
  import LegacyFixtures._

  private val allocator = new RootAllocator()

  override def afterAll(): Unit = {
    val leaked = allocator.getAllocatedMemory
    allocator.close()
    assert(leaked == 0, s"$leaked bytes still allocated")
  }

  private def withVectors[T](vs: Seq[FieldVector])(body: Seq[FieldVector] => T): T =
    try body(vs) finally vs.foreach(_.close())

  private def check(actual: Seq[FieldVector], fields: Seq[LanceField], expected: Map[String, IndexedSeq[Any]],
                    from: Int, rows: Int): Unit = {
    assert(actual.length == fields.length)
    actual.zip(fields).foreach { case (v, f) =>
      assert(v.getValueCount == rows, s"column ${f.name}")
      assert(v.getField.getType == f.toArrow.getType, s"column ${f.name}")
      val want = expected.getOrElse(f.name, fail(s"no expected column ${f.name}"))
      firstMismatch(f.name, v, want, from).foreach(m => fail(m))
    }
  }

  private val legacyDatasets = Seq("rich_legacy", "rich_legacy_batches", "legacy_extra")

  for (name <- legacyDatasets) {
    test(s"$name: every fragment reads as pylance reads it") {
      val ds = dataset(name)
      val m = manifest(ds)
      val schema = LanceSchema.fromProto(
        m.getFieldsList.asScala.toSeq, Map.empty, "manifest")
      val refs = dataFiles(ds, m)
      assert(refs.nonEmpty)
      refs.foreach { ref =>
        val reader = open(ref, schema)
        try {
          assert(reader.numRows == ref.rows)
          val want = expected(ds, ref.fragmentId, allocator)
          withVectors(reader.read(schema.fields, 0, reader.numRows, allocator)) { vs =>
            check(vs, schema.fields, want, 0, reader.numRows.toInt)
          }
        } finally reader.close()
      }
    }
  }

  test("rich_legacy_batches: file has several batches; sub-ranges crossing batch boundaries") {
    val ds = dataset("rich_legacy_batches")
    val m = manifest(ds)
    val schema = LegacyFixtures.schema(m)
    val ref = dataFiles(ds, m).head
    val reader = open(ref, schema)
    try {
      assert(reader.footer.numBatches > 3, "fixture should have several row groups")
      val want = expected(ds, ref.fragmentId, allocator)
      val n = reader.numRows
      for ((from, until) <- Seq((100L, 300L), (127L, 129L), (0L, 1L), (n - 1, n), (5L, 5L), (1L, n - 1))) {
        withVectors(reader.read(schema.fields, from, until, allocator)) { vs =>
          check(vs, schema.fields, want, from.toInt, (until - from).toInt)
        }
      }
    } finally reader.close()
  }

  test("legacy_extra: dictionary, empty-vs-null and nested columns over a range crossing batches") {
    val ds = dataset("legacy_extra")
    val m = manifest(ds)
    val schema = LegacyFixtures.schema(m)
    val ref = dataFiles(ds, m).head
    val reader = open(ref, schema)
    try {
      assert(reader.footer.numBatches > 1)
      val want = expected(ds, ref.fragmentId, allocator)
      withVectors(reader.read(schema.fields, 150, 610, allocator)) { vs =>
        check(vs, schema.fields, want, 150, 460)
      }
      // an empty string is null in a nullable column, but stays "" when the column is required
      val sRequired = schema.field("s_required").get
      withVectors(reader.read(Seq(sRequired), 0, 1, allocator)) { vs => assert(vs.head.getObject(0).toString == "") }
      schema.field("s_empty").foreach { f =>
        withVectors(reader.read(Seq(f), 0, 1, allocator)) { vs => assert(vs.head.isNull(0)) }
      }
    } finally reader.close()
  }

  test("projections: one column, and a struct pruned to one child") {
    val ds = dataset("rich_legacy")
    val m = manifest(ds)
    val schema = LegacyFixtures.schema(m)
    val ref = dataFiles(ds, m).head
    val reader = open(ref, schema)
    try {
      val want = expected(ds, ref.fragmentId, allocator)
      val s = schema.field("s").get
      withVectors(reader.read(Seq(s), 1000, 2100, allocator)) { vs => check(vs, Seq(s), want, 1000, 1100) }

      for ((structName, childName) <- Seq(("st", "b"), ("st_nested", "tags"), ("st_nested", "inner"))) {
        val st = schema.field(structName).get
        val pruned = st.withChildren(st.children.filter(_.name == childName))
        val prunedWant = want(structName).map {
          case mm: Map[_, _] => mm.filter(_._1 == childName)
          case other => other
        }
        withVectors(reader.read(Seq(pruned, schema.field("id").get), 10, 2000, allocator)) { vs =>
          assert(vs.head.getField.getChildren.size == 1)
          firstMismatch(structName, vs.head, prunedWant, 10).foreach(fail(_))
          firstMismatch("id", vs(1), want("id"), 10).foreach(fail(_))
        }
      }
    } finally reader.close()
  }

  // ---- bad input --------------------------------------------------------------

  private def fixtureFile(): (LegacyFixtures.DataFileRef, LanceSchema) = {
    val ds = dataset("legacy_extra")
    val m = manifest(ds)
    (dataFiles(ds, m).head, LegacyFixtures.schema(m))
  }

  private def corruptCopy(name: String)(edit: Array[Byte] => Array[Byte]): Path = {
    val (ref, _) = fixtureFile()
    val dir = Files.createTempDirectory("legacy-bad")
    val p = dir.resolve(name)
    Files.write(p, edit(Files.readAllBytes(ref.path)))
    p.toFile.deleteOnExit(); dir.toFile.deleteOnExit()
    p
  }

  private def openAndReadAll(p: Path): Unit = {
    val (ref, schema) = fixtureFile()
    val src = new LocalFileSource(p)
    try {
      val r = LegacyFileReader.open(src, schema, ref.fieldIds)
      r.read(schema.fields, 0, r.numRows, allocator).foreach(_.close())
    } finally src.close()
  }

  private def assertFails(p: Path, mentions: String*): LanceFormatException = {
    val e = intercept[LanceFormatException](openAndReadAll(p))
    assert(e.getMessage.contains(p.toString), e.getMessage)
    mentions.foreach(s => assert(e.getMessage.contains(s), e.getMessage))
    e
  }

  test("bad input: truncated copies name the file") {
    assertFails(corruptCopy("half.lance")(b => b.take(b.length / 2)))
    assertFails(corruptCopy("tiny.lance")(b => b.take(3)))
    assertFails(corruptCopy("empty.lance")(_ => Array.emptyByteArray))
  }

  test("bad input: wrong magic names the file") {
    assertFails(corruptCopy("magic.lance") { b => val c = b.clone(); c(c.length - 1) = 'X'.toByte; c }, "magic")
  }

  test("bad input: a metadata position past the end names the file") {
    assertFails(corruptCopy("metapos.lance") { b =>
      val c = b.clone()
      ByteBuffer.wrap(c).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(c.length - 16, Long.MaxValue / 2)
      c
    })
  }

  test("bad input: out-of-range page positions name the file and the column") {
    val (ref, schema) = fixtureFile()
    val src = new LocalFileSource(ref.path)
    val footer = try LegacyFooter.read(src) finally src.close()
    val p = corruptCopy("pages.lance") { b =>
      val c = b.clone()
      val bb = ByteBuffer.wrap(c).order(java.nio.ByteOrder.LITTLE_ENDIAN)
      // every page of every field: position far past the end
      val cells = (ref.fieldIds.max - ref.fieldIds.min + 1) * footer.numBatches
      (0 until cells).foreach(i => bb.putLong((footer.pageTablePosition + i * 16L).toInt, 1L << 40))
      c
    }
    assertFails(p, "column 'id'")
    assert(schema.field("id").isDefined)
  }

  test("bad input: unsupported encoding and fields missing from the file are named") {
    val (ref, schema) = fixtureFile()
    val reader = open(ref, schema)
    try {
      val id = schema.field("id").get
      val rle = id.copy(encoding = io.lancespark.schema.FieldEncoding.Rle)
      val e = intercept[LanceFormatException](reader.read(Seq(rle), 0, 1, allocator))
      assert(e.getMessage.contains(ref.path.toString) && e.getMessage.contains("'id'") && e.getMessage.contains("RLE"))
      val ghost = id.copy(id = 999, name = "ghost")
      val e2 = intercept[LanceFormatException](reader.read(Seq(ghost), 0, 1, allocator))
      assert(e2.getMessage.contains("ghost"))
      val e3 = intercept[LanceFormatException](reader.read(Seq(id), 0, reader.numRows + 1, allocator))
      assert(e3.getMessage.contains(ref.path.toString))
    } finally reader.close()
  }

  test("bad input: random corruption of the tail and random truncation fail cleanly") {
    val (ref, _) = fixtureFile()
    val src = new LocalFileSource(ref.path)
    val footer = try LegacyFooter.read(src) finally src.close()
    val rnd = new scala.util.Random(42)
    var failures = 0
    for (i <- 0 until 60) {
      val p = corruptCopy(s"fuzz-$i.lance") { b =>
        if (i % 3 == 0) b.take(rnd.nextInt(b.length))
        else {
          val c = b.clone()
          val lo = footer.pageTablePosition.toInt
          (0 until 1 + rnd.nextInt(4)).foreach(_ => c(lo + rnd.nextInt(c.length - lo)) = rnd.nextInt(256).toByte)
          c
        }
      }
      try openAndReadAll(p)
      catch {
        case e: LanceFormatException =>
          assert(e.getMessage.contains(p.toString), e.getMessage)
          failures += 1
      }
      Files.delete(p)
    }
    assert(failures >= 20)
  }
}
