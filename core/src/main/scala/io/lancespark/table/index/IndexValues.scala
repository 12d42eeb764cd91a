package io.lancespark.table.index

import java.math.{BigDecimal => JBigDecimal}
import java.nio.charset.StandardCharsets.UTF_8

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector._
import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType}

/** The values an index build takes, one per row, as plain JVM values: every
  * integer type, date and timestamp as `java.lang.Long`, floats as
  * `java.lang.Double`, strings as `String`, binaries as `Array[Byte]`,
  * decimals as `java.math.BigDecimal`, booleans as `java.lang.Boolean`; a
  * null as `null` (the form [[IndexFile.statValue]] reads back). */
object IndexValues {

  /** Whether BTREE and BITMAP indices are built here over a column of this type. */
  def supported(t: ArrowType): Boolean = t match {
    case i: ArrowType.Int => i.getIsSigned
    case f: ArrowType.FloatingPoint => f.getPrecision != FloatingPointPrecision.HALF
    case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 | _: ArrowType.Binary | _: ArrowType.LargeBinary => true
    case d: ArrowType.Date => d.getUnit == DateUnit.DAY
    case _: ArrowType.Timestamp | _: ArrowType.Bool => true
    case d: ArrowType.Decimal => d.getBitWidth == 128
    case _ => false
  }

  /** The order of the reference's index training (Arrow's sort, nulls
    * first): numbers by value (floats by total order: NaN last), strings by
    * their UTF-8 bytes, binaries bytewise, false before true. */
  val ordering: Ordering[Any] = new Ordering[Any] {
    def compare(a: Any, b: Any): Int = (a, b) match {
      case (null, null) => 0
      case (null, _) => -1
      case (_, null) => 1
      case (x: java.lang.Long, y: java.lang.Long) => java.lang.Long.compare(x, y)
      case (x: java.lang.Double, y: java.lang.Double) => java.lang.Double.compare(x, y)
      case (x: String, y: String) => bytes(x.getBytes(UTF_8), y.getBytes(UTF_8))
      case (x: Array[Byte], y: Array[Byte]) => bytes(x, y)
      case (x: JBigDecimal, y: JBigDecimal) => x.compareTo(y)
      case (x: java.lang.Boolean, y: java.lang.Boolean) => java.lang.Boolean.compare(x, y)
      case _ => throw new IllegalArgumentException(s"cannot order ${a.getClass.getName} and ${b.getClass.getName}")
    }
  }

  private def bytes(x: Array[Byte], y: Array[Byte]): Int = {
    val n = math.min(x.length, y.length)
    var i = 0
    while (i < n) {
      val c = (x(i) & 0xff) - (y(i) & 0xff)
      if (c != 0) return c
      i += 1
    }
    x.length - y.length
  }

  /** Whether two values are the same key (NaN equals NaN, as a sort groups them). */
  def same(a: Any, b: Any): Boolean = ordering.compare(a, b) == 0

  /** A nullable vector of `t` named `name` holding `values`. */
  def vector(name: String, t: ArrowType, values: IndexedSeq[Any], allocator: BufferAllocator): FieldVector = {
    val v = new Field(name, FieldType.nullable(t), null).createVector(allocator)
    try {
      v.setInitialCapacity(values.size)
      v.allocateNew()
      var i = 0
      while (i < values.size) { set(v, i, values(i)); i += 1 }
      v.setValueCount(values.size)
      v
    } catch { case e: Throwable => v.close(); throw e }
  }

  private def set(v: FieldVector, i: Int, value: Any): Unit =
    if (value == null) v match {
      case b: BaseFixedWidthVector => b.setNull(i)
      case b: BaseVariableWidthVector => b.setNull(i)
      case b: BaseLargeVariableWidthVector => b.setNull(i)
      case _ => throw new IllegalArgumentException(s"cannot set a null in ${v.getClass.getSimpleName}")
    } else (v, value) match {
      case (x: BigIntVector, l: java.lang.Long) => x.setSafe(i, l.longValue)
      case (x: IntVector, l: java.lang.Long) => x.setSafe(i, l.intValue)
      case (x: SmallIntVector, l: java.lang.Long) => x.setSafe(i, l.shortValue)
      case (x: TinyIntVector, l: java.lang.Long) => x.setSafe(i, l.byteValue)
      case (x: DateDayVector, l: java.lang.Long) => x.setSafe(i, l.intValue)
      case (x: TimeStampVector, l: java.lang.Long) => x.setSafe(i, l.longValue)
      case (x: Float8Vector, d: java.lang.Double) => x.setSafe(i, d.doubleValue)
      case (x: Float4Vector, d: java.lang.Double) => x.setSafe(i, d.floatValue)
      case (x: VarCharVector, s: String) => x.setSafe(i, s.getBytes(UTF_8))
      case (x: LargeVarCharVector, s: String) => x.setSafe(i, s.getBytes(UTF_8))
      case (x: VarBinaryVector, b: Array[Byte]) => x.setSafe(i, b)
      case (x: LargeVarBinaryVector, b: Array[Byte]) => x.setSafe(i, b)
      case (x: DecimalVector, d: JBigDecimal) => x.setSafe(i, d.setScale(x.getScale))
      case (x: BitVector, b: java.lang.Boolean) => x.setSafe(i, if (b) 1 else 0)
      case _ => throw new IllegalArgumentException(
        s"a ${value.getClass.getName} value does not go into a ${v.getClass.getSimpleName}")
    }

  /** Row `i` of `v` in this form (null for a null). */
  def get(v: ValueVector, i: Int): Any = IndexFile.statValue(v, i).orNull
}
