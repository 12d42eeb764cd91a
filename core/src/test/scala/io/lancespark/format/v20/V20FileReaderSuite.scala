package io.lancespark.format.v20

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.FieldVector
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.{LanceField, LanceFormatException, LanceSchema}
import io.lancespark.format.file.{ColumnMetadataReader, Footer}
import io.lancespark.format.input.LocalFileSource
import io.lancespark.proto.table.Manifest

class V20FileReaderSuite extends AnyFunSuite with BeforeAndAfterAll {
  import ArrowCompare._

  private val allocator = new RootAllocator()

  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0, s"leaked ${allocator.getAllocatedMemory} bytes")
    finally allocator.close()
  }

  private def v2File(name: String): Path = {
    val p = fixtures.resolve("v2_0").resolve(s"$name.lance")
    if (Files.exists(p)) p else fixtures.resolve("v2_0_extra").resolve(s"$name.lance")
  }
  private def v2Expected(name: String): Path =
    v2File(name).resolveSibling(s"$name.arrow")

  private def withReader[T](p: Path)(f: V20FileReader => T): T = {
    val r = V20FileReader.openStandalone(new LocalFileSource(p))
    try f(r) finally r.close()
  }

  private def withVectors[T](vs: Seq[FieldVector])(f: Seq[FieldVector] => T): T =
    try f(vs) finally vs.foreach(_.close())

  /** Reads `fields` rows [from, until) and compares with expected rows. */
  private def check(r: V20FileReader, fields: Seq[LanceField], from: Long, until: Long,
                    expected: Expected): Unit =
    withVectors(r.read(fields, from, until, allocator)) { vs =>
      assert(vs.size == fields.size)
      vs.zip(fields).foreach { case (v, f) =>
        assert(v.getValueCount == until - from, s"column ${f.name}")
        val exp = expected.column(f.name).slice(from.toInt, until.toInt)
        val got = values(v)
        // a pruned struct: compare only the kept children
        val expPruned = if (f.isStruct) exp.map(pruneTo(f, _)) else exp
        firstMismatch(f.name, got, expPruned).foreach(m => fail(s"${r.path} rows [$from, $until): $m"))
      }
    }

  private def pruneTo(f: LanceField, v: Any): Any = v match {
    case m: Map[_, _] if f.isStruct =>
      val mm = m.asInstanceOf[Map[Any, Any]]
      f.children.flatMap(c => mm.get(c.name).map(x => c.name -> pruneTo(c, x))).toMap
    case other => other
  }

  private def namesIn(dir: String): Seq[String] =
    Files.list(fixtures.resolve(dir)).iterator.asScala.map(_.getFileName.toString)
      .filter(_.endsWith(".lance")).map(_.stripSuffix(".lance")).toSeq.sorted
  private val v2Names: Seq[String] = namesIn("v2_0")
  private val extraNames: Seq[String] = namesIn("v2_0_extra")

  test("fixtures exist") {
    assert(v2Names.contains("rich_small_pages") && v2Names.contains("long_lists"), v2Names)
    assert(extraNames.contains("null_pages") && extraNames.contains("dict_strings"), extraNames)
  }

  (v2Names ++ extraNames).foreach { name =>
    test(s"full read of ${v2File(name).getParent.getFileName}/$name equals pylance") {
      val expected = readExpected(v2Expected(name), allocator)
      withReader(v2File(name)) { r =>
        assert(r.footer.versionName == "2.0")
        assert(r.numRows == expected.numRows)
        assert(r.fileSchema.fields.map(_.name) == expected.names)
        withVectors(r.read(r.fileSchema.fields, 0, r.numRows, allocator)) { vs =>
          vs.zip(expected.names.indices).foreach { case (v, c) =>
            assert(v.getField.getName == expected.names(c))
            assert(v.getField.getType.toString == expected.types(c), s"type of ${expected.names(c)}")
            firstMismatch(expected.names(c), values(v), expected.columns(c)).foreach(m => fail(s"$name: $m"))
          }
        }
      }
    }
  }

  private val ranges = Seq((1234L, 2345L), (0L, 1L), (1L, 2L), (999L, 1000L), (2000L, 3000L), (17L, 2999L), (500L, 500L))

  (Seq("rich_small_pages", "long_lists") ++ extraNames).foreach { name =>
    test(s"sub-ranges of $name crossing page boundaries") {
      val expected = readExpected(v2Expected(name), allocator)
      withReader(v2File(name)) { r =>
        ranges.filter(_._2 <= r.numRows).foreach { case (a, b) => check(r, r.fileSchema.fields, a, b, expected) }
        // many small windows
        (0L until r.numRows by 97L).foreach(a => check(r, r.fileSchema.fields, a, math.min(r.numRows, a + 13), expected))
      }
    }
  }

  (v2Names ++ extraNames).foreach { name =>
    test(s"$name read batch by batch, each batch's reads issued during the previous one, equals pylance") {
      val expected = readExpected(v2Expected(name), allocator)
      withReader(v2File(name)) { r =>
        val starts = (0L until r.numRows by 333L).toVector
        def until(a: Long): Long = math.min(r.numRows, a + 333)
        starts.zipWithIndex.foreach { case (a, k) =>
          val next = starts.lift(k + 1).map(b => (b, until(b)))
          withVectors(r.read(r.fileSchema.fields, a, until(a), allocator, next)) { vs =>
            vs.zip(r.fileSchema.fields).foreach { case (v, f) =>
              firstMismatch(f.name, values(v), expected.column(f.name).slice(a.toInt, until(a).toInt))
                .foreach(m => fail(s"$name rows [$a, ${until(a)}): $m"))
            }
          }
        }
      }
    }
  }

  test("projections: one column, a struct pruned to one child, reordered columns") {
    val expected = readExpected(v2Expected("rich_small_pages"), allocator)
    withReader(v2File("rich_small_pages")) { r =>
      val s = r.fileSchema
      check(r, Seq(s.field("s").get), 0, r.numRows, expected)
      check(r, Seq(s.field("lst_st").get), 1234, 2345, expected)
      val st = s.field("st").get
      check(r, Seq(st.withChildren(st.children.filter(_.name == "b"))), 100, 2900, expected)
      val nested = s.field("st_nested").get
      check(r, Seq(nested.withChildren(nested.children.filter(_.name == "tags"))), 1234, 2345, expected)
      check(r, Seq(s.field("vec").get, s.field("id").get, s.field("s_low").get), 7, 2999, expected)
      check(r, Seq.empty, 0, 10, expected)
    }
  }

  test("the fixtures exercise the 2.0 encodings pylance writes") {
    val seen = scala.collection.mutable.Set.empty[String]
    def walk(e: io.lancespark.proto.encodings.ArrayEncoding): Unit = {
      import io.lancespark.proto.encodings.ArrayEncoding.ArrayEncodingCase._
      val c = e.getArrayEncodingCase
      c match {
        case NULLABLE =>
          val n = e.getNullable
          seen += s"nullable.${n.getNullabilityCase.name.toLowerCase}"
          if (n.hasNoNulls) walk(n.getNoNulls.getValues)
          if (n.hasSomeNulls) { walk(n.getSomeNulls.getValidity); walk(n.getSomeNulls.getValues) }
        case FLAT => seen += s"flat${e.getFlat.getBitsPerValue}"
        case BINARY => seen += "binary"; walk(e.getBinary.getIndices); walk(e.getBinary.getBytes)
        case DICTIONARY => seen += "dictionary"; walk(e.getDictionary.getIndices); walk(e.getDictionary.getItems)
        case FIXED_SIZE_LIST => seen += "fixed_size_list"; walk(e.getFixedSizeList.getItems)
        case LIST => seen += "list"; walk(e.getList.getOffsets)
        case other => seen += other.name.toLowerCase
      }
    }
    Seq("rich_small_pages", "all_null").foreach { name =>
      val src = new LocalFileSource(v2File(name))
      try {
        val footer = Footer.read(src)
        val cm = new ColumnMetadataReader(src, footer)
        (0 until footer.numColumns).foreach(i => cm.column(i).pages.foreach(p => walk(io.lancespark.proto.encodings.ArrayEncoding.parseFrom(p.encoding))))
        if (name == "rich_small_pages")
          assert(cm.column(0).pages.size > 1, "rich_small_pages should have several pages per column")
      } finally src.close()
    }
    info(seen.toSeq.sorted.mkString(", "))
    Seq("nullable.no_nulls", "nullable.some_nulls", "nullable.all_nulls", "flat1", "flat8", "flat16",
        "flat64", "flat128", "flat256", "binary", "dictionary", "fixed_size_list", "list", "struct")
      .foreach(e => assert(seen.contains(e), s"$e not seen in $seen"))
  }

  /** The newest manifest of a dataset. */
  private def readManifest(ds: Path): Manifest = {
    val m = Files.list(ds.resolve("_versions")).iterator.asScala
      .filter(_.toString.endsWith(".manifest")).toSeq.head
    val bytes = Files.readAllBytes(m)
    val tail = ByteBuffer.wrap(bytes, bytes.length - 16, 16).order(ByteOrder.LITTLE_ENDIAN)
    val pos = tail.getLong().toInt
    assert(new String(bytes, bytes.length - 4, 4, "US-ASCII") == "LANC")
    val len = ByteBuffer.wrap(bytes, pos, 4).order(ByteOrder.LITTLE_ENDIAN).getInt
    Manifest.parseFrom(ByteBuffer.wrap(bytes, pos + 4, len))
  }

  test("datasets/rich_2_0: every data file via the manifest's column indices equals pylance") {
    val ds = fixtures.resolve("datasets").resolve("rich_2_0")
    val manifest = readManifest(ds)
    val schema = LanceSchema.fromProto(manifest.getFieldsList.asScala.toSeq,
      manifest.getSchemaMetadataMap.asScala.map { case (k, v) => k -> v.toByteArray }.toMap, ds.toString)
    assert(manifest.getFragmentsCount == 3)
    manifest.getFragmentsList.asScala.foreach { frag =>
      val expected = readExpected(ds.resolveSibling("rich_2_0.expected").resolve(s"frag-${frag.getId}.arrow"), allocator)
      assert(frag.getFilesCount == 1)
      val df = frag.getFiles(0)
      val mapping = df.getFieldsList.asScala.map(_.toInt).zip(df.getColumnIndicesList.asScala.map(_.toInt))
        .filter(_._2 >= 0).toMap
      val src = new LocalFileSource(ds.resolve("data").resolve(df.getPath))
      val r = V20FileReader.open(src, schema, mapping)
      try {
        assert(r.numRows == expected.numRows)
        check(r, schema.fields, 0, r.numRows, expected)
        check(r, schema.fields, r.numRows / 3, r.numRows / 2, expected)
      } finally r.close()
    }
  }

  private def damaged(name: String)(edit: Array[Byte] => Array[Byte]): Path = {
    val dir = Files.createTempDirectory("v2-bad")
    val p = dir.resolve(s"$name-damaged.lance")
    Files.write(p, edit(Files.readAllBytes(v2File("rich_one_page"))))
    p
  }

  private def expectError(p: Path)(body: V20FileReader => Unit): LanceFormatException = {
    val e = intercept[LanceFormatException] {
      val r = V20FileReader.openStandalone(new LocalFileSource(p))
      try body(r) finally r.close()
    }
    assert(e.getMessage.contains(p.toString), e.getMessage)
    e
  }

  private def readAll(r: V20FileReader): Unit =
    r.read(r.fileSchema.fields, 0, r.numRows, allocator).foreach(_.close())

  test("a file truncated by 10 bytes is refused, naming the path") {
    expectError(damaged("truncated")(b => b.take(b.length - 10)))(readAll)
  }

  test("a file with a wrong magic is refused, naming the path") {
    val e = expectError(damaged("magic") { b => val c = b.clone(); c(c.length - 1) = 'X'.toByte; c })(readAll)
    assert(e.getMessage.contains("magic"))
  }

  test("a footer with out-of-range offsets is refused, naming the path") {
    expectError(damaged("offsets") { b =>
      val c = b.clone()
      ByteBuffer.wrap(c).order(ByteOrder.LITTLE_ENDIAN).putLong(c.length - 40 + 8, Long.MaxValue / 2)
      c
    })(readAll)
  }

  test("a file truncated in the middle of its pages is refused, naming the path") {
    // keep the footer and metadata but zero the data region's start: still no crash
    val p = damaged("tiny")(b => b.take(20))
    expectError(p)(readAll)
  }

  test("schema/column mismatch and bad ranges are refused, naming the path and field") {
    val p = v2File("rich_one_page")
    withReader(p) { r =>
      val f = r.fileSchema.field("id").get
      val e1 = intercept[LanceFormatException](r.read(Seq(f.copy(id = 999)), 0, 10, allocator))
      assert(e1.getMessage.contains(p.toString) && e1.getMessage.contains("999"))
      val e2 = intercept[LanceFormatException](r.read(Seq(f), 0, r.numRows + 1, allocator))
      assert(e2.getMessage.contains(p.toString))
    }
    // the manifest maps a field to the wrong column: an int column read as a string
    val src = new LocalFileSource(p)
    val schema0 = V20FileReader.openStandalone(new LocalFileSource(p))
    val fs = try schema0.fileSchema finally schema0.close()
    val sField = fs.field("s").get
    val idCol = 0
    val r = V20FileReader.open(src, fs, Map(sField.id -> idCol))
    try {
      val e = intercept[LanceFormatException](r.read(Seq(sField), 0, 10, allocator))
      assert(e.getMessage.contains(p.toString) && e.getMessage.contains("'s'"), e.getMessage)
    } finally r.close()
  }

  test("a small read touches only the footer, one column's metadata and its overlapping pages") {
    val p = v2File("rich_small_pages")
    val src = new CountingSource(p)
    val r = V20FileReader.openStandalone(src)
    try {
      val f = r.fileSchema.field("s").get
      r.read(Seq(f), 1500, 1510, allocator).foreach(_.close())
      val fileSize = src.size
      info(s"reads: ${src.reads}")
      assert(src.bytesRead < fileSize / 50, s"read ${src.bytesRead} of $fileSize bytes: ${src.reads}")
      val pageBytes = {
        val other = new LocalFileSource(p)
        try new ColumnMetadataReader(other, r.footer).column(r.fieldColumns(f.id))
          .pagesOverlapping(1500, 1510).flatMap(_.buffers).map(_.size).sum
        finally other.close()
      }
      assert(src.bytesRead <= pageBytes + 64 * 1024, s"${src.bytesRead} bytes read, pages are $pageBytes")
      // a list column reads its overlapping offsets pages and the item pages they reference
      val before = src.bytesRead
      r.read(Seq(r.fileSchema.field("lst_lst").get), 2000, 2003, allocator).foreach(_.close())
      info(s"list reads: ${src.reads.drop(7)}")
      assert(src.bytesRead - before < fileSize / 50)
    } finally r.close()
  }

  test("random corruption and truncation give a LanceFormatException or a result, never another failure") {
    val original = Files.readAllBytes(v2File("rich_one_page"))
    val dir = Files.createTempDirectory("v2-fuzz")
    val tailStart = {
      val src = new LocalFileSource(v2File("rich_one_page"))
      try Footer.read(src).columnMetadataStart finally src.close()
    }
    val rng = new scala.util.Random(42)
    var refused = 0
    (0 until 300).foreach { i =>
      val bytes = original.clone()
      val damaged =
        if (i % 10 == 0) bytes.take(rng.nextInt(bytes.length))
        else {
          (0 until 1 + rng.nextInt(4)).foreach { _ =>
            // mostly the metadata (protobufs, offset tables), sometimes anywhere
            val at = if (rng.nextInt(4) > 0) tailStart + rng.self.nextLong(original.length - tailStart) else rng.self.nextLong(original.length)
            bytes(at.toInt) = rng.nextInt(256).toByte
          }
          bytes
        }
      val p = dir.resolve(s"fuzz-$i.lance")
      Files.write(p, damaged)
      try {
        val r = V20FileReader.openStandalone(new LocalFileSource(p))
        try r.read(r.fileSchema.fields, 0, r.numRows, allocator).foreach(_.close())
        finally r.close()
      } catch {
        case e: LanceFormatException =>
          refused += 1
          assert(e.getMessage.contains(p.toString), s"case $i: ${e.getMessage}")
        case e: Throwable => fail(s"case $i: ${e.getClass.getName} instead of LanceFormatException", e)
      }
      Files.delete(p)
    }
    assert(refused > 30)
    assert(allocator.getAllocatedMemory == 0)
  }

  test("no Arrow memory is leaked") {
    assert(allocator.getAllocatedMemory == 0)
  }
}
