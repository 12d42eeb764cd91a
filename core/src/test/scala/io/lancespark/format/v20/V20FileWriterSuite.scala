package io.lancespark.format.v20

import java.math.BigDecimal
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector._
import org.apache.arrow.vector.complex.{FixedSizeListVector, LargeListVector, ListVector, StructVector}
import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision, TimeUnit}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.format.WriterTestKit
import io.lancespark.format.file.WrittenFile
import io.lancespark.format.file.ColumnMetadataReader
import io.lancespark.format.input.LocalFileSource
import io.lancespark.format.stats.{PageStatistics, StatsStore}
import io.lancespark.proto.file.{Encoding => PbEncoding}

class V20FileWriterSuite extends AnyFunSuite with BeforeAndAfterAll with WriterTestKit {
  import ArrowCompare.{firstMismatch, values}

  protected val allocator = new RootAllocator()
  private val tmp: Path = Files.createTempDirectory("v2writer")
  private val pylanceDir: Path = Files.createDirectories(tmp.resolve("pylance"))

  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0, s"leaked ${allocator.getAllocatedMemory} bytes")
    finally {
      allocator.close()
      if (!sys.env.contains("LANCE_KEEP_TEST_FILES"))
        Files.walk(tmp).sorted(java.util.Comparator.reverseOrder[Path]()).forEach(p => Files.deleteIfExists(p))
    }
  }

  // ------------------------------------------------------------ helpers

  private def writeFile(name: String, schema: LanceSchema, batches: Seq[Seq[FieldVector]],
                        maxRows: Int = V20FileWriter.DefaultMaxRowsPerPage,
                        maxBytes: Long = V20FileWriter.DefaultMaxPageBytes,
                        dir: Path = tmp, statistics: Boolean = true): (Path, WrittenFile) = {
    val p = dir.resolve(s"$name.lance")
    val w = new V20FileWriter(Files.newOutputStream(p), p.toString, schema, maxRows, maxBytes, statistics, allocator)
    try {
      batches.foreach(w.write)
      val wf = w.finish()
      assert(wf.sizeBytes == Files.size(p))
      (p, wf)
    } finally w.close()
  }

  private def readBack(p: Path): (LanceSchema, Seq[FieldVector]) = {
    val r = V20FileReader.openStandalone(new LocalFileSource(p))
    try {
      assert(r.footer.versionName == "2.0")
      (r.fileSchema, r.read(r.fileSchema.fields, 0, r.numRows, allocator))
    } finally r.close()
  }

  /** Writes `cols` in batches of `batch` rows and checks the reader returns them. */
  private def roundTrip(name: String, schema: LanceSchema, cols: Seq[IndexedSeq[Any]], batch: Int,
                        maxRows: Int, maxBytes: Long, pylance: Boolean = false): Path = {
    val n = cols.head.size
    val batches = (0 until n by batch).map(a => vectors(schema, cols.map(_.slice(a, math.min(n, a + batch)))))
    val (p, wf) = try writeFile(name, schema, batches, maxRows, maxBytes) finally batches.foreach(_.foreach(_.close()))
    assert(wf.numRows == n)
    assert(wf.fieldIds == schema.allFields.map(_.id))
    assert(wf.columnIndices == schema.allFields.indices.toVector)
    withVectors(vectors(schema, cols)) { expected =>
      val (fileSchema, got) = readBack(p)
      withVectors(got) { got =>
        assert(fileSchema.toProto == schema.toProto.map(identity) || fileSchema.allFields.map(_.id) == schema.allFields.map(_.id))
        got.zip(expected).zip(schema.fields).foreach { case ((g, e), lf) =>
          assert(g.getField.getType == e.getField.getType, lf.name)
          firstMismatch(lf.name, values(g), values(e)).foreach(m => fail(s"$name: $m"))
        }
      }
      if (pylance) writeIpc(pylanceDir.resolve(s"$name.arrow"), expected)
    }
    if (pylance) {
      Files.copy(p, pylanceDir.resolve(s"$name.lance"))
      pylanceReads(pylanceDir, name)
    }
    p
  }

  // ------------------------------------------------------------ data

  // ------------------------------------------------------------ tests

  test("LanceSchema.fromArrow: ids depth first, logical types and encodings as pylance writes them") {
    val s = LanceSchema.fromArrow(richArrow)
    val byName = s.allFields.map(lf => s"${lf.name}#${lf.id}" -> lf).toMap
    def lt(name: String): String = s.allFields.find(_.name == name).get.logicalType
    assert(lt("b") == "bool" && lt("u64") == "uint64" && lt("f16") == "halffloat" && lt("f32") == "float")
    assert(lt("ls") == "large_string" && lt("lbin") == "large_binary" && lt("fsb") == "fixed_size_binary:5")
    assert(lt("d32") == "date32:day" && lt("d64") == "date64:ms" && lt("t32s") == "time32:s" && lt("t64ns") == "time64:ns")
    assert(lt("ts_us_utc") == "timestamp:us:UTC" && lt("ts_ns") == "timestamp:ns:-" &&
      lt("ts_ms_ny") == "timestamp:ms:America/New_York")
    assert(lt("dec") == "decimal:128:18:3" && lt("dec256") == "decimal:256:40:5")
    assert(lt("vec") == "fixed_size_list:float:4" && lt("vec_i") == "fixed_size_list:int32:2")
    assert(lt("lst") == "list" && lt("llst") == "large_list" && lt("lst_st") == "list.struct" && lt("st") == "struct")
    assert(s.field("vec").get.children.isEmpty)
    val all = s.allFields
    assert(all.map(_.id) == all.indices.toVector)
    val pb = s.toProto
    assert(pb.filter(_.getParentId == -1).map(_.getName) == richArrow.getFields.asScala.map(_.getName))
    val lst = pb.find(_.getName == "lst").get
    val item = pb(pb.indexOf(lst) + 1)
    assert(item.getName == "item" && item.getParentId == lst.getId && item.getLogicalType == "int64")
    assert(pb.find(_.getName == "st").get.getEncoding == PbEncoding.NONE)
    assert(pb.find(_.getName == "s").get.getEncoding == PbEncoding.VAR_BINARY)
    assert(pb.find(_.getName == "lst").get.getEncoding == PbEncoding.PLAIN)
    assert(pb.find(_.getName == "vec").get.getEncoding == PbEncoding.PLAIN)
    assert(!pb.find(_.getName == "nn").get.getNullable && pb.find(_.getName == "i8").get.getNullable)
    assert(LanceSchema.fromArrow(richArrow, firstId = 10).allFields.head.id == 10)
    assert(byName.nonEmpty)
    // round trip through the proto list
    val back = LanceSchema.fromProto(pb, Map.empty, "test")
    assert(back.toArrow == s.toArrow)
  }

  test("types 2.0 cannot store are refused, naming the column") {
    val map = new Field("m", FieldType.nullable(new ArrowType.Map(false)), java.util.Arrays.asList(
      new Field("entries", FieldType.notNullable(ArrowType.Struct.INSTANCE), java.util.Arrays.asList(
        new Field("key", FieldType.notNullable(ArrowType.Utf8.INSTANCE), null),
        new Field("value", FieldType.nullable(int(32)), null)))))
    // maps are Lance maps (file version 2.2), which the 2.0 writer refuses
    val schema = LanceSchema.fromArrow(new Schema(java.util.Arrays.asList(f("ok", int(32)), f("st", ArrowType.Struct.INSTANCE, map))))
    val p = tmp.resolve("map.lance")
    val out = Files.newOutputStream(p)
    val e = try intercept[LanceFormatException](new V20FileWriter(out, p.toString, schema)) finally out.close()
    assert(e.getMessage.contains("'m'") && e.getMessage.contains("2.2"), e.getMessage)
    val u = intercept[LanceFormatException](LanceSchema.fromArrow(new Schema(java.util.Arrays.asList(
      f("u", new ArrowType.Union(org.apache.arrow.vector.types.UnionMode.Sparse, Array.empty[Int]))))))
    assert(u.getMessage.contains("'u'"), u.getMessage)
  }

  test("every type round-trips, one batch, default pages") {
    val s = LanceSchema.fromArrow(richArrow)
    roundTrip("rich_one_batch", s, richColumns(3000, 1), 3000, V20FileWriter.DefaultMaxRowsPerPage,
      V20FileWriter.DefaultMaxPageBytes, pylance = true)
  }

  test("every type round-trips with small pages, odd batches, lists spanning pages") {
    val s = LanceSchema.fromArrow(richArrow)
    val p = roundTrip("rich_small_pages", s, richColumns(5000, 2), 777, 300, 2048, pylance = true)
    // several pages per column, items of long lists spread over several pages
    val r = V20FileReader.openStandalone(new LocalFileSource(p))
    try {
      val cols = new ColumnMetadataReader(new LocalFileSource(p), r.footer)
      val lstItem = s.allFields.indexWhere(lf => lf.name == "item" && lf.logicalType == "int64")
      assert(cols.column(lstItem).pages.size > 10)
      assert(cols.column(0).pages.size >= 5000 / 300)
      // priorities: the first row of the page
      val pages = cols.column(s.allFields.indexWhere(_.name == "i64")).pages
      assert(pages.head.priority == 0 && pages(1).priority == pages.head.length)
      // sub-range reads across page boundaries agree with a full read
      withVectors(r.read(r.fileSchema.fields, 0, r.numRows, allocator)) { full =>
        Seq((299L, 301L), (1234L, 2345L), (4999L, 5000L)).foreach { case (a, b) =>
          withVectors(r.read(r.fileSchema.fields, a, b, allocator)) { part =>
            part.zip(full).foreach { case (pv, fv) =>
              firstMismatch(pv.getField.getName, values(pv), values(fv).slice(a.toInt, b.toInt)).foreach(fail(_))
            }
          }
        }
      }
    } finally r.close()
  }

  test("many tiny batches accumulate into pages; empty batches; an empty file") {
    val s = LanceSchema.fromArrow(richArrow)
    val p = roundTrip("rich_tiny_batches", s, richColumns(400, 3), 7, 100, 1 << 20)
    val r = V20FileReader.openStandalone(new LocalFileSource(p))
    try assert(new ColumnMetadataReader(new LocalFileSource(p), r.footer).column(1).pages.size == 4)
    finally r.close()
    // empty batches and no rows at all
    val (e, wf) = withVectors(vectors(s, richColumns(0, 1))) { vs =>
      writeIpc(pylanceDir.resolve("empty.arrow"), vs)
      val written = writeFile("empty", s, Seq(vs, vs), dir = pylanceDir)
      pylanceReads(pylanceDir, "empty")
      written
    }
    assert(wf.numRows == 0)
    val (_, got) = readBack(e)
    withVectors(got)(g => assert(g.forall(_.getValueCount == 0)))
  }

  test("a null struct value is refused with the column named") {
    val s = LanceSchema.fromArrow(new Schema(java.util.Arrays.asList(
      f("id", int(32)), list("l", f("item", ArrowType.Struct.INSTANCE, f("x", int(32)))))))
    withVectors(vectors(s, Seq(IndexedSeq(1, 2), IndexedSeq(Seq(Map("x" -> 1)), Seq(null))))) { vs =>
      val p = tmp.resolve("nullstruct.lance")
      val w = new V20FileWriter(Files.newOutputStream(p), p.toString, s)
      try {
        val e = intercept[LanceFormatException](w.write(vs))
        assert(e.getMessage.contains("'l.item'") && e.getMessage.contains("null struct"), e.getMessage)
      } finally w.close()
    }
  }

  test("vectors that do not match the schema are refused") {
    val s = LanceSchema.fromArrow(new Schema(java.util.Arrays.asList(f("a", int(32)))))
    val other = LanceSchema.fromArrow(new Schema(java.util.Arrays.asList(f("a", int(64)))))
    withVectors(vectors(other, Seq(IndexedSeq(1L)))) { vs =>
      val p = tmp.resolve("mismatch.lance")
      val w = new V20FileWriter(Files.newOutputStream(p), p.toString, s)
      try assert(intercept[LanceFormatException](w.write(vs)).getMessage.contains("'a'"))
      finally w.close()
    }
  }

  // ------------------------------------------------------------ statistics

  private def statsOf(p: Path): PageStatistics = {
    val src = new LocalFileSource(p)
    try StatsStore.read(src, allocator).getOrElse(fail("no statistics"))
    finally src.close()
  }

  test("statistics: floats ignore NaN, zeros are signed, all-null pages use -Inf/+Inf") {
    val s = LanceSchema.fromArrow(new Schema(java.util.Arrays.asList(
      f("d", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
      f("h", new ArrowType.FloatingPoint(FloatingPointPrecision.HALF)),
      f("fl", new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)))))
    val d = IndexedSeq[Any](Double.NaN, 0.0, 1.5, null, /**/ null, null, null, null, /**/
      -0.0, Double.PositiveInfinity, Double.NaN, 0.0, /**/ Double.NaN, Double.NaN, null, Double.NaN, /**/
      -3.0, -0.0, 0.0, -1.0)
    val h = d.map { case x: Double => x.toFloat; case null => null }
    val (p, _) = withVectors(vectors(s, Seq(d, h, h)))(vs => writeFile("float_stats", s, Seq(vs), maxRows = 4))
    val st = statsOf(p)
    def bits(x: Option[Any]): Any = x.map { case v: java.lang.Double => java.lang.Double.doubleToRawLongBits(v) }
    def dd(v: Double) = Some(java.lang.Double.doubleToRawLongBits(v))
    Seq(0, 1, 2).foreach { fid =>
      val pages = st.forField(fid)
      assert(pages.map(_.firstRow) == Seq(0, 4, 8, 12, 16))
      assert(pages.map(_.numRows) == Seq(4, 4, 4, 4, 4))
      assert(pages.map(_.nullCount) == Seq(1, 4, 0, 1, 0))
      assert(pages.map(p => bits(p.min)) == Seq(dd(-0.0), dd(Double.NegativeInfinity), dd(-0.0),
        dd(Double.NegativeInfinity), dd(-3.0)), s"field $fid")
      assert(pages.map(p => bits(p.max)) == Seq(dd(1.5), dd(Double.PositiveInfinity), dd(Double.PositiveInfinity),
        dd(Double.PositiveInfinity), dd(0.0)), s"field $fid")
      assert(pages.map(_.columnIndex) == Seq.fill(5)(fid) && pages.map(_.pageIndex) == (0 until 5))
    }
  }

  test("statistics: integers, unsigned, dates, timestamps, decimals, booleans; all-null pages use the type's range") {
    val s = LanceSchema.fromArrow(new Schema(java.util.Arrays.asList(
      f("i8", int(8)), f("u8", int(8, false)), f("u64", int(64, false)), f("i32", int(32)),
      f("d", new ArrowType.Date(DateUnit.DAY)), f("ts", new ArrowType.Timestamp(TimeUnit.MICROSECOND, "UTC")),
      f("dec", new ArrowType.Decimal(5, 2, 128)), f("b", ArrowType.Bool.INSTANCE),
      f("st", ArrowType.Struct.INSTANCE, f("x", int(16))), list("l", f("item", int(32))))))
    val cols = Seq(
      IndexedSeq[Any](-5, 7, null, null, null),
      IndexedSeq[Any](200, 3, null, null, null),
      IndexedSeq[Any](-1L, 5L, null, null, null), // -1 is 2^64-1 unsigned
      IndexedSeq[Any](null, 42, null, null, null),
      IndexedSeq[Any](-10, 20, null, null, null),
      IndexedSeq[Any](100L, -100L, null, null, null),
      IndexedSeq[Any](new BigDecimal("-1.50"), new BigDecimal("2.25"), null, null, null),
      IndexedSeq[Any](true, true, null, null, null),
      IndexedSeq[Any](Map("x" -> 3.toShort), Map("x" -> (-4).toShort), Map("x" -> null), Map("x" -> null), Map("x" -> null)),
      IndexedSeq[Any](Seq(1), Seq(2), null, null, null))
    val (p, _) = withVectors(vectors(s, cols))(vs => writeFile("int_stats", s, Seq(vs), maxRows = 2))
    val st = statsOf(p)
    def mm(name: String): Seq[(Any, Any, Long)] = {
      val id = s.allFields.find(_.name == name).get.id
      st.forField(id).map(p => (p.min.orNull, p.max.orNull, p.nullCount))
    }
    assert(mm("i8") == Seq((-5L, 7L, 0L), (Byte.MinValue.toLong, Byte.MaxValue.toLong, 2L), (-128L, 127L, 1L)))
    assert(mm("u8") == Seq((3L, 200L, 0L), (0L, 255L, 2L), (0L, 255L, 1L)))
    assert(mm("u64") == Seq((5L, -1L, 0L), (0L, -1L, 2L), (0L, -1L, 1L)))
    assert(mm("i32") == Seq((42L, 42L, 1L), (Int.MinValue.toLong, Int.MaxValue.toLong, 2L), (Int.MinValue.toLong, Int.MaxValue.toLong, 1L)))
    assert(mm("d").head == ((-10L, 20L, 0L)))
    assert(mm("ts").head == ((-100L, 100L, 0L)) && mm("ts")(1) == ((Long.MinValue, Long.MaxValue, 2L)))
    assert(mm("dec").head == ((new BigDecimal("-1.50"), new BigDecimal("2.25"), 0L)))
    assert(mm("dec")(1) == ((new BigDecimal("-999.99"), new BigDecimal("999.99"), 2L)))
    assert(mm("b") == Seq((true, true, 0L), (false, true, 2L), (false, true, 1L)))
    assert(mm("x") == Seq((-4L, 3L, 0L), (-32768L, 32767L, 2L), (-32768L, 32767L, 1L)))
    // no statistics for structs, lists or list items
    val ids = st.pages.map(_.fieldId).toSet
    Seq("st", "l", "item").foreach(n => assert(!ids.contains(s.allFields.find(_.name == n).get.id), n))
  }

  test("statistics: strings and binaries, truncated to 64 bytes") {
    val s = LanceSchema.fromArrow(new Schema(java.util.Arrays.asList(
      f("s", ArrowType.Utf8.INSTANCE), f("bin", ArrowType.LargeBinary.INSTANCE),
      f("fsb", new ArrowType.FixedSizeBinary(2)))))
    val longA = "a" * 70
    val longE = "\u00e9" * 40 // 80 bytes
    val maxChar = "\udbff\udfff" // U+10FFFF, 4 bytes
    val zff = "z" + "\uffff" * 30 // 91 bytes
    val ff = Array.fill[Byte](70)(-1)
    def b(xs: Int*): Array[Byte] = xs.map(_.toByte).toArray
    val cols = Seq(
      IndexedSeq[Any]("b", "", longA, null, null, null, longE, zff, maxChar * 20, "x", "y", zff),
      IndexedSeq[Any](b(1, 2), ff, ff, null, null, null, Array.fill[Byte](70)(7), b(0xff, 0), b(), b(0),
        b(0), b(0) ++ ff),
      IndexedSeq[Any](b(1, 2), b(0xff, 0), null, b(0, 9), null, null, null, null, null, b(5, 5), b(5, 5), b(5, 5)))
    val (p, _) = withVectors(vectors(s, cols))(vs => writeFile("string_stats", s, Seq(vs), maxRows = 2))
    val st = statsOf(p)
    val sp = st.forField(0)
    assert(sp.map(_.nullCount) == Seq(0, 1, 2, 0, 0, 0))
    assert(sp.map(_.min.orNull) == Seq("", "a" * 64, null, "z" + "\uffff" * 21, "x", "y"))
    // the max of a long value: its 64-byte prefix with the last character
    // that can be incremented incremented (none for U+10FFFF; a 4-byte
    // U+10000 after U+FFFF must still fit 64 bytes)
    assert(sp.map(_.max.orNull) == Seq("b", "a" * 63 + "b", null, "\u00e9" * 31 + "\u00ea", null,
      "z" + "\uffff" * 19 + "\ud800\udc00"))
    sp.flatMap(p => p.min.toSeq ++ p.max.toSeq).foreach(v => assert(v.toString.getBytes(UTF_8).length <= 64))
    def hex(o: Option[Any]): String = o.map(_.asInstanceOf[Array[Byte]].map(x => f"${x & 0xff}%02x").mkString).orNull
    val bp = st.forField(1)
    assert(bp.map(_.nullCount) == Seq(0, 1, 2, 0, 0, 0))
    assert(bp.map(p => hex(p.min)) == Seq("0102", "ff" * 64, null, "07" * 64, "", "00"))
    assert(bp.map(p => hex(p.max)) == Seq(null, null, null, "ff00", "00", "01"))
    val fp = st.forField(2)
    assert(fp.map(p => hex(p.min)) == Seq("0102", "0009", null, null, "0505", "0505"))
    assert(fp.map(p => hex(p.max)) == Seq("ff00", "0009", null, null, "0505", "0505"))
  }

  test("statistics can be turned off; pylance reads files with and without them") {
    val s = LanceSchema.fromArrow(richArrow)
    val cols = richColumns(1000, 9)
    withVectors(vectors(s, cols)) { vs =>
      val (p, _) = writeFile("no_stats", s, Seq(vs), maxRows = 100, dir = pylanceDir, statistics = false)
      writeIpc(pylanceDir.resolve("no_stats.arrow"), vs)
      val src = new LocalFileSource(p)
      try assert(StatsStore.read(src, allocator).isEmpty) finally src.close()
      val (p2, _) = writeFile("with_stats", s, Seq(vs), maxRows = 100, dir = pylanceDir)
      writeIpc(pylanceDir.resolve("with_stats.arrow"), vs)
      pylanceReads(pylanceDir, "no_stats")
      pylanceReads(pylanceDir, "with_stats")
      val st = statsOf(p2)
      assert(st.forField(s.field("i64").get.id).size == 10)
    }
  }
}

object V20FileWriterSuite {

  lazy val repoRoot: Path = {
    var d = Path.of("").toAbsolutePath
    while (d != null && !(Files.exists(d.resolve("build.sbt")) && Files.isDirectory(d.resolve("protos")))) d = d.getParent
    if (d == null) throw new IllegalStateException("repository root (build.sbt + protos/) not found")
    d
  }

  /** Fills a freshly created vector with values: null, Boolean, numbers,
    * String, Array[Byte], BigDecimal, Seq (lists), Map (structs). */
  def fill(v: FieldVector, vals: IndexedSeq[Any]): Unit = {
    val n = vals.size
    v.setInitialCapacity(n)
    v.allocateNew()
    def num(x: Any): Long = x match {
      case b: Byte => b.toLong; case s: Short => s.toLong; case i: Int => i.toLong; case l: Long => l
    }
    v match {
      case l: ListVector =>
        val items = vals.flatMap { case null => Nil; case s: Seq[_] => s }
        fill(l.getDataVector, items)
        var off = 0
        vals.zipWithIndex.foreach {
          case (null, i) => l.getOffsetBuffer.setInt(4L * (i + 1), off) // validity bit stays 0
          case (s: Seq[_], i) =>
            l.getOffsetBuffer.setInt(4L * i, off); off += s.size; l.getOffsetBuffer.setInt(4L * (i + 1), off)
            org.apache.arrow.vector.BitVectorHelper.setBit(l.getValidityBuffer, i)
          case (x, _) => throw new MatchError(x)
        }
        l.setLastSet(n - 1)
        l.setValueCount(n)
      case l: LargeListVector =>
        val items = vals.flatMap { case null => Nil; case s: Seq[_] => s }
        fill(l.getDataVector, items)
        var off = 0L
        vals.zipWithIndex.foreach {
          case (null, i) => l.getOffsetBuffer.setLong(8L * (i + 1), off)
          case (s: Seq[_], i) =>
            l.getOffsetBuffer.setLong(8L * i, off); off += s.size; l.getOffsetBuffer.setLong(8L * (i + 1), off)
            org.apache.arrow.vector.BitVectorHelper.setBit(l.getValidityBuffer, i)
          case (x, _) => throw new MatchError(x)
        }
        l.setLastSet(n - 1)
        l.setValueCount(n)
      case f: FixedSizeListVector =>
        val dim = f.getListSize
        fill(f.getDataVector, vals.flatMap { case null => Seq.fill(dim)(null); case s: Seq[_] => s })
        vals.zipWithIndex.foreach { case (x, i) => if (x == null) f.setNull(i) else f.setNotNull(i) }
        f.setValueCount(n)
      case s: StructVector =>
        s.getChildrenFromFields.asScala.foreach { c =>
          fill(c, vals.map { case null => null; case m: Map[_, _] => m.asInstanceOf[Map[String, Any]].getOrElse(c.getName, null) })
        }
        vals.zipWithIndex.foreach { case (x, i) => if (x == null) s.setNull(i) else s.setIndexDefined(i) }
        s.setValueCount(n)
      case _ =>
        vals.zipWithIndex.foreach {
          case (null, i) => v.asInstanceOf[BaseValueVector] match {
            case fw: BaseFixedWidthVector => fw.setNull(i)
            case vw: BaseVariableWidthVector => vw.setNull(i)
            case vw: BaseLargeVariableWidthVector => vw.setNull(i)
          }
          case (x, i) => (v, x) match {
            case (b: BitVector, x: Boolean) => b.setSafe(i, if (x) 1 else 0)
            case (t: TinyIntVector, x) => t.setSafe(i, num(x).toByte)
            case (t: SmallIntVector, x) => t.setSafe(i, num(x).toShort)
            case (t: IntVector, x) => t.setSafe(i, num(x).toInt)
            case (t: BigIntVector, x) => t.setSafe(i, num(x))
            case (t: UInt1Vector, x) => t.setSafe(i, num(x).toInt)
            case (t: UInt2Vector, x) => t.setSafe(i, num(x).toInt)
            case (t: UInt4Vector, x) => t.setSafe(i, num(x).toInt)
            case (t: UInt8Vector, x) => t.setSafe(i, num(x))
            case (t: Float2Vector, x: Float) => t.setSafeWithPossibleTruncate(i, x)
            case (t: Float4Vector, x: Float) => t.setSafe(i, x)
            case (t: Float8Vector, x: Double) => t.setSafe(i, x)
            case (t: DateDayVector, x) => t.setSafe(i, num(x).toInt)
            case (t: DateMilliVector, x) => t.setSafe(i, num(x))
            case (t: TimeSecVector, x) => t.setSafe(i, num(x).toInt)
            case (t: TimeMilliVector, x) => t.setSafe(i, num(x).toInt)
            case (t: TimeMicroVector, x) => t.setSafe(i, num(x))
            case (t: TimeNanoVector, x) => t.setSafe(i, num(x))
            case (t: TimeStampVector, x) => t.setSafe(i, num(x))
            case (t: DecimalVector, x: BigDecimal) => t.setSafe(i, x)
            case (t: Decimal256Vector, x: BigDecimal) => t.setSafe(i, x)
            case (t: FixedSizeBinaryVector, x: Array[Byte]) => t.setSafe(i, x)
            case (t: BaseVariableWidthVector, x: String) => t.setSafe(i, x.getBytes(UTF_8))
            case (t: BaseVariableWidthVector, x: Array[Byte]) => t.setSafe(i, x)
            case (t: BaseLargeVariableWidthVector, x: String) => t.setSafe(i, x.getBytes(UTF_8))
            case (t: BaseLargeVariableWidthVector, x: Array[Byte]) => t.setSafe(i, x)
            case (t, x) => throw new IllegalArgumentException(s"cannot put $x into ${t.getClass.getSimpleName}")
          }
        }
        v.setValueCount(n)
    }
  }
}
