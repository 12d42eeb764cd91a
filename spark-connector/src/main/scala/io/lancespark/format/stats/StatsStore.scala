package io.lancespark.format.stats

import java.io.ByteArrayOutputStream
import java.nio.channels.Channels
import java.nio.charset.StandardCharsets

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.{BaseFixedWidthVector, BaseLargeVariableWidthVector, BaseVariableWidthVector, BigIntVector, BitVector, FieldVector, IntVector, VectorSchemaRoot}
import org.apache.arrow.vector.complex.StructVector
import org.apache.arrow.vector.ipc.{ArrowStreamReader, ArrowStreamWriter}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.format.file.FileContainer
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.format.stats.PageStatistics.{BufferKey, Version, VersionKey}
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

  private def statsField(f: LanceField): Field = {
    val t = f.arrowType
    new Field(f.id.toString, FieldType.nullable(ArrowType.Struct.INSTANCE), java.util.List.of(
      new Field("null_count", FieldType.nullable(new ArrowType.Int(64, true)), null),
      new Field("min_value", FieldType.nullable(t), null),
      new Field("max_value", FieldType.nullable(t), null)))
  }

  /** The statistics as one Arrow IPC stream (one record batch, one row per page). */
  private[format] def toIpc(fields: Seq[LanceField], stats: Seq[RawStat], allocator: BufferAllocator): Array[Byte] = {
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


  /** The page statistics of a 2.x data file (any 2.x version), None if it has none. */
  def read(source: RandomAccessSource, allocator: BufferAllocator): Option[PageStatistics] =
    read(FileContainer.open(source, _ => true, "a 2.x file"), allocator)

  /** The page statistics of a 2.x file, None if it has none. */
  def read(file: FileContainer): Option[PageStatistics] = {
    val allocator = new RootAllocator()
    try read(file, allocator) finally allocator.close()
  }

  def read(file: FileContainer, allocator: BufferAllocator): Option[PageStatistics] = {
    val key = file.descriptor.getSchema.getMetadataMap.get(BufferKey)
    if (key == null) return None
    val idx = key.toStringUtf8.toIntOption.getOrElse(
      throw LanceFormatException(file.path, s"schema metadata $BufferKey = '${key.toStringUtf8}' is not a number"))
    if (idx <= 0) throw LanceFormatException(file.path, s"page statistics in global buffer $idx")
    val bb = file.globalBuffer(idx, "page statistics")
    val bytes = new Array[Byte](bb.remaining()); bb.get(bytes)
    val reader = new ArrowStreamReader(new java.io.ByteArrayInputStream(bytes), allocator)
    try {
      val root = reader.getVectorSchemaRoot
      val version = Option(root.getSchema.getCustomMetadata).flatMap(m => Option(m.get(VersionKey)))
      if (!version.contains(Version))
        throw LanceFormatException(file.path, s"page statistics layout version ${version.getOrElse("(none)")} is not $Version")
      val out = Vector.newBuilder[PageStat]
      while (reader.loadNextBatch()) {
        def int(name: String, i: Int): Long = root.getVector(name) match {
          case v: IntVector => v.get(i).toLong
          case v: BigIntVector => v.get(i)
          case other => throw LanceFormatException(file.path, s"page statistics column $name is ${other.getField.getType}")
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
