package io.lancespark.spark.write

import java.math.{BigDecimal => JBigDecimal}

import org.apache.arrow.vector._
import org.apache.arrow.vector.complex.{FixedSizeListVector, LargeListVector, ListVector, StructVector}
import org.apache.arrow.vector.types.TimeUnit
import org.apache.spark.sql.catalyst.expressions.SpecializedGetters
import org.apache.spark.sql.types._

import io.lancespark.schema.LanceFormatException
import io.lancespark.spark.shim.TimeTypes

/** Writes Spark values (from an InternalRow or ArrayData) into one Arrow
  * vector of the target Lance type. The target may be narrower or differently
  * shaped than Spark's type (appending to a dataset pylance wrote: unsigned
  * ints, other time units, fixed-size lists); values that do not fit are an
  * error naming the column, never silently changed. */
abstract class ArrowFieldWriter(val vector: ValueVector, val column: String) {

  private val nullable: Boolean = vector.getField.isNullable

  /** A NULL for a field the dataset declares non-nullable fails the task (and so
    * the write, before anything is committed): pylance refuses to read a file
    * holding one, so writing it would corrupt the dataset. */
  final def write(in: SpecializedGetters, ordinal: Int, index: Int): Unit =
    if (!in.isNullAt(ordinal)) setValue(in, ordinal, index)
    else if (nullable) setNull(index)
    else throw new LanceFormatException(
      s"column '$column' is declared non-nullable by the dataset, but the data being written has a NULL " +
        "in it; nothing was committed (filter or fill the NULLs, or write to a nullable column)")

  protected def setValue(in: SpecializedGetters, ordinal: Int, index: Int): Unit

  protected def setNull(index: Int): Unit = vector match {
    case v: BaseFixedWidthVector    => v.setNull(index)
    case v: BaseVariableWidthVector => v.setNull(index)
    case v: BaseLargeVariableWidthVector => v.setNull(index)
    case v: ListVector              => v.setNull(index)
    case v: LargeListVector         => v.setNull(index)
    case v: FixedSizeListVector     => v.setNull(index)
    case v: StructVector            => v.setNull(index)  // (the 2.0 file writer refuses it, naming the column)
    case _: NullVector              => ()
    case v => throw new IllegalStateException(s"no null support for ${v.getClass.getSimpleName}")
  }

  protected def fail(problem: String): Nothing =
    throw new LanceFormatException(s"column '$column': $problem")

  /** Sets the final value count (recursively) after a batch. */
  def finish(count: Int): Unit = vector.setValueCount(count)
}

object ArrowFieldWriter {

  /** A writer for `vector` taking Spark values of `sparkType`. */
  def apply(vector: ValueVector, sparkType: DataType, column: String): ArrowFieldWriter = (vector, sparkType) match {
    case (v: BitVector, BooleanType) => simple(v, column)((in, o, i) => v.setSafe(i, if (in.getBoolean(o)) 1 else 0))
    case (v: TinyIntVector, ByteType) => simple(v, column)((in, o, i) => v.setSafe(i, in.getByte(o)))
    case (v: SmallIntVector, ShortType) => simple(v, column)((in, o, i) => v.setSafe(i, in.getShort(o)))
    case (v: IntVector, IntegerType) => simple(v, column)((in, o, i) => v.setSafe(i, in.getInt(o)))
    case (v: BigIntVector, LongType) => simple(v, column)((in, o, i) => v.setSafe(i, in.getLong(o)))
    case (v: Float4Vector, FloatType) => simple(v, column)((in, o, i) => v.setSafe(i, in.getFloat(o)))
    case (v: Float8Vector, DoubleType) => simple(v, column)((in, o, i) => v.setSafe(i, in.getDouble(o)))
    case (v: Float2Vector, FloatType) =>
      simple(v, column)((in, o, i) => v.setSafeWithPossibleTruncate(i, in.getFloat(o)))
    case (v: UInt1Vector, ShortType) =>
      ranged(v, column, 0L, 255L)(_.getShort(_).toLong)((i, x) => v.setSafe(i, x.toInt))
    case (v: UInt2Vector, IntegerType) =>
      ranged(v, column, 0L, 65535L)(_.getInt(_).toLong)((i, x) => v.setSafe(i, x.toInt))
    case (v: UInt4Vector, LongType) =>
      ranged(v, column, 0L, 4294967295L)(_.getLong(_))((i, x) => v.setSafe(i, x.toInt))
    case (v: UInt8Vector, d: DecimalType) if d.scale == 0 =>
      simple(v, column) { (in, o, i) =>
        val bd = in.getDecimal(o, d.precision, d.scale).toJavaBigDecimal.toBigIntegerExact
        if (bd.signum < 0 || bd.bitLength > 64) throw new LanceFormatException(
          s"column '$column': value $bd does not fit the dataset's uint64 type")
        v.setSafe(i, bd.longValue)
      }
    // decimals of up to 18 digits are a long in Spark: its unscaled value, sign-extended to 128 bits
    case (v: DecimalVector, d: DecimalType) if d.precision <= Decimal.MAX_LONG_DIGITS =>
      checkDecimal(v, d, column)
      simple(v, column)((in, o, i) => v.setSafe(i, in.getDecimal(o, d.precision, d.scale).toUnscaledLong))
    case (v: DecimalVector, d: DecimalType) => decimal(v, d, column)((i, bd) => v.setSafe(i, bd))
    case (v: Decimal256Vector, d: DecimalType) => decimal(v, d, column)((i, bd) => v.setSafe(i, bd))
    case (v: VarCharVector, StringType) => simple(v, column)((in, o, i) => setUtf8(v, i, in.getUTF8String(o)))
    case (v: LargeVarCharVector, StringType) =>
      simple(v, column)((in, o, i) => v.setSafe(i, in.getUTF8String(o).getBytes))
    case (v: VarBinaryVector, BinaryType) => simple(v, column)((in, o, i) => v.setSafe(i, in.getBinary(o)))
    case (v: LargeVarBinaryVector, BinaryType) => simple(v, column)((in, o, i) => v.setSafe(i, in.getBinary(o)))
    case (v: FixedSizeBinaryVector, BinaryType) =>
      simple(v, column) { (in, o, i) =>
        val b = in.getBinary(o)
        if (b.length != v.getByteWidth) throw new LanceFormatException(
          s"column '$column': a ${b.length}-byte value does not fit fixed_size_binary:${v.getByteWidth}")
        v.setSafe(i, b)
      }
    case (v: DateDayVector, DateType) => simple(v, column)((in, o, i) => v.setSafe(i, in.getInt(o)))
    case (v: DateMilliVector, DateType) => simple(v, column)((in, o, i) => v.setSafe(i, in.getInt(o) * 86400000L))
    case (v: TimeStampVector, TimestampType | TimestampNTZType) =>
      val unit = v.getField.getType.asInstanceOf[org.apache.arrow.vector.types.pojo.ArrowType.Timestamp].getUnit
      simple(v, column)((in, o, i) => v.setSafe(i, fromMicros(in.getLong(o), unit, column)))
    case (v: DurationVector, _: DayTimeIntervalType) =>
      simple(v, column)((in, o, i) => v.setSafe(i, fromMicros(in.getLong(o), v.getUnit, column)))
    case (v: TimeNanoVector, t) if TimeTypes.isTime(t) => simple(v, column)((in, o, i) => v.setSafe(i, in.getLong(o)))
    case (v: TimeMicroVector, t) if TimeTypes.isTime(t) =>
      simple(v, column)((in, o, i) => v.setSafe(i, exactDiv(in.getLong(o), 1000L, "microsecond", column)))
    case (v: TimeMilliVector, t) if TimeTypes.isTime(t) =>
      simple(v, column)((in, o, i) => v.setSafe(i, exactDiv(in.getLong(o), 1000000L, "millisecond", column).toInt))
    case (v: TimeSecVector, t) if TimeTypes.isTime(t) =>
      simple(v, column)((in, o, i) => v.setSafe(i, exactDiv(in.getLong(o), 1000000000L, "second", column).toInt))
    case (v: ListVector, ArrayType(et, _)) => new ListWriter(v, et, column)
    case (v: LargeListVector, ArrayType(et, _)) => new LargeListWriter(v, et, column)
    case (v: FixedSizeListVector, ArrayType(et, _)) => new FixedSizeListWriter(v, et, column)
    case (v: ListVector, m: MapType) => new MapAsListWriter(v, m, column)
    case (v: StructVector, BinaryType) if SparkToArrow.isBlobV2(v.getField) => new BlobV2BinaryWriter(v, column)
    case (v: StructVector, st: StructType) => new StructWriter(v, st, column)
    case (v, t) =>
      throw new LanceFormatException(
        s"column '$column': Spark type ${t.simpleString} cannot be written to Lance type ${v.getField.getType}")
  }

  /** Sets vector value `index` from field `ordinal` of `in`. Our own SAM type,
    * not a Function3 (which is not specialized: it would box both ints for
    * every value written). */
  private trait Setter { def apply(in: SpecializedGetters, ordinal: Int, index: Int): Unit }

  /** Field `ordinal` of `in` as a long (see [[Setter]]). */
  private trait LongGetter { def apply(in: SpecializedGetters, ordinal: Int): Long }

  private def simple(v: ValueVector, column: String)(set: Setter): ArrowFieldWriter =
    new ArrowFieldWriter(v, column) {
      override protected def setValue(in: SpecializedGetters, ordinal: Int, index: Int): Unit = set(in, ordinal, index)
    }

  /** A string's bytes without copying them to an array first where they are
    * on the heap (rows from Spark's operators). */
  private def setUtf8(v: VarCharVector, i: Int, s: org.apache.spark.unsafe.types.UTF8String): Unit =
    s.getBaseObject match {
      case a: Array[Byte] if s.getBaseOffset >= org.apache.spark.unsafe.Platform.BYTE_ARRAY_OFFSET =>
        v.setSafe(i, a, (s.getBaseOffset - org.apache.spark.unsafe.Platform.BYTE_ARRAY_OFFSET).toInt, s.numBytes)
      case _ => v.setSafe(i, s.getBytes)
    }

  private def ranged(v: ValueVector, column: String, lo: Long, hi: Long)(get: LongGetter)(
      set: (Int, Long) => Unit): ArrowFieldWriter =
    simple(v, column) { (in, o, i) =>
      val x = get(in, o)
      if (x < lo || x > hi) throw new LanceFormatException(
        s"column '$column': value $x does not fit the dataset's type ${v.getField.getType} [$lo, $hi]")
      set(i, x)
    }

  private def decimal(v: ValueVector, d: DecimalType, column: String)(set: (Int, JBigDecimal) => Unit): ArrowFieldWriter = {
    checkDecimal(v, d, column)
    simple(v, column)((in, o, i) => set(i, in.getDecimal(o, d.precision, d.scale).toJavaBigDecimal))
  }

  private def checkDecimal(v: ValueVector, d: DecimalType, column: String): Unit = {
    val t = v.getField.getType.asInstanceOf[org.apache.arrow.vector.types.pojo.ArrowType.Decimal]
    if (t.getScale != d.scale || t.getPrecision < d.precision)
      throw new LanceFormatException(
        s"column '$column': Spark ${d.simpleString} cannot be written to decimal(${t.getPrecision},${t.getScale})")
  }

  private def exactDiv(x: Long, by: Long, unit: String, column: String): Long = {
    if (x % by != 0) throw new LanceFormatException(
      s"column '$column': value has precision finer than the dataset's $unit unit")
    x / by
  }

  private def fromMicros(micros: Long, unit: TimeUnit, column: String): Long = unit match {
    case TimeUnit.MICROSECOND => micros
    case TimeUnit.NANOSECOND  => Math.multiplyExact(micros, 1000L)
    case TimeUnit.MILLISECOND => exactDiv(micros, 1000L, "millisecond", column)
    case TimeUnit.SECOND      => exactDiv(micros, 1000000L, "second", column)
  }

  private final class ListWriter(v: ListVector, et: DataType, column: String) extends ArrowFieldWriter(v, column) {
    private val items = ArrowFieldWriter(v.getDataVector, et, s"$column.element")
    private val bulk = BulkItems.of(v.getDataVector, et)
    override protected def setValue(in: SpecializedGetters, ordinal: Int, index: Int): Unit = {
      val a = in.getArray(ordinal)
      val start = v.startNewValue(index)
      val n = a.numElements()
      if (!bulk.exists(_.copy(a, start, n))) {
        var k = 0
        while (k < n) { items.write(a, k, start + k); k += 1 }
      }
      v.endValue(index, n)
    }
  }

  private final class LargeListWriter(v: LargeListVector, et: DataType, column: String) extends ArrowFieldWriter(v, column) {
    private val items = ArrowFieldWriter(v.getDataVector, et, s"$column.element")
    override protected def setValue(in: SpecializedGetters, ordinal: Int, index: Int): Unit = {
      val a = in.getArray(ordinal)
      val start = v.startNewValue(index.toLong)
      var k = 0
      while (k < a.numElements()) { items.write(a, k, (start + k).toInt); k += 1 }
      v.endValue(index, a.numElements().toLong)
    }
  }

  private final class FixedSizeListWriter(v: FixedSizeListVector, et: DataType, column: String)
      extends ArrowFieldWriter(v, column) {
    private val items = ArrowFieldWriter(v.getDataVector, et, s"$column.element")
    private val bulk = BulkItems.of(v.getDataVector, et)
    private val size = v.getListSize
    override protected def setValue(in: SpecializedGetters, ordinal: Int, index: Int): Unit = {
      val a = in.getArray(ordinal)
      if (a.numElements() != size)
        fail(s"a vector of ${a.numElements()} elements does not fit the fixed-size list of $size")
      val start = v.startNewValue(index)
      if (!bulk.exists(_.copy(a, start, size))) {
        var k = 0
        while (k < size) { items.write(a, k, start + k); k += 1 }
      }
    }
    override protected def setNull(index: Int): Unit = {
      v.setNull(index)
      // keep the items aligned: a null vector still occupies `size` item slots
      val start = index * size
      var k = 0
      while (k < size) { nullItem(start + k); k += 1 }
    }
    private def nullItem(i: Int): Unit = v.getDataVector match {
      case d: BaseFixedWidthVector => d.setNull(i)
      case d: BaseVariableWidthVector => d.setNull(i)
      case d => fail(s"unsupported fixed-size list item ${d.getClass.getSimpleName}")
    }
  }

  private final class MapAsListWriter(v: ListVector, m: MapType, column: String) extends ArrowFieldWriter(v, column) {
    private val entries = v.getDataVector match {
      case s: StructVector => s
      case other => fail(s"map column stored as ${other.getField.getType}, expected list<struct<key, value>>")
    }
    private val keys = ArrowFieldWriter(entries.getChildByOrdinal(0), m.keyType, s"$column.key")
    private val values = ArrowFieldWriter(entries.getChildByOrdinal(1), m.valueType, s"$column.value")
    override protected def setValue(in: SpecializedGetters, ordinal: Int, index: Int): Unit = {
      val map = in.getMap(ordinal)
      val start = v.startNewValue(index)
      var k = 0
      while (k < map.numElements()) {
        entries.setIndexDefined(start + k)
        keys.write(map.keyArray(), k, start + k)
        values.write(map.valueArray(), k, start + k)
        k += 1
      }
      v.endValue(index, map.numElements())
    }
  }

  /** BINARY values into a 2.2 blob column (`lance.blob.v2`: a struct of
    * `data` and `uri`): the bytes as `data`, `uri` NULL; a NULL is a NULL value. */
  private final class BlobV2BinaryWriter(v: StructVector, column: String) extends ArrowFieldWriter(v, column) {
    private val data: LargeVarBinaryVector = v.getChild("data") match {
      case d: LargeVarBinaryVector => d
      case other => fail(s"a blob column whose data is ${other.getField.getType}, not large_binary")
    }
    private val uri: ValueVector = v.getChild("uri")
    override protected def setValue(in: SpecializedGetters, ordinal: Int, index: Int): Unit = {
      v.setIndexDefined(index)
      data.setSafe(index, in.getBinary(ordinal))
      uri match {
        case u: BaseVariableWidthVector => u.setNull(index)
        case u: BaseLargeVariableWidthVector => u.setNull(index)
        case _ => ()
      }
    }
  }

  private final class StructWriter(v: StructVector, st: StructType, column: String) extends ArrowFieldWriter(v, column) {
    private val children = st.fields.zipWithIndex.map { case (f, i) =>
      ArrowFieldWriter(v.getChildByOrdinal(i), f.dataType, s"$column.${f.name}")
    }
    override protected def setValue(in: SpecializedGetters, ordinal: Int, index: Int): Unit = {
      val row = in.getStruct(ordinal, st.length)
      v.setIndexDefined(index)
      var k = 0
      while (k < children.length) { children(k).write(row, k, index); k += 1 }
    }
  }
}
