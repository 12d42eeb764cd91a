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
}

object RowIdSequence {

  private[table] sealed trait Segment {
    def length: Long
    def fill(offset: Long, count: Int, out: Array[Long], outPos: Int): Unit
  }

  private final case class Range(start: Long, end: Long) extends Segment {
    override def length: Long = end - start
    override def fill(offset: Long, count: Int, out: Array[Long], outPos: Int): Unit = {
      var i = 0
      while (i < count) { out(outPos + i) = start + offset + i; i += 1 }
    }
  }

  private final case class Explicit(values: Array[Long]) extends Segment {
    override def length: Long = values.length.toLong
    override def fill(offset: Long, count: Int, out: Array[Long], outPos: Int): Unit =
      System.arraycopy(values, offset.toInt, out, outPos, count)
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
