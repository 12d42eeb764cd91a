package io.lancespark.spark.read

import java.math.{BigDecimal => JBigDecimal, BigInteger}

import org.apache.arrow.vector._
import org.apache.arrow.vector.complex.{FixedSizeListVector, LargeListVector, ListVector, MapVector, StructVector}
import org.apache.spark.sql.types._
import org.apache.spark.sql.vectorized.{ColumnVector, ColumnarArray, ColumnarMap}
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String

import io.lancespark.format.arrow.NullCounts
import io.lancespark.table.scan.ColumnDictionary

/** A Spark column over an Arrow vector decoded by the codec, converting on
  * access where Spark's representation differs (unsigned widening, time units,
  * 64-bit dates, fixed-size lists and binaries). No per-row objects except
  * where Spark's API returns one (strings wrap the Arrow buffer in place).
  * With a `selection`, row `i` is the vector's row `selection(i)` (the rows a
  * filter or deletions kept, read in place rather than copied). With a
  * `fixed` dictionary (integers, dates, decimals of at most 18 digits) of the
  * vector's rows, the values are read through its items: the vector's own
  * values may be hollow (unwritten), only its validity is read. */
final class LanceColumnVector(sparkType: DataType, val vector: ValueVector,
                              dictionary: Option[ColumnDictionary] = None,
                              strings: DictionaryStrings = DictionaryStrings.Fresh,
                              selection: Option[Array[Int]] = None,
                              fixed: Option[ColumnDictionary] = None) extends ColumnVector(sparkType) {

  // the selection, or null for every row (read on each access: a field, not an Option)
  private val rows: Array[Int] = selection.orNull

  @inline private def at(rowId: Int): Int = if (rows == null) rowId else rows(rowId)

  override def isNullAt(rowId: Int): Boolean = isNullAt0(at(rowId))
  override def getBoolean(rowId: Int): Boolean = getBoolean0(at(rowId))
  override def getByte(rowId: Int): Byte = getByte0(at(rowId))
  override def getShort(rowId: Int): Short = getShort0(at(rowId))
  override def getInt(rowId: Int): Int = getInt0(at(rowId))
  override def getLong(rowId: Int): Long = getLong0(at(rowId))
  override def getFloat(rowId: Int): Float = getFloat0(at(rowId))
  override def getDouble(rowId: Int): Double = getDouble0(at(rowId))
  override def getDecimal(rowId: Int, precision: Int, scale: Int): Decimal = getDecimal0(at(rowId), precision, scale)
  override def getUTF8String(rowId: Int): UTF8String = getUTF8String0(at(rowId))
  override def getBinary(rowId: Int): Array[Byte] = getBinary0(at(rowId))
  override def getArray(rowId: Int): ColumnarArray = getArray0(at(rowId))
  override def getMap(rowId: Int): ColumnarMap = getMap0(at(rowId))

  private val children: Array[LanceColumnVector] = (sparkType, vector) match {
    case (st: StructType, v: StructVector) =>
      st.fields.zipWithIndex.map { case (f, i) =>
        new LanceColumnVector(f.dataType, v.getChildByOrdinal(i), selection = selection)
      }
    case (mt: MapType, v: MapVector) =>
      val entries = v.getDataVector.asInstanceOf[StructVector]
      Array(new LanceColumnVector(mt.keyType, entries.getChildByOrdinal(0)),
        new LanceColumnVector(mt.valueType, entries.getChildByOrdinal(1)))
    case (at: ArrayType, v: ListVector)          => Array(new LanceColumnVector(at.elementType, v.getDataVector))
    case (at: ArrayType, v: LargeListVector)     => Array(new LanceColumnVector(at.elementType, v.getDataVector))
    case (at: ArrayType, v: FixedSizeListVector) => Array(new LanceColumnVector(at.elementType, v.getDataVector))
    case _ => Array.empty
  }

  // Hot-path state resolved once per batch: Spark calls the getters once per
  // row, so they read the Arrow buffers directly (the vectors are immutable
  // while the batch is alive) instead of going through Arrow's checked accessors.
  private val nullCount: Int = NullCounts.count(vector)
  private val validityAddress: Long =
    if (nullCount == 0) 0L
    else vector match {
      case _: NullVector => 0L
      case v: FieldVector if v.getValidityBufferAddress != 0L => v.getValidityBufferAddress
      case _ => 0L
    }
  private val fixedItems: ColumnDictionary = fixed.filter(_.rows == vector.getValueCount).orNull
  private val kind: Int = vector match {
    case _ if fixedItems != null => LanceColumnVector.FixedItems
    case _: BigIntVector  => LanceColumnVector.Int64
    // microseconds since the epoch, as Spark's TIMESTAMP and TIMESTAMP_NTZ hold them
    case _: TimeStampMicroVector | _: TimeStampMicroTZVector => LanceColumnVector.Int64
    case _: IntVector     => LanceColumnVector.Int32
    case _: DateDayVector => LanceColumnVector.Int32
    case _: SmallIntVector => LanceColumnVector.Int16
    case _: TinyIntVector => LanceColumnVector.Int8
    case _: Float8Vector  => LanceColumnVector.Float64
    case _: Float4Vector  => LanceColumnVector.Float32
    case _: DecimalVector => LanceColumnVector.Decimal128
    case v: VarCharVector if dictionary.exists(_.rows == v.getValueCount) => LanceColumnVector.Utf8Dictionary
    case _: VarCharVector => LanceColumnVector.Utf8
    case _ => LanceColumnVector.Other
  }
  private val dataAddress: Long = vector match {
    case v: BaseFixedWidthVector if kind != LanceColumnVector.Other => v.getDataBufferAddress
    case v: VarCharVector => v.getDataBufferAddress
    case _ => 0L
  }
  // A column of dictionary items: one UTF8String per item, made on first use
  // and shared by the rows (and batches) using it, so what Spark computes and
  // caches on a string (its length in characters) is computed once per item.
  private val items: ColumnDictionary = dictionary.filter(_ => kind == LanceColumnVector.Utf8Dictionary).orNull
  private val itemStrings: Array[UTF8String] = if (items == null) Array.empty else strings.of(items)
  // the rows' items and the items' values (integers of the column's width; decimals unscaled)
  private val itemIds: Array[Int] = if (fixedItems == null) null else fixedItems.itemIds
  private val itemKeys: Array[Long] = if (fixedItems == null) null else fixedItems.itemKeys
  // with more items than the processor's caches hold near (a page of money
  // amounts: tens of thousands), the rows' values gathered once in a tight
  // loop, whose independent loads overlap, rather than each on its access
  // (not when a filter kept under a quarter of the rows: those few looked up)
  private val gathered: Array[Long] =
    if (fixedItems == null || itemKeys.length <= LanceColumnVector.GatherItems ||
        (rows != null && rows.length < itemIds.length / 4)) null
    else {
      val out = new Array[Long](itemIds.length)
      var i = 0
      while (i < out.length) {
        val k = itemIds(i)
        out(i) = if (k >= 0 && k < itemKeys.length) itemKeys(k) else 0L // (a null row's id may be any)
        i += 1
      }
      out
    }
  @inline private def key(rowId: Int): Long = if (gathered != null) gathered(rowId) else itemKeys(itemIds(rowId))
  private val offsetAddress: Long = vector match {
    case v: VarCharVector => v.getOffsetBufferAddress
    case _ => 0L
  }

  override def close(): Unit = vector.close()
  override def hasNull: Boolean = nullCount > 0
  override def numNulls: Int = if (rows == null || nullCount == 0) nullCount else selectedNulls

  private lazy val selectedNulls: Int = rows.count(r => vector.isNull(r))

  private def isNullAt0(rowId: Int): Boolean =
    if (nullCount == 0) false
    else if (validityAddress != 0L)
      ((Platform.getByte(null, validityAddress + (rowId >> 3)) >> (rowId & 7)) & 1) == 0
    else vector.isNull(rowId)

  private def getBoolean0(rowId: Int): Boolean = vector.asInstanceOf[BitVector].get(rowId) == 1
  private def getByte0(rowId: Int): Byte =
    if (kind == LanceColumnVector.Int8) Platform.getByte(null, dataAddress + rowId)
    else if (kind == LanceColumnVector.FixedItems) key(rowId).toByte
    else vector.asInstanceOf[TinyIntVector].get(rowId)

  private def getShort0(rowId: Int): Short =
    if (kind == LanceColumnVector.Int16) Platform.getShort(null, dataAddress + 2L * rowId) else slowShort(rowId)

  private def slowShort(rowId: Int): Short = if (kind == LanceColumnVector.FixedItems) key(rowId).toShort else vector match {
    case v: SmallIntVector => v.get(rowId)
    case v: UInt1Vector    => (v.get(rowId) & 0xff).toShort
    case v                 => unsupported(v, "short")
  }

  private def getInt0(rowId: Int): Int =
    if (kind == LanceColumnVector.Int32) Platform.getInt(null, dataAddress + 4L * rowId) else slowInt(rowId)

  private def slowInt(rowId: Int): Int = if (kind == LanceColumnVector.FixedItems) key(rowId).toInt else vector match {
    case v: IntVector       => v.get(rowId)
    case v: UInt2Vector     => v.get(rowId).toInt
    case v: DateDayVector   => v.get(rowId)
    case v: DateMilliVector => Math.floorDiv(v.get(rowId), 86400000L).toInt
    case v                  => unsupported(v, "int")
  }

  private def getLong0(rowId: Int): Long =
    if (kind == LanceColumnVector.Int64) Platform.getLong(null, dataAddress + 8L * rowId) else slowLong(rowId)

  private def slowLong(rowId: Int): Long = if (kind == LanceColumnVector.FixedItems) key(rowId) else vector match {
    case v: BigIntVector           => v.get(rowId)
    case v: UInt4Vector            => v.get(rowId).toLong & 0xffffffffL
    case v: TimeStampSecVector     => v.get(rowId) * 1000000L
    case v: TimeStampSecTZVector   => v.get(rowId) * 1000000L
    case v: TimeStampMilliVector   => v.get(rowId) * 1000L
    case v: TimeStampMilliTZVector => v.get(rowId) * 1000L
    case v: TimeStampMicroVector   => v.get(rowId)
    case v: TimeStampMicroTZVector => v.get(rowId)
    case v: TimeStampNanoVector    => Math.floorDiv(v.get(rowId), 1000L)
    case v: TimeStampNanoTZVector  => Math.floorDiv(v.get(rowId), 1000L)
    // Spark's TIME values are nanoseconds since midnight
    case v: TimeSecVector          => v.get(rowId).toLong * 1000000000L
    case v: TimeMilliVector        => v.get(rowId).toLong * 1000000L
    case v: TimeMicroVector        => v.get(rowId) * 1000L
    case v: TimeNanoVector         => v.get(rowId)
    case v: DurationVector         => durationMicros(v, rowId)
    case v                         => unsupported(v, "long")
  }

  private def getFloat0(rowId: Int): Float =
    if (kind == LanceColumnVector.Float32) Platform.getFloat(null, dataAddress + 4L * rowId) else slowFloat(rowId)

  private def slowFloat(rowId: Int): Float = vector match {
    case v: Float4Vector => v.get(rowId)
    case v: Float2Vector => v.getValueAsFloat(rowId)
    case v               => unsupported(v, "float")
  }

  private def getDouble0(rowId: Int): Double =
    if (kind == LanceColumnVector.Float64) Platform.getDouble(null, dataAddress + 8L * rowId)
    else vector.asInstanceOf[Float8Vector].get(rowId)

  // Small enough to be inlined into Spark's generated code, where the Decimal
  // it returns usually never escapes (and is not allocated): values of at
  // most 18 digits, stored or read through dictionary items, made at one
  // allocation site (the JIT does not scalar-replace two that merge, and the
  // branch profile is the method's, shared by the batches of both kinds)
  private def getDecimal0(rowId: Int, precision: Int, scale: Int): Decimal =
    if (precision <= Decimal.MAX_LONG_DIGITS && (kind == LanceColumnVector.Decimal128 || kind == LanceColumnVector.FixedItems) &&
        !isNullAt0(rowId))
      Decimal.createUnsafe(
        // the low 8 bytes of a little-endian two's-complement 128-bit value that fits a long
        if (kind == LanceColumnVector.Decimal128) Platform.getLong(null, dataAddress + 16L * rowId) else key(rowId),
        precision, scale)
    else slowDecimal(rowId, precision, scale)

  private def slowDecimal(rowId: Int, precision: Int, scale: Int): Decimal = {
    if (isNullAt0(rowId)) return null
    if (kind == LanceColumnVector.FixedItems) return Decimal.createUnsafe(key(rowId), precision, scale)
    vector match {
      case v: DecimalVector if precision <= Decimal.MAX_LONG_DIGITS =>
        // the low 8 bytes of a little-endian two's-complement 128-bit value
        Decimal.createUnsafe(v.getDataBuffer.getLong(rowId.toLong * 16), precision, scale)
      case v: DecimalVector    => Decimal(v.getObject(rowId), precision, scale)
      case v: Decimal256Vector => Decimal(v.getObject(rowId), precision, scale)
      case v: UInt8Vector =>
        val raw = v.get(rowId)
        if (raw >= 0) Decimal(raw, precision, scale)
        else Decimal(new JBigDecimal(new BigInteger(java.lang.Long.toUnsignedString(raw))), precision, scale)
      case v => unsupported(v, "decimal")
    }
  }

  // Kept small so that the JIT inlines it into Spark's generated code, where the
  // UTF8String it returns usually never escapes (and is not allocated).
  private def getUTF8String0(rowId: Int): UTF8String =
    if (kind == LanceColumnVector.Utf8 && !isNullAt0(rowId)) utf8At(rowId) else slowUTF8String(rowId)

  /** Row `rowId` of a `VarCharVector`, in place; with its character count when
    * the batch's strings are all ASCII (see [[AsciiStrings]]). */
  private def utf8At(rowId: Int): UTF8String = {
    val offsets = offsetAddress + 4L * rowId
    val start = Platform.getInt(null, offsets)
    val length = Platform.getInt(null, offsets + 4) - start
    val s = UTF8String.fromAddress(null, dataAddress + start, length)
    if (ascii == LanceColumnVector.Ascii || (ascii == LanceColumnVector.Unchecked && checkAscii()))
      AsciiStrings.withChars(s, length)
    else s
  }

  // whether every string of the batch is ASCII: checked on the first string read
  private var ascii: Int =
    if (offsetAddress != 0L && AsciiStrings.available) LanceColumnVector.Unchecked else LanceColumnVector.NotAscii

  private def checkAscii(): Boolean = {
    val n = vector.getValueCount
    val all = n == 0 || {
      val from = Platform.getInt(null, offsetAddress)
      AsciiStrings.isAscii(dataAddress + from, Platform.getInt(null, offsetAddress + 4L * n).toLong - from)
    }
    ascii = if (all) LanceColumnVector.Ascii else LanceColumnVector.NotAscii
    all
  }

  private def itemString(k: Int): UTF8String = {
    val cached = itemStrings(k)
    if (cached != null) cached
    else {
      // each item in a byte array of its own: what Spark's hash aggregates and
      // joins ask of a key string (getBytes) is then that array, not a copy a row
      val made = UTF8String.fromBytes(items.itemBytes(k))
      itemStrings(k) = made
      made
    }
  }

  private def slowUTF8String(rowId: Int): UTF8String = {
    if (isNullAt0(rowId)) return null
    if (kind == LanceColumnVector.Utf8Dictionary) {
      val k = items.itemOf(rowId)
      return if (k >= 0) itemString(k) else utf8At(rowId) // (a null item in a valid row: the vector's value)
    }
    vector match {
      case v: LargeVarCharVector =>
        val start = v.getOffsetBuffer.getLong(rowId.toLong * 8)
        val end = v.getOffsetBuffer.getLong((rowId + 1).toLong * 8)
        UTF8String.fromAddress(null, v.getDataBuffer.memoryAddress() + start, (end - start).toInt)
      case v => unsupported(v, "string")
    }
  }

  private def getBinary0(rowId: Int): Array[Byte] = {
    if (isNullAt0(rowId)) return null
    vector match {
      case v: VarBinaryVector      => v.get(rowId)
      case v: LargeVarBinaryVector => v.get(rowId)
      case v: FixedSizeBinaryVector => v.get(rowId)
      case v                       => unsupported(v, "binary")
    }
  }

  private def getArray0(rowId: Int): ColumnarArray = {
    if (isNullAt0(rowId)) return null
    vector match {
      case v: ListVector =>
        val start = v.getOffsetBuffer.getInt(rowId.toLong * 4)
        val end = v.getOffsetBuffer.getInt((rowId + 1).toLong * 4)
        new ColumnarArray(children(0), start, end - start)
      case v: LargeListVector =>
        val start = v.getOffsetBuffer.getLong(rowId.toLong * 8)
        val end = v.getOffsetBuffer.getLong((rowId + 1).toLong * 8)
        new ColumnarArray(children(0), start.toInt, (end - start).toInt)
      case v: FixedSizeListVector =>
        new ColumnarArray(children(0), rowId * v.getListSize, v.getListSize)
      case v => unsupported(v, "array")
    }
  }

  private def getMap0(rowId: Int): ColumnarMap = {
    if (isNullAt0(rowId)) return null
    vector match {
      case v: MapVector =>
        val start = v.getOffsetBuffer.getInt(rowId.toLong * 4)
        val end = v.getOffsetBuffer.getInt((rowId + 1).toLong * 4)
        new ColumnarMap(children(0), children(1), start, end - start)
      case v => unsupported(v, "map")
    }
  }

  override def getChild(ordinal: Int): ColumnVector = children(ordinal)

  private def durationMicros(v: DurationVector, rowId: Int): Long = {
    val raw = DurationVector.get(v.getDataBuffer, rowId)
    v.getUnit match {
      case org.apache.arrow.vector.types.TimeUnit.SECOND      => raw * 1000000L
      case org.apache.arrow.vector.types.TimeUnit.MILLISECOND => raw * 1000L
      case org.apache.arrow.vector.types.TimeUnit.MICROSECOND => raw
      case org.apache.arrow.vector.types.TimeUnit.NANOSECOND  => Math.floorDiv(raw, 1000L)
    }
  }

  private def unsupported(v: ValueVector, as: String): Nothing =
    throw new UnsupportedOperationException(
      s"cannot read ${v.getClass.getSimpleName} '${v.getField.getName}' as $as (Spark type $sparkType)")
}

private object LanceColumnVector {
  val Other = 0
  val Int64 = 1
  val Int32 = 2
  val Float64 = 3
  val Float32 = 4
  val Utf8 = 5
  val Utf8Dictionary = 6
  val Decimal128 = 7
  val Int16 = 8
  val Int8 = 9
  val FixedItems = 10

  /** Most dictionary items read in place; with more, a batch's values are gathered. */
  val GatherItems: Int = 4096

  // states of a string batch's ASCII check
  val Unchecked = 0
  val Ascii = 1
  val NotAscii = 2
}
