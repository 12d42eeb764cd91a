package io.lancespark.table.filter

import java.math.{BigDecimal => JBigDecimal, BigInteger}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._
import scala.util.Random

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision, TimeUnit}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceSchema
import io.lancespark.table.LongTests
import io.lancespark.format.input.LocalFileSource
import io.lancespark.format.stats.StatsStore
import io.lancespark.format.arrow.DictionaryColumn
import io.lancespark.format.v20.{V20FileReader, V20FileWriter, V20FileWriterSuite}
import io.lancespark.format.v21.V21FileReader
import io.lancespark.format.v21.write.V21FileWriter
import io.lancespark.table.filter.Filter._

/** Random data written with V20FileWriter in small pages, random predicate
  * trees: the row evaluator must equal a reference evaluation on plain Scala
  * values (written here from Spark's rules, independently of the engine), and
  * the statistics pruner must be sound. Seeded: set FILTER_SEED to reproduce. */
class FilterPropertySuite extends AnyFunSuite with BeforeAndAfterAll {
  import FilterPropertySuite._

  private val allocator = new RootAllocator()
  private val tmp: Path = Files.createTempDirectory("filterprop")

  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0, s"leaked ${allocator.getAllocatedMemory} bytes")
    finally {
      allocator.close()
      Files.walk(tmp).sorted(java.util.Comparator.reverseOrder[Path]()).forEach(p => Files.deleteIfExists(p))
    }
  }

  // ----------------------------------------------------------- columns

  /** A column: Arrow type, a pool of raw values (as V20FileWriterSuite.fill
    * takes them), the Spark value of a raw value, literals not in the pool. */
  private case class Col(name: String, t: ArrowType, pool: IndexedSeq[Any], spark: Any => Any,
                         lit: Any => Lit, extra: IndexedSeq[Lit])

  private def bytesOf(s: String): Bytes = Bytes(s.getBytes(UTF_8))
  private def dec(s: String) = new JBigDecimal(s)
  private val longLit: Any => Lit = v => Lit.LongLit(v.asInstanceOf[Long])
  private val decLit: Any => Lit = v => Lit.DecimalLit(v.asInstanceOf[JBigDecimal])
  private val dblLit: Any => Lit = v => Lit.DoubleLit(v.asInstanceOf[Double])
  private val strLit: Any => Lit = v => Lit.BytesLit(v.asInstanceOf[Bytes].a, utf8 = true)
  private val binLit: Any => Lit = v => Lit.BytesLit(v.asInstanceOf[Bytes].a, utf8 = false)

  private val longStr = "a" * 70
  private val strings = IndexedSeq("", "a", "ab", "abc", "b", "é", "éa", "日本", "日本語", "\uD83D\uDE00", longStr,
    longStr + "b", "ab" * 40, "zzz", "\u00ff", "a" * 64, "\uD83D\uDE00" * 20, "Z")
  private val doubles = IndexedSeq(Double.NaN, 0.0, -0.0, Double.PositiveInfinity, Double.NegativeInfinity, 1.5, -2.5,
    1.0, 2.0, 3.0, -1.0, Double.MinPositiveValue, Double.MaxValue, -Double.MaxValue)

  private val columns: IndexedSeq[Col] = IndexedSeq(
    Col("i", new ArrowType.Int(32, true), IndexedSeq(-20, -3, -1, 0, 1, 2, 3, 5, 7, 20, Int.MinValue, Int.MaxValue),
      v => v.asInstanceOf[Int].toLong, longLit,
      IndexedSeq(Lit.LongLit(100), Lit.LongLit(-100), Lit.LongLit(4), Lit.LongLit(Long.MaxValue), Lit.LongLit(Long.MinValue),
        Lit.DecimalLit(dec("2.5")), Lit.DecimalLit(dec("-0.5")), Lit.DecimalLit(dec("1e30")))),
    Col("l", new ArrowType.Int(64, true), IndexedSeq(-5L, 0L, 1L, 2L, 1000L, Long.MinValue, Long.MaxValue, Long.MaxValue - 1),
      identity, longLit, IndexedSeq(Lit.LongLit(3), Lit.LongLit(-1), Lit.DecimalLit(dec("9223372036854775807.5")),
        Lit.DecimalLit(dec("-9223372036854775808.5")))),
    Col("u", new ArrowType.Int(64, false), IndexedSeq(0L, 1L, 2L, Long.MaxValue, Long.MinValue, -1L, -2L),
      v => new JBigDecimal(new BigInteger(java.lang.Long.toUnsignedString(v.asInstanceOf[Long]))), decLit,
      IndexedSeq(Lit.LongLit(-1), Lit.LongLit(5), Lit.DecimalLit(dec("18446744073709551616")), Lit.DecimalLit(dec("9223372036854775808.5")),
        Lit.DecimalLit(dec("0.5")), Lit.LongLit(Long.MaxValue))),
    Col("d", new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE), doubles, identity, dblLit,
      IndexedSeq(Lit.DoubleLit(0.1), Lit.DoubleLit(1e300), Lit.DoubleLit(-1e300), Lit.DoubleLit(2.5))),
    Col("f", new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE), doubles.map(_.toFloat),
      v => v.asInstanceOf[Float].toDouble, dblLit, IndexedSeq(Lit.DoubleLit(0.1), Lit.DoubleLit(1e300), Lit.DoubleLit(2.5),
        Lit.DoubleLit(Double.MaxValue))),
    Col("s", ArrowType.Utf8.INSTANCE, strings, v => bytesOf(v.asInstanceOf[String]), strLit,
      IndexedSeq("aa", "a" * 65, "a" * 63, longStr + "a", "", "\u0000", "日", "\uFFFF", "b" * 80).map(Lit.string)),
    Col("bin", ArrowType.Binary.INSTANCE, IndexedSeq(Array[Byte](), Array[Byte](0), Array[Byte](-1), Array.fill[Byte](70)(-1),
      Array.fill[Byte](70)(-1) :+ 0.toByte, Array[Byte](1, 2, 3), Array[Byte](-128), Array.fill[Byte](66)(5)), v => Bytes(v.asInstanceOf[Array[Byte]]),
      binLit, IndexedSeq(Array[Byte](1, 2), Array.fill[Byte](64)(-1), Array.fill[Byte](65)(-1), Array[Byte](-1, 0)).map(Lit.binary)),
    Col("dt", new ArrowType.Date(DateUnit.DAY), IndexedSeq(-1, 0, 1, 18000, 18001, -40000), v => v.asInstanceOf[Int].toLong, longLit,
      IndexedSeq(Lit.LongLit(2), Lit.LongLit(-2), Lit.LongLit(17999))),
    Col("dm", new ArrowType.Date(DateUnit.MILLISECOND), IndexedSeq(-1L, 0L, 86399999L, 86400000L, -86400000L, -86400001L, 123456789L),
      v => Math.floorDiv(v.asInstanceOf[Long], 86400000L), longLit, IndexedSeq(Lit.LongLit(-2), Lit.LongLit(2), Lit.LongLit(5))),
    Col("ts", new ArrowType.Timestamp(TimeUnit.NANOSECOND, "UTC"), IndexedSeq(-1L, 0L, 999L, 1000L, 1001L, -1000L, -1001L, 1700000000123456789L),
      v => Math.floorDiv(v.asInstanceOf[Long], 1000L), longLit, IndexedSeq(Lit.LongLit(-2), Lit.LongLit(2), Lit.LongLit(1700000000123457L))),
    Col("tss", new ArrowType.Timestamp(TimeUnit.SECOND, null), IndexedSeq(-1L, 0L, 1L, 1700000000L),
      v => v.asInstanceOf[Long] * 1000000L, longLit, IndexedSeq(Lit.LongLit(1), Lit.LongLit(999999), Lit.LongLit(-1000001))),
    Col("dec", new ArrowType.Decimal(10, 2, 128), IndexedSeq(dec("-1.50"), dec("0.00"), dec("0.01"), dec("12345678.99"), dec("-99999999.99"), dec("3.14")),
      identity, decLit, IndexedSeq(dec("0.005"), dec("1.505"), dec("-1.5"), dec("1e20"), dec("3.140")).map(Lit.DecimalLit) :+ Lit.LongLit(3)),
    Col("big", new ArrowType.Decimal(30, 5, 128), IndexedSeq(dec("-1.00000"), dec("0.00000"), dec("1234567890123456789012.12345"), dec("0.00001")),
      identity, decLit, IndexedSeq(dec("0.000005"), dec("1"), dec("-1e40")).map(Lit.DecimalLit)),
    Col("bo", ArrowType.Bool.INSTANCE, IndexedSeq(true, false), identity, v => Lit.BoolLit(v.asInstanceOf[Boolean]), IndexedSeq.empty))

  private val structCol = Col("st.x", new ArrowType.Int(32, true), IndexedSeq(-2, 0, 1, 9), v => v.asInstanceOf[Int].toLong, longLit,
    IndexedSeq(Lit.LongLit(5)))

  private val arrowSchema: Schema = new Schema((columns.map(c => new Field(c.name, FieldType.nullable(c.t), null)) :+
    new Field("st", FieldType.notNullable(ArrowType.Struct.INSTANCE),
      java.util.Arrays.asList(new Field("x", FieldType.nullable(structCol.t), null)))).asJava)
  private val schema = LanceSchema.fromArrow(arrowSchema)
  private val allCols: IndexedSeq[(Column, Col)] = columns.map(c => Vector(c.name) -> c) :+ (Vector("st", "x") -> structCol)
  private val gone: Column = Vector("gone") // a column absent from the fragment: reads as NULL

  // ----------------------------------------------------------- data

  private case class Dataset(path: Path, rows: Int, raw: Map[Column, IndexedSeq[Any]]) {
    /** Spark values (None = NULL). */
    lazy val values: Map[Column, IndexedSeq[Option[Any]]] =
      raw.map { case (c, vs) => c -> vs.map(v => Option(v).map(colOf(c).spark)) } + (gone -> IndexedSeq.fill(rows)(None))
  }

  private def colOf(c: Column): Col = allCols.find(_._1 == c).get._2

  private def makeDataset(rnd: Random, id: Int): Dataset = {
    val rows = if (rnd.nextInt(10) == 0) rnd.nextInt(5) else 1 + rnd.nextInt(300)
    val nullRate = Seq(0.0, 0.1, 0.5, 0.95, 1.0)(rnd.nextInt(5))
    // runs of similar values, so that some pages are narrow
    def gen(c: Col): IndexedSeq[Any] = {
      val out = IndexedSeq.newBuilder[Any]
      var i = 0
      while (i < rows) {
        val run = 1 + rnd.nextInt(30)
        val sub = rnd.shuffle(c.pool).take(1 + rnd.nextInt(3))
        val nulls = if (rnd.nextInt(4) == 0) 0.0 else nullRate
        (0 until math.min(run, rows - i)).foreach { _ =>
          out += (if (rnd.nextDouble() < nulls) null else sub(rnd.nextInt(sub.size)))
        }
        i += run
      }
      out.result()
    }
    val raw: Map[Column, IndexedSeq[Any]] = allCols.map { case (p, c) => p -> gen(c) }.toMap
    val p = tmp.resolve(s"d$id.lance")
    val maxRows = 1 + rnd.nextInt(40)
    val maxBytes = 64L + rnd.nextInt(2000)
    val batchSize = 1 + rnd.nextInt(math.max(1, rows))
    val w = new V20FileWriter(Files.newOutputStream(p), p.toString, schema, maxRows, maxBytes, allocator = allocator)
    try {
      (0 until rows by batchSize).foreach { a =>
        val b = math.min(rows, a + batchSize)
        val vs = schema.fields.map { lf =>
          val v = lf.toArrow.createVector(allocator)
          if (lf.name == "st") V20FileWriterSuite.fill(v, raw(Vector("st", "x")).slice(a, b).map(x => Map("x" -> x)))
          else V20FileWriterSuite.fill(v, raw(Vector(lf.name)).slice(a, b))
          v
        }
        try w.write(vs) finally vs.foreach(_.close())
      }
      w.finish()
    } finally w.close()
    Dataset(p, rows, raw)
  }

  // ----------------------------------------------------------- predicates

  private def randomLit(rnd: Random, c: Col): Lit = rnd.nextInt(10) match {
    case 0 => Lit.NullLit
    case 1 | 2 if c.extra.nonEmpty => c.extra(rnd.nextInt(c.extra.size))
    case _ => c.lit(c.spark(c.pool(rnd.nextInt(c.pool.size))))
  }

  private def randomLeaf(rnd: Random): Filter = {
    val (path, c) = if (rnd.nextInt(25) == 0) (gone, columns(1)) else allCols(rnd.nextInt(allCols.size))
    rnd.nextInt(12) match {
      case 0 => IsNull(path)
      case 1 => IsNotNull(path)
      case 2 => In(path, Vector.fill(rnd.nextInt(5))(randomLit(rnd, c)))
      case 3 if c.t == ArrowType.Utf8.INSTANCE || c.t == ArrowType.Binary.INSTANCE =>
        val base = c.spark(c.pool(rnd.nextInt(c.pool.size))).asInstanceOf[Bytes].a
        val p = if (rnd.nextInt(5) == 0) c.extra(rnd.nextInt(c.extra.size)).asInstanceOf[Lit.BytesLit].value
                else base.take(rnd.nextInt(base.length + 1))
        StartsWith(path, p)
      case 4 if rnd.nextInt(4) == 0 => if (rnd.nextBoolean()) AlwaysTrue else AlwaysFalse
      case _ => Compare(path, CompareOp.all(rnd.nextInt(CompareOp.all.size)), randomLit(rnd, c))
    }
  }

  private def randomFilter(rnd: Random, depth: Int): Filter =
    if (depth == 0 || rnd.nextInt(3) == 0) randomLeaf(rnd)
    else rnd.nextInt(5) match {
      case 0 | 1 => And(randomFilter(rnd, depth - 1), randomFilter(rnd, depth - 1))
      case 2 | 3 => Or(randomFilter(rnd, depth - 1), randomFilter(rnd, depth - 1))
      case _ => Not(randomFilter(rnd, depth - 1))
    }

  /** The same filter with AND/OR operands swapped and IN values shuffled at random. */
  private def reorder(rnd: Random, f: Filter): Filter = f match {
    case And(l, r) => if (rnd.nextBoolean()) And(reorder(rnd, r), reorder(rnd, l)) else And(reorder(rnd, l), reorder(rnd, r))
    case Or(l, r) => if (rnd.nextBoolean()) Or(reorder(rnd, r), reorder(rnd, l)) else Or(reorder(rnd, l), reorder(rnd, r))
    case Not(c) => Not(reorder(rnd, c))
    case In(c, vs) => In(c, rnd.shuffle(vs))
    case other => other
  }

  // ----------------------------------------------------------- checking

  private def readVectors(d: Dataset, from: Int, until: Int): Seq[FieldVector] = {
    val r = V20FileReader.openStandalone(new LocalFileSource(d.path))
    try {
      val vs = r.read(r.fileSchema.fields, from, until, allocator)
      val gv = new org.apache.arrow.vector.BigIntVector("gone", allocator)
      gv.allocateNew(); gv.setValueCount(until - from)
      vs :+ gv
    } finally r.close()
  }

  private def stats(d: Dataset, rnd: Random): Map[Column, ColumnStats] = {
    val src = new LocalFileSource(d.path)
    val st = try StatsStore.read(src, allocator).get finally src.close()
    val known = allCols.flatMap { case (p, c) =>
      val f = p.tail.foldLeft(schema.field(p.head).get)((f, n) => f.children.find(_.name == n).get)
      if (rnd.nextInt(12) == 0) None // unknown statistics
      else Some(p -> (ColumnStats.Pages(c.t, st.forField(f.id)): ColumnStats))
    }.toMap
    known + (gone -> ColumnStats.Absent)
  }

  private val seed: Long = sys.env.get("FILTER_SEED").map(_.toLong).getOrElse(20261122L)

  /** make test draws the first half of the seed's datasets (make test-long all `n`). */
  private def datasets(n: Int): Int = if (LongTests.enabled) n else n / 2

  /** The dataset's rows written again as a 2.1 or 2.2 file by our writer, in
    * pages of at most `maxRows` rows (its encodings chosen from the data:
    * columns of few values get dictionaries). */
  private def rewriteV21(d: Dataset, id: Int, minor: Int, maxRows: Int): Path = {
    val p = tmp.resolve(s"d$id-2$minor.lance")
    val w = new V21FileWriter(Files.newOutputStream(p), p.toString, schema, minor, maxRows, allocator = allocator)
    try {
      val vs = schema.fields.map { lf =>
        val v = lf.toArrow.createVector(allocator)
        if (lf.name == "st") V20FileWriterSuite.fill(v, d.raw(Vector("st", "x")).map(x => Map("x" -> x)))
        else V20FileWriterSuite.fill(v, d.raw(Vector(lf.name)))
        v
      }
      try w.write(vs) finally vs.foreach(_.close())
      w.finish()
    } finally w.close()
    p
  }

  test(s"row evaluator over dictionary items of 2.1/2.2 files = reference (seed $seed)") {
    // integer, date and decimal columns of few values, written with dictionaries: read with
    // their vectors hollow (zeros) and tested through the items; the others as they are
    val rnd = new Random(seed + 7)
    var checks = 0
    var itemColumns = 0
    (0 until datasets(30)).foreach { di =>
      val d = makeDataset(rnd, 100 + di)
      val minor = 1 + rnd.nextInt(2)
      val maxRows = if (rnd.nextBoolean()) 1000 else 1 + rnd.nextInt(200)
      val p = rewriteV21(d, di, minor, maxRows)
      val r = V21FileReader.openStandalone(new LocalFileSource(p))
      try {
        val fields = r.fileSchema.fields
        val itemsOnly = fields.filter(f => DictionaryColumn.fixedItems(f.arrowType)).map(_.id).toSet
        (0 until 12).foreach { fi =>
          val filter = randomFilter(rnd, 1 + rnd.nextInt(3))
          val where = s"2.$minor dataset $di (${d.rows} rows, pages of $maxRows), filter $fi: $filter"
          val (from, until) = if (d.rows > 0 && rnd.nextBoolean()) {
            val a = rnd.nextInt(d.rows); (a, a + 1 + rnd.nextInt(d.rows - a))
          } else (0, d.rows)
          val read = if (until > from) r.readRanges(fields, Vector((from.toLong, until.toLong)), allocator, None, itemsOnly)
                     else r.read(fields, from.toLong, until.toLong, allocator)
          val gv = new org.apache.arrow.vector.BigIntVector("gone", allocator)
          gv.allocateNew(); gv.setValueCount(until - from)
          val vs = read :+ gv
          try {
            val dicts = vs.map(v => if (v eq gv) None else r.dictionaryOf(v))
            itemColumns += dicts.count(_.exists(_.isFixed))
            val sel = RowEvaluator.evaluate(filter, vs, until - from, new RowEvaluator.Binds, dicts)
            (from until until).foreach { i =>
              val ref = Reference.eval(filter, c => d.values(c)(i)).contains(true)
              if (sel.get(i - from) != ref)
                fail(s"$where: row $i ${d.values.map { case (k, v) => k -> v(i) }.filter(e => filter.columns(e._1))}: evaluator ${sel.get(i - from)}, reference $ref")
            }
          } finally vs.foreach(_.close())
          checks += 1
        }
      } finally r.close()
    }
    info(s"$checks filters checked; $itemColumns column reads were dictionary items")
    assert(itemColumns > 100, s"only $itemColumns column reads were dictionary items")
  }

  test(s"row evaluator = reference, pruning is sound (seed $seed)") {
    val rnd = new Random(seed)
    var checks = 0
    var prunedRows = 0L
    var allMatchRows = 0L
    var totalRows = 0L
    (0 until datasets(40)).foreach { di =>
      val d = makeDataset(rnd, di)
      val st = stats(d, rnd)
      (0 until 25).foreach { fi =>
        val filter = randomFilter(rnd, 1 + rnd.nextInt(3))
        val where = s"dataset $di (${d.rows} rows), filter $fi: $filter"
        val ref: IndexedSeq[Option[Boolean]] = (0 until d.rows).map(i => Reference.eval(filter, c => d.values(c)(i)))
        // (o) the normalized filter (by which scans are compared for reuse) selects
        // the same rows, and is the same whatever the order of AND/OR operands and IN values
        val norm = Filter.normalized(filter)
        (0 until d.rows).foreach { i =>
          val n = Reference.eval(norm, c => d.values(c)(i))
          if (n != ref(i)) fail(s"$where: row $i: normalized $norm gives $n, reference ${ref(i)}")
        }
        // (its own generator: the datasets and filters drawn from `rnd` stay those of the seed)
        val reordered = reorder(new Random(seed + 31L * di + fi), filter)
        assert(Filter.normalized(reordered) == norm, s"$where: reordered as $reordered")
        // (i) the row evaluator, over the whole file or a slice
        val (from, until) = if (d.rows > 0 && rnd.nextBoolean()) {
          val a = rnd.nextInt(d.rows); (a, a + 1 + rnd.nextInt(d.rows - a))
        } else (0, d.rows)
        val vs = readVectors(d, from, until)
        try {
          val (t, f) = RowEvaluator.evaluate3(filter, vs, until - from)
          val sel = RowEvaluator.evaluate(filter, vs, until - from)
          assert(sel == t, where)
          (from until until).foreach { i =>
            val got = if (t.get(i - from)) Some(true) else if (f.get(i - from)) Some(false) else None
            if (got != ref(i)) fail(s"$where: row $i ${d.values.map { case (k, v) => k -> v(i) }.filter(e => filter.columns(e._1))}: evaluator $got, reference ${ref(i)}")
          }
        } finally vs.foreach(_.close())
        // (ii) pruning
        val (may, all) = StatsPruner.candidateRanges(filter, st, d.rows)
        val outcomes = StatsPruner.outcomes(filter, st, d.rows)
        (0 until d.rows).foreach { i =>
          if (ref(i).contains(true) && !may.contains(i)) fail(s"$where: row $i matches but is pruned ($may)")
          if (all.contains(i) && !ref(i).contains(true)) fail(s"$where: row $i in all-match ranges but evaluates to ${ref(i)}")
          val o = ref(i) match { case Some(true) => Outcomes.True; case Some(false) => Outcomes.False; case None => Outcomes.Null }
          if (!outcomes.contains(o)) fail(s"$where: row $i gives $o, not in $outcomes")
        }
        assert(all.minus(may).isEmpty, where)
        prunedRows += d.rows - may.count
        allMatchRows += all.count
        totalRows += d.rows
        checks += 1
      }
    }
    info(s"$checks filters checked on $totalRows rows: ${prunedRows} rows pruned, $allMatchRows rows proven to match")
    assert(prunedRows > totalRows / 20, "pruning hardly ever prunes")
    assert(allMatchRows > totalRows / 20, "pruning hardly ever proves a match")
  }
}

object FilterPropertySuite {
  final case class Bytes(a: Array[Byte]) {
    override def equals(o: Any): Boolean = o match { case Bytes(b) => java.util.Arrays.equals(a, b); case _ => false }
    override def hashCode: Int = java.util.Arrays.hashCode(a)
    override def toString: String = new String(a, UTF_8).take(20) + s"(${a.length}B)"
  }

  /** Spark's semantics written out plainly on Spark values: Long, Double,
    * java.math.BigDecimal, Bytes, Boolean; None = NULL. */
  object Reference {
    def litValue(l: Lit): Option[Any] = l match {
      case Lit.NullLit => None
      case Lit.LongLit(v) => Some(v)
      case Lit.DoubleLit(v) => Some(v)
      case Lit.DecimalLit(v) => Some(v)
      case Lit.BytesLit(v, _) => Some(Bytes(v))
      case Lit.BoolLit(v) => Some(v)
    }

    def cmp(a: Any, b: Any): Int = (a, b) match {
      case (x: Double, y: Double) =>
        if (x.isNaN && y.isNaN) 0 else if (x.isNaN) 1 else if (y.isNaN) -1 else if (x < y) -1 else if (x > y) 1 else 0
      case (x: Long, y: Long) => java.lang.Long.compare(x, y)
      case (x: Long, y: JBigDecimal) => JBigDecimal.valueOf(x).compareTo(y)
      case (x: JBigDecimal, y: Long) => x.compareTo(JBigDecimal.valueOf(y))
      case (x: JBigDecimal, y: JBigDecimal) => x.compareTo(y)
      case (x: Bytes, y: Bytes) =>
        val n = math.min(x.a.length, y.a.length)
        var i = 0
        while (i < n && x.a(i) == y.a(i)) i += 1
        if (i < n) Integer.compare(x.a(i) & 0xff, y.a(i) & 0xff) else Integer.compare(x.a.length, y.a.length)
      case (x: Boolean, y: Boolean) => java.lang.Boolean.compare(x, y)
      case _ => throw new IllegalArgumentException(s"cannot compare $a and $b")
    }

    def not(a: Option[Boolean]): Option[Boolean] = a.map(!_)
    def and(a: Option[Boolean], b: Option[Boolean]): Option[Boolean] =
      if (a.contains(false) || b.contains(false)) Some(false) else if (a.isEmpty || b.isEmpty) None else Some(true)
    def or(a: Option[Boolean], b: Option[Boolean]): Option[Boolean] = not(and(not(a), not(b)))

    def eval(f: Filter, value: Column => Option[Any]): Option[Boolean] = f match {
      case AlwaysTrue => Some(true)
      case AlwaysFalse => Some(false)
      case And(l, r) => and(eval(l, value), eval(r, value))
      case Or(l, r) => or(eval(l, value), eval(r, value))
      case Not(c) => not(eval(c, value))
      case IsNull(c) => Some(value(c).isEmpty)
      case IsNotNull(c) => Some(value(c).nonEmpty)
      case Compare(c, CompareOp.EqNullSafe, lit) => (value(c), litValue(lit)) match {
        case (None, None) => Some(true)
        case (None, _) | (_, None) => Some(false)
        case (Some(a), Some(b)) => Some(cmp(a, b) == 0)
      }
      case Compare(c, op, lit) => for (a <- value(c); b <- litValue(lit)) yield {
        val x = cmp(a, b)
        op match {
          case CompareOp.Eq => x == 0
          case CompareOp.NotEq => x != 0
          case CompareOp.Lt => x < 0
          case CompareOp.LtEq => x <= 0
          case CompareOp.Gt => x > 0
          case CompareOp.GtEq => x >= 0
          case CompareOp.EqNullSafe => x == 0
        }
      }
      case In(_, vs) if vs.isEmpty => Some(false)
      case In(c, vs) => value(c) match {
        case None => None
        case Some(a) =>
          if (vs.exists(l => litValue(l).exists(cmp(a, _) == 0))) Some(true)
          else if (vs.exists(_.isNull)) None
          else Some(false)
      }
      case StartsWith(c, p) => value(c).map { case Bytes(a) => a.length >= p.length && a.take(p.length).sameElements(p) }
    }
  }
}
