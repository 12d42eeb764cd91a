package io.lancespark.table.model

import java.nio.{ByteBuffer, ByteOrder}

import scala.jdk.CollectionConverters._

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.{EncodedU64Array, U64Segment, RowIdSequence => PbSequence}

/** The stable row ids of one fragment, in row order: a list of segments, each
  * a compact form of u64s (a range, a range with holes, a range filtered by a
  * bitmap, or an explicit array). */
final class RowIdSequence private (segments: Vector[RowIdSequence.Segment]) {
  private val starts: Array[Long] = segments.scanLeft(0L)(_ + _.length).toArray

  def length: Long = starts.last

  /** Row ids of rows [from, until). */
  def slice(from: Long, until: Long): Array[Long] = {
    require(from >= 0 && until <= length && from <= until, s"row range [$from, $until) of $length")
    val out = new Array[Long]((until - from).toInt)
    var pos = from
    var seg = java.util.Arrays.binarySearch(starts, from) match {
      case i if i >= 0 => i
      case i => -i - 2
    }
    while (pos < until) {
      while (starts(seg + 1) <= pos) seg += 1
      val inSeg = pos - starts(seg)
      val n = math.min(until - pos, segments(seg).length - inSeg)
      segments(seg).fill(inSeg, n.toInt, out, (pos - from).toInt)
      pos += n
    }
    out
  }

  /** The row offsets (ascending) whose row id is in `ids`. */
  def offsetsOf(ids: Set[Long]): Vector[Long] =
    segments.indices.iterator.flatMap(i => segments(i).positions(ids).map(_ + starts(i))).toVector.sorted
}

object RowIdSequence {

  private[table] sealed trait Segment {
    def length: Long
    def fill(offset: Long, count: Int, out: Array[Long], outPos: Int): Unit
    /** Offsets within the segment of the values in `ids`. */
    def positions(ids: Set[Long]): Iterator[Long]
  }

  private final case class Range(start: Long, end: Long) extends Segment {
    override def positions(ids: Set[Long]): Iterator[Long] =
      ids.iterator.filter(id => id >= start && id < end).map(_ - start)
    override def length: Long = end - start
    override def fill(offset: Long, count: Int, out: Array[Long], outPos: Int): Unit = {
      var i = 0
      while (i < count) { out(outPos + i) = start + offset + i; i += 1 }
    }
  }

  private final case class Explicit(values: Array[Long]) extends Segment {
    override def positions(ids: Set[Long]): Iterator[Long] =
      values.indices.iterator.filter(i => ids.contains(values(i))).map(_.toLong)
    override def length: Long = values.length.toLong
    override def fill(offset: Long, count: Int, out: Array[Long], outPos: Int): Unit =
      System.arraycopy(values, offset.toInt, out, outPos, count)
  }

  /** The number of values of one segment (a span of a version sequence, say). */
  def segmentLength(s: U64Segment, where: String): Long = segment(s, where).length

  /** A serialized RowIdSequence holding `ids` in order: ascending runs of
    * consecutive ids as ranges, a sorted sequence with few gaps as a range
    * with holes, anything else as an explicit array. */
  def encode(ids: Array[Long]): Array[Byte] = {
    val b = PbSequence.newBuilder()
    if (ids.nonEmpty) b.addSegments(encodeSegment(ids))
    b.build().toByteArray
  }

  private def encodeSegment(ids: Array[Long]): U64Segment = {
    val sorted = ids.indices.drop(1).forall(i => ids(i) > ids(i - 1))
    val (start, end) = (ids.head, ids.last + 1)
    if (sorted && end - start == ids.length.toLong)
      U64Segment.newBuilder().setRange(U64Segment.Range.newBuilder().setStart(start).setEnd(end)).build()
    else if (sorted && end - start <= 2L * ids.length) {
      val holes = Array.newBuilder[Long]
      var next = start
      ids.foreach { id => while (next < id) { holes += next; next += 1 }; next = id + 1 }
      U64Segment.newBuilder().setRangeWithHoles(U64Segment.RangeWithHoles.newBuilder()
        .setStart(start).setEnd(end).setHoles(encodeArray(holes.result()))).build()
    } else if (sorted) U64Segment.newBuilder().setSortedArray(encodeArray(ids)).build()
    else U64Segment.newBuilder().setArray(encodeArray(ids)).build()
  }

  /** Values as offsets from their minimum in 16 or 32 bits when they fit, else as u64s. */
  private def encodeArray(values: Array[Long]): EncodedU64Array = {
    val b = EncodedU64Array.newBuilder()
    if (values.isEmpty) return b.setU64Array(EncodedU64Array.U64Array.newBuilder()).build()
    val base = values.min
    val span = values.max - base
    def le(width: Int): ByteBuffer = ByteBuffer.allocate(values.length * width).order(ByteOrder.LITTLE_ENDIAN)
    if (span >= 0 && span < (1L << 16)) {
      val buf = le(2); values.foreach(v => buf.putShort((v - base).toShort))
      b.setU16Array(EncodedU64Array.U16Array.newBuilder().setBase(base)
        .setOffsets(com.google.protobuf.ByteString.copyFrom(buf.array())))
    } else if (span >= 0 && span < (1L << 32)) {
      val buf = le(4); values.foreach(v => buf.putInt((v - base).toInt))
      b.setU32Array(EncodedU64Array.U32Array.newBuilder().setBase(base)
        .setOffsets(com.google.protobuf.ByteString.copyFrom(buf.array())))
    } else {
      val buf = le(8); values.foreach(v => buf.putLong(v))
      b.setU64Array(EncodedU64Array.U64Array.newBuilder().setValues(com.google.protobuf.ByteString.copyFrom(buf.array())))
    }
    b.build()
  }

  def parse(bytes: Array[Byte], where: String): RowIdSequence = {
    val pb =
      try PbSequence.parseFrom(bytes)
      catch {
        case e: com.google.protobuf.InvalidProtocolBufferException =>
          throw new LanceFormatException(s"$where: corrupt row id sequence: ${e.getMessage}", e)
      }
    new RowIdSequence(pb.getSegmentsList.asScala.toVector.map(segment(_, where)))
  }

  private def segment(s: U64Segment, where: String): Segment = s.getSegmentCase match {
    case U64Segment.SegmentCase.RANGE =>
      Range(s.getRange.getStart, s.getRange.getEnd)
    case U64Segment.SegmentCase.RANGE_WITH_HOLES =>
      val r = s.getRangeWithHoles
      val holes = decodeArray(r.getHoles, where).toSet
      Explicit((r.getStart until r.getEnd).iterator.filterNot(holes.contains).toArray)
    case U64Segment.SegmentCase.RANGE_WITH_BITMAP =>
      val r = s.getRangeWithBitmap
      val bits = r.getBitmap.toByteArray
      val n = (r.getEnd - r.getStart).toInt
      Explicit((0 until n).iterator
        .filter(i => (i / 8) < bits.length && (bits(i / 8) & (1 << (i % 8))) != 0)
        .map(i => r.getStart + i).toArray)
    case U64Segment.SegmentCase.SORTED_ARRAY => Explicit(decodeArray(s.getSortedArray, where))
    case U64Segment.SegmentCase.ARRAY        => Explicit(decodeArray(s.getArray, where))
    case other =>
      throw new LanceFormatException(s"$where: unsupported row id segment kind $other")
  }

  private def decodeArray(a: EncodedU64Array, where: String): Array[Long] = {
    def le(bytes: com.google.protobuf.ByteString): ByteBuffer =
      bytes.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN)
    a.getArrayCase match {
      case EncodedU64Array.ArrayCase.U16_ARRAY =>
        val b = le(a.getU16Array.getOffsets); val base = a.getU16Array.getBase
        Array.tabulate(b.remaining() / 2)(i => base + (b.getShort(i * 2) & 0xffff))
      case EncodedU64Array.ArrayCase.U32_ARRAY =>
        val b = le(a.getU32Array.getOffsets); val base = a.getU32Array.getBase
        Array.tabulate(b.remaining() / 4)(i => base + (b.getInt(i * 4) & 0xffffffffL))
      case EncodedU64Array.ArrayCase.U64_ARRAY =>
        val b = le(a.getU64Array.getValues)
        Array.tabulate(b.remaining() / 8)(i => b.getLong(i * 8))
      case other => throw new LanceFormatException(s"$where: unsupported row id array kind $other")
    }
  }
}
