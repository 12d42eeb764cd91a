package io.lancespark.table.filter

import java.nio.file.{Files, Path, Paths}

import scala.jdk.CollectionConverters._
import scala.util.Random

import org.apache.arrow.memory.RootAllocator
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.format.input.LocalFileSource
import io.lancespark.format.v01.{LegacyFileReader, LegacyFixtures, LegacyStatistics}
import io.lancespark.table.filter.Filter._

/** The statistics pylance writes into 0.1 (legacy) files: read them, check
  * every page's bounds hold for its rows in the Spark-visible domain, and
  * that pruning with them is sound (against the row evaluator). Needs
  * pylance: LANCE_PYTHON or the repository's .venv (make venv); canceled without. */
class LegacyStatisticsSuite extends AnyFunSuite with BeforeAndAfterAll {

  private val allocator = new RootAllocator()
  private val tmp: Path = Files.createTempDirectory("legacystats")

  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0, s"leaked ${allocator.getAllocatedMemory} bytes")
    finally {
      allocator.close()
      Files.walk(tmp).sorted(java.util.Comparator.reverseOrder[Path]()).forEach(p => Files.deleteIfExists(p))
    }
  }

  private lazy val python: Option[String] =
    (sys.env.get("LANCE_PYTHON").toSeq :+ io.lancespark.format.v20.V20FileWriterSuite.repoRoot.resolve(".venv/bin/python").toString)
      .find(p => Files.isExecutable(Paths.get(p)))

  private val script =
    """import sys, random, decimal, math
      |import pyarrow as pa, lance
      |rnd = random.Random(7)
      |n = 600
      |def maybe(v, p=0.2): return None if rnd.random() < p else v
      |def block(i): return (i // 50) % 4   # 0: no nulls, 1: all null, 2: narrow, no nulls, 3: with nulls
      |def col(gen):
      |    out = []
      |    for i in range(n):
      |        b = block(i)
      |        out.append(None if b == 1 else maybe(gen(b)) if b == 3 else gen(b))
      |    return out
      |fl = [0.0, -0.0, float('nan'), float('inf'), float('-inf'), 1.5, -2.5, 3.0]
      |strs = ["", "a", "ab", "é", "日本", "a" * 70, "a" * 70 + "b", "\U0010ffff" * 20, "zz", "\U0001F600"]
      |bins = [b"", b"\x00", b"\xff" * 70, b"\x01\x02", b"\x80"]
      |t = pa.table({
      |  "i": pa.array(col(lambda b: rnd.randint(-5, 5) if b == 2 else rnd.choice([-2**63, 2**63 - 1, 0, 7, -7])), pa.int64()),
      |  "i8": pa.array(col(lambda b: rnd.randint(-128, 127)), pa.int8()),
      |  "u": pa.array(col(lambda b: rnd.choice([0, 1, 2**64 - 1, 2**63])), pa.uint64()),
      |  "d": pa.array(col(lambda b: rnd.choice(fl[:3]) if b == 2 else rnd.choice(fl)), pa.float64()),
      |  "f": pa.array(col(lambda b: rnd.choice(fl)), pa.float32()),
      |  "s": pa.array(col(lambda b: rnd.choice(strs[5:7]) if b == 2 else rnd.choice(strs[1:]) if b == 0 else rnd.choice(strs)), pa.string()),
      |  "ls": pa.array(col(lambda b: rnd.choice(strs)), pa.large_string()),
      |  "bin": pa.array(col(lambda b: rnd.choice(bins)), pa.binary()),
      |  "dt": pa.array(col(lambda b: rnd.randint(-3, 3)), pa.date32()),
      |  "dm": pa.array(col(lambda b: rnd.randint(-3, 3) * 43200000 - 1), pa.date64()),
      |  "dec": pa.array(col(lambda b: decimal.Decimal(rnd.randint(-999, 999)) / 100), pa.decimal128(10, 2)),
      |  "bo": pa.array(col(lambda b: rnd.random() < 0.5), pa.bool_()),
      |  "st": pa.array([{"x": maybe(rnd.randint(0, 9))} for i in range(n)], pa.struct([("x", pa.int32())])),
      |})
      |lance.write_dataset(t, sys.argv[1], data_storage_version="legacy", max_rows_per_group=37)
      |""".stripMargin

  private lazy val dataset: Path = {
    val py = python.getOrElse(cancel("pylance not available (set LANCE_PYTHON)"))
    val s = tmp.resolve("gen.py")
    Files.writeString(s, script)
    val ds = tmp.resolve("legacy_ds")
    val p = new ProcessBuilder(py, s.toString, ds.toString).redirectErrorStream(true).start()
    val out = new String(p.getInputStream.readAllBytes())
    assert(p.waitFor() == 0, out)
    ds
  }

  test("pylance 0.1 statistics: bounds hold, pruning is sound") {
    val m = LegacyFixtures.manifest(dataset)
    val schema = LegacyFixtures.schema(m)
    val rnd = new Random(11)
    var pruned = 0L; var proven = 0L; var checked = 0
    m.getFragmentsList.asScala.foreach { frag =>
      val df = frag.getFiles(0)
      val path = dataset.resolve("data").resolve(df.getPath)
      val src = new LocalFileSource(path)
      val reader = LegacyFileReader.open(src, schema, df.getFieldsList.asScala.map(_.intValue).toSeq)
      try {
        val st = LegacyStatistics.read(src, allocator).getOrElse(fail(s"$path has no statistics"))
        val n = reader.numRows.toInt
        val vectors = reader.read(schema.fields, 0, n, allocator)
        try {
          val leaves: Seq[(Column, io.lancespark.schema.LanceField)] = schema.fields.flatMap { f =>
            if (f.isStruct) f.children.map(c => Vector(f.name, c.name) -> c) else Seq(Vector(f.name) -> f)
          }
          val stats: Map[Column, ColumnStats] = leaves.flatMap { case (c, f) =>
            val pages = st.forField(f.id)
            if (pages.isEmpty) None else Some(c -> (ColumnStats.Pages(f.arrowType, pages): ColumnStats))
          }.toMap
          info(s"${path.getFileName}: statistics for ${stats.keys.map(Filter.name).toSeq.sorted.mkString(", ")}; " +
            s"none for ${leaves.map(_._1).filterNot(stats.contains).map(Filter.name).mkString(", ")}")
          assert(stats.keySet.map(_.last) == Set("i", "i8", "u", "d", "f", "s", "ls", "bin", "dt", "dm", "dec", "bo", "x"))
          // every page: IS NULL / IS NOT NULL and the bounds, checked through the pruner
          // against exact row evaluation, for literals taken from the rows themselves
          leaves.filter(l => stats.contains(l._1)).foreach { case (c, f) =>
            val p = st.forField(f.id)
            if (checked == 0) info(s"${Filter.name(c)} pages: " + p.take(4).map(s => s"(rows ${s.firstRow}+${s.numRows}, nulls ${s.nullCount}, " +
              s"min ${s.min.map(show)}, max ${s.max.map(show)})").mkString(" "))
            if (sys.env.contains("DUMP_STATS")) p.foreach { s =>
              var v: org.apache.arrow.vector.ValueVector = vectors.find(_.getField.getName == c.head).get
              c.tail.foreach(x => v = v.asInstanceOf[org.apache.arrow.vector.complex.StructVector].getChild(x))
              val vv = v
              val actual = (s.firstRow until s.firstRow + s.numRows).count(r => vv.isNull(r.toInt))
              info(s"${Filter.name(c)} page ${s.pageIndex} rows ${s.firstRow}+${s.numRows} nulls ${s.nullCount} (actual $actual) min ${s.min.map(show)} max ${s.max.map(show)}")
            }
            val lits = literals(vectors, c, n)
            val filters = Seq(IsNull(c), IsNotNull(c)) ++ lits.flatMap(l => CompareOp.all.map(op => Compare(c, op, l))) ++
              lits.collect { case Lit.BytesLit(b, _) => StartsWith(c, b.take(rnd.nextInt(b.length + 1))) }
            filters.foreach { flt =>
              val truth = RowEvaluator.evaluate(flt, vectors, n)
              val (may, all) = StatsPruner.candidateRanges(flt, stats, n)
              (0 until n).foreach { i =>
                if (truth.get(i) && !may.contains(i)) fail(s"$flt: row $i matches but is pruned (${vectors.map(_.getObject(i))})")
                if (all.contains(i) && !truth.get(i)) fail(s"$flt: row $i proven to match but does not")
              }
              pruned += n - may.count; proven += all.count; checked += 1
            }
          }
        } finally vectors.foreach(_.close())
      } finally reader.close()
    }
    info(s"$checked predicates: $pruned rows pruned, $proven proven")
    assert(pruned > 0 && proven > 0)
  }

  private def show(v: Any): String = v match {
    case b: Array[Byte] => b.map(x => f"${x & 0xff}%02x").mkString.take(20) + s"(${b.length}B)"
    case s: String => s"'${s.take(10)}'(${s.length})"
    case o => o.toString
  }

  /** Literals (in the Spark domain) of up to 8 distinct values of the column. */
  private def literals(vectors: Seq[org.apache.arrow.vector.FieldVector], c: Column, n: Int): Seq[Lit] = {
    import org.apache.arrow.vector._
    var v: ValueVector = vectors.find(_.getField.getName == c.head).get
    c.tail.foreach(x => v = v.asInstanceOf[complex.StructVector].getChild(x))
    val out = (0 until n).filterNot(v.isNull).map { i =>
      v match {
        case x: BigIntVector => Lit.LongLit(x.get(i))
        case x: TinyIntVector => Lit.LongLit(x.get(i).toLong)
        case x: IntVector => Lit.LongLit(x.get(i).toLong)
        case x: UInt8Vector => Lit.DecimalLit(new java.math.BigDecimal(new java.math.BigInteger(java.lang.Long.toUnsignedString(x.get(i)))))
        case x: Float8Vector => Lit.DoubleLit(x.get(i))
        case x: Float4Vector => Lit.DoubleLit(x.get(i).toDouble)
        case x: VarCharVector => Lit.BytesLit(x.get(i), utf8 = true)
        case x: LargeVarCharVector => Lit.BytesLit(x.get(i), utf8 = true)
        case x: VarBinaryVector => Lit.BytesLit(x.get(i), utf8 = false)
        case x: DateDayVector => Lit.LongLit(x.get(i).toLong)
        case x: DateMilliVector => Lit.LongLit(Math.floorDiv(x.get(i), 86400000L))
        case x: DecimalVector => Lit.DecimalLit(x.getObject(i))
        case x: BitVector => Lit.BoolLit(x.get(i) == 1)
        case x => fail(s"unexpected ${x.getClass}")
      }
    }.distinct
    out.take(8)
  }
}
