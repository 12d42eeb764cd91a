package io.lancespark.format.stats

import java.io.ByteArrayOutputStream
import java.nio.channels.Channels
import java.nio.charset.StandardCharsets

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.{BaseFixedWidthVector, BaseLargeVariableWidthVector, BaseVariableWidthVector, BigIntVector, BitVector, FieldVector, IntVector, VarBinaryVector, VectorSchemaRoot}
import org.apache.arrow.vector.complex.StructVector
import org.apache.arrow.vector.ipc.{ArrowStreamReader, ArrowStreamWriter}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.format.file.FileContainer
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.format.stats.PageStatistics.{BufferKey, ReadableVersions, SketchBufferKey, SketchVersion, SketchVersionKey, Version, VersionKey}
import io.lancespark.format.stats.StatsCollector.RawStat
import io.lancespark.format.stats.StatsValues._

/** Page statistics in a file: one Arrow IPC stream (one record batch, one row
  * per page) in a global buffer. */
object StatsStore {

  private val pageFields: Seq[Field] = Seq(
    new Field("column_index", FieldType.notNullable(new ArrowType.Int(32, true)), null),
    new Field("field_id", FieldType.notNullable(new ArrowType.Int(32, true)), null),
    new Field("page_index", FieldType.notNullable(new ArrowType.Int(32, true)), null),
    new Field("first_row", FieldType.notNullable(new ArrowType.Int(64, true)), null),
    new Field("num_rows", FieldType.notNullable(new ArrowType.Int(64, true)), null))

  /** Version 2: every row's bounds in the same two binary columns, as the
    * raw bytes [[StatsCollector]] computes (little-endian fixed-width values,
    * one byte 0/1 for booleans, the bytes of strings and binaries), read back
    * by the field's type. A row's size no longer grows with the number of
    * fields, which bounds per block of rows need. */
  private val boundFields: Seq[Field] = Seq(
    new Field("null_count", FieldType.nullable(new ArrowType.Int(64, true)), null),
    new Field("min_value", FieldType.nullable(ArrowType.Binary.INSTANCE), null),
    new Field("max_value", FieldType.nullable(ArrowType.Binary.INSTANCE), null),
    // added within version 2 (readers that do not know it ignore it): the
    // bytes of a string or binary page's values, for a planner's row sizes
    new Field("value_bytes", FieldType.nullable(new ArrowType.Int(64, true)), null))

  /** The statistics as one Arrow IPC stream (one record batch, one row per
    * page or block of rows), layout version 2. */
  private[format] def toIpc(fields: Seq[LanceField], stats: Seq[RawStat], allocator: BufferAllocator): Array[Byte] = {
    val known = fields.map(_.id).toSet
    stats.find(s => !known.contains(s.fieldId)).foreach(s =>
      throw new IllegalArgumentException(s"statistics of field ${s.fieldId}, which is not among ${known.toSeq.sorted}"))
    val schema = new Schema((pageFields ++ boundFields).asJava, java.util.Map.of(VersionKey, Version))
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
      val nulls = root.getVector("null_count").asInstanceOf[BigIntVector]
      val mins = root.getVector("min_value").asInstanceOf[VarBinaryVector]
      val maxs = root.getVector("max_value").asInstanceOf[VarBinaryVector]
      val valueBytes = root.getVector("value_bytes").asInstanceOf[BigIntVector]
      stats.zipWithIndex.foreach { case (s, i) =>
        colIdx.set(i, s.columnIndex); fid.set(i, s.fieldId); pidx.set(i, s.pageIndex)
        first.set(i, s.firstRow); num.set(i, s.numRows); nulls.set(i, s.nullCount)
        if (s.min != null) mins.setSafe(i, s.min)
        if (s.max != null) maxs.setSafe(i, s.max)
        if (s.valueBytes >= 0) valueBytes.set(i, s.valueBytes)
      }
      root.getFieldVectors.asScala.foreach(_.setValueCount(n))
      root.setRowCount(n)
      val bytes = new ByteArrayOutputStream()
      val w = new ArrowStreamWriter(root, null, Channels.newChannel(bytes))
      w.start(); w.writeBatch(); w.end(); w.close()
      bytes.toByteArray
    } finally root.close()
  }

  /** The distinct-value sketches of a file's fields as one Arrow IPC stream
    * (one record batch, one row per field: `field_id`, `sketch` as
    * [[DistinctSketch.toBytes]] writes it), layout version 1. */
  private[format] def sketchesToIpc(sketches: Seq[(Int, DistinctSketch)], allocator: BufferAllocator): Array[Byte] = {
    val schema = new Schema(Seq(
      new Field("field_id", FieldType.notNullable(new ArrowType.Int(32, true)), null),
      new Field("sketch", FieldType.notNullable(ArrowType.Binary.INSTANCE), null)).asJava,
      java.util.Map.of(SketchVersionKey, SketchVersion))
    val root = VectorSchemaRoot.create(schema, allocator)
    try {
      root.allocateNew()
      val fid = root.getVector("field_id").asInstanceOf[IntVector]
      val sk = root.getVector("sketch").asInstanceOf[VarBinaryVector]
      sketches.zipWithIndex.foreach { case ((id, s), i) => fid.setSafe(i, id); sk.setSafe(i, s.toBytes) }
      root.getFieldVectors.asScala.foreach(_.setValueCount(sketches.size))
      root.setRowCount(sketches.size)
      val bytes = new ByteArrayOutputStream()
      val w = new ArrowStreamWriter(root, null, Channels.newChannel(bytes))
      w.start(); w.writeBatch(); w.end(); w.close()
      bytes.toByteArray
    } finally root.close()
  }

  /** The bytes of the global buffer whose index the schema metadata `key`
    * holds (a decimal above 0: buffer 0 is the descriptor); None without the key. */
  private def globalBufferNamed(file: FileContainer, key: String, what: String): Option[Array[Byte]] =
    Option(file.descriptor.getSchema.getMetadataMap.get(key)).map { v =>
      val idx = scala.util.Try(v.toStringUtf8.toInt).toOption.filter(_ > 0).getOrElse(
        throw LanceFormatException(file.path, s"schema metadata $key = '${v.toStringUtf8}' is not a global buffer index"))
      val bb = file.globalBuffer(idx, what)
      val bytes = new Array[Byte](bb.remaining()); bb.get(bytes)
      bytes
    }

  /** The sketches of a file (none when its writer left none). */
  private def readSketches(file: FileContainer, allocator: BufferAllocator): Map[Int, DistinctSketch] = {
    val bytes = globalBufferNamed(file, SketchBufferKey, "distinct-value sketches").getOrElse(return Map.empty)
    val reader = new ArrowStreamReader(new java.io.ByteArrayInputStream(bytes), allocator)
    try {
      val root = reader.getVectorSchemaRoot
      val version = Option(root.getSchema.getCustomMetadata).flatMap(m => Option(m.get(SketchVersionKey)))
      if (!version.contains(SketchVersion))
        throw LanceFormatException(file.path,
          s"distinct-value sketch layout version ${version.getOrElse("(none)")} is not $SketchVersion")
      val out = Map.newBuilder[Int, DistinctSketch]
      while (reader.loadNextBatch()) {
        (root.getVector("field_id"), root.getVector("sketch")) match {
          case (f: IntVector, s: VarBinaryVector) =>
            (0 until root.getRowCount).foreach { i =>
              DistinctSketch.fromBytes(s.get(i)) match {
                case Right(sk) => out += f.get(i) -> sk
                case Left(why) => throw LanceFormatException(file.path, s"distinct-value sketch of field ${f.get(i)}: $why")
              }
            }
          case _ => throw LanceFormatException(file.path, "distinct-value sketches without int32 field_id and binary sketch columns")
        }
      }
      out.result()
    } finally reader.close()
  }

  /** A file's statistics as written (bounds as raw bytes) and its sketches,
    * for a writer that joins files ([[io.lancespark.format.FileConcat]]);
    * None when it has none, or has them in a layout other than the one
    * written now (they cannot be carried over as they are). */
  private[format] def raw(file: FileContainer, allocator: BufferAllocator): Option[(Vector[RawStat], Map[Int, DistinctSketch])] = {
    val bytes = globalBufferNamed(file, BufferKey, "page statistics").getOrElse(return None)
    val reader = new ArrowStreamReader(new java.io.ByteArrayInputStream(bytes), allocator)
    try {
      val root = reader.getVectorSchemaRoot
      val version = Option(root.getSchema.getCustomMetadata).flatMap(m => Option(m.get(VersionKey)))
      if (!version.contains(Version)) return None
      val out = Vector.newBuilder[RawStat]
      while (reader.loadNextBatch()) {
        def ints(name: String): IntVector = root.getVector(name).asInstanceOf[IntVector]
        def longs(name: String): BigIntVector = root.getVector(name).asInstanceOf[BigIntVector]
        def bins(name: String): VarBinaryVector = root.getVector(name).asInstanceOf[VarBinaryVector]
        val (col, fid, pidx, first, num, nc, mins, maxs) = (ints("column_index"), ints("field_id"), ints("page_index"),
          longs("first_row"), longs("num_rows"), longs("null_count"), bins("min_value"), bins("max_value"))
        val vb = Option(root.getVector("value_bytes")).collect { case v: BigIntVector => v }
        (0 until root.getRowCount).foreach { i =>
          out += RawStat(col.get(i), fid.get(i), pidx.get(i), first.get(i), num.get(i),
            if (nc.isNull(i)) -1L else nc.get(i), if (mins.isNull(i)) null else mins.get(i),
            if (maxs.isNull(i)) null else maxs.get(i), vb.filterNot(_.isNull(i)).fold(-1L)(_.get(i)))
        }
      }
      Some((out.result(), readSketches(file, allocator)))
    } finally reader.close()
  }

  /** The page statistics of a 2.x data file (any 2.x version), None if it has none. */
  def read(source: RandomAccessSource, allocator: BufferAllocator): Option[PageStatistics] =
    read(FileContainer.open(source, _ => true, "a 2.x file"), allocator)

  /** The page statistics of a 2.x file, None if it has none. */
  def read(file: FileContainer): Option[PageStatistics] = {
    val allocator = new RootAllocator()
    try read(file, allocator) finally allocator.close()
  }

  def read(file: FileContainer, allocator: BufferAllocator): Option[PageStatistics] = {
    val bytes = globalBufferNamed(file, BufferKey, "page statistics").getOrElse(return None)
    val reader = new ArrowStreamReader(new java.io.ByteArrayInputStream(bytes), allocator)
    try {
      val root = reader.getVectorSchemaRoot
      val version = Option(root.getSchema.getCustomMetadata).flatMap(m => Option(m.get(VersionKey)))
      if (!version.exists(ReadableVersions.contains))
        throw LanceFormatException(file.path,
          s"page statistics layout version ${version.getOrElse("(none)")} is not one of ${ReadableVersions.mkString(", ")}")
      lazy val types: Map[Int, ArrowType] = file.fileSchema.allFields.map(f => f.id -> f.arrowType).toMap
      val out = Vector.newBuilder[PageStat]
      while (reader.loadNextBatch()) {
        def int(name: String, i: Int): Long = root.getVector(name) match {
          case v: IntVector => v.get(i).toLong
          case v: BigIntVector => v.get(i)
          case other => throw LanceFormatException(file.path, s"page statistics column $name is ${other.getField.getType}")
        }
        // version 2's bound columns, looked up once per batch
        def binary(name: String): VarBinaryVector = root.getVector(name) match {
          case v: VarBinaryVector => v
          case other => throw LanceFormatException(file.path,
            s"page statistics column $name is ${Option(other).map(_.getField.getType.toString).getOrElse("missing")}")
        }
        lazy val nc = root.getVector("null_count") match {
          case v: BigIntVector => v
          case other => throw LanceFormatException(file.path,
            s"page statistics column null_count is ${Option(other).map(_.getField.getType.toString).getOrElse("missing")}")
        }
        lazy val mins = binary("min_value")
        lazy val maxs = binary("max_value")
        // optional (files written before it have none)
        val valueBytes = Option(root.getVector("value_bytes")).collect { case v: BigIntVector => v }
        (0 until root.getRowCount).foreach { i =>
          val fieldId = int("field_id", i).toInt
          val (nulls, mn, mx) =
            if (version.contains("1")) {
              Option(root.getVector(fieldId.toString)).collect { case s: StructVector => s }.filterNot(_.isNull(i)) match {
                case Some(s) =>
                  val nc = s.getChild("null_count").asInstanceOf[BigIntVector]
                  (if (nc.isNull(i)) -1L else nc.get(i), decode(s.getChild("min_value"), i), decode(s.getChild("max_value"), i))
                case None => (-1L, None, None)
              }
            } else {
              val t = types.getOrElse(fieldId,
                throw LanceFormatException(file.path, s"page statistics of field $fieldId, which the file does not hold"))
              def bound(v: VarBinaryVector): Option[Any] = if (v.isNull(i)) None else Some(decodeRaw(v.get(i), t, file.path))
              (if (nc.isNull(i)) -1L else nc.get(i), bound(mins), bound(maxs))
            }
          out += PageStat(int("column_index", i).toInt, fieldId, int("page_index", i).toInt,
            int("first_row", i), int("num_rows", i), nulls, mn, mx,
            valueBytes.filterNot(_.isNull(i)).fold(-1L)(_.get(i)))
        }
      }
      Some(PageStatistics(out.result(), readSketches(file, allocator)))
    } finally reader.close()
  }

  /** A version-2 bound: the raw bytes of a value of type `t`, as [[decode]]
    * returns version-1 bounds (numbers as Long/Double, decimals as
    * BigDecimal, strings as String, other bytes as arrays). */
  private[format] def decodeRaw(raw: Array[Byte], t: ArrowType, path: String): Any = {
    def width(w: Int): Unit =
      if (raw.length != w) throw LanceFormatException(path, s"a page statistics bound of ${raw.length} bytes for $t")
    kindOf(t) match {
      case Some(BoolKind) => width(1); java.lang.Boolean.valueOf(raw(0) != 0)
      case Some(IntKind(w, signed)) => width(w); java.lang.Long.valueOf(intAt(raw, 0, w, signed))
      case Some(FloatKind(w)) => width(w); java.lang.Double.valueOf(floatAt(raw, 0, w))
      case Some(DecimalKind(w, _)) =>
        width(w)
        val scale = t.asInstanceOf[ArrowType.Decimal].getScale
        new java.math.BigDecimal(new java.math.BigInteger(raw.reverse), scale)
      case Some(FixedBinaryKind(w)) => width(w); raw
      case Some(VarKind(true)) => new String(raw, StandardCharsets.UTF_8)
      case Some(VarKind(false)) => raw
      case None => throw LanceFormatException(path, s"page statistics for a field of type $t")
    }
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
