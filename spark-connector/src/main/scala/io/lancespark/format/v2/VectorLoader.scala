package io.lancespark.format.v2

import java.nio.ByteBuffer

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.{ArrowBuf, BufferAllocator}
import org.apache.arrow.vector.{BaseFixedWidthVector, BaseLargeVariableWidthVector, BaseVariableWidthVector, BitVector, FieldVector}
import org.apache.arrow.vector.complex.{FixedSizeListVector, LargeListVector, ListVector, StructVector}
import org.apache.arrow.vector.ipc.message.ArrowFieldNode

import io.lancespark.format.v2.Block._

/** Fills Arrow vectors from decoded page slices with bulk copies: builds each
  * vector's buffers and hands them over with `loadFieldBuffers`. */
private[v2] final class VectorLoader(allocator: BufferAllocator, fail: String => Nothing) {

  /** Validity of a slice and the slice of its values (None when all null). */
  private def unwrap(s: Slice): (Option[Bits], Long, Option[Slice]) = s.block match {
    case NullableBlock(v, inner)              => (Some(v), s.start, Some(Slice(inner, s.start, s.count)))
    case AllNullBlock(_)                      => (None, -1L, None)
    case v: VarBlock if v.validity.isDefined  => (v.validity, s.start, Some(s))
    case l: ListBlock if l.validity.isDefined => (l.validity, s.start, Some(s))
    case _                                    => (None, 0L, Some(s))
  }

  private def alloc(bytes: Long): ArrowBuf = {
    val b = allocator.buffer(math.max(bytes, 1L))
    b.setZero(0, b.capacity())
    b
  }

  /** Builds a validity buffer for the slices; returns it and the null count. */
  private def validityOf(slices: Seq[Slice], n: Long): (ArrowBuf, Long) = {
    val buf = alloc((n + 7) / 8)
    var dst = 0L
    var nulls = 0L
    slices.foreach { s =>
      unwrap(s) match {
        case (_, -1L, None) => nulls += s.count // all null: bits stay 0
        case (None, _, _)   => setOnes(buf, dst, s.count)
        case (Some(bits), from, _) =>
          var i = 0L
          while (i < s.count) {
            if (bits.get(from + i)) {
              val d = dst + i
              setBit(buf, d)
            } else nulls += 1
            i += 1
          }
      }
      dst += s.count
    }
    (buf, nulls)
  }

  private def setBit(buf: ArrowBuf, d: Long): Unit =
    buf.setByte(d >>> 3, buf.getByte(d >>> 3) | (1 << (d & 7).toInt))

  private def setOnes(buf: ArrowBuf, start: Long, count: Long): Unit = {
    var d = start
    val end = start + count
    while (d < end && (d & 7) != 0) { setBit(buf, d); d += 1 }
    val wholeBytes = (end - d) >>> 3
    if (wholeBytes > 0) { buf.setOne(d >>> 3, wholeBytes); d += wholeBytes * 8 }
    while (d < end) { setBit(buf, d); d += 1 }
  }

  private def load(vec: FieldVector, n: Long, nulls: Long, bufs: Seq[ArrowBuf]): Unit =
    try vec.loadFieldBuffers(new ArrowFieldNode(n, nulls), bufs.asJava)
    finally bufs.foreach(_.close())

  private def slice(data: ByteBuffer, from: Long, len: Long): ByteBuffer = {
    val d = data.duplicate()
    d.position(from.toInt).limit((from + len).toInt)
    d
  }

  /** A leaf vector (primitive, binary, fixed-size list) from page slices. */
  def loadLeaf(vec: FieldVector, slices: Seq[Slice]): Unit = {
    val n = slices.map(_.count).sum
    if (n > Int.MaxValue) fail(s"$n rows do not fit one Arrow vector")
    val (validity, nulls) = validityOf(slices, n)
    var owned: List[ArrowBuf] = List(validity)
    try {
      vec match {
        case v: BitVector =>
          val data = alloc((n + 7) / 8); owned ::= data
          var dst = 0L
          slices.foreach { s =>
            unwrap(s)._3.foreach { inner =>
              inner.block match {
                case BitBlock(_, bits) =>
                  var i = 0L
                  while (i < s.count) {
                    if (bits.get(inner.start + i)) {
                      val d = dst + i
                      setBit(data, d)
                    }
                    i += 1
                  }
                case other => mismatch(v, other)
              }
            }
            dst += s.count
          }
          load(v, n, nulls, Seq(validity, data)); owned = Nil

        case v: BaseFixedWidthVector =>
          val w = v.getTypeWidth
          val data = alloc(n * w); owned ::= data
          var dst = 0L
          slices.foreach { s =>
            unwrap(s)._3.foreach { inner =>
              inner.block match {
                case FixedBlock(_, `w`, src) => data.setBytes(dst * w, slice(src, inner.start * w, s.count * w))
                case other => mismatch(v, other)
              }
            }
            dst += s.count
          }
          load(v, n, nulls, Seq(validity, data)); owned = Nil

        case v: BaseVariableWidthVector  => loadVar(v, slices, n, nulls, validity, 4); owned = Nil
        case v: BaseLargeVariableWidthVector => loadVar(v, slices, n, nulls, validity, 8); owned = Nil

        case v: FixedSizeListVector =>
          val dim = v.getListSize
          val childSlices = slices.map { s =>
            unwrap(s)._3 match {
              case None => Slice(AllNullBlock(s.count * dim), 0, s.count * dim)
              case Some(inner) => inner.block match {
                case FslBlock(_, `dim`, items) => Slice(items, inner.start * dim, s.count * dim)
                case other => mismatch(v, other)
              }
            }
          }
          load(v, n, nulls, Seq(validity)); owned = Nil
          loadLeaf(v.getDataVector, childSlices)

        case other => fail(s"unsupported Arrow vector ${other.getClass.getSimpleName} for a leaf column")
      }
    } finally owned.foreach(_.close())
  }

  private def loadVar(v: FieldVector, slices: Seq[Slice], n: Long, nulls: Long, validity: ArrowBuf, ow: Int): Unit = {
    var total = 0L
    slices.foreach { s =>
      unwrap(s)._3.foreach { inner =>
        inner.block match {
          case VarBlock(_, offs, _, _) => total += offs((inner.start + s.count).toInt) - offs(inner.start.toInt)
          case other => mismatch(v, other)
        }
      }
    }
    if (ow == 4 && total > Int.MaxValue) fail(s"$total bytes do not fit a 32-bit-offset Arrow vector")
    val offsets = alloc((n + 1) * ow)
    val data = try alloc(total) catch { case e: Throwable => offsets.close(); throw e }
    var dst = 0L
    var pos = 0L
    try {
      slices.foreach { s =>
        unwrap(s)._3 match {
          case None =>
            var i = 0L
            while (i < s.count) { putOffset(offsets, dst + i + 1, pos, ow); i += 1 }
          case Some(inner) =>
            val VarBlock(_, offs, src, _) = inner.block
            val base = offs(inner.start.toInt)
            val len = offs((inner.start + s.count).toInt) - base
            if (len > 0) data.setBytes(pos, slice(src, base, len))
            var i = 0
            while (i < s.count) {
              putOffset(offsets, dst + i + 1, pos + offs((inner.start + i + 1).toInt) - base, ow)
              i += 1
            }
            pos += len
        }
        dst += s.count
      }
    } catch { case e: Throwable => offsets.close(); data.close(); throw e }
    load(v, n, nulls, Seq(validity, offsets, data))
  }

  private def putOffset(buf: ArrowBuf, i: Long, value: Long, ow: Int): Unit =
    if (ow == 4) buf.setInt(i * 4, value.toInt) else buf.setLong(i * 8, value)

  /** A list vector's own buffers from list page slices; returns nothing, the
    * caller fills the items. `itemSizes` gives each output list's offsets. */
  def loadList(vec: FieldVector, slices: Seq[Slice]): Unit = {
    val n = slices.map(_.count).sum
    val ow = vec match {
      case _: ListVector => 4
      case _: LargeListVector => 8
      case other => fail(s"unsupported Arrow vector ${other.getClass.getSimpleName} for a list column")
    }
    val (validity, nulls) = validityOf(slices, n)
    val offsets = try alloc((n + 1) * ow) catch { case e: Throwable => validity.close(); throw e }
    try {
      var dst = 0L
      var pos = 0L
      slices.foreach { s =>
        unwrap(s)._3 match {
          case None =>
            var i = 0L
            while (i < s.count) { putOffset(offsets, dst + i + 1, pos, ow); i += 1 }
          case Some(inner) =>
            inner.block match {
              case ListBlock(_, offs, _) =>
                val base = offs(inner.start.toInt)
                var i = 0
                while (i < s.count) {
                  putOffset(offsets, dst + i + 1, pos + offs((inner.start + i + 1).toInt) - base, ow)
                  i += 1
                }
                pos += offs((inner.start + s.count).toInt) - base
              case other => mismatch(vec, other)
            }
        }
        dst += s.count
      }
      if (ow == 4 && pos > Int.MaxValue) fail(s"$pos list items do not fit a 32-bit-offset Arrow list")
    } catch { case e: Throwable => validity.close(); offsets.close(); throw e }
    load(vec, n, nulls, Seq(validity, offsets))
  }

  /** A struct vector's own (all-valid) validity; the caller fills children. */
  def loadStruct(vec: StructVector, n: Long): Unit = {
    val validity = alloc((n + 7) / 8)
    setOnes(validity, 0, n)
    load(vec, n, 0, Seq(validity))
  }

  private def mismatch(v: FieldVector, b: Block): Nothing =
    fail(s"page data (${b.getClass.getSimpleName}${b match {
      case f: FixedBlock => s" of ${f.width}-byte values"
      case f: FslBlock => s" of dimension ${f.dimension}"
      case _ => ""
    }}) does not match the field's Arrow type ${v.getField.getType}")
}
