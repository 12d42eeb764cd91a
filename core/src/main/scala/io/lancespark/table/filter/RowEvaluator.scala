package io.lancespark.table.filter

import java.math.{BigDecimal => JBigDecimal}

import scala.collection.mutable

import org.apache.arrow.memory.ArrowBuf
import org.apache.arrow.memory.util.{Float16, MemoryUtil}
import org.apache.arrow.vector._
import org.apache.arrow.vector.complex.StructVector
import org.apache.arrow.vector.types.TimeUnit
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.format.arrow.DictionaryColumn
import io.lancespark.table.filter.Filter._

/** Exact evaluation of a [[Filter]] over one batch of decoded Arrow vectors
  * (typed as `LanceField.toArrow`, as the readers return them), with Spark's
  * semantics on the values Spark sees. Vectorized: each column is decoded
  * once per batch into long keys (see [[Domain]]) or read in place (strings,
  * binaries), each leaf is one loop, logic works on 64-row words. */
object RowEvaluator {

  /** The rows (0 until rowCount) where the filter is TRUE. `vectors` are the
    * batch's top-level vectors, found by field name. */
  def evaluate(filter: Filter, vectors: Seq[ValueVector], rowCount: Int): java.util.BitSet =
    evaluate(filter, vectors, rowCount, new Binds)

  /** As above, binding the filter's leaves through `binds` (to evaluate one
    * filter over many batches, binding each leaf once). */
  def evaluate(filter: Filter, vectors: Seq[ValueVector], rowCount: Int, binds: Binds): java.util.BitSet =
    evaluate(filter, vectors, rowCount, binds, Nil)

  /** As above; `dictionaries(i)`, where given, holds the rows of `vectors(i)`
    * as items of a dictionary: a string test then runs once per item. */
  def evaluate(filter: Filter, vectors: Seq[ValueVector], rowCount: Int, binds: Binds,
               dictionaries: Seq[Option[DictionaryColumn]]): java.util.BitSet = {
    val byName = vectors.map(v => v.getField.getName -> v).toMap
    val dicts = vectors.zip(dictionaries).collect { case (v, Some(d)) => v.getField.getName -> d }.toMap
    evaluate(filter, (c: Column) => {
      val rc = resolvePath(c, byName)
      if (c.size == 1) rc.copy(dictionary = dicts.get(c.head)) else rc
    }, rowCount, binds)
  }

  /** As above, with each column path resolved by `column`. */
  def evaluate(filter: Filter, column: Column => ResolvedColumn, rowCount: Int, binds: Binds = new Binds): java.util.BitSet = {
    val ctx = new Batch(column, rowCount, binds)
    val (t, _) = eval(filter, ctx, ctx.ones)
    java.util.BitSet.valueOf(t)
  }

  /** Leaves bound to their column's domain, each (leaf, domain) once: binding
    * sorts an IN list, which may hold thousands of values. */
  final class Binds {
    private val bound = new java.util.IdentityHashMap[Filter, (Domain, BoundLeaf)]()
    def apply(leaf: Filter, domain: Domain): BoundLeaf = {
      val hit = bound.get(leaf)
      if (hit != null && hit._1 == domain) hit._2
      else {
        val b = BoundLeaf.bind(leaf, domain).fold(e => throw new IllegalArgumentException(e), identity)
        bound.put(leaf, domain -> b)
        b
      }
    }
  }

  /** Outcome bit sets (TRUE rows, FALSE rows; the others are NULL). */
  def evaluate3(filter: Filter, vectors: Seq[ValueVector], rowCount: Int): (java.util.BitSet, java.util.BitSet) = {
    val byName = vectors.map(v => v.getField.getName -> v).toMap
    val b = new Batch((c: Column) => resolvePath(c, byName), rowCount, new Binds)
    val (t, f) = eval(filter, b, b.ones)
    (java.util.BitSet.valueOf(t), java.util.BitSet.valueOf(f))
  }

  /** None if the row evaluator can evaluate the filter on columns of these
    * Arrow types (path -> type), else why not. */
  def unsupported(filter: Filter, typeOf: Column => Option[ArrowType]): Option[String] = filter match {
    case AlwaysTrue | AlwaysFalse => None
    case And(l, r) => unsupported(l, typeOf).orElse(unsupported(r, typeOf))
    case Or(l, r) => unsupported(l, typeOf).orElse(unsupported(r, typeOf))
    case Not(c) => unsupported(c, typeOf)
    case leaf =>
      val c = leaf.columns.head
      typeOf(c) match {
        case None => Some(s"column ${name(c)} not found")
        case Some(t) => Domain.of(t) match {
          case None => Some(s"column ${name(c)} of type $t cannot be filtered")
          case Some(d) => BoundLeaf.bind(leaf, d).left.toOption
        }
      }
  }

  /** A column of the batch: its leaf vector and the vectors of its parent
    * structs (whose nulls make the leaf NULL). */
  final case class ResolvedColumn(leaf: ValueVector, parents: Seq[ValueVector],
                                  dictionary: Option[DictionaryColumn] = None)

  private def resolvePath(c: Column, byName: Map[String, ValueVector]): ResolvedColumn = {
    val top = byName.getOrElse(c.head, throw new IllegalArgumentException(
      s"column ${name(c)}: no vector named '${c.head}' among ${byName.keys.mkString(", ")}"))
    var cur: ValueVector = top
    val parents = mutable.ArrayBuffer.empty[ValueVector]
    c.tail.foreach { n =>
      cur match {
        case s: StructVector =>
          parents += s
          cur = Option(s.getChild(n).asInstanceOf[ValueVector]).getOrElse(
            throw new IllegalArgumentException(s"column ${name(c)}: struct has no field '$n'"))
        case other => throw new IllegalArgumentException(s"column ${name(c)}: '${other.getField.getName}' is not a struct")
      }
    }
    ResolvedColumn(cur, parents.toSeq)
  }

  // ------------------------------------------------------------- per batch

  private final class Batch(resolve: Column => ResolvedColumn, val n: Int, val binds: Binds) {
    val words: Int = (n + 63) >>> 6
    private val cols = mutable.Map.empty[Column, ColumnData]
    def column(c: Column): ColumnData = cols.getOrElseUpdate(c, new ColumnData(resolve(c), this))
    /** All n bits set. */
    def ones: Array[Long] = {
      val a = new Array[Long](words)
      java.util.Arrays.fill(a, -1L)
      if ((n & 63) != 0) a(words - 1) = (1L << (n & 63)) - 1
      a
    }
  }

  /** One column of a batch: validity words (1 = non-null, parents included)
    * and, decoded on first use, keys / decimals. */
  private final class ColumnData(rc: ResolvedColumn, b: Batch) {
    val vector: ValueVector = rc.leaf
    val n: Int = b.n
    /** The rows as dictionary items, when the reader saw them so. */
    val dictionary: Option[DictionaryColumn] = rc.dictionary.filter(_.rows == n)
    if (vector.getValueCount < n)
      throw new IllegalArgumentException(s"vector '${vector.getField.getName}' has ${vector.getValueCount} values, not $n")
    val arrowType: ArrowType = vector.getField.getType
    val domain: Domain = Domain.of(arrowType).getOrElse(
      throw new IllegalArgumentException(s"column '${vector.getField.getName}' of type $arrowType cannot be filtered"))

    val valid: Array[Long] = {
      val v = validityWords(vector, n, b.words)
      rc.parents.foreach { p =>
        val pv = validityWords(p, n, b.words)
        var i = 0
        while (i < v.length) { v(i) &= pv(i); i += 1 }
      }
      v
    }

    /** The rows as fixed-width dictionary items (integer keys), or null: the
      * vector's values may then be hollow (unwritten), and every key is read
      * through the items. */
    private val items: DictionaryColumn = dictionary.filter(_.isFixed).orNull
    /** `items` where a test pays to run once per item (at most as many items
      * as rows; each row then takes its item's outcome), else null: the tests
      * run on the rows' keys (read through the items where there are some). */
    val fixed: DictionaryColumn = if (items != null && items.itemCount <= n) items else null

    private var decodedKeys: Array[Long] = null
    /** Every row's key, decoded on first use. */
    def keys: Array[Long] = {
      if (fixed != null) // (its tests go through the items)
        throw new IllegalStateException(s"column '${vector.getField.getName}': keys of dictionary items' rows")
      if (decodedKeys == null) decodedKeys = if (items != null) itemKeysOfRows(items, n) else decodeKeys(vector, n)
      decodedKeys
    }
    /** Whether a test should read the keys of `care`'s rows one by one rather
      * than decode every row's: few rows to test, keys not decoded yet, and a
      * vector whose keys are read by address (0: not). */
    def readFew(care: Array[Long]): Boolean = items == null && decodedKeys == null && addressWidth > 0 && few(care, n)
    lazy val addressWidth: Int = keyWidth(vector)
    lazy val decimals: Array[JBigDecimal] = {
      if (items != null) // (such columns are decimals of at most 18 digits, compared as keys)
        throw new IllegalStateException(s"column '${vector.getField.getName}': decimals of dictionary items")
      val out = new Array[JBigDecimal](n)
      vector match {
        case d: DecimalVector => var i = 0; while (i < n) { if (!d.isNull(i)) out(i) = d.getObject(i); i += 1 }
        case d: Decimal256Vector => var i = 0; while (i < n) { if (!d.isNull(i)) out(i) = d.getObject(i); i += 1 }
        case other => throw new IllegalArgumentException(s"not a decimal vector: ${other.getClass.getSimpleName}")
      }
      out
    }
  }

  private def validityWords(v: ValueVector, n: Int, words: Int): Array[Long] = {
    val out = new Array[Long](words)
    v match {
      case _: NullVector => ()
      case _ =>
        val buf = v.getValidityBuffer
        val bytes = (n + 7) >>> 3
        if (buf == null || buf.capacity < bytes) {
          var i = 0
          while (i < n) { if (!v.isNull(i)) out(i >>> 6) |= 1L << i; i += 1 }
        } else {
          var w = 0
          while (w < words) {
            val base = w * 8
            if (base + 8 <= bytes) out(w) = buf.getLong(base.toLong)
            else {
              var x = 0L; var k = 0
              while (base + k < bytes) { x |= (buf.getByte((base + k).toLong) & 0xffL) << (8 * k); k += 1 }
              out(w) = x
            }
            w += 1
          }
          if ((n & 63) != 0) out(words - 1) &= (1L << (n & 63)) - 1
        }
    }
    out
  }

  /** Every row's key through its dictionary item (garbage for nulls). */
  private def itemKeysOfRows(d: DictionaryColumn, n: Int): Array[Long] = {
    val ids = d.itemIds
    val keys = d.itemKeys
    val out = new Array[Long](n)
    var i = 0
    while (i < n) { out(i) = keys(ids(i)); i += 1 }
    out
  }

  /** Keys (see [[Domain.Keyed]] / [[Domain.Exact]]) of every row; garbage for nulls. */
  private def decodeKeys(v: ValueVector, n: Int): Array[Long] = {
    val out = new Array[Long](n)
    def data: ArrowBuf = v.getDataBuffer
    var i = 0
    val width = keyWidth(v)
    if (width > 0) {
      // the common key types, read by address (ArrowBuf's getters check bounds on every call), as
      // `keyAt` reads one row's: a loop per width
      val a = addressOf(v, n, width)
      (width: @annotation.switch) match {
        case 1 => while (i < n) { out(i) = MemoryUtil.getByte(a + i).toLong; i += 1 }
        case 2 => while (i < n) { out(i) = MemoryUtil.getShort(a + 2L * i).toLong; i += 1 }
        case 4 => while (i < n) { out(i) = MemoryUtil.getInt(a + 4L * i).toLong; i += 1 }
        case 8 => while (i < n) { out(i) = MemoryUtil.getLong(a + 8L * i); i += 1 }
        case _ => while (i < n) { out(i) = MemoryUtil.getLong(a + 16L * i); i += 1 }
      }
    } else v match {
      case _: UInt1Vector => val d = data; while (i < n) { out(i) = d.getByte(i.toLong) & 0xffL; i += 1 }
      case _: UInt2Vector => val d = data; while (i < n) { out(i) = d.getShort(2L * i) & 0xffffL; i += 1 }
      case _: UInt4Vector => val d = data; while (i < n) { out(i) = d.getInt(4L * i) & 0xffffffffL; i += 1 }
      case _: UInt8Vector => val d = data; while (i < n) { out(i) = d.getLong(8L * i) ^ Long.MinValue; i += 1 }
      case _: Float2Vector => val d = data; while (i < n) { out(i) = Domain.doubleKey(Float16.toFloat(d.getShort(2L * i)).toDouble); i += 1 }
      case _: Float4Vector => val d = data; while (i < n) { out(i) = Domain.doubleKey(d.getFloat(4L * i).toDouble); i += 1 }
      case _: Float8Vector => val d = data; while (i < n) { out(i) = Domain.doubleKey(d.getDouble(8L * i)); i += 1 }
      case _: BitVector => val d = data; while (i < n) { out(i) = (d.getByte((i >>> 3).toLong) >>> (i & 7)) & 1L; i += 1 }
      case _: DateMilliVector => val d = data; while (i < n) { out(i) = Math.floorDiv(d.getLong(8L * i), 86400000L); i += 1 }
      case _: TimeSecVector => val d = data; while (i < n) { out(i) = d.getInt(4L * i).toLong * 1000000000L; i += 1 }
      case _: TimeMilliVector => val d = data; while (i < n) { out(i) = d.getInt(4L * i).toLong * 1000000L; i += 1 }
      case _: TimeMicroVector => val d = data; while (i < n) { out(i) = d.getLong(8L * i) * 1000L; i += 1 }
      case _: TimeNanoVector => val d = data; while (i < n) { out(i) = d.getLong(8L * i); i += 1 }
      case t: TimeStampVector =>
        val unit = t.getField.getType.asInstanceOf[ArrowType.Timestamp].getUnit
        fillMicros(data, unit, n, out)
      case t: DurationVector => fillMicros(data, t.getUnit, n, out)
      case d: Decimal256Vector => val buf = d.getDataBuffer; while (i < n) { out(i) = buf.getLong(32L * i); i += 1 }
      case other => throw new IllegalArgumentException(s"cannot compare values of ${other.getClass.getSimpleName}")
    }
    out
  }

  /** Sets the bit of each row of `care` whose dictionary item passes:
    * `pass(k)` is 1 where item k passes, 0 where not (each item tested once);
    * each row takes its item's outcome, without branching. */
  private def itemLoop(d: DictionaryColumn, n: Int, care: Array[Long], out: Array[Long], pass: Array[Long]): Unit =
    if (few(care, n)) {
      val ids = d.itemIds
      var w = 0
      while (w < care.length) {
        var m = care(w)
        while (m != 0L) {
          val i = (w << 6) + java.lang.Long.numberOfTrailingZeros(m)
          out(w) |= pass(ids(i)) << i
          m &= m - 1
        }
        w += 1
      }
    } else {
      val rows = new Array[Long](out.length)
      d.markRows(pass, rows)
      var w = 0
      while (w < out.length) { out(w) |= rows(w) & care(w); w += 1 }
    }

  /** 1 for each item key in [lo, hi] (not in it, when `negate`), else 0:
    * `key - lo <= hi - lo` as unsigned numbers (lo <= hi). */
  private def itemsInRange(keys: Array[Long], lo: Long, hi: Long, negate: Boolean): Array[Long] = {
    val pass = new Array[Long](keys.length)
    val span = hi - lo
    val flip = if (negate) 1L else 0L
    var k = 0
    while (k < keys.length) {
      pass(k) = (if (java.lang.Long.compareUnsigned(keys(k) - lo, span) <= 0) 1L else 0L) ^ flip
      k += 1
    }
    pass
  }

  /** 1 for each item key in the set, else 0. */
  private def itemsIn(keys: Array[Long], contains: Long => Boolean): Array[Long] = {
    val pass = new Array[Long](keys.length)
    var k = 0
    while (k < keys.length) { if (contains(keys(k))) pass(k) = 1L; k += 1 }
    pass
  }

  /** The width of the values of a vector whose keys are read by address
    * (`decodeKeys` every row's, `keyAt` one row's); 0 for the others. */
  private def keyWidth(v: ValueVector): Int = v match {
    case _: TinyIntVector => 1
    case _: SmallIntVector => 2
    case _: IntVector | _: DateDayVector => 4
    case _: BigIntVector => 8
    case _: DecimalVector => 16 // its low word, as decodeKeys reads it
    case _ => 0
  }

  /** Row i's key, as `decodeKeys` decodes it, from values of `width` bytes at `a`. */
  private def keyAt(a: Long, width: Int, i: Int): Long = (width: @annotation.switch) match {
    case 1 => MemoryUtil.getByte(a + i).toLong
    case 2 => MemoryUtil.getShort(a + 2L * i).toLong
    case 4 => MemoryUtil.getInt(a + 4L * i).toLong
    case 8 => MemoryUtil.getLong(a + 8L * i)
    case _ => MemoryUtil.getLong(a + 16L * i)
  }

  /** Few rows to test: at most one in 8 of the batch's (a filter's earlier
    * leaves kept few), where reading their keys one by one costs less than
    * decoding and testing every row's. */
  private def few(care: Array[Long], n: Int): Boolean = {
    var c = 0L
    var w = 0
    while (w < care.length) { c += java.lang.Long.bitCount(care(w)); w += 1 }
    c * 8 <= n
  }

  /** Sets the bit of each row of `care` whose key passes `test`, reading only
    * those rows' keys (as [[rangeLoop]] and [[inLoop]] do over every row's). */
  private def testAt(v: ValueVector, n: Int, width: Int, care: Array[Long], out: Array[Long],
                     test: Long => Boolean): Unit = {
    val a = addressOf(v, n, width)
    var w = 0
    while (w < care.length) {
      var m = care(w)
      while (m != 0L) {
        val i = (w << 6) + java.lang.Long.numberOfTrailingZeros(m)
        if (test(keyAt(a, width, i))) out(w) |= 1L << i
        m &= m - 1
      }
      w += 1
    }
  }

  /** The address of `v`'s values, checked once to hold `n` values of `width` bytes. */
  private def addressOf(v: ValueVector, n: Int, width: Int): Long = {
    val d = v.getDataBuffer
    if (n > 0) d.checkBytes(0L, width.toLong * n)
    d.memoryAddress()
  }

  private def fillMicros(d: ArrowBuf, unit: TimeUnit, n: Int, out: Array[Long]): Unit = {
    var i = 0
    unit match {
      case TimeUnit.SECOND => while (i < n) { out(i) = d.getLong(8L * i) * 1000000L; i += 1 }
      case TimeUnit.MILLISECOND => while (i < n) { out(i) = d.getLong(8L * i) * 1000L; i += 1 }
      case TimeUnit.MICROSECOND => while (i < n) { out(i) = d.getLong(8L * i); i += 1 }
      case TimeUnit.NANOSECOND => while (i < n) { out(i) = Math.floorDiv(d.getLong(8L * i), 1000L); i += 1 }
    }
  }

  // ------------------------------------------------------------ evaluation

  /** (TRUE rows, FALSE rows) as words, exact for the rows of `care` (words;
    * the other rows' bits are arbitrary): the right side of an AND is only
    * evaluated where the left is not FALSE, of an OR where it is not TRUE. */
  private def eval(f: Filter, b: Batch, care: Array[Long]): (Array[Long], Array[Long]) = f match {
    case AlwaysTrue => (b.ones, new Array[Long](b.words))
    case AlwaysFalse => (new Array[Long](b.words), b.ones)
    case And(l, r) =>
      val (lt, lf) = eval(l, b, care)
      val (rt, rf) = eval(r, b, andNot(care, lf))
      var i = 0
      while (i < lt.length) { lt(i) &= rt(i); lf(i) |= rf(i); i += 1 }
      (lt, lf)
    case Or(l, r) =>
      val (lt, lf) = eval(l, b, care)
      val (rt, rf) = eval(r, b, andNot(care, lt))
      var i = 0
      while (i < lt.length) { lt(i) |= rt(i); lf(i) &= rf(i); i += 1 }
      (lt, lf)
    case Not(c) => val (t, fl) = eval(c, b, care); (fl, t)
    case leaf =>
      val col = b.column(leaf.columns.head)
      val bound = b.binds(leaf, col.domain)
      val valid = col.valid
      val pass = passWords(bound.test, col, b, andWords(care, valid))
      val all = b.ones
      def bits(o: Outcomes): Array[Long] = {
        val out = new Array[Long](b.words)
        var i = 0
        while (i < out.length) {
          var w = 0L
          if (bound.onNull.contains(o)) w |= ~valid(i)
          if (bound.onPass.contains(o)) w |= valid(i) & pass(i)
          if (bound.onFail.contains(o)) w |= valid(i) & ~pass(i)
          out(i) = w & all(i)
          i += 1
        }
        out
      }
      (bits(Outcomes.True), bits(Outcomes.False))
  }

  private def andNot(a: Array[Long], b: Array[Long]): Array[Long] = {
    val out = new Array[Long](a.length)
    var i = 0
    while (i < a.length) { out(i) = a(i) & ~b(i); i += 1 }
    out
  }

  private def andWords(a: Array[Long], b: Array[Long]): Array[Long] = {
    val out = new Array[Long](a.length)
    var i = 0
    while (i < a.length) { out(i) = a(i) & b(i); i += 1 }
    out
  }

  /** Sets the bit of each row of `care` whose key is in [lo, hi] (not in it,
    * when `negate`), a word of 64 rows at a time without branching on the
    * keys: `key - lo <= hi - lo` as unsigned 64-bit numbers, i.e. no borrow in
    * `(hi - lo) - (key - lo)`. (A branch per row costs a misprediction on
    * about every other row of a filter keeping a few tenths of them.) */
  private def rangeLoop(keys: Array[Long], n: Int, care: Array[Long], out: Array[Long],
                        lo: Long, hi: Long, negate: Boolean): Unit = {
    if (lo > hi) { // an empty range: no key is in it
      if (negate) { var w = 0; while (w < care.length) { out(w) |= care(w); w += 1 } }
      return
    }
    val span = hi - lo
    val flip = if (negate) 1L else 0L
    var w = 0
    while (w < care.length) {
      val m = care(w)
      if (m != 0L) {
        val base = w << 6
        val stop = math.min(n, base + 64)
        var i = base
        var word = 0L
        while (i < stop) {
          val x = keys(i) - lo
          val borrow = ((~span & x) | (~(span ^ x) & (span - x))) >>> 63
          word |= ((borrow ^ 1L) ^ flip) << i
          i += 1
        }
        out(w) |= word & m
      }
      w += 1
    }
  }

  /** As [[rangeLoop]], for the keys in a set. */
  private def inLoop(keys: Array[Long], care: Array[Long], out: Array[Long], contains: Long => Boolean): Unit = {
    var w = 0
    while (w < care.length) {
      var m = care(w)
      while (m != 0L) {
        val i = (w << 6) + java.lang.Long.numberOfTrailingZeros(m)
        if (contains(keys(i))) out(w) |= 1L << i
        m &= m - 1
      }
      w += 1
    }
  }

  /** Words of the rows of `care` whose (non-null) value passes the test;
    * bits of the other rows are arbitrary. */
  private def passWords(test: ValueTest, col: ColumnData, b: Batch, care: Array[Long]): Array[Long] = {
    import ValueTest._
    val n = b.n
    val out = new Array[Long](b.words)
    test match {
      case Const(r) => if (r) java.util.Arrays.fill(out, -1L)
      case KeyCmp(op, k) =>
        // the rows whose key is in [lo, hi] (not in it: negate): plain longs, not a tuple of them,
        // as this runs for every leaf of every batch
        def range(lo: Long, hi: Long, negate: Boolean): Unit =
          if (col.fixed != null) {
            if (lo <= hi) itemLoop(col.fixed, n, care, out, itemsInRange(col.fixed.itemKeys, lo, hi, negate))
            else if (negate) { var w = 0; while (w < care.length) { out(w) |= care(w); w += 1 } }
          } else if (col.readFew(care)) testAt(col.vector, n, col.addressWidth, care, out, key => (key >= lo && key <= hi) != negate)
          else rangeLoop(col.keys, n, care, out, lo, hi, negate)
        op match {
          case CompareOp.Eq | CompareOp.EqNullSafe => range(k, k, negate = false)
          case CompareOp.NotEq => range(k, k, negate = true)
          case CompareOp.Lt => if (k != Long.MinValue) range(Long.MinValue, k - 1, negate = false)
          case CompareOp.LtEq => range(Long.MinValue, k, negate = false)
          case CompareOp.Gt => if (k != Long.MaxValue) range(k + 1, Long.MaxValue, negate = false)
          case CompareOp.GtEq => range(k, Long.MaxValue, negate = false)
        }
      case in: KeyIn =>
        if (col.fixed != null) itemLoop(col.fixed, n, care, out, itemsIn(col.fixed.itemKeys, in.contains))
        else if (col.readFew(care)) testAt(col.vector, n, col.addressWidth, care, out, in.contains)
        else inLoop(col.keys, care, out, in.contains)
      case DecCmp(op, v) =>
        val ds = col.decimals
        var i = 0
        while (i < n) { if (ds(i) != null && ValueTest.holds(op, ds(i).compareTo(v))) out(i >>> 6) |= 1L << i; i += 1 }
      case DecIn(vs) =>
        val ds = col.decimals
        var i = 0
        while (i < n) { if (ds(i) != null && vs.exists(_.compareTo(ds(i)) == 0)) out(i >>> 6) |= 1L << i; i += 1 }
      case BytesCmp(op, v) =>
        bytesLoop(col, out, care) { (s, len) => ValueTest.holds(op, java.util.Arrays.compareUnsigned(s, 0, len, v, 0, v.length)) }
      case BytesIn(vs) =>
        val arr = vs.toArray
        bytesLoop(col, out, care) { (s, len) =>
          var lo = 0; var hi = arr.length - 1; var found = false
          while (!found && lo <= hi) {
            val mid = (lo + hi) >>> 1
            val c = java.util.Arrays.compareUnsigned(arr(mid), 0, arr(mid).length, s, 0, len)
            if (c == 0) found = true else if (c < 0) lo = mid + 1 else hi = mid - 1
          }
          found
        }
      case BytesPrefix(p) =>
        bytesLoop(col, out, care, limit = p.length) { (s, len) => len >= p.length && java.util.Arrays.equals(s, 0, p.length, p, 0, p.length) }
    }
    out
  }

  /** A test of a value's bytes (a function type of its own: `(Array[Byte], Int) => Boolean`
    * is not specialized, and would box every length it is called with). */
  private trait BytesTest { def apply(s: Array[Byte], len: Int): Boolean }

  /** Calls `test` with each non-null row's bytes (copied into a scratch array,
    * at most `limit` of them; the length passed is the value's full length). */
  private def bytesLoop(col: ColumnData, out: Array[Long], care: Array[Long], limit: Int = Int.MaxValue)(
      test: BytesTest): Unit = {
    var scratch = new Array[Byte](64)
    // dictionary items: each item tested once, its rows take its outcome
    val itemPass: Array[Byte] = col.dictionary.fold(Array.empty[Byte]) { d =>
      val pass = new Array[Byte](d.itemCount)
      var k = 0
      while (k < pass.length) {
        d.withItem(k) { (bytes, offset, len) =>
          val copy = math.min(len, limit)
          if (copy > scratch.length) scratch = new Array[Byte](math.max(copy, scratch.length * 2))
          System.arraycopy(bytes, offset, scratch, 0, copy)
          if (test(scratch, len)) pass(k) = 1
        }
        k += 1
      }
      pass
    }
    val dict: DictionaryColumn = col.dictionary.orNull
    def run(start: Int => Long, end: Int => Long, data: ArrowBuf): Unit = {
      var w = 0
      while (w < care.length) {
        var m = care(w)
        while (m != 0L) {
          val i = (w << 6) + java.lang.Long.numberOfTrailingZeros(m)
          val k = if (dict == null) -1 else dict.itemOf(i)
          if (k >= 0) {
            if (itemPass(k) == 1) out(w) |= 1L << i
          } else {
            val s = start(i)
            val len = (end(i) - s).toInt
            val copy = math.min(len, limit)
            if (copy > scratch.length) scratch = new Array[Byte](math.max(copy, scratch.length * 2))
            data.getBytes(s, scratch, 0, copy)
            if (test(scratch, len)) out(w) |= 1L << i
          }
          m &= m - 1
        }
        w += 1
      }
    }
    col.vector match {
      case v: BaseVariableWidthVector =>
        val o = v.getOffsetBuffer
        run(i => o.getInt(4L * i).toLong, i => o.getInt(4L * (i + 1)).toLong, v.getDataBuffer)
      case v: BaseLargeVariableWidthVector =>
        val o = v.getOffsetBuffer
        run(i => o.getLong(8L * i), i => o.getLong(8L * (i + 1)), v.getDataBuffer)
      case v: FixedSizeBinaryVector =>
        val w = v.getByteWidth.toLong
        run(i => w * i, i => w * (i + 1), v.getDataBuffer)
      case other => throw new IllegalArgumentException(s"cannot compare bytes of ${other.getClass.getSimpleName}")
    }
  }
}
