package io.lancespark.table.filter

import java.math.{BigDecimal => JBigDecimal}
import java.nio.charset.StandardCharsets.UTF_8

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector._
import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision, TimeUnit}
import org.apache.arrow.vector.types.pojo.{ArrowType, FieldType}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.format.stats.PageStat
import io.lancespark.table.filter.Filter._
import io.lancespark.table.filter.Lit._

/** Cases worked out by hand from Spark's semantics and the statistics rules. */
class FilterHandCasesSuite extends AnyFunSuite with BeforeAndAfterAll {

  private val allocator = new RootAllocator()
  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0) finally allocator.close()
  }

  private val I64 = new ArrowType.Int(64, true)
  private val F64 = new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)
  private val Str = ArrowType.Utf8.INSTANCE

  private def col(n: String*): Column = n.toVector
  private def page(first: Long, rows: Long, nulls: Long, min: Any, max: Any) =
    PageStat(0, 0, 0, first, rows, nulls, Option(min), Option(max))
  private def one(t: ArrowType, p: PageStat): Map[Column, ColumnStats] = Map(col("x") -> ColumnStats.Pages(t, Vector(p)))
  private def out(f: Filter, st: Map[Column, ColumnStats], n: Long = 10): Outcomes = StatsPruner.outcomes(f, st, n)
  private val x = col("x")
  private def s(v: String) = Lit.string(v)
  private def cmp(op: CompareOp, l: Lit) = Compare(x, op, l)
  import CompareOp._

  test("normalized: operand order and repeats do not matter, operators do") {
    val (a, b, c) = (cmp(Eq, LongLit(1)), cmp(Eq, s("FRANCE")), IsNotNull(col("y")))
    assert(normalized(Or(a, b)) == normalized(Or(b, a)))
    assert(normalized(And(And(a, b), c)) == normalized(And(c, And(b, a))))
    assert(normalized(And(a, And(a, b))) == normalized(And(b, a)))
    assert(normalized(In(x, Vector(LongLit(2), LongLit(1), LongLit(2)))) == In(x, Vector(LongLit(1), LongLit(2))))
    assert(normalized(Or(a, b)) != normalized(And(a, b)))
    assert(normalized(Not(Or(a, b))) != normalized(Or(Not(a), b)))
    assert(normalized(cmp(Lt, LongLit(1))) != normalized(cmp(Gt, LongLit(1))))
  }

  test("Kleene outcome sets") {
    import Outcomes._
    assert((True | Null).and(False) == False)
    assert((True | Null).and(True) == (True | Null))
    assert(Null.or(True) == True)
    assert(!(True | Null) == (False | Null))
    assert((True | False).and(Null) == (False | Null))
    assert(All.or(False) == All)
  }

  test("float page: NaN is not in max, so > and = NaN cannot skip; < and all-match are bounded by min") {
    val st = one(F64, page(0, 10, 0, 1.0, 5.0))
    assert(out(cmp(Gt, DoubleLit(10)), st).canBeTrue)           // NaN > 10
    assert(out(cmp(Eq, DoubleLit(Double.NaN)), st).canBeTrue)
    assert(out(cmp(GtEq, DoubleLit(Double.PositiveInfinity)), st).canBeTrue)
    assert(out(cmp(Lt, DoubleLit(0)), st) == Outcomes.False)
    assert(out(cmp(Eq, DoubleLit(0.5)), st) == Outcomes.False)
    assert(!out(cmp(LtEq, DoubleLit(5)), st).allTrue)            // NaN <= 5 is false
    assert(out(cmp(GtEq, DoubleLit(1)), st) == Outcomes.True)    // NaN >= 1 too
    assert(out(cmp(NotEq, DoubleLit(Double.NaN)), st).canBeTrue)
    // -0.0 = 0.0: a page of zeros (min -0.0, max +0.0)
    val z = one(F64, page(0, 10, 0, -0.0, 0.0))
    assert(out(cmp(Lt, DoubleLit(-0.0)), z) == Outcomes.False)
    assert(out(cmp(GtEq, DoubleLit(0.0)), z) == Outcomes.True)
    assert(out(cmp(Eq, DoubleLit(-0.0)), z) == (Outcomes.True | Outcomes.False)) // may be NaN
  }

  test("all-null pages") {
    val st = one(I64, page(0, 10, 10, Long.MinValue, Long.MaxValue))
    assert(out(cmp(Eq, LongLit(5)), st) == Outcomes.Null)
    assert(out(Not(cmp(Eq, LongLit(5))), st) == Outcomes.Null)
    assert(out(IsNull(x), st) == Outcomes.True)
    assert(out(cmp(EqNullSafe, LongLit(5)), st) == Outcomes.False)
    assert(out(cmp(EqNullSafe, NullLit), st) == Outcomes.True)
    assert(out(In(x, Vector(LongLit(1), NullLit)), st) == Outcomes.Null)
    assert(out(In(x, Vector()), st) == Outcomes.False)
    assert(out(Or(cmp(Eq, LongLit(5)), IsNull(x)), st) == Outcomes.True)
    // strings: all-null pages have null bounds
    val ss = one(Str, page(0, 10, 10, null, null))
    assert(out(StartsWith(x, Array.emptyByteArray), ss) == Outcomes.Null)
  }

  test("NOT (x > 5) with and without nulls") {
    val withNulls = one(I64, page(0, 10, 2, 6L, 9L))
    assert(out(cmp(Gt, LongLit(5)), withNulls) == (Outcomes.True | Outcomes.Null))
    assert(out(Not(cmp(Gt, LongLit(5))), withNulls) == (Outcomes.False | Outcomes.Null)) // skippable
    val noNulls = one(I64, page(0, 10, 0, 6L, 9L))
    assert(out(cmp(Gt, LongLit(5)), noNulls).allTrue)
    val low = one(I64, page(0, 10, 2, 0L, 3L))
    assert(out(Not(cmp(Gt, LongLit(5))), low) == (Outcomes.True | Outcomes.Null))
    assert(out(Not(cmp(Gt, LongLit(5))), one(I64, page(0, 10, 0, 0L, 3L))).allTrue)
    assert(out(cmp(Eq, LongLit(7)), one(I64, page(0, 10, 0, 7L, 7L))).allTrue)
    assert(out(In(x, Vector(LongLit(3), LongLit(7))), one(I64, page(0, 10, 0, 7L, 7L))).allTrue)
    assert(out(In(x, Vector(LongLit(3), LongLit(8))), one(I64, page(0, 10, 0, 4L, 7L))) == Outcomes.False)
    assert(out(In(x, Vector(LongLit(3), NullLit)), one(I64, page(0, 10, 0, 4L, 7L))) == Outcomes.Null)
  }

  test("truncated strings: min is a lower bound, a null max is unknown") {
    val a64 = "a" * 64
    val st = one(Str, page(0, 10, 0, a64, null)) // e.g. values "a"*70 .. U+10FFFF * 20
    assert(out(cmp(Lt, s(a64)), st) == Outcomes.False)
    assert(out(cmp(Eq, s(a64)), st).canBeTrue)
    assert(out(cmp(Gt, s("zzzz")), st).canBeTrue)
    assert(out(cmp(Eq, s("a" * 70)), st).canBeTrue)
    // max incremented: values in ["ab"*32, "ab"*31 + "ac"]
    val t = one(Str, page(0, 10, 0, "ab" * 32, "ab" * 31 + "ac"))
    assert(out(StartsWith(x, "ab".getBytes(UTF_8)), t).allTrue)
    assert(out(StartsWith(x, "abab".getBytes(UTF_8)), t).allTrue)
    val longPrefix = ("ab" * 40).getBytes(UTF_8)
    assert(out(StartsWith(x, longPrefix), t) == (Outcomes.True | Outcomes.False))
    assert(out(StartsWith(x, "b".getBytes(UTF_8)), t) == Outcomes.False)
    assert(out(StartsWith(x, "ac".getBytes(UTF_8)), t) == Outcomes.False)
    // unsigned order: 'é' (c3 a9) > 'z'
    val u = one(Str, page(0, 10, 0, "a", "z"))
    assert(out(cmp(GtEq, s("é")), u) == Outcomes.False)
    // a prefix of 0xFF bytes has no successor; every value >= [FF] starts with FF
    val bin = one(ArrowType.Binary.INSTANCE, page(0, 10, 0, Array[Byte](-1), null))
    assert(out(StartsWith(x, Array[Byte](-1)), bin) == Outcomes.True)
    assert(out(StartsWith(x, Array[Byte](-1, -1)), bin) == (Outcomes.True | Outcomes.False))
    assert(out(StartsWith(x, Array[Byte](-2)), bin) == Outcomes.False)
  }

  test("conversions to Spark values: uint64, ns timestamps, ms dates, decimals") {
    val u = one(new ArrowType.Int(64, false), page(0, 10, 0, -1L, -1L)) // 2^64 - 1
    assert(out(cmp(Eq, DecimalLit(new JBigDecimal("18446744073709551615"))), u).allTrue)
    assert(out(cmp(Lt, LongLit(0)), u) == Outcomes.False)
    assert(out(cmp(Gt, LongLit(Long.MaxValue)), u).allTrue)
    val ts = one(new ArrowType.Timestamp(TimeUnit.NANOSECOND, "UTC"), page(0, 10, 0, -999L, -1L)) // floor: -1 µs
    assert(out(cmp(Eq, LongLit(-1)), ts).allTrue)
    assert(out(cmp(Eq, LongLit(0)), ts) == Outcomes.False)
    val dm = one(new ArrowType.Date(DateUnit.MILLISECOND), page(0, 10, 0, -86400000L, -1L)) // day -1
    assert(out(cmp(Eq, LongLit(-1)), dm).allTrue)
    val dec = one(new ArrowType.Decimal(10, 2, 128), page(0, 10, 0, new JBigDecimal("0.01"), new JBigDecimal("0.01")))
    assert(out(cmp(Eq, DecimalLit(new JBigDecimal("0.005"))), dec) == Outcomes.False)
    assert(out(cmp(Gt, DecimalLit(new JBigDecimal("0.005"))), dec).allTrue)
    assert(out(cmp(Eq, DecimalLit(new JBigDecimal("0.0100"))), dec).allTrue)
    val tss = one(new ArrowType.Timestamp(TimeUnit.SECOND, null), page(0, 10, 0, Long.MinValue, 0L)) // overflows: unknown
    assert(out(cmp(Gt, LongLit(0)), tss).canBeTrue)
  }

  test("absent and unknown columns") {
    val st: Map[Column, ColumnStats] = Map(x -> ColumnStats.Absent)
    assert(out(cmp(Eq, LongLit(1)), st) == Outcomes.Null)
    assert(out(IsNull(x), st) == Outcomes.True)
    assert(out(Not(cmp(Eq, LongLit(1))), st) == Outcomes.Null)
    assert(out(cmp(EqNullSafe, LongLit(1)), st) == Outcomes.False)
    assert(out(cmp(Eq, LongLit(1)), Map.empty) == Outcomes.All)
    assert(out(IsNull(x), Map.empty) == (Outcomes.True | Outcomes.False))
    assert(out(cmp(Eq, LongLit(1)), one(I64, page(0, 10, -1, null, null))) == Outcomes.All)
    // a literal that does not fit the column's type: nothing known
    assert(out(cmp(Eq, s("a")), one(I64, page(0, 10, 0, 1L, 1L))) == Outcomes.All)
  }

  test("candidateRanges splits at the page boundaries of every column") {
    val st: Map[Column, ColumnStats] = Map(
      col("a") -> ColumnStats.Pages(I64, Vector(page(0, 10, 0, 0L, 9L), page(10, 10, 0, 10L, 19L))),
      col("b") -> ColumnStats.Pages(I64, Vector(page(0, 5, 5, Long.MinValue, Long.MaxValue), page(5, 15, 0, 100L, 200L))))
    val f = Or(Compare(col("a"), GtEq, LongLit(10)), IsNull(col("b")))
    val (may, all) = StatsPruner.candidateRanges(f, st, 20)
    assert(may == RowRanges.of((0L, 5L), (10L, 20L)))
    assert(all == may)
    val (may2, all2) = StatsPruner.candidateRanges(And(Compare(col("a"), Lt, LongLit(12)), Compare(col("b"), Gt, LongLit(150))), st, 20)
    assert(may2 == RowRanges(5, 20) && all2.isEmpty)
    // rows beyond the pages are unknown
    val (may3, _) = StatsPruner.candidateRanges(Compare(col("a"), Lt, LongLit(0)), st, 25)
    assert(may3 == RowRanges(20, 25))
  }

  test("RowRanges algebra") {
    val a = RowRanges.of((0L, 5L), (10L, 20L))
    val b = RowRanges.of((3L, 12L), (15L, 16L), (30L, 31L))
    assert(a.union(b) == RowRanges.of((0L, 20L), (30L, 31L)))
    assert(a.intersect(b) == RowRanges.of((3L, 5L), (10L, 12L), (15L, 16L)))
    assert(a.complement(25) == RowRanges.of((5L, 10L), (20L, 25L)))
    assert(a.count == 15 && a.contains(4) && !a.contains(5) && a.contains(10) && !a.contains(20))
    assert(RowRanges.of((0L, 2L), (2L, 4L)).numRanges == 1)
    assert(a.containsAll(11, 19) && !a.containsAll(4, 11))
  }

  test("RowRanges union, intersect and minus equal a bit set model on random sets") {
    val rnd = new scala.util.Random(17)
    def randomSet(): (RowRanges, java.util.BitSet) = {
      val bits = new java.util.BitSet()
      val rs = (0 until rnd.nextInt(40)).map { _ =>
        val s = rnd.nextInt(300).toLong
        (s, s + rnd.nextInt(12))
      }
      rs.foreach { case (s, e) => bits.set(s.toInt, e.toInt) }
      (RowRanges.of(rs: _*), bits)
    }
    def model(bits: java.util.BitSet): RowRanges = {
      val out = new RowRanges.Builder
      var i = bits.nextSetBit(0)
      while (i >= 0) { val e = bits.nextClearBit(i); out.add(i.toLong, e.toLong); i = bits.nextSetBit(e) }
      out.result()
    }
    (0 until 500).foreach { _ =>
      val (a, x) = randomSet()
      val (b, y) = randomSet()
      val or = x.clone().asInstanceOf[java.util.BitSet]; or.or(y)
      val and = x.clone().asInstanceOf[java.util.BitSet]; and.and(y)
      val not = x.clone().asInstanceOf[java.util.BitSet]; not.andNot(y)
      assert(a.union(b) == model(or), s"$a | $b")
      assert(a.intersect(b) == model(and), s"$a & $b")
      assert(a.minus(b) == model(not), s"$a - $b")
    }
  }

  test("row evaluator: NaN, -0.0, nulls, Kleene NOT, strings as unsigned bytes, nested structs") {
    val d = new Float8Vector("d", allocator)
    val st = new org.apache.arrow.vector.complex.StructVector("st", allocator, FieldType.nullable(ArrowType.Struct.INSTANCE), null)
    val sv = new VarCharVector("s", allocator)
    try {
      val vals = Seq(Double.NaN, -0.0, 0.0, Double.NaN, Double.PositiveInfinity, 1.0)
      d.allocateNew(6); vals.zipWithIndex.foreach { case (v, i) => if (i == 3) d.setNull(i) else d.set(i, v) }; d.setValueCount(6)
      sv.allocateNew(); Seq("z", "é", "", "a" * 70, null, "ab").zipWithIndex.foreach {
        case (null, i) => sv.setNull(i); case (v, i) => sv.setSafe(i, v.getBytes(UTF_8))
      }; sv.setValueCount(6)
      val xs = st.addOrGet("x", FieldType.nullable(new ArrowType.Int(32, true)), classOf[IntVector])
      st.allocateNew()
      (0 until 6).foreach { i => xs.setSafe(i, i); if (i == 2) st.setNull(i) else st.setIndexDefined(i) }
      xs.setNull(5); xs.setValueCount(6); st.setValueCount(6)
      val vs = Seq(d, st, sv)
      def rows(f: Filter): Set[Int] = { val b = RowEvaluator.evaluate(f, vs, 6); (0 until 6).filter(b.get).toSet }
      val dc = col("d")
      assert(rows(Compare(dc, Eq, DoubleLit(0.0))) == Set(1, 2))
      assert(rows(Compare(dc, Eq, DoubleLit(-0.0))) == Set(1, 2))
      assert(rows(Compare(dc, Gt, DoubleLit(Double.PositiveInfinity))) == Set(0))
      assert(rows(Compare(dc, Eq, DoubleLit(Double.NaN))) == Set(0))
      assert(rows(Compare(dc, LtEq, DoubleLit(Double.NaN))) == Set(0, 1, 2, 4, 5))
      assert(rows(Not(Compare(dc, Lt, DoubleLit(1)))) == Set(0, 4, 5))
      assert(rows(Compare(dc, EqNullSafe, NullLit)) == Set(3))
      assert(rows(Not(Compare(dc, EqNullSafe, DoubleLit(1)))) == Set(0, 1, 2, 3, 4))
      assert(rows(In(dc, Vector(DoubleLit(Double.NaN), DoubleLit(-0.0)))) == Set(0, 1, 2))
      assert(rows(Not(In(dc, Vector(DoubleLit(1), NullLit)))) == Set())
      val sc = col("s")
      assert(rows(Compare(sc, Gt, s("z"))) == Set(1))
      assert(rows(Compare(sc, Lt, s("a"))) == Set(2))
      assert(rows(StartsWith(sc, "a".getBytes(UTF_8))) == Set(3, 5))
      assert(rows(StartsWith(sc, Array.emptyByteArray)) == Set(0, 1, 2, 3, 5))
      assert(rows(Compare(sc, GtEq, s("a" * 64))) == Set(0, 1, 3, 5))
      val xc = col("st", "x")
      assert(rows(Compare(xc, GtEq, LongLit(0))) == Set(0, 1, 3, 4)) // row 2: null struct, row 5: null x
      assert(rows(IsNull(xc)) == Set(2, 5))
      assert(rows(Or(IsNull(xc), Compare(dc, Gt, DoubleLit(0)))) == Set(0, 2, 4, 5))
      assert(RowEvaluator.unsupported(Compare(xc, Eq, s("a")), _ => Some(new ArrowType.Int(32, true))).isDefined)
      assert(RowEvaluator.unsupported(Compare(xc, Eq, LongLit(1)), _ => Some(new ArrowType.Int(32, true))).isEmpty)
      intercept[IllegalArgumentException](RowEvaluator.evaluate(Compare(xc, Eq, s("a")), vs, 6))
    } finally { d.close(); st.close(); sv.close() }
  }

  test("IN with long lists: dense, sparse and extreme keys select as a set does") {
    val rnd = new scala.util.Random(7)
    val n = 5000
    // row values: ids around zero, a spread of large magnitudes, the extremes, nulls
    val values: IndexedSeq[Option[Long]] = (0 until n).map { i =>
      if (i % 97 == 0) None
      else if (i % 31 == 0) Some(if (rnd.nextBoolean()) Long.MinValue else Long.MaxValue)
      else if (i % 3 == 0) Some(rnd.nextLong())
      else Some(rnd.nextInt(20000).toLong - 10000)
    }
    val v = new BigIntVector("x", allocator)
    try {
      v.allocateNew(n)
      values.zipWithIndex.foreach { case (o, i) => o.fold(v.setNull(i))(v.set(i, _)) }
      v.setValueCount(n)
      def rows(f: Filter): Set[Int] = { val b = RowEvaluator.evaluate(f, Seq(v), n); (0 until n).filter(b.get).toSet }
      def expect(set: Set[Long]): Set[Int] = values.indices.filter(i => values(i).exists(set.contains)).toSet
      val present = values.flatten.distinct
      // dense: ids of a small range (a bit per key), with repeats
      val dense = Vector.fill(3000)(rnd.nextInt(8000).toLong - 4000)
      // sparse: a few large keys (hash set), some present in the rows, some not
      val sparse = Vector.fill(300)(rnd.nextLong()) ++ rnd.shuffle(present).take(300)
      // the extremes: a range the bits cannot cover
      val extreme = Vector(Long.MinValue, Long.MaxValue, 0L) ++ (1 to 40).map(_.toLong)
      for (keys <- Seq(dense, sparse, extreme, present.toVector)) {
        val lits = keys.map(LongLit)
        assert(rows(In(x, lits)) == expect(keys.toSet))
        // a NULL in the list makes the misses NULL, not TRUE: NOT IN selects nothing
        assert(rows(Not(In(x, lits :+ NullLit))).isEmpty)
        assert(rows(Not(In(x, lits))) == values.indices.filter(i => values(i).exists(k => !keys.contains(k))).toSet)
      }
      // one set of bindings reused over batches gives the same answers
      val binds = new RowEvaluator.Binds
      val f = In(x, dense.map(LongLit))
      (1 to 3).foreach { _ =>
        val b = RowEvaluator.evaluate(f, Seq(v), n, binds)
        assert((0 until n).filter(b.get).toSet == expect(dense.toSet))
      }
    } finally v.close()
  }

  test("a leaf after a selective one reads only the kept rows' keys: each type read by address, as when every row is tested") {
    // a = i % 20: `a = 3` keeps one row in 20, so the leaves after it test few rows (read one by
    // one); `a >= 0` keeps every row, so they decode and test every row's key. Both must select the
    // rows the plain values below select (Kleene: a NULL b makes the AND NULL, and NOT of it NULL).
    val n = 4000
    val plain: IndexedSeq[Option[Long]] = (0 until n).map(i => if (i % 13 == 0) None else Some(((i * 37L) % 251) - 125))
    val a = new BigIntVector("a", allocator)
    val dec = new ArrowType.Decimal(7, 2, 128)
    val bs: Seq[FieldVector] = Seq(new TinyIntVector("b", allocator), new SmallIntVector("b", allocator),
      new IntVector("b", allocator), new DateDayVector("b", allocator),
      new DecimalVector("b", FieldType.nullable(dec), allocator))
    try {
      a.allocateNew(n); (0 until n).foreach(i => a.set(i, (i % 20).toLong)); a.setValueCount(n)
      bs.foreach { b =>
        b.allocateNew()
        (0 until n).foreach { i =>
          plain(i) match {
            case None => b.setNull(i)
            case Some(v) => b match {
              case t: TinyIntVector => t.setSafe(i, v.toInt)
              case t: SmallIntVector => t.setSafe(i, v.toInt)
              case t: IntVector => t.setSafe(i, v.toInt)
              case t: DateDayVector => t.setSafe(i, v.toInt)
              case t: DecimalVector => t.setSafe(i, JBigDecimal.valueOf(v, 2))
            }
          }
        }
        b.setValueCount(n)
        val lit: Long => Lit = b match {
          case _: DecimalVector => v => DecimalLit(JBigDecimal.valueOf(v, 2))
          case _ => v => LongLit(v)
        }
        val bc = col("b")
        val cases: Seq[(Filter, Long => Boolean)] =
          Seq(Eq, NotEq, Lt, LtEq, Gt, GtEq).flatMap { op =>
            Seq(-125L, -7L, 0L, 125L).map { k =>
              val holds: Long => Boolean = op match {
                case Eq => _ == k; case NotEq => _ != k; case Lt => _ < k
                case LtEq => _ <= k; case Gt => _ > k; case _ => _ >= k
              }
              (Compare(bc, op, lit(k)): Filter) -> holds
            }
          } ++ Seq(
            (Not(And(Compare(bc, GtEq, lit(-40)), Compare(bc, LtEq, lit(60)))): Filter) -> ((v: Long) => v < -40 || v > 60),
            (In(bc, Vector(-125L, 3L, 17L, 99L, 500L).map(lit)): Filter) -> Set(-125L, 3L, 17L, 99L, 500L),
            (Not(In(bc, Vector(0L, 1L, 2L).map(lit))): Filter) -> ((v: Long) => v < 0 || v > 2))
        for ((leaf, holds) <- cases; (first, keeps) <- Seq[(Filter, Int => Boolean)](
               Compare(col("a"), Eq, LongLit(3)) -> (_ % 20 == 3), Compare(col("a"), GtEq, LongLit(0)) -> (_ => true))) {
          val got = RowEvaluator.evaluate(And(first, leaf), Seq(a, b), n)
          val expect = (0 until n).filter(i => keeps(i) && plain(i).exists(holds))
          assert((0 until n).filter(got.get) == expect, s"${b.getClass.getSimpleName}: ${And(first, leaf)}")
        }
      }
    } finally { a.close(); bs.foreach(_.close()) }
  }

  test("FragmentStats: the file that stores a column, absent columns, nested paths") {
    import scala.jdk.CollectionConverters._
    import io.lancespark.schema.LanceSchema
    import io.lancespark.format.stats.PageStatistics
    import io.lancespark.table.model.{DataFileRef, FragmentInfo}
    val arrow = new org.apache.arrow.vector.types.pojo.Schema(java.util.Arrays.asList(
      new org.apache.arrow.vector.types.pojo.Field("a", FieldType.nullable(I64), null),
      new org.apache.arrow.vector.types.pojo.Field("st", FieldType.nullable(ArrowType.Struct.INSTANCE),
        java.util.Arrays.asList(new org.apache.arrow.vector.types.pojo.Field("y", FieldType.nullable(Str), null))),
      new org.apache.arrow.vector.types.pojo.Field("added", FieldType.nullable(I64), null)))
    val schema = LanceSchema.fromArrow(arrow) // ids: a 0, st 1, st.y 2, added 3
    val f1 = DataFileRef("one.lance", Vector(0, 1, 2), Vector(0, 1, 2), 2, 0, 0)
    val f2 = DataFileRef("two.lance", Vector(0), Vector(0), 2, 0, 0) // rewrites a
    val frag = FragmentInfo(0, Vector(f1, f2), None, 10,
      io.lancespark.proto.table.DataFragment.getDefaultInstance)
    val stats = Map(
      "one.lance" -> PageStatistics(Vector(PageStat(0, 0, 0, 0, 10, 0, Some(1L), Some(1L)), PageStat(2, 2, 0, 0, 10, 0, Some("q"), Some("r")))),
      "two.lance" -> PageStatistics(Vector(PageStat(0, 0, 0, 0, 10, 0, Some(5L), Some(6L)))))
    val cs = FragmentStats.columnStats(Set(col("a"), col("st", "y"), col("added"), col("nope")), schema, frag, r => stats.get(r.path))
    assert(cs(col("a")) == ColumnStats.Pages(I64, Vector(PageStat(0, 0, 0, 0, 10, 0, Some(5L), Some(6L)))))
    assert(cs(col("st", "y")).asInstanceOf[ColumnStats.Pages].pages.map(_.max) == Vector(Some("r")))
    assert(cs(col("added")) == ColumnStats.Absent)
    assert(!cs.contains(col("nope")))
    val f = And(Compare(col("a"), GtEq, LongLit(5)), Or(IsNull(col("added")), StartsWith(col("st", "y"), Array[Byte]('q'))))
    assert(StatsPruner.outcomes(f, cs, 10) == Outcomes.True)
    assert(schema.fields.asJava.size == 3)
  }

  test("toString for EXPLAIN") {
    val f = And(Compare(col("id"), GtEq, LongLit(100)), StartsWith(col("name"), "ab".getBytes(UTF_8)))
    assert(f.toString == "id >= 100 AND name STARTS_WITH 'ab'")
    assert(Or(f, Not(IsNull(col("a b", "c")))).toString == "(id >= 100 AND name STARTS_WITH 'ab') OR NOT `a b`.c IS NULL")
    assert(In(col("x"), Vector(LongLit(1), NullLit, s("it's"))).toString == "x IN (1, NULL, 'it\\'s')")
    assert(f.columns == Set(col("id"), col("name")))
  }
}
