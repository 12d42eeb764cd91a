package io.lancespark.table.aggregate

import java.math.{BigDecimal => JBigDecimal, BigInteger}
import java.nio.charset.StandardCharsets.UTF_8

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.{DecimalVector, IntVector, ValueVector, VarCharVector}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.format.arrow.NullCounts
import io.lancespark.table.aggregate.AggFn._
import io.lancespark.table.aggregate.Expr._
import io.lancespark.table.aggregate.NumType._

/** Partial aggregates worked out by hand: the partial sums of a group add up
  * to its exact sum and each stays within its input type; values beyond a
  * long; overflow errors; groups of strings, integers and NULLs. */
class AggregatorSuite extends AnyFunSuite with BeforeAndAfterAll {

  private val allocator = new RootAllocator()
  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0) finally allocator.close()
  }

  private def decimals(name: String, p: Int, s: Int, values: Seq[Option[String]]): DecimalVector = {
    val v = new DecimalVector(name, allocator, p, s)
    v.allocateNew(values.size)
    values.zipWithIndex.foreach {
      case (Some(x), i) => v.setSafe(i, new JBigDecimal(x).setScale(s))
      case (None, i) => v.setNull(i)
    }
    v.setValueCount(values.size)
    v
  }

  private def strings(name: String, values: Seq[Option[String]]): VarCharVector = {
    val v = new VarCharVector(name, allocator)
    v.allocateNew()
    values.zipWithIndex.foreach {
      case (Some(x), i) => v.setSafe(i, x.getBytes(UTF_8))
      case (None, i) => v.setNull(i)
    }
    v.setValueCount(values.size)
    v
  }

  private def ints(name: String, values: Seq[Option[Int]]): IntVector = {
    val v = new IntVector(name, allocator)
    v.allocateNew(values.size)
    values.zipWithIndex.foreach { case (Some(x), i) => v.setSafe(i, x); case (None, i) => v.setNull(i) }
    v.setValueCount(values.size)
    v
  }

  /** (grouping values, partial results) of each row, NULL as None, numbers as BigIntegers. */
  private def run(spec: Aggregation, vectors: ValueVector*)(rows: Array[Int] = Array.range(0, vectors.head.getValueCount))
      : Vector[(Vector[Option[Any]], Vector[Option[Any]])] = {
    try {
      val byName = vectors.map(v => v.getField.getName -> v).toMap
      val a = new Aggregator(spec)
      a.add(byName, _ => None, rows)
      def value(v: Any): Option[Any] = Option(v).map {
        case l: java.lang.Long => BigInteger.valueOf(l)
        case other => other
      }
      a.rows.toVector.map { r =>
        r.take(spec.groupBy.size).map(value).toVector -> r.drop(spec.groupBy.size).map(value).toVector
      }
    } finally vectors.foreach(_.close())
  }

  private def big(v: Option[Any]): BigInteger = v match {
    case Some(b: BigInteger) => b
    case other => fail(s"not a sum: $other")
  }

  private def count(v: Option[Any]): Long = big(v).longValueExact
  private def b(v: Long): BigInteger = BigInteger.valueOf(v)

  test("a group's partial sums add up to its sum, each within the input's decimal range") {
    val values = Seq.fill(7)(Some("99.9")) ++ Seq(None, Some("-0.5"))
    val out = run(Aggregation(Vector.empty, Vector(Sum(Col("x", Dec(3, 1))), CountStar)),
      decimals("x", 3, 1, values))()
    val sums = out.map(r => big(r._2(0)))
    // 7 * 999 - 5 tenths, set aside whenever 99.9 would be passed
    assert(sums.reduce(_ add _) == BigInteger.valueOf(7 * 999 - 5))
    assert(sums.forall(_.abs.compareTo(BigInteger.valueOf(999)) <= 0), sums)
    assert(sums.size >= 7, sums)
    // COUNT(*) is counted once: the rows set aside carry 0
    assert(out.map(r => count(r._2(1))).sum == values.size)
  }

  test("no GROUP BY, no NULLs, several batches: the partial sums add up to the sum, each within range") {
    // the one-group loop: the sum leaves DECIMAL(3,1) after ten values of 99.9, is set aside, starts again
    val first = Seq.fill(12)(Some("99.9")) ++ Seq(Some("-0.5"), Some("0.3"))
    val second = Seq(Some("-99.9"), Some("50.0")) ++ Seq.fill(9)(Some("99.9"))
    val spec = Aggregation(Vector.empty, Vector(Sum(Col("x", Dec(3, 1))), CountStar, Sum(Col("i", Integral(32)))))
    val a = new Aggregator(spec)
    val vectors = Seq(decimals("x", 3, 1, first), ints("i", first.indices.map(j => Some(Int.MaxValue - j))),
      decimals("x", 3, 1, second), ints("i", second.indices.map(j => Some(-j))))
    try {
      a.add(Map("x" -> vectors(0), "i" -> vectors(1)), _ => None, Array.range(0, first.size))
      a.add(Map("x" -> vectors(2), "i" -> vectors(3)), _ => None, Array.range(0, second.size))
      val out = a.rows.toVector.map(_.toVector.map(v => Option(v).map {
        case l: java.lang.Long => BigInteger.valueOf(l)
        case other => other
      }))
      val sums = out.flatMap(r => r(0).map(_.asInstanceOf[BigInteger]))
      assert(sums.reduce(_ add _) == BigInteger.valueOf(12 * 999 - 5 + 3 - 999 + 500 + 9 * 999))
      assert(sums.forall(_.abs.compareTo(BigInteger.valueOf(999)) <= 0), sums)
      assert(out.map(r => count(r(1))).sum == first.size + second.size)
      // the integer sums stay within INT's range too, and add up to the exact sum
      val intSums = out.flatMap(r => r(2).map(_.asInstanceOf[BigInteger]))
      val exact = first.indices.map(j => b(Int.MaxValue.toLong - j)).reduce(_ add _).add(b(-(0 until second.size).sum.toLong))
      assert(intSums.reduce(_ add _) == exact)
      assert(intSums.forall(_.abs.compareTo(b(Int.MaxValue.toLong)) <= 0), intSums)
    } finally vectors.foreach(_.close())
  }

  test("NullCounts.any and count: a null at any position (in a whole word, in the tail), or none, as Arrow counts") {
    for (n <- Seq(1, 63, 64, 65, 130, 200); at <- Seq(-1, 0, n / 2, n - 1)) {
      val v = ints("i", (0 until n).map(j => if (j == at) None else Some(j)))
      try {
        assert(NullCounts.any(v) == (at >= 0), s"n=$n null at $at")
        assert(NullCounts.count(v) == v.getNullCount, s"n=$n null at $at")
      }
      finally v.close()
    }
  }

  test("fewSetAside: a sum is pushed when its input stays within 1/1,024 of its type's range, or its type is wide") {
    def agg(e: Expr): Aggregation = Aggregation(Vector.empty, Vector(Sum(e), CountStar))
    val bounds = Map("price" -> new JBigDecimal("20000.00"), "rate" -> new JBigDecimal("0.09"),
      "q" -> new JBigDecimal("100"), "big" -> new JBigDecimal("1000000"))
    val maxAbs: String => Option[JBigDecimal] = bounds.get
    // DECIMAL(7,2): largest 99,999.99; 20,000.00 * 1,024 is beyond, 97.65 * 1,024 within, 97.66 beyond
    assert(!Aggregator.fewSetAside(agg(Col("price", Dec(7, 2))), maxAbs))
    assert(Aggregator.fewSetAside(agg(Col("p", Dec(7, 2))), Map("p" -> new JBigDecimal("97.65")).get))
    assert(!Aggregator.fewSetAside(agg(Col("p", Dec(7, 2))), Map("p" -> new JBigDecimal("97.66")).get))
    // no statistics: wide types, and decimals of 10 digits or more (values would have to exceed
    // 1/1,024 of the range, 97,656.25 in a DECIMAL(10,2), for a sum to be set aside every 1,024 rows)
    assert(!Aggregator.fewSetAside(agg(Col("nostats", Dec(7, 2))), maxAbs))
    assert(!Aggregator.fewSetAside(agg(Col("nostats", Dec(9, 2))), maxAbs))
    assert(Aggregator.fewSetAside(agg(Col("nostats", Dec(10, 2))), maxAbs))
    assert(Aggregator.fewSetAside(agg(Col("nostats", Dec(15, 2))), maxAbs))
    // statistics that bound it outweigh the guess: 20,000.00 in a DECIMAL(10,2) is within, 10,000,000.00 not
    assert(Aggregator.fewSetAside(agg(Col("price", Dec(10, 2))), maxAbs))
    assert(!Aggregator.fewSetAside(agg(Col("big", Dec(10, 2))), Map("big" -> new JBigDecimal("10000000.00")).get))
    assert(!Aggregator.fewSetAside(agg(Col("nostats", Integral(32))), maxAbs))
    assert(Aggregator.fewSetAside(agg(Col("nostats", Integral(64))), maxAbs))
    assert(Aggregator.fewSetAside(agg(Col("nostats", Dec(18, 2))), maxAbs))
    // through arithmetic: price * (1 - rate) in DECIMAL(13,4) (largest 999,999,999.9999): 20,000 * 1.09 * 1,024 within
    val net = Arith(Times, Col("price", Dec(7, 2)), Arith(Minus, Lit(JBigDecimal.ONE, Dec(1, 0)), Col("rate", Dec(3, 2)), Dec(4, 2)), Dec(13, 4))
    assert(Aggregator.fewSetAside(agg(net), maxAbs))
    // an INT column of at most 100: 102,400 within 2^31 - 1; q * big (1e8) * 1,024 beyond, in INT
    assert(Aggregator.fewSetAside(agg(Col("q", Integral(32))), maxAbs))
    assert(!Aggregator.fewSetAside(agg(Arith(Times, Col("q", Integral(32)), Col("big", Integral(32)), Integral(32))), maxAbs))
    // counts, minima and maxima never set anything aside
    assert(Aggregator.fewSetAside(Aggregation(Vector.empty, Vector(Min(Col("price", Dec(7, 2))), CountStar)), maxAbs))
  }

  test("integer groups coming in order, then out of order: one group per value") {
    val keys = Seq(Some(1), Some(1), Some(2), Some(3), Some(3), Some(2), Some(1), Some(5), None, Some(5), Some(-4))
    val out = run(Aggregation(Vector("k"), Vector(CountStar)), ints("k", keys))()
    val counts = out.map(r => r._1.head.map(v => BigInteger.valueOf(v.toString.toLong)) -> count(r._2(0))).toMap
    assert(counts == Map(Some(b(1)) -> 3L, Some(b(2)) -> 2L, Some(b(3)) -> 2L, Some(b(5)) -> 2L, None -> 1L, Some(b(-4)) -> 1L))
  }

  test("complete: one sum per group in the SQL result type (10 more digits), or an overflow error") {
    val values = Seq.fill(7)(Some("99.9")) ++ Seq(None, Some("-0.5"))
    val spec = Aggregation(Vector.empty, Vector(Sum(Col("x", Dec(3, 1))), CountStar))
    val v = decimals("x", 3, 1, values)
    try {
      val a = new Aggregator(spec, complete = true)
      a.add(Map("x" -> v), _ => None, Array.range(0, values.size))
      assert(a.rows.toVector.map(_.toVector) == Vector(Vector(java.lang.Long.valueOf(7 * 999 - 5), java.lang.Long.valueOf(9))))
    } finally v.close()
    assert(Aggregator.resultType(Dec(3, 1)) == Dec(13, 1) && Aggregator.resultType(Dec(35, 2)) == Dec(38, 2))
    assert(Aggregator.completable(spec) && !Aggregator.completable(Aggregation(Vector.empty, Vector(Sum(Col("x", Dec(29, 0)))))))
    assert(!Aggregator.completable(Aggregation(Vector.empty, Vector(Sum(Col("n", Integral(64)))))))
    // beyond the result type: an error (a caller completes only sums that cannot get there)
    val big = "9" * 38
    val w = decimals("x", 38, 0, Seq(Some(big), Some(big)))
    try {
      val a = new Aggregator(Aggregation(Vector.empty, Vector(Sum(Col("x", Dec(38, 0))))), complete = true)
      intercept[ArithmeticException](a.add(Map("x" -> w), _ => None, Array(0, 1)))
    } finally w.close()
  }

  test("values beyond a long: exact sums, minimum and maximum") {
    val e37 = "1" + "0" * 37
    val values = Seq(Some(e37), Some(e37), Some("-" + e37), Some("9" + "0" * 36), Some("5"), None)
    val out = run(Aggregation(Vector.empty, Vector(Sum(Col("x", Dec(38, 0))), Min(Col("x", Dec(38, 0))),
      Max(Col("x", Dec(38, 0))))), decimals("x", 38, 0, values))()
    val total = values.flatten.map(new BigInteger(_)).reduce(_ add _)
    assert(out.map(r => big(r._2(0))).reduce(_ add _) == total)
    assert(out.head._2(1).contains(new BigInteger("-" + e37)))
    assert(out.head._2(2).contains(new BigInteger(e37)))
  }

  test("a product out of its decimal type's range is an overflow error, not a wrapped or NULL value") {
    val x = Col("x", Dec(38, 0))
    val spec = Aggregation(Vector.empty, Vector(Sum(Arith(Times, x, x, Dec(38, 0)))))
    val e = intercept[ArithmeticException](run(spec, decimals("x", 38, 0, Seq(Some("1" + "0" * 19))))())
    assert(e.getMessage.contains("NUMERIC_VALUE_OUT_OF_RANGE") && e.getMessage.contains("DECIMAL(38,0)"), e.getMessage)
    // an integer product past 32 bits in an int expression
    val q = Col("q", Integral(32))
    intercept[ArithmeticException](run(Aggregation(Vector.empty, Vector(Sum(Arith(Times, q, q, Integral(32))))),
      ints("q", Seq(Some(50000))))())
  }

  test("decimal arithmetic at the result's scale: price * (1 - rate)") {
    val price = Col("p", Dec(12, 2))
    val rate = Col("r", Dec(4, 2))
    val e = Arith(Times, price, Arith(Minus, Lit(JBigDecimal.ONE, Dec(1, 0)), rate, Dec(5, 2)), Dec(18, 4))
    val out = run(Aggregation(Vector.empty, Vector(Sum(e))),
      decimals("p", 12, 2, Seq(Some("10.25"), Some("3.00"), None)),
      decimals("r", 4, 2, Seq(Some("0.10"), None, Some("0.5"))))()
    // 10.25 * 0.90 = 9.2250; the other rows have a NULL operand
    assert(out.map(r => big(r._2(0))).reduce(_ add _) == BigInteger.valueOf(92250))
  }

  test("groups of a string and an integer, NULL a group of its own; only the rows chosen") {
    val g = strings("g", Seq(Some("a"), Some("b"), None, Some("a"), Some("a"), None, Some("b")))
    val k = ints("k", Seq(Some(1), Some(1), Some(1), Some(2), Some(1), None, Some(1)))
    val v = ints("v", Seq(Some(1), Some(2), Some(3), Some(4), Some(5), Some(6), Some(7)))
    val spec = Aggregation(Vector("g", "k"), Vector(Sum(Col("v", Integral(32))), Count(Left("v"))))
    val out = run(spec, g, k, v)(Array(0, 1, 2, 3, 4, 5)).map { case (keys, vals) =>
      keys.map(_.map { case b: Array[Byte] => new String(b, UTF_8); case o => o }) -> vals
    }.toMap
    assert(out == Map(
      Vector(Some("a"), Some(b(1))) -> Vector(Some(b(6)), Some(b(2))),
      Vector(Some("b"), Some(b(1))) -> Vector(Some(b(2)), Some(b(1))),
      Vector(None, Some(b(1))) -> Vector(Some(b(3)), Some(b(1))),
      Vector(Some("a"), Some(b(2))) -> Vector(Some(b(4)), Some(b(1))),
      Vector(None, None) -> Vector(Some(b(6)), Some(b(1)))))
    // one grouping column without a NULL row: no NULL group
    val one = run(Aggregation(Vector("g"), Vector(CountStar)), strings("g", Seq(Some("a"), None, Some("b"))))(Array(0, 2))
      .map(_._1.map(_.map { case a: Array[Byte] => new String(a, UTF_8) }))
    assert(one.toSet == Set(Vector(Some("a")), Vector(Some("b"))), one)
  }

  test("minimum, maximum and count of an expression, with NULLs, chosen rows, with and without groups (seeded)") {
    val rnd = new scala.util.Random(20261129)
    (0 until 40).foreach { round =>
      val n = 1 + rnd.nextInt(300)
      val keys = Seq.fill(n)(if (rnd.nextInt(10) == 0) None else Some(rnd.nextInt(4)))
      val values = Seq.fill(n)(if (rnd.nextInt(4) == 0) None else Some(rnd.nextInt() >> rnd.nextInt(31)))
      val chosen = (0 until n).filter(_ => rnd.nextInt(3) > 0).toArray
      val x = Col("x", Integral(32))
      val plusOne = Arith(Plus, Widen(x, Integral(64)), Lit(JBigDecimal.ONE, Integral(64)), Integral(64))
      val fns = Vector(Min(x), Max(x), Count(Right(plusOne)), Max(plusOne))
      Seq(Vector.empty[String], Vector("k")).foreach { groupBy =>
        val out = run(Aggregation(groupBy, fns), ints("k", keys), ints("x", values))(chosen)
        val rows = chosen.toSeq.map(j => (if (groupBy.isEmpty) None else keys(j), values(j)))
        val expected = rows.groupBy(_._1).map { case (k, rs) =>
          val vs = rs.flatMap(_._2).map(_.toLong)
          val keyOut = if (groupBy.isEmpty) Vector.empty else Vector(k.map(v => b(v.toLong)))
          keyOut -> Vector(vs.reduceOption(_ min _).map(b), vs.reduceOption(_ max _).map(b), Some(b(vs.size.toLong)),
            vs.reduceOption(_ max _).map(v => b(v + 1)))
        }
        val got = out.toMap
        if (chosen.isEmpty && groupBy.isEmpty) assert(out.isEmpty || out.map(_._2(2)) == Vector(Some(b(0))), s"round $round")
        else assert(got == expected, s"round $round, groupBy $groupBy")
      }
    }
  }
}
