package io.lancespark.format

import java.math.BigDecimal
import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._
import scala.util.Random

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector._
import org.apache.arrow.vector.ipc.ArrowFileWriter
import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision, TimeUnit}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}

import io.lancespark.schema.LanceSchema
import io.lancespark.format.v20.V20FileWriterSuite.{fill, repoRoot}

/** What the writer suites share: Arrow vectors from plain values, a rich
  * schema of every type with data for it, and the pylance check of a file. */
trait WriterTestKit {
  protected def allocator: BufferAllocator

  protected def nullable(t: ArrowType, kids: Field*): FieldType = FieldType.nullable(t)
  protected def f(name: String, t: ArrowType, kids: Field*): Field = new Field(name, nullable(t), kids.asJava)
  protected def list(name: String, item: Field): Field = f(name, ArrowType.List.INSTANCE, item)
  protected def int(bits: Int, signed: Boolean = true) = new ArrowType.Int(bits, signed)

  /** Creates vectors for `schema` (through LanceSchema, as the writer expects)
    * filled with `rows` (one Seq of column values per column). */
  protected def vectors(schema: LanceSchema, cols: Seq[IndexedSeq[Any]]): Seq[FieldVector] =
    schema.fields.zip(cols).map { case (lf, vals) =>
      val v = lf.toArrow.createVector(allocator)
      fill(v, vals)
      v
    }

  protected def withVectors[T](vs: Seq[FieldVector])(body: Seq[FieldVector] => T): T =
    try body(vs) finally vs.foreach(_.close())

  /** pylance (the oracle) reads `<name>.lance` in the pylance directory as the
    * Arrow IPC file `<name>.arrow` beside it says: each test checks its own files. */
  protected def pylanceReads(pylanceDir: Path, name: String): Unit = {
    val python = sys.env.get("LANCE_PYTHON").map(Path.of(_)).getOrElse(repoRoot.resolve(".venv/bin/python"))
    if (!Files.isExecutable(python))
      throw new AssertionError(s"the pylance check needs a python with pylance 14: $python is missing; run `make venv` " +
        "or set LANCE_PYTHON")
    val lance = pylanceDir.resolve(s"$name.lance")
    val expected = pylanceDir.resolve(s"$name.arrow")
    val (rc, output) = io.lancespark.table.PylanceProcess.runFile(repoRoot.resolve("tests/fixtures/pylance_reads.py"),
      lance.toString, expected.toString)
    assert(rc == 0, s"pylance could not read $lance as expected (exit $rc):\n$output")
  }

  protected def writeIpc(p: Path, vs: Seq[FieldVector]): Unit = {
    val root = new VectorSchemaRoot(vs.map(_.getField).asJava, vs.asJava, vs.head.getValueCount)
    val out = Files.newByteChannel(p, java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.WRITE)
    val w = new ArrowFileWriter(root, null, out)
    try { w.start(); w.writeBatch(); w.end() } finally { w.close(); out.close() }
  }

  protected val richArrow = new Schema(Seq(
    f("b", ArrowType.Bool.INSTANCE), f("i8", int(8)), f("i16", int(16)), f("i32", int(32)), f("i64", int(64)),
    f("u8", int(8, false)), f("u16", int(16, false)), f("u32", int(32, false)), f("u64", int(64, false)),
    f("f16", new ArrowType.FloatingPoint(FloatingPointPrecision.HALF)),
    f("f32", new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)),
    f("f64", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
    f("s", ArrowType.Utf8.INSTANCE), f("ls", ArrowType.LargeUtf8.INSTANCE),
    f("bin", ArrowType.Binary.INSTANCE), f("lbin", ArrowType.LargeBinary.INSTANCE),
    f("fsb", new ArrowType.FixedSizeBinary(5)),
    f("d32", new ArrowType.Date(DateUnit.DAY)), f("d64", new ArrowType.Date(DateUnit.MILLISECOND)),
    f("t32s", new ArrowType.Time(TimeUnit.SECOND, 32)), f("t32ms", new ArrowType.Time(TimeUnit.MILLISECOND, 32)),
    f("t64us", new ArrowType.Time(TimeUnit.MICROSECOND, 64)), f("t64ns", new ArrowType.Time(TimeUnit.NANOSECOND, 64)),
    f("ts_us_utc", new ArrowType.Timestamp(TimeUnit.MICROSECOND, "UTC")),
    f("ts_ns", new ArrowType.Timestamp(TimeUnit.NANOSECOND, null)),
    f("ts_ms_ny", new ArrowType.Timestamp(TimeUnit.MILLISECOND, "America/New_York")),
    f("dec", new ArrowType.Decimal(18, 3, 128)), f("dec256", new ArrowType.Decimal(40, 5, 256)),
    f("vec", new ArrowType.FixedSizeList(4), new Field("item", FieldType.nullable(
      new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)), null)),
    f("vec_i", new ArrowType.FixedSizeList(2), new Field("item", FieldType.nullable(int(32)), null)),
    list("lst", f("item", int(64))),
    f("llst", ArrowType.LargeList.INSTANCE, f("item", ArrowType.Utf8.INSTANCE)),
    f("st", ArrowType.Struct.INSTANCE, f("a", int(32)), f("b", ArrowType.Utf8.INSTANCE),
      f("inner", ArrowType.Struct.INSTANCE, f("x", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)))),
    list("lst_st", f("item", ArrowType.Struct.INSTANCE, f("k", ArrowType.Utf8.INSTANCE),
      list("v", f("item", int(16))))),
    list("lst_lst", list("item", f("item", int(32)))),
    new Field("nn", FieldType.notNullable(int(64)), null),
    f("alln", int(64)), f("alln_s", ArrowType.Utf8.INSTANCE), list("alln_l", f("item", int(32))),
    f("alln_vec", new ArrowType.FixedSizeList(3), new Field("item", FieldType.nullable(
      new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)), null))
  ).asJava)

  protected def richColumns(n: Int, seed: Int): Seq[IndexedSeq[Any]] = {
    val rnd = new Random(seed)
    def col(g: Int => Any, nullEvery: Int = 7): IndexedSeq[Any] =
      (0 until n).map(i => if (nullEvery > 0 && i % nullEvery == 3) null else g(i))
    def str(i: Int): String = {
      val len = rnd.nextInt(30)
      if (i % 11 == 0) "" else (0 until len).map(k => "abcé€😀xyz"(k % 9)).mkString + i
    }
    def bytes(len: Int): Array[Byte] = Array.fill(len)(rnd.nextInt(256).toByte)
    Seq(
      col(_ => rnd.nextBoolean()),
      col(_ => rnd.nextInt(256) - 128), col(_ => rnd.nextInt(65536) - 32768), col(_ => rnd.nextInt()),
      col(_ => rnd.nextLong()),
      col(_ => rnd.nextInt(256)), col(_ => rnd.nextInt(65536)), col(_ => rnd.nextLong() & 0xffffffffL),
      col(_ => rnd.nextLong()),
      col(i => (i % 100) * 0.5f), col(i => if (i % 13 == 1) Float.NaN else rnd.nextFloat() * 100 - 50),
      col(i => if (i % 17 == 2) Double.NegativeInfinity else rnd.nextGaussian()),
      col(str), col(str, 5), col(i => bytes(i % 9)), col(i => bytes(i % 20), 3), col(_ => bytes(5)),
      col(_ => rnd.nextInt(40000) - 20000), col(_ => (rnd.nextInt(40000) - 20000) * 86400000L),
      col(_ => rnd.nextInt(86400)), col(_ => rnd.nextInt(86400000)),
      col(_ => rnd.nextLong() % 86400000000L).map(x => if (x == null) null else math.abs(x.asInstanceOf[Long])),
      col(_ => math.abs(rnd.nextLong() % 86400000000000L)),
      col(_ => rnd.nextLong() >> 12), col(_ => rnd.nextLong() >> 2), col(_ => rnd.nextLong() >> 20),
      col(_ => BigDecimal.valueOf(rnd.nextLong() % 1000000000000000L, 3)),
      col(_ => new BigDecimal(new java.math.BigInteger(120, rnd.self).subtract(java.math.BigInteger.ONE.shiftLeft(119)), 5)),
      col(i => (0 until 4).map(k => if ((i + k) % 9 == 0) null else rnd.nextFloat())),
      col(_ => Seq(rnd.nextInt(), rnd.nextInt()), 0),
      // lists: nulls, empties, some long lists (hundreds of items) crossing item pages
      col(i => if (i % 10 == 5) Seq.empty else (0 until (if (i % 97 == 0) 700 else rnd.nextInt(8))).map(k =>
        if (k % 13 == 12) null else rnd.nextLong())),
      col(i => (0 until rnd.nextInt(4)).map(k => if (k == 2) null else str(i + k)), 4),
      col(i => Map("a" -> (if (i % 5 == 0) null else rnd.nextInt()), "b" -> (if (i % 6 == 0) null else str(i)),
        "inner" -> Map("x" -> (if (i % 4 == 1) null else rnd.nextDouble()))), 0),
      col(i => (0 until rnd.nextInt(4)).map(k => Map("k" -> (if (k == 1) null else str(k)),
        "v" -> (if ((i + k) % 3 == 0) null else (0 until rnd.nextInt(4)).map(x => (x * 7 - i % 100).toShort))))),
      col(i => (0 until rnd.nextInt(3)).map(k => if ((i + k) % 4 == 0) null else (0 until k + 1).map(_ + i)), 6),
      col(_ => rnd.nextLong(), 0),
      col(_ => 1L, 1), col(_ => "x", 1), col(_ => Seq(1), 1), col(_ => Seq(1f, 2f, 3f), 1))
  }

}
