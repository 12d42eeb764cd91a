package io.lancespark.format.v2

import java.io.ByteArrayOutputStream
import java.nio.channels.Channels
import java.nio.charset.StandardCharsets

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.memory.util.Float16
import org.apache.arrow.vector.{BaseFixedWidthVector, BaseLargeVariableWidthVector, BaseVariableWidthVector, BigIntVector, BitVector, FieldVector, IntVector, VectorSchemaRoot}
import org.apache.arrow.vector.complex.StructVector
import org.apache.arrow.vector.ipc.{ArrowStreamReader, ArrowStreamWriter}
import org.apache.arrow.vector.types.FloatingPointPrecision
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.proto.file.FileDescriptor

/** Statistics of one page of one column. `firstRow`/`numRows` are the page's
  * top-level rows. `min`/`max` are lower/upper bounds (None = unknown):
  * java.lang.Long for integers, dates, times and timestamps (unsigned 64-bit
  * values as their raw bits), java.lang.Double for floats (half and single
  * precision widened), java.math.BigDecimal for decimals, java.lang.Boolean,
  * String for strings, Array[Byte] for binary and fixed-size binary. */
final case class PageStat(
    columnIndex: Int,
    fieldId: Int,
    pageIndex: Int,
    firstRow: Long,
    numRows: Long,
    nullCount: Long,
    min: Option[Any],
    max: Option[Any])

/** The page statistics of one 2.0 file written by [[V2FileWriter]]. */
final case class PageStatistics(pages: Vector[PageStat]) {
  lazy val byField: Map[Int, Vector[PageStat]] = pages.groupBy(_.fieldId)
  def forField(fieldId: Int): Vector[PageStat] = byField.getOrElse(fieldId, Vector.empty)
}

/** Per-page statistics (see docs/page-statistics.md): computed while writing
  * leaf columns that are not inside a list, stored as an Arrow IPC stream in
  * a global buffer that the schema metadata key [[PageStatistics.BufferKey]]
  * points to. Readers that do not know the key (pylance) ignore the buffer. */
object PageStatistics {
  /** FileDescriptor schema metadata key: the index of the global buffer. */
  val BufferKey = "lance_spark:page_stats_buffer"
  /** Arrow schema metadata key of the IPC stream: layout version. */
  val VersionKey = "lance_spark:page_stats_version"
  val Version = "1"
  /** Longest binary/string bound kept, in bytes. */
  val MaxBoundBytes = 64

  // ---------------------------------------------------------------- kinds

  /** How a column's values compare; None for columns without statistics. */
  private[v2] sealed trait Kind
  private[v2] final case class IntKind(width: Int, signed: Boolean) extends Kind
  private[v2] final case class FloatKind(width: Int) extends Kind
  private[v2] final case class DecimalKind(width: Int, precision: Int) extends Kind
  private[v2] case object BoolKind extends Kind
  private[v2] final case class FixedBinaryKind(width: Int) extends Kind
  private[v2] final case class VarKind(utf8: Boolean) extends Kind

  private[v2] def kindOf(t: ArrowType): Option[Kind] = t match {
    case i: ArrowType.Int => Some(IntKind(i.getBitWidth / 8, i.getIsSigned))
    case f: ArrowType.FloatingPoint => Some(FloatKind(f.getPrecision match {
      case FloatingPointPrecision.HALF => 2
      case FloatingPointPrecision.SINGLE => 4
      case FloatingPointPrecision.DOUBLE => 8
    }))
    case d: ArrowType.Date => Some(IntKind(if (d.getUnit == org.apache.arrow.vector.types.DateUnit.DAY) 4 else 8, signed = true))
    case t: ArrowType.Time => Some(IntKind(t.getBitWidth / 8, signed = true))
    case _: ArrowType.Timestamp => Some(IntKind(8, signed = true))
    case d: ArrowType.Decimal => Some(DecimalKind(d.getBitWidth / 8, d.getPrecision))
    case _: ArrowType.Bool => Some(BoolKind)
    case b: ArrowType.FixedSizeBinary => Some(FixedBinaryKind(b.getByteWidth))
    case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 => Some(VarKind(utf8 = true))
    case _: ArrowType.Binary | _: ArrowType.LargeBinary => Some(VarKind(utf8 = false))
    case _ => None
  }

  // ---------------------------------------------------------- collecting

  /** Statistics of one written page, bounds as raw little-endian values (or
    * the bytes of strings/binaries; booleans as one byte 0/1); null = unknown. */
  private[v2] final case class RawStat(
      columnIndex: Int, fieldId: Int, pageIndex: Int, firstRow: Long, numRows: Long,
      nullCount: Long, min: Array[Byte], max: Array[Byte])

  private def le(v: BigInt, width: Int): Array[Byte] = {
    val be = v.toByteArray // big-endian two's complement
    val out = new Array[Byte](width)
    val fill: Byte = if (v.signum < 0) -1 else 0
    java.util.Arrays.fill(out, fill)
    var i = 0
    while (i < math.min(width, be.length)) { out(i) = be(be.length - 1 - i); i += 1 }
    out
  }

  private def leLong(v: Long, width: Int): Array[Byte] = Array.tabulate(width)(i => (v >>> (8 * i)).toByte)

  /** Integer value i (width bytes) of `a`, sign- or zero-extended. */
  private def intAt(a: Array[Byte], i: Int, width: Int, signed: Boolean): Long = {
    val o = i * width
    var v = 0L
    var k = width - 1
    while (k >= 0) { v = (v << 8) | (a(o + k) & 0xffL); k -= 1 }
    if (signed && width < 8) { val s = 64 - 8 * width; (v << s) >> s } else v
  }

  private def floatAt(a: Array[Byte], i: Int, width: Int): Double = width match {
    case 2 => Float16.toFloat(intAt(a, i, 2, signed = false).toShort).toDouble
    case 4 => java.lang.Float.intBitsToFloat(intAt(a, i, 4, signed = false).toInt).toDouble
    case _ => java.lang.Double.longBitsToDouble(intAt(a, i, 8, signed = false))
  }

  /** Two's complement little-endian comparison of values i and j of width bytes. */
  private def compareDecimal(a: Array[Byte], i: Int, j: Int, width: Int): Int = {
    val oi = i * width
    val oj = j * width
    val hi = java.lang.Byte.compare(a(oi + width - 1), a(oj + width - 1))
    if (hi != 0) return hi
    var k = width - 2
    while (k >= 0) {
      val c = Integer.compare(a(oi + k) & 0xff, a(oj + k) & 0xff)
      if (c != 0) return c
      k -= 1
    }
    0
  }

  private def slice(a: Array[Byte], from: Int, len: Int): Array[Byte] = java.util.Arrays.copyOfRange(a, from, from + len)

  private[v2] def collect(kind: Kind, page: LeafPage): (Long, Array[Byte], Array[Byte]) = {
    val n = page.rows
    val valid = page.validity
    val vals = page.values
    var minI = -1
    var maxI = -1
    kind match {
      case IntKind(w, signed) =>
        var lo = 0L; var hi = 0L
        var i = 0
        while (i < n) {
          if (valid.get(i)) {
            val v = intAt(vals, i, w, signed)
            if (minI < 0) { minI = i; maxI = i; lo = v; hi = v }
            else if (signed) {
              if (v < lo) { lo = v; minI = i }
              if (v > hi) { hi = v; maxI = i }
            } else {
              if (java.lang.Long.compareUnsigned(v, lo) < 0) { lo = v; minI = i }
              if (java.lang.Long.compareUnsigned(v, hi) > 0) { hi = v; maxI = i }
            }
          }
          i += 1
        }
        if (minI < 0) {
          val (mn, mx) =
            if (signed) (leLong(Long.MinValue >> (64 - 8 * w), w), leLong(Long.MaxValue >>> (64 - 8 * w), w))
            else (new Array[Byte](w), Array.fill[Byte](w)(-1))
          (page.nullCount, mn, mx)
        } else (page.nullCount, slice(vals, minI * w, w), slice(vals, maxI * w, w))

      case FloatKind(w) =>
        var lo = 0.0; var hi = 0.0
        var i = 0
        while (i < n) {
          if (valid.get(i)) {
            val v = floatAt(vals, i, w)
            if (!v.isNaN) {
              if (minI < 0) { minI = i; maxI = i; lo = v; hi = v }
              else {
                if (v < lo) { lo = v; minI = i }
                if (v > hi) { hi = v; maxI = i }
              }
            }
          }
          i += 1
        }
        def enc(d: Double): Array[Byte] = w match {
          case 2 => leLong(Float16.toFloat16(d.toFloat).toLong, 2)
          case 4 => leLong(java.lang.Float.floatToIntBits(d.toFloat).toLong, 4)
          case _ => leLong(java.lang.Double.doubleToLongBits(d), 8)
        }
        if (minI < 0) (page.nullCount, enc(Double.NegativeInfinity), enc(Double.PositiveInfinity))
        else {
          val mn = if (lo == 0.0) enc(-0.0) else slice(vals, minI * w, w)
          val mx = if (hi == 0.0) enc(0.0) else slice(vals, maxI * w, w)
          (page.nullCount, mn, mx)
        }

      case DecimalKind(w, p) =>
        var i = 0
        while (i < n) {
          if (valid.get(i)) {
            if (minI < 0) { minI = i; maxI = i }
            else {
              if (compareDecimal(vals, i, minI, w) < 0) minI = i
              if (compareDecimal(vals, i, maxI, w) > 0) maxI = i
            }
          }
          i += 1
        }
        if (minI < 0) {
          val m = BigInt(10).pow(p) - 1
          (page.nullCount, le(-m, w), le(m, w))
        } else (page.nullCount, slice(vals, minI * w, w), slice(vals, maxI * w, w))

      case BoolKind =>
        var anyTrue = false; var anyFalse = false
        var i = 0
        while (i < n) {
          if (valid.get(i)) {
            if (((vals(i >>> 3) >>> (i & 7)) & 1) != 0) anyTrue = true else anyFalse = true
          }
          i += 1
        }
        val mn: Byte = if (anyFalse || !anyTrue) 0 else 1
        val mx: Byte = if (anyTrue || !anyFalse) 1 else 0
        (page.nullCount, Array(mn), Array(mx))

      case FixedBinaryKind(w) =>
        var i = 0
        while (i < n) {
          if (valid.get(i)) {
            if (minI < 0) { minI = i; maxI = i }
            else {
              if (java.util.Arrays.compareUnsigned(vals, i * w, i * w + w, vals, minI * w, minI * w + w) < 0) minI = i
              if (java.util.Arrays.compareUnsigned(vals, i * w, i * w + w, vals, maxI * w, maxI * w + w) > 0) maxI = i
            }
          }
          i += 1
        }
        if (minI < 0) (page.nullCount, null, null)
        else (page.nullCount, slice(vals, minI * w, w), slice(vals, maxI * w, w))

      case VarKind(utf8) =>
        val ends = page.ends
        def start(i: Int): Int = if (i == 0) 0 else ends.getLong(i - 1).toInt
        def end(i: Int): Int = ends.getLong(i).toInt
        var i = 0
        while (i < n) {
          if (valid.get(i)) {
            if (minI < 0) { minI = i; maxI = i }
            else {
              val s = start(i); val e = end(i)
              if (java.util.Arrays.compareUnsigned(vals, s, e, vals, start(minI), end(minI)) < 0) minI = i
              if (java.util.Arrays.compareUnsigned(vals, s, e, vals, start(maxI), end(maxI)) > 0) maxI = i
            }
          }
          i += 1
        }
        if (minI < 0) (page.nullCount, null, null)
        else {
          val mn = slice(vals, start(minI), end(minI) - start(minI))
          val mx = slice(vals, start(maxI), end(maxI) - start(maxI))
          (page.nullCount, truncateMin(mn, utf8), truncateMax(mx, utf8))
        }
    }
  }

  /** Longest prefix of at most MaxBoundBytes bytes (whole UTF-8 characters
    * when `utf8`): a lower bound of `v`. */
  private[v2] def truncateMin(v: Array[Byte], utf8: Boolean): Array[Byte] =
    if (v.length <= MaxBoundBytes) v else java.util.Arrays.copyOf(v, prefixLength(v, utf8))

  private def prefixLength(v: Array[Byte], utf8: Boolean): Int = {
    var len = math.min(v.length, MaxBoundBytes)
    // do not cut a UTF-8 character: back up over continuation bytes
    if (utf8 && len < v.length) while (len > 0 && (v(len) & 0xc0) == 0x80) len -= 1
    len
  }

  /** An upper bound of `v` of at most MaxBoundBytes bytes: `v` itself if
    * short enough, else its prefix with the last byte (character, when `utf8`)
    * that can be incremented incremented and what follows dropped; null if
    * there is none. */
  private[v2] def truncateMax(v: Array[Byte], utf8: Boolean): Array[Byte] = {
    if (v.length <= MaxBoundBytes) return v
    val len = prefixLength(v, utf8)
    if (!utf8) {
      var k = len - 1
      while (k >= 0 && v(k) == -1) k -= 1
      if (k < 0) null
      else {
        val out = java.util.Arrays.copyOf(v, k + 1)
        out(k) = (out(k) + 1).toByte
        out
      }
    } else {
      val s = new String(v, 0, len, StandardCharsets.UTF_8)
      val cps = s.codePoints().toArray
      var k = cps.length - 1
      while (k >= 0) {
        var c = cps(k) + 1
        if (c >= 0xd800 && c <= 0xdfff) c = 0xe000
        if (c <= 0x10ffff) {
          val prefix = new String(cps, 0, k) + new String(Character.toChars(c))
          val bytes = prefix.getBytes(StandardCharsets.UTF_8)
          if (bytes.length <= MaxBoundBytes) return bytes
        }
        k -= 1
      }
      null
    }
  }

  // ------------------------------------------------------------- storing

  private val pageFields: Seq[Field] = Seq(
    new Field("column_index", FieldType.notNullable(new ArrowType.Int(32, true)), null),
    new Field("field_id", FieldType.notNullable(new ArrowType.Int(32, true)), null),
    new Field("page_index", FieldType.notNullable(new ArrowType.Int(32, true)), null),
    new Field("first_row", FieldType.notNullable(new ArrowType.Int(64, true)), null),
    new Field("num_rows", FieldType.notNullable(new ArrowType.Int(64, true)), null))

  private def statsField(f: LanceField): Field = {
    val t = f.arrowType
    new Field(f.id.toString, FieldType.nullable(ArrowType.Struct.INSTANCE), java.util.List.of(
      new Field("null_count", FieldType.nullable(new ArrowType.Int(64, true)), null),
      new Field("min_value", FieldType.nullable(t), null),
      new Field("max_value", FieldType.nullable(t), null)))
  }

  /** The statistics as one Arrow IPC stream (one record batch, one row per page). */
  private[v2] def toIpc(fields: Seq[LanceField], stats: Seq[RawStat], allocator: BufferAllocator): Array[Byte] = {
    val schema = new Schema((pageFields ++ fields.map(statsField)).asJava, java.util.Map.of(VersionKey, Version))
    val root = VectorSchemaRoot.create(schema, allocator)
    try {
      val n = stats.size
      root.getFieldVectors.asScala.foreach(_.setInitialCapacity(math.max(n, 1)))
      root.allocateNew()
      val colIdx = root.getVector("column_index").asInstanceOf[IntVector]
      val fid = root.getVector("field_id").asInstanceOf[IntVector]
      val pidx = root.getVector("page_index").asInstanceOf[IntVector]
      val first = root.getVector("first_row").asInstanceOf[BigIntVector]
      val num = root.getVector("num_rows").asInstanceOf[BigIntVector]
      val structs = fields.map(f => f.id -> root.getVector(f.id.toString).asInstanceOf[StructVector]).toMap
      stats.zipWithIndex.foreach { case (s, i) =>
        colIdx.set(i, s.columnIndex); fid.set(i, s.fieldId); pidx.set(i, s.pageIndex)
        first.set(i, s.firstRow); num.set(i, s.numRows)
        val sv = structs(s.fieldId)
        sv.setIndexDefined(i)
        sv.getChild("null_count").asInstanceOf[BigIntVector].set(i, s.nullCount)
        setBound(sv.getChild("min_value"), i, s.min)
        setBound(sv.getChild("max_value"), i, s.max)
      }
      root.getFieldVectors.asScala.foreach {
        case sv: StructVector => sv.getChildrenFromFields.asScala.foreach(_.setValueCount(n)); sv.setValueCount(n)
        case v => v.setValueCount(n)
      }
      root.setRowCount(n)
      val bytes = new ByteArrayOutputStream()
      val w = new ArrowStreamWriter(root, null, Channels.newChannel(bytes))
      w.start(); w.writeBatch(); w.end(); w.close()
      bytes.toByteArray
    } finally root.close()
  }

  private def setBound(v: FieldVector, i: Int, raw: Array[Byte]): Unit = if (raw != null) v match {
    case b: BitVector => b.set(i, raw(0).toInt)
    case f: org.apache.arrow.vector.FixedSizeBinaryVector => f.set(i, raw)
    case f: BaseFixedWidthVector =>
      f.getDataBuffer.setBytes(i.toLong * f.getTypeWidth, raw)
      f.setIndexDefined(i)
    case s: BaseVariableWidthVector => s.setSafe(i, raw)
    case s: BaseLargeVariableWidthVector => s.setSafe(i, raw)
    case other => throw new IllegalStateException(s"no statistics for ${other.getField.getType}")
  }

  // ------------------------------------------------------------- reading

  /** The page statistics of a 2.0 file, None if it has none. */
  def read(source: RandomAccessSource): Option[PageStatistics] = {
    val allocator = new RootAllocator()
    try read(source, allocator) finally allocator.close()
  }

  def read(source: RandomAccessSource, allocator: BufferAllocator): Option[PageStatistics] = {
    val footer = Footer.read(source)
    val buffers = Footer.readRegions(source, footer.globalBufferTablePos, footer.numGlobalBuffers, "global buffer")
    if (buffers.isEmpty) return None
    val fd = FileDescriptor.parseFrom(source.read(buffers.head.position, buffers.head.size))
    val key = fd.getSchema.getMetadataMap.get(BufferKey)
    if (key == null) return None
    val idx = key.toStringUtf8.toIntOption.getOrElse(
      throw LanceFormatException(source.path, s"schema metadata $BufferKey = '${key.toStringUtf8}' is not a number"))
    if (idx <= 0 || idx >= buffers.size)
      throw LanceFormatException(source.path, s"page statistics in global buffer $idx, but the file has ${buffers.size}")
    val region = buffers(idx)
    val bb = source.read(region.position, region.size)
    val bytes = new Array[Byte](bb.remaining()); bb.get(bytes)
    val reader = new ArrowStreamReader(new java.io.ByteArrayInputStream(bytes), allocator)
    try {
      val root = reader.getVectorSchemaRoot
      val version = Option(root.getSchema.getCustomMetadata).flatMap(m => Option(m.get(VersionKey)))
      if (!version.contains(Version))
        throw LanceFormatException(source.path, s"page statistics layout version ${version.getOrElse("(none)")} is not $Version")
      val out = Vector.newBuilder[PageStat]
      while (reader.loadNextBatch()) {
        def int(name: String, i: Int): Long = root.getVector(name) match {
          case v: IntVector => v.get(i).toLong
          case v: BigIntVector => v.get(i)
          case other => throw LanceFormatException(source.path, s"page statistics column $name is ${other.getField.getType}")
        }
        (0 until root.getRowCount).foreach { i =>
          val fieldId = int("field_id", i).toInt
          val sv = Option(root.getVector(fieldId.toString)).collect { case s: StructVector => s }
          val (nulls, mn, mx) = sv.filterNot(_.isNull(i)) match {
            case Some(s) =>
              val nc = s.getChild("null_count").asInstanceOf[BigIntVector]
              (if (nc.isNull(i)) -1L else nc.get(i), decode(s.getChild("min_value"), i), decode(s.getChild("max_value"), i))
            case None => (-1L, None, None)
          }
          out += PageStat(int("column_index", i).toInt, fieldId, int("page_index", i).toInt,
            int("first_row", i), int("num_rows", i), nulls, mn, mx)
        }
      }
      Some(PageStatistics(out.result()))
    } finally reader.close()
  }

  private[format] def decode(v: FieldVector, i: Int): Option[Any] = {
    if (v == null || v.isNull(i)) return None
    val t = v.getField.getType
    Some(v match {
      case b: BitVector => java.lang.Boolean.valueOf(b.get(i) != 0)
      case f: org.apache.arrow.vector.FixedSizeBinaryVector => f.get(i)
      case d: org.apache.arrow.vector.DecimalVector => d.getObject(i)
      case d: org.apache.arrow.vector.Decimal256Vector => d.getObject(i)
      case f: BaseFixedWidthVector =>
        val w = f.getTypeWidth
        val raw = new Array[Byte](w)
        f.getDataBuffer.getBytes(i.toLong * w, raw)
        kindOf(t) match {
          case Some(FloatKind(fw)) => java.lang.Double.valueOf(floatAt(raw, 0, fw))
          case Some(IntKind(iw, signed)) => java.lang.Long.valueOf(intAt(raw, 0, iw, signed))
          case _ => raw
        }
      case s: BaseVariableWidthVector =>
        val b = s.get(i)
        if (kindOf(t).contains(VarKind(utf8 = true))) new String(b, StandardCharsets.UTF_8) else b
      case s: BaseLargeVariableWidthVector =>
        val b = s.get(i)
        if (kindOf(t).contains(VarKind(utf8 = true))) new String(b, StandardCharsets.UTF_8) else b
      case other => other.getObject(i)
    })
  }
}
