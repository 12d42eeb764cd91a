package io.lancespark.format.arrow

import java.nio.ByteBuffer

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.{ArrowBuf, BufferAllocator}
import org.apache.arrow.memory.util.MemoryUtil
import org.apache.arrow.vector.{BaseFixedWidthVector, BaseLargeVariableWidthVector, BaseVariableWidthVector, BitVector, FieldVector}
import org.apache.arrow.vector.complex.{FixedSizeListVector, LargeListVector, ListVector, StructVector}
import org.apache.arrow.vector.ipc.message.ArrowFieldNode

import io.lancespark.format.arrow.Block._

/** Fills Arrow vectors from decoded page slices: builds each vector's buffers
  * (values with bulk copies) and hands them over with `loadFieldBuffers`. */
private[format] final class VectorLoader(allocator: BufferAllocator, fail: String => Nothing) {

  /** Buffers allocated for one vector; closed if anything fails before they
    * are handed to the vector. */
  private final class Owned {
    var bufs: List[ArrowBuf] = Nil
    /** A zeroed buffer (validity: bits are ORed in). */
    def alloc(bytes: Long): ArrowBuf = {
      val b = allocRaw(bytes)
      b.setZero(0, b.capacity())
      b
    }
    /** A buffer whose first `bytes` the caller overwrites entirely. */
    def allocRaw(bytes: Long): ArrowBuf = {
      val b = allocator.buffer(math.max(bytes, 1L))
      bufs ::= b
      b
    }
    /** Loads `ordered` into `vec`; afterwards the vector holds its own references. */
    def loadInto(vec: FieldVector, n: Long, nulls: Long, ordered: ArrowBuf*): Unit = {
      val mine = bufs
      bufs = Nil
      try vec.loadFieldBuffers(new ArrowFieldNode(n, nulls), ordered.asJava)
      finally mine.foreach(_.close())
    }
  }

  private def owning[T](f: Owned => T): T = {
    val o = new Owned
    try f(o)
    catch { case e: Throwable => o.bufs.foreach(b => try b.close() catch { case _: Throwable => () }); throw e }
  }

  /** Validity of a slice and the slice of its values (None when all null). */
  private def unwrap(s: Slice): (Option[Bits], Option[Slice]) = s.block match {
    case NullableBlock(v, inner)              => (Some(v), Some(Slice(inner, s.start, s.count)))
    case AllNullBlock(_)                      => (None, None)
    case v: VarBlock if v.validity.isDefined  => (v.validity, Some(s))
    case d: DictBlock if d.validity.isDefined => (d.validity, Some(s))
    case l: ListBlock if l.validity.isDefined => (l.validity, Some(s))
    case _                                    => (None, Some(s))
  }

  private def countRows(slices: Seq[Slice]): Long = {
    var n = 0L
    slices.foreach(s => n += s.count)
    if (n > Int.MaxValue - 1) fail(s"$n rows do not fit one Arrow vector")
    n
  }

  /** Builds a validity buffer for the slices; returns it and the null count. */
  private def validityOf(o: Owned, slices: Seq[Slice], n: Long): (ArrowBuf, Long) = {
    val buf = o.alloc((n + 7) / 8)
    var dst = 0L
    var nulls = 0L
    slices.foreach { s =>
      unwrap(s) match {
        case (_, None)           => nulls += s.count // all null: bits stay 0
        case (None, Some(_))     => setOnes(buf, dst, s.count)
        case (Some(bits), Some(_)) => nulls += s.count - copyBits(buf, dst, bits, s.start, s.count)
      }
      dst += s.count
    }
    (buf, nulls)
  }

  private def setBit(buf: ArrowBuf, d: Long): Unit =
    buf.setByte(d >>> 3, buf.getByte(d >>> 3) | (1 << (d & 7).toInt))

  /** ORs `count` bits of `src` from `from` into `dst` at `at` (dst bits there
    * are 0); returns how many were set. Whole destination bytes are gathered
    * from the source a byte at a time (shifted when the two are not aligned
    * alike: a task's rows can start anywhere in a page), then stored at once. */
  private def copyBits(dst: ArrowBuf, at: Long, src: Bits, from: Long, count: Long): Long = {
    var set = 0L
    var i = 0L
    while (i < count && ((at + i) & 7) != 0) { // up to dst's next byte boundary
      if (src.get(from + i)) { setBit(dst, at + i); set += 1 }
      i += 1
    }
    val bytes = (count - i) >>> 3
    if (bytes > 0) {
      val s0 = src.bitOffset + from + i
      val first = (s0 >>> 3).toInt
      val shift = (s0 & 7).toInt
      val out = new Array[Byte](bytes.toInt)
      val buf = src.buf
      var b = 0
      if (shift == 0) buf.duplicate().position(first).get(out)
      else while (b < out.length) {
        // the source bits of a byte span two source bytes (the second exists: these
        // bits lie within the `count` the source holds)
        out(b) = (((buf.get(first + b) & 0xff) >>> shift) | ((buf.get(first + b + 1) & 0xff) << (8 - shift))).toByte
        b += 1
      }
      dst.setBytes((at + i) >>> 3, out)
      b = 0
      while (b < out.length) { set += Integer.bitCount(out(b) & 0xff); b += 1 }
      i += bytes * 8
    }
    while (i < count) {
      if (src.get(from + i)) { setBit(dst, at + i); set += 1 }
      i += 1
    }
    set
  }

  private def setOnes(buf: ArrowBuf, start: Long, count: Long): Unit = {
    var d = start
    val end = start + count
    while (d < end && (d & 7) != 0) { setBit(buf, d); d += 1 }
    val wholeBytes = (end - d) >>> 3
    if (wholeBytes > 0) { buf.setOne(d >>> 3, wholeBytes); d += wholeBytes * 8 }
    while (d < end) { setBit(buf, d); d += 1 }
  }

  private def view(data: ByteBuffer, from: Long, len: Long): ByteBuffer = {
    val d = data.duplicate()
    d.position(from.toInt).limit((from + len).toInt)
    d
  }

  /** A leaf vector (primitive, binary, fixed-size list) from page slices. */
  def loadLeaf(vec: FieldVector, slices: Seq[Slice]): Unit = {
    val n = countRows(slices)
    vec match {
      case v: FixedSizeListVector =>
        val dim = v.getListSize
        val childSlices = slices.map { s =>
          unwrap(s)._2 match {
            case None => Slice(AllNullBlock(s.count * dim), 0, s.count * dim)
            case Some(inner) => inner.block match {
              case FslBlock(_, `dim`, items) => Slice(items, inner.start * dim, s.count * dim)
              case other => mismatch(v, other)
            }
          }
        }
        owning { o =>
          val (validity, nulls) = validityOf(o, slices, n)
          o.loadInto(v, n, nulls, validity)
        }
        loadLeaf(v.getDataVector, childSlices)

      case v: BitVector => owning { o =>
        val (validity, nulls) = validityOf(o, slices, n)
        val data = o.alloc((n + 7) / 8)
        var dst = 0L
        slices.foreach { s =>
          unwrap(s)._2.foreach { inner =>
            inner.block match {
              case BitBlock(_, bits) => copyBits(data, dst, bits, inner.start, s.count)
              case other => mismatch(v, other)
            }
          }
          dst += s.count
        }
        o.loadInto(v, n, nulls, validity, data)
      }

      case v: BaseFixedWidthVector => owning { o =>
        val (validity, nulls) = validityOf(o, slices, n)
        val w = v.getTypeWidth
        val data = o.allocRaw(n * w)
        var dst = 0L
        slices.foreach { s =>
          unwrap(s)._2 match {
            case Some(inner) => inner.block match {
              case FixedBlock(_, `w`, src) => data.setBytes(dst * w, view(src, inner.start * w, s.count * w))
              case d: FixedDictBlock if d.items.width == w => lookUp(d, inner.start.toInt, s.count.toInt, data, dst)
              case other => mismatch(v, other)
            }
            case None => data.setZero(dst * w, s.count * w) // all null: values are zeros
          }
          dst += s.count
        }
        o.loadInto(v, n, nulls, validity, data)
      }

      case v: BaseVariableWidthVector      => loadVar(v, slices, n, 4)
      case v: BaseLargeVariableWidthVector => loadVar(v, slices, n, 8)
      case other => fail(s"unsupported Arrow vector ${other.getClass.getSimpleName} for a leaf column")
    }
  }

  /** Rows [from, from + count) of a fixed-width dictionary block, looked up
    * into `data` from value `at`: one bounds check, then a typed store a row. */
  private def lookUp(d: FixedDictBlock, from: Int, count: Int, data: ArrowBuf, at: Long): Unit = {
    if (count <= 0) return
    val w = d.items.width
    if (from < 0 || from + count > d.which.length) fail(s"rows [$from, ${from + count}) of ${d.which.length}")
    data.checkBytes(at * w, (at + count) * w)
    val which = d.which
    var addr = data.memoryAddress() + at * w
    var i = from
    val end = from + count
    w match {
      case 8 =>
        val src = d.items.longs
        while (i < end) { MemoryUtil.putLong(addr, src(which(i))); addr += 8; i += 1 }
      case 16 => // (128-bit decimals: two words an item)
        val src = d.items.longs
        while (i < end) {
          val k = which(i)
          MemoryUtil.putLong(addr, src(2 * k)); MemoryUtil.putLong(addr + 8, src(2 * k + 1))
          addr += 16; i += 1
        }
      case 4 =>
        val src = d.items.ints
        while (i < end) { MemoryUtil.putInt(addr, src(which(i))); addr += 4; i += 1 }
      case 2 =>
        val src = d.items.shorts
        while (i < end) { MemoryUtil.putShort(addr, src(which(i))); addr += 2; i += 1 }
      case 1 =>
        val src = d.items.bytes
        while (i < end) { MemoryUtil.putByte(addr, src(which(i))); addr += 1; i += 1 }
      case _ =>
        val src = d.items.bytes
        val base = data.memoryAddress()
        while (i < end) { data.setBytes(addr - base, src, which(i) * w, w); addr += w; i += 1 }
    }
  }

  /** A variable-width vector with the slices' validity and every value empty
    * (all offsets 0), or a fixed-width one whose values are left unwritten
    * (whatever the buffer held: a caller must not read them): rows a caller
    * reads as dictionary items, not from the vector. Other vectors are loaded
    * whole. */
  def loadHollow(v: FieldVector, slices: Seq[Slice]): Unit = v match {
    case _: BaseVariableWidthVector => owning { o =>
      val n = countRows(slices)
      val (validity, nulls) = validityOf(o, slices, n)
      o.loadInto(v, n, nulls, validity, o.alloc((n + 1) * 4), o.alloc(DataSlack))
    }
    case f: BaseFixedWidthVector if !f.isInstanceOf[BitVector] => owning { o =>
      val n = countRows(slices)
      val (validity, nulls) = validityOf(o, slices, n)
      o.loadInto(v, n, nulls, validity, o.allocRaw(n * f.getTypeWidth))
    }
    case _ => loadLeaf(v, slices)
  }

  private def loadVar(v: FieldVector, slices: Seq[Slice], n: Long, ow: Int): Unit = owning { o =>
    // each slice's value bytes (a dictionary slice's summed once, here)
    // (filled in a loop: a `map` to Long boxed one a slice, and a batch has a slice a chunk)
    val sliceBytes = new Array[Long](slices.length)
    var total = 0L
    var k = 0
    slices.foreach { s =>
      val bytes = unwrap(s)._2 match {
        case None => 0L
        case Some(inner) => inner.block match {
          case VarBlock(_, offs, _, _) => offs((inner.start + s.count).toInt) - offs(inner.start.toInt)
          case d: DictBlock            => dictBytes(d, inner.start.toInt, s.count.toInt)
          case other => mismatch(v, other)
        }
      }
      sliceBytes(k) = bytes
      total += bytes
      k += 1
    }
    if (ow == 4 && total > Int.MaxValue) fail(s"$total bytes do not fit a 32-bit-offset Arrow vector")
    val (validity, nulls) = validityOf(o, slices, n)
    val offsets = o.allocRaw((n + 1) * ow)
    putOffset(offsets, 0, 0, ow)
    val data = o.allocRaw(total + DataSlack)
    var dst = 0L
    var pos = 0L
    k = 0
    slices.foreach { s =>
      val bytes = sliceBytes(k)
      k += 1
      unwrap(s)._2 match {
        case None =>
          var i = 0L
          while (i < s.count) { putOffset(offsets, dst + i + 1, pos, ow); i += 1 }
        case Some(Slice(VarBlock(_, offs, src, _), start, _)) =>
          val base = offs(start.toInt)
          val len = offs((start + s.count).toInt) - base
          if (len > 0) data.setBytes(pos, view(src, base, len))
          copyOffsets(offsets, dst + 1, offs, start.toInt + 1, s.count.toInt, pos - base, ow)
          pos += len
        case Some(Slice(d: DictBlock, start, _)) =>
          pos = expand(d, start.toInt, s.count.toInt, offsets, dst + 1, data, pos, ow, bytes)
        case Some(other) => mismatch(v, other.block)
      }
      dst += s.count
    }
    o.loadInto(v, n, nulls, validity, offsets, data)
  }

  private def putOffset(buf: ArrowBuf, i: Long, value: Long, ow: Int): Unit =
    if (ow == 4) buf.setInt(i * 4, value.toInt) else buf.setLong(i * 8, value)

  /** Spare bytes at the end of variable-width data buffers: dictionary values
    * are copied in 8-byte words. */
  private val DataSlack = 8L

  /** Bytes of rows [from, from + count) of a dictionary block. */
  private def dictBytes(d: DictBlock, from: Int, count: Int): Long = {
    val offs = d.items.offsets
    var total = 0L
    var i = from
    while (i < from + count) {
      val k = d.which(i)
      if (k >= 0) total += offs(k + 1) - offs(k)
      i += 1
    }
    total
  }

  /** Writes rows [from, from + count) of a dictionary block as plain values
    * (`total` bytes, see `dictBytes`): offsets from index `at` (relative to
    * `pos`), bytes from `pos` of `data`. Returns the data position after them. */
  private def expand(d: DictBlock, from: Int, count: Int, offsets: ArrowBuf, at: Long, data: ArrowBuf,
                     pos0: Long, ow: Int, total: Long): Long = {
    if (count <= 0) return pos0
    if (from < 0 || from + count > d.which.length) fail(s"rows [$from, ${from + count}) of ${d.which.length}")
    if (d.items.bytes.length < d.items.offsets.last + DictionaryItems.Padding) fail("dictionary bytes are not padded")
    if (offsets.capacity < (at + count) * ow || data.capacity < pos0 + total + DataSlack)
      fail(s"vector buffers too small for the dictionary values")
    val offs = d.items.offsets
    val bytes = d.items.bytes
    var offAddr = offsets.memoryAddress() + at * ow
    val dataAddr = data.memoryAddress()
    var pos = pos0
    var i = from
    while (i < from + count) {
      val k = d.which(i)
      if (k >= 0) {
        val start = offs(k).toInt
        val len = (offs(k + 1) - start).toInt
        // 8-byte words: may write up to 7 bytes past the value (overwritten by
        // the next one, or into the data buffer's slack) and read up to 7 past
        // the item (into the dictionary's padding)
        var j = 0
        while (j < len) { MemoryUtil.putLong(dataAddr + pos + j, MemoryUtil.getLong(bytes, start + j)); j += 8 }
        pos += len
      }
      if (ow == 4) MemoryUtil.putInt(offAddr, pos.toInt) else MemoryUtil.putLong(offAddr, pos)
      offAddr += ow
      i += 1
    }
    pos
  }

  /** Writes offsets `at` .. `at + count - 1` of `buf` from `src(from + k) + shift`:
    * one bounds check for the range, then unchecked stores. */
  private def copyOffsets(buf: ArrowBuf, at: Long, src: Array[Long], from: Int, count: Int, shift: Long,
                          ow: Int): Unit = {
    if (count <= 0) return
    buf.checkBytes(at * ow, (at + count) * ow)
    if (from < 0 || from + count > src.length) fail(s"offsets [$from, ${from + count}) of ${src.length}")
    var addr = buf.memoryAddress() + at * ow
    var k = from
    val end = from + count
    if (ow == 4) while (k < end) { MemoryUtil.putInt(addr, (src(k) + shift).toInt); addr += 4; k += 1 }
    else while (k < end) { MemoryUtil.putLong(addr, src(k) + shift); addr += 8; k += 1 }
  }

  /** A list vector's own buffers (validity, offsets) from list page slices;
    * the caller fills the items. */
  def loadList(vec: FieldVector, slices: Seq[Slice]): Unit = owning { o =>
    val n = countRows(slices)
    val ow = vec match {
      case _: ListVector => 4
      case _: LargeListVector => 8
      case other => fail(s"unsupported Arrow vector ${other.getClass.getSimpleName} for a list column")
    }
    val (validity, nulls) = validityOf(o, slices, n)
    val offsets = o.alloc((n + 1) * ow)
    var dst = 0L
    var pos = 0L
    slices.foreach { s =>
      unwrap(s)._2 match {
        case None =>
          var i = 0L
          while (i < s.count) { putOffset(offsets, dst + i + 1, pos, ow); i += 1 }
        case Some(Slice(ListBlock(_, offs, _, _), start, _)) =>
          val base = offs(start.toInt)
          var i = 0
          while (i < s.count) {
            putOffset(offsets, dst + i + 1, pos + offs((start + i + 1).toInt) - base, ow)
            i += 1
          }
          pos += offs((start + s.count).toInt) - base
        case Some(other) => mismatch(vec, other.block)
      }
      dst += s.count
    }
    if (ow == 4 && pos > Int.MaxValue) fail(s"$pos list items do not fit a 32-bit-offset Arrow list")
    o.loadInto(vec, n, nulls, validity, offsets)
  }

  /** A struct vector's own validity (all valid without `valid`); the caller fills children. */
  def loadStruct(vec: StructVector, n: Long, valid: Option[Bits] = None): Unit = owning { o =>
    val validity = o.alloc((n + 7) / 8)
    val nulls = valid match {
      case None => setOnes(validity, 0, n); 0L
      case Some(bits) => n - copyBits(validity, 0, bits, 0, n)
    }
    o.loadInto(vec, n, nulls, validity)
  }

  private def mismatch(v: FieldVector, b: Block): Nothing =
    fail(s"page data (${b.getClass.getSimpleName}${b match {
      case f: FixedBlock => s" of ${f.width}-byte values"
      case f: FslBlock => s" of dimension ${f.dimension}"
      case _ => ""
    }}) does not match the field's Arrow type ${v.getField.getType}")
}
