package io.lancespark.format.v21

import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceSchema
import io.lancespark.format.WriterTestKit
import io.lancespark.format.input.LocalFileSource
import io.lancespark.format.v20.ArrowCompare.{firstMismatch, values}
import io.lancespark.format.file.WrittenFile
import io.lancespark.format.v21.write.{V21FileWriter, WriteCodecs}

/** Files written at 2.1 and 2.2 read back equal with [[V21FileReader]] and
  * with pylance (the oracle), every type, nulls at every depth, small pages
  * and odd batches, every codec on and off. */
class V21FileWriterSuite extends AnyFunSuite with BeforeAndAfterAll with WriterTestKit {

  protected val allocator = new RootAllocator()
  private val tmp: Path = Files.createTempDirectory("v21writer")
  private val pylanceDir: Path = Files.createDirectories(tmp.resolve("pylance"))

  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0, s"leaked ${allocator.getAllocatedMemory} bytes")
    finally {
      allocator.close()
      if (!sys.env.contains("LANCE_KEEP_TEST_FILES"))
        Files.walk(tmp).sorted(java.util.Comparator.reverseOrder[Path]()).forEach(p => Files.deleteIfExists(p))
    }
  }

  private def write(name: String, schema: LanceSchema, minor: Int, batches: Seq[Seq[FieldVector]], maxRows: Int,
                    codecs: WriteCodecs): (Path, WrittenFile) = {
    val p = pylanceDir.resolve(s"$name.lance")
    val w = new V21FileWriter(Files.newOutputStream(p), p.toString, schema, minor, maxRows,
      V21FileWriter.DefaultMaxPageBytes, codecs, statistics = true, allocator)
    try {
      batches.foreach(w.write)
      val wf = w.finish()
      assert(wf.sizeBytes == Files.size(p))
      (p, wf)
    } finally w.close()
  }

  /** Writes `cols` in batches, reads them back and has pylance read them. */
  private def roundTrip(name: String, schema: LanceSchema, cols: Seq[IndexedSeq[Any]], minor: Int, batch: Int,
                        maxRows: Int, codecs: WriteCodecs = WriteCodecs()): Path = {
    val n = cols.head.size
    val batches = (0 until n by batch).map(a => vectors(schema, cols.map(_.slice(a, math.min(n, a + batch)))))
    val (p, wf) = try write(name, schema, minor, batches, maxRows, codecs) finally batches.foreach(_.foreach(_.close()))
    assert(wf.numRows == n)
    withVectors(vectors(schema, cols)) { expected =>
      val r = V21FileReader.openStandalone(new LocalFileSource(p))
      try {
        assert(r.footer.versionName == s"2.$minor")
        withVectors(r.read(r.fileSchema.fields, 0, r.numRows, allocator)) { got =>
          got.zip(expected).zip(schema.fields).foreach { case ((g, e), lf) =>
            firstMismatch(lf.name, values(g), values(e)).foreach(m => fail(s"$name: $m"))
          }
        }
      } finally r.close()
      writeIpc(pylanceDir.resolve(s"$name.arrow"), expected)
    }
    pylanceReads(pylanceDir, name)
    p
  }

  Seq(1, 2).foreach { minor =>
    test(s"2.$minor: every type round-trips, and pylance reads it") {
      roundTrip(s"rich-2.$minor", LanceSchema.fromArrow(richArrow), richColumns(5000, 1), minor, 5000, 32 * 1024)
    }

    test(s"2.$minor: small pages and odd batches") {
      roundTrip(s"rich_small-2.$minor", LanceSchema.fromArrow(richArrow), richColumns(3000, 2), minor, 777, 300)
    }

    test(s"2.$minor: with each codec turned off") {
      Seq("bitpacking" -> WriteCodecs(bitpacking = false), "rle" -> WriteCodecs(rle = false),
        "dictionary" -> WriteCodecs(dictionary = false), "general" -> WriteCodecs(general = false),
        "fullzip" -> WriteCodecs(fullZip = false)).foreach { case (off, c) =>
        roundTrip(s"no_$off-2.$minor", LanceSchema.fromArrow(richArrow), richColumns(1500, 3), minor, 1500, 1024, c)
      }
    }

    test(s"2.$minor: files of consecutive rows joined without decoding read as one file; pylance reads it") {
      val schema = LanceSchema.fromArrow(richArrow)
      val n = 4000
      val cols = richColumns(n, 5)
      val cuts = Seq(0, 1300, 1301, 2900, n)  // (a piece of one row)
      val parts = cuts.zip(cuts.drop(1)).zipWithIndex.map { case ((a, b), i) =>
        val batches = Seq(vectors(schema, cols.map(_.slice(a, b))))
        try write(s"piece$i-2.$minor", schema, minor, batches, 700, WriteCodecs())._1
        finally batches.foreach(_.foreach(_.close()))
      }
      val name = s"joined-2.$minor"
      val p = pylanceDir.resolve(s"$name.lance")
      val joined = io.lancespark.format.FileConcat.write(parts.map(q => new LocalFileSource(q)), Files.newOutputStream(p),
        p.toString)
      assert(joined.rows == n && joined.size == Files.size(p))
      withVectors(vectors(schema, cols)) { expected =>
        val r = V21FileReader.openStandalone(new LocalFileSource(p))
        try {
          withVectors(r.read(r.fileSchema.fields, 0, r.numRows, allocator)) { got =>
            got.zip(expected).zip(schema.fields).foreach { case ((g, e), lf) =>
              firstMismatch(lf.name, values(g), values(e)).foreach(m => fail(s"$name: $m"))
            }
          }
          // a slice across a join reads the same rows as the whole
          withVectors(r.read(r.fileSchema.fields, 1250, 1350, allocator)) { got =>
            withVectors(vectors(schema, cols.map(_.slice(1250, 1350)))) { want =>
              got.zip(want).zip(schema.fields).foreach { case ((g, e), lf) =>
                firstMismatch(lf.name, values(g), values(e)).foreach(m => fail(s"$name [1250, 1350): $m"))
              }
            }
          }
        } finally r.close()
        writeIpc(pylanceDir.resolve(s"$name.arrow"), expected)
      }
      // the statistics follow the rows: each field's entries cover [0, n) in order, bounds as written
      val joinedStats = io.lancespark.format.stats.StatsStore.read(new LocalFileSource(p), allocator).get
      val pieceStats = parts.map(q => io.lancespark.format.stats.StatsStore.read(new LocalFileSource(q), allocator).get)
      assert(joinedStats.pages.nonEmpty)
      joinedStats.byField.foreach { case (fid, ps) =>
        assert(ps.head.firstRow == 0 && ps.last.firstRow + ps.last.numRows == n, s"field $fid")
        ps.zip(ps.drop(1)).foreach { case (a, b) => assert(a.firstRow + a.numRows == b.firstRow, s"field $fid") }
        def show(x: Any): String = x match { case a: Array[Byte] => a.mkString(","); case o => o.toString }
        def bounds(s: io.lancespark.format.stats.PageStat) = (s.nullCount, s.min.map(show), s.max.map(show))
        assert(ps.map(bounds) == pieceStats.flatMap(_.forField(fid)).map(bounds), s"field $fid")
        assert(joinedStats.sketchOf(fid).isDefined == pieceStats.forall(_.sketchOf(fid).isDefined))
      }
      pylanceReads(pylanceDir, name)
    }

    test(s"2.$minor: null structs at any depth, lists of structs of lists") {
      val schema = LanceSchema.fromArrow(new Schema(Seq(
        f("st", ArrowType.Struct.INSTANCE, f("in", ArrowType.Struct.INSTANCE, f("v", int(32))),
          list("l", f("item", ArrowType.Utf8.INSTANCE))),
        list("ls", f("item", ArrowType.Struct.INSTANCE, f("x", int(64)), list("y", f("item", int(16))))),
        new Field("nn", FieldType.notNullable(int(64)), null),
        // null structs over lists that are never null nor empty (regression: differential seed 74)
        f("sl", ArrowType.Struct.INSTANCE, list("l", f("item", ArrowType.Bool.INSTANCE)))).asJava))
      val n = 4000
      val cols = Seq(
        (0 until n).map(i => if (i % 5 == 0) null else Map(
          "in" -> (if (i % 3 == 0) null else Map("v" -> (if (i % 7 == 0) null else i))),
          "l" -> (if (i % 4 == 0) null else (0 until i % 3).map(k => if (k == 1) null else s"s$i.$k"))): Any),
        (0 until n).map(i => if (i % 6 == 0) null else (0 until i % 4).map(k =>
          if ((i + k) % 5 == 0) null else Map("x" -> (i * 10 + k).toLong,
            "y" -> (if (k % 2 == 0) Seq.empty else (0 until k).map(_.toShort)))): Any),
        (0 until n).map(i => i.toLong: Any),
        (0 until n).map(i => if (i % 3 == 1) null else Map("l" -> (0 to i % 5).map(k => if (k == 3) null else k % 2 == 0)): Any))
      roundTrip(s"nested-2.$minor", schema, cols, minor, 1000, 1500)
    }

    test(s"2.$minor: wide values go to full-zip pages; long lists span chunks") {
      val schema = LanceSchema.fromArrow(new Schema(Seq(
        f("big", ArrowType.Utf8.INSTANCE), f("bigl", ArrowType.LargeBinary.INSTANCE),
        f("vec", new ArrowType.FixedSizeList(100), new Field("item", FieldType.nullable(
          new ArrowType.FloatingPoint(org.apache.arrow.vector.types.FloatingPointPrecision.SINGLE)), null)),
        list("long", f("item", int(32)))).asJava))
      val n = 600
      val cols = Seq(
        (0 until n).map(i => if (i % 9 == 0) null else "x" * (300 + i % 50): Any),
        (0 until n).map(i => if (i % 10 == 3) null else Array.tabulate[Byte](256 + i)(k => (k * i).toByte): Any),
        (0 until n).map(i => if (i % 7 == 0) null else (0 until 100).map(k => if ((i + k) % 11 == 0) null else (i + k).toFloat): Any),
        (0 until n).map(i => if (i % 8 == 0) null else (0 until (if (i % 50 == 1) 5000 else i % 5)): Any))
      roundTrip(s"wide-2.$minor", schema, cols, minor, 600, 600)
    }
  }

  test("2.2: maps") {
    val entries = new Field("entries", FieldType.notNullable(ArrowType.Struct.INSTANCE),
      Seq(new Field("key", FieldType.notNullable(ArrowType.Utf8.INSTANCE), null), f("value", int(32))).asJava)
    val schema = LanceSchema.fromArrow(new Schema(Seq(
      new Field("m", FieldType.nullable(new ArrowType.Map(false)), Seq(entries).asJava)).asJava))
    val n = 2000
    val cols = Seq((0 until n).map(i => if (i % 7 == 0) null else (0 until i % 4).map(k =>
      Map("key" -> s"k$k", "value" -> (if (k == 2) null else k))): Any))
    roundTrip("map-2.2", schema, cols, 2, 2000, 1000)
  }

  Seq(1, 2).foreach { minor =>
    test(s"2.$minor: compressible columns are compressed") {
      // 100k rows: a sorted key (deltas of 1: RLE or bit-packing keep it well under 8 bytes a value),
      // small ints 0..15 (4 bits), 20 repeated strings (dictionary: 5 bits of index),
      // a constant, and a mostly-null column
      val schema = LanceSchema.fromArrow(new Schema(Seq(
        f("key", int(64)), f("small", int(32)), f("word", ArrowType.Utf8.INSTANCE), f("one", int(64)),
        f("sparse", int(64))).asJava))
      val n = 100000
      val words = (0 until 20).map(k => s"category-$k-of-the-vocabulary")
      val cols = Seq(
        (0 until n).map(i => (1000000L + i): Any), (0 until n).map(i => ((i * 7919) % 16): Any),
        (0 until n).map(i => words((i * 31) % 20): Any), (0 until n).map(_ => 42L: Any),
        (0 until n).map(i => if (i % 100 == 0) i.toLong else null: Any))
      val p = roundTrip(s"compressible-2.$minor", schema, cols, minor, 10000, 32 * 1024)
      val raw = n.toLong * (8 + 4 + 8 + 8 + 8) + words.map(_.length).sum.toLong * n / 20
      // bit-packed or run-length, every column fits in 1 byte a value (raw: about 60)
      assert(Files.size(p) < n * 5L, s"${Files.size(p)} bytes for $raw bytes of values")
    }
  }
}
