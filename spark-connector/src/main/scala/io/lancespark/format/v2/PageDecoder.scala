package io.lancespark.format.v2

import java.nio.{ByteBuffer, ByteOrder}

import scala.collection.mutable.ArrayBuffer
import scala.util.control.NonFatal

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.input.{ByteRange, ByteReader, PlannedRead}
import io.lancespark.proto.encodings.{ArrayEncoding, Buffer => PbBuffer, Flat, Nullable}
import io.lancespark.format.v2.Block._

/** Decodes items [from, until) of one page of a 2.0 file: walks its
  * ArrayEncoding tree and reads only the byte ranges of the buffers that those
  * items need (values, validity bits, the offsets bracketing them, their bytes).
  * The resulting [[Block]] holds exactly `until - from` items.
  *
  * Supported: flat (1 bit and whole bytes, uncompressed), nullable, binary,
  * dictionary (of binary or fixed-width items; indices 1-based with 0 = null
  * unless `directDictionary`, for columns of Arrow dictionary type),
  * fixed_size_list, fixed_size_binary, list (offsets), struct. Everything else
  * is refused with a [[LanceFormatException]] naming file, column, page and
  * encoding. The block may share memory with what `input` returns.
  *
  * [[plan]] lists the reads a decode will make before any byte is read, so a
  * batch's reads can be issued together and ahead of its decode. */
final class PageDecoder(
    input: ByteReader,
    column: ColumnInfo,
    page: PageInfo,
    globalBuffers: => Vector[Region],
    where: String,
    directDictionary: Boolean,
    dictionaries: DictionaryCache = new DictionaryCache) {

  private val path = input.path

  private def fail(problem: String): Nothing =
    throw LanceFormatException(path, s"$where, page ${page.index}: $problem")

  def decode(from: Long, until: Long): Block = {
    if (from < 0 || until < from || until > page.length)
      fail(s"items [$from, $until) requested from a page of ${page.length}")
    decode(page.encoding, page.length, from, until, top = true)
  }

  /** The buffers a buffer reference of this type indexes; None for an unknown type. */
  private def buffersOf(b: PbBuffer): Option[Vector[Region]] = b.getBufferType match {
    case PbBuffer.BufferType.page   => Some(page.buffers)
    case PbBuffer.BufferType.column => Some(column.buffers)
    case PbBuffer.BufferType.file   => Some(globalBuffers)
    case _                          => None
  }

  private def region(b: PbBuffer): Region = {
    val idx = b.getBufferIndex
    val table = buffersOf(b).getOrElse(fail(s"unknown buffer type ${b.getBufferType}"))
    if (idx < 0 || idx >= table.size)
      fail(s"encoding refers to ${b.getBufferType} buffer $idx but there are ${table.size}")
    table(idx)
  }

  /** Bytes [offset, offset + len) of a buffer. */
  private def bytes(b: PbBuffer, offset: Long, len: Long, what: String): ByteBuffer = {
    val r = region(b)
    if (offset < 0 || len < 0 || offset + len > r.size)
      fail(s"$what needs bytes [$offset, ${offset + len}) of a ${r.size}-byte buffer")
    if (len == 0) ByteBuffer.allocate(0).order(ByteOrder.LITTLE_ENDIAN)
    else input.read(r.position + offset, len)
  }

  /** Where items [from, until) of a flat array lie in its buffer: (offset,
    * length) in bytes; None for a width this reader does not support. */
  private def flatSpan(flat: Flat, from: Long, until: Long): Option[(Long, Long)] = {
    val bits = flat.getBitsPerValue
    if (bits == 1) {
      val first = from >>> 3
      Some((first, (until + 7) / 8 - first))
    } else if (bits > 0 && bits % 8 == 0 && bits <= 8 * 1024 * 1024) {
      val width = bits / 8
      Some((from * width, (until - from) * width))
    } else None
  }

  private def checkCount(n: Long): Int = {
    if (n < 0 || n > Int.MaxValue - 1) fail(s"$n items, more than this reader supports at once")
    n.toInt
  }

  /** Items [from, until) of an array of `n` items encoded as `enc`; at the
    * `top` of a page's encoding, dictionary-encoded strings stay a [[DictBlock]]
    * (the vector loader expands them), elsewhere they are expanded here. */
  private def decode(enc: ArrayEncoding, n: Long, from: Long, until: Long, top: Boolean = false): Block = {
    import ArrayEncoding.ArrayEncodingCase._
    val count = until - from
    enc.getArrayEncodingCase match {
      case FLAT =>
        val flat = enc.getFlat
        if (flat.hasCompression && flat.getCompression.getScheme.nonEmpty)
          fail(s"unsupported encoding: flat with '${flat.getCompression.getScheme}' compression")
        val bits = flat.getBitsPerValue
        flatSpan(flat, from, until) match {
          case Some((offset, len)) if bits == 1 =>
            BitBlock(count, new Bits(bytes(flat.getBuffer, offset, len, s"a bitmap of $n bits"), from & 7))
          case Some((offset, len)) =>
            val width = (bits / 8).toInt
            FixedBlock(count, width, bytes(flat.getBuffer, offset, len, s"$count values of $width bytes"))
          case None => fail(s"unsupported encoding: flat with $bits bits per value")
        }

      case NULLABLE =>
        val nb = enc.getNullable
        nb.getNullabilityCase match {
          case Nullable.NullabilityCase.NO_NULLS  => decode(nb.getNoNulls.getValues, n, from, until, top)
          case Nullable.NullabilityCase.ALL_NULLS => AllNullBlock(count)
          case Nullable.NullabilityCase.SOME_NULLS =>
            val validity = decode(nb.getSomeNulls.getValidity, n, from, until) match {
              case BitBlock(_, b) => b
              case other => fail(s"nullable validity decodes to ${other.getClass.getSimpleName}, not a bitmap")
            }
            NullableBlock(validity, decode(nb.getSomeNulls.getValues, n, from, until))
          case other => fail(s"nullable encoding without nullability ($other)")
        }

      case FIXED_SIZE_LIST =>
        val fsl = enc.getFixedSizeList
        if (fsl.getHasValidity) fail("unsupported encoding: fixed_size_list with has_validity (a 2.1 layout)")
        val dim = fsl.getDimension.toLong
        if (dim <= 0) fail(s"fixed_size_list with dimension $dim")
        FslBlock(count, dim.toInt,
          decode(fsl.getItems, Math.multiplyExact(n, dim), from * dim, until * dim))

      case FIXED_SIZE_BINARY =>
        val fsb = enc.getFixedSizeBinary
        val w = fsb.getByteWidth.toLong
        val c = checkCount(count)
        decode(fsb.getBytes, Math.multiplyExact(n, w), from * w, until * w) match {
          case FixedBlock(_, 1, data) => VarBlock(count, Array.tabulate(c + 1)(i => i * w), data, None)
          case other => fail(s"fixed_size_binary bytes decode to ${other.getClass.getSimpleName}")
        }

      case BINARY =>
        val bin = enc.getBinary
        val ends = this.ends(decode(bin.getIndices, n, math.max(0, from - 1), until), from > 0,
          bin.getNullAdjustment, "binary indices")
        val data = if (ends.total == 0) ByteBuffer.allocate(0) else {
          // the page's values back to back; only this range's bytes are read
          decode(bin.getBytes, ends.first + ends.total, ends.first, ends.first + ends.total) match {
            case FixedBlock(_, 1, d) => d
            case other => fail(s"binary bytes decode to ${other.getClass.getSimpleName}, not bytes")
          }
        }
        VarBlock(count, ends.offsets, data, ends.validity)

      case DICTIONARY =>
        val dict = enc.getDictionary
        val c = checkCount(count)
        val (idxValidity, idxBlock) = decode(dict.getIndices, n, from, until) match {
          case NullableBlock(v, inner) => (Some(v), inner)
          case AllNullBlock(_)         => return AllNullBlock(count)
          case other                   => (None, other)
        }
        val idx = integers(idxBlock, "dictionary indices")
        val numItems = dict.getNumDictionaryItems
        if (numItems < 0 || numItems > Int.MaxValue - 2) fail(s"a dictionary of $numItems items")
        // Strings dictionary-encoded by the writer use index 0 for null and k for
        // item k-1; columns of Arrow dictionary type store the indices as they are.
        val shift = if (directDictionary) 0 else 1
        val items = dictionaries(column.index, page.index) {
          decode(dict.getItems, numItems, 0, numItems) match {
            case NullableBlock(v, inner) => DictionaryItems(Some(v), inner, numItems.toInt, shift, fail)
            case v: VarBlock             => DictionaryItems(v.validity, v, numItems.toInt, shift, fail)
            case other                   => DictionaryItems(None, other, numItems.toInt, shift, fail)
          }
        }
        if (items.values == AllNullValues) return AllNullBlock(count)
        val remap = items.remap
        val checkValid = idxValidity.isDefined
        val idxBits = idxValidity.getOrElse(Bits.Empty)
        val which = new Array[Int](c)
        var anyNull = false
        var i = 0
        while (i < c) {
          val raw = idx(i)
          val k =
            if (checkValid && !idxBits.get(i)) -1
            else if (raw < 0 || raw >= remap.length) fail(s"dictionary index $raw out of range ($numItems items)")
            else remap(raw.toInt)
          which(i) = k
          if (k < 0) anyNull = true
          i += 1
        }
        val validity = if (anyNull) Some(Bits.tabulate(c)(j => which(j) >= 0)) else None
        items.values match {
          case v: VarValues if top => DictBlock(count, which, v, validity)
          case v: VarValues        => DictionaryItems.toVarBlock(which, v, validity, fail)
          case v: FixedValues      => DictionaryItems.toFixedBlock(which, v, validity, fail)
          case AllNullValues       => AllNullBlock(count)
        }

      case LIST =>
        val list = enc.getList
        val ends = this.ends(decode(list.getOffsets, n, math.max(0, from - 1), until), from > 0,
          list.getNullOffsetAdjustment, "list offsets")
        if (ends.first + ends.total > list.getNumItems)
          fail(s"list offsets reach item ${ends.first + ends.total} but the page references ${list.getNumItems} items")
        ListBlock(count, ends.offsets, ends.validity, ends.first)

      case STRUCT => StructBlock(count)

      case other =>
        fail(s"unsupported encoding '${other.name.toLowerCase}' (not written by Lance 2.0 writers; " +
          "this reader supports flat, nullable, binary, dictionary, fixed_size_list, fixed_size_binary, list, struct)")
    }
  }

  /** The reads [[decode]]`(from, until)` will make, as far as they are known
    * before any byte is read: values, validity bitmaps, offsets, dictionary
    * indices and (if not cached, and `dictionaryItems`) items. What offsets
    * point at follows once they are read: the value bytes of a binary page, and
    * for a list page `listItems(first, last)`, the reads of its items [first,
    * last) (counted from the page's first referenced item). Planning never
    * fails: whatever it cannot plan is read when the decode asks for it, and
    * the decode reports what is wrong. */
  def plan(from: Long, until: Long, listItems: (Long, Long) => Seq[ByteRange] = (_, _) => Nil,
           dictionaryItems: Boolean = true): Seq[PlannedRead] = {
    val out = ArrayBuffer.empty[PlannedRead]
    if (from >= 0 && from <= until && until <= page.length)
      try planInto(page.encoding, page.length, from, until, out, new PlanContext(listItems, dictionaryItems))
      catch { case NonFatal(_) => () }
    out.toSeq
  }

  private final class PlanContext(val listItems: (Long, Long) => Seq[ByteRange], val dictionaryItems: Boolean)

  /** The file range of bytes [offset, offset + len) of a buffer, if it lies inside it. */
  private def fileRange(b: PbBuffer, offset: Long, len: Long): Option[ByteRange] =
    buffersOf(b).flatMap(_.lift(b.getBufferIndex))
      .filter(r => offset >= 0 && len > 0 && offset + len <= r.size)
      .map(r => ByteRange(r.position + offset, len))

  private def flatRange(enc: ArrayEncoding, from: Long, until: Long): Option[ByteRange] =
    if (!enc.hasFlat) None
    else flatSpan(enc.getFlat, from, until).flatMap { case (o, l) => fileRange(enc.getFlat.getBuffer, o, l) }

  private def planInto(enc: ArrayEncoding, n: Long, from: Long, until: Long, out: ArrayBuffer[PlannedRead],
                       ctx: PlanContext): Unit = {
    import ArrayEncoding.ArrayEncodingCase._
    enc.getArrayEncodingCase match {
      case FLAT => flatRange(enc, from, until).foreach(out += PlannedRead(_))
      case NULLABLE =>
        val nb = enc.getNullable
        nb.getNullabilityCase match {
          case Nullable.NullabilityCase.NO_NULLS => planInto(nb.getNoNulls.getValues, n, from, until, out, ctx)
          case Nullable.NullabilityCase.SOME_NULLS =>
            planInto(nb.getSomeNulls.getValidity, n, from, until, out, ctx)
            planInto(nb.getSomeNulls.getValues, n, from, until, out, ctx)
          case _ => ()
        }
      case FIXED_SIZE_LIST =>
        val fsl = enc.getFixedSizeList
        val dim = fsl.getDimension.toLong
        if (!fsl.getHasValidity && dim > 0)
          planInto(fsl.getItems, Math.multiplyExact(n, dim), from * dim, until * dim, out, ctx)
      case FIXED_SIZE_BINARY =>
        val w = enc.getFixedSizeBinary.getByteWidth.toLong
        planInto(enc.getFixedSizeBinary.getBytes, Math.multiplyExact(n, w), from * w, until * w, out, ctx)
      case BINARY => planBinary(enc, n, from, until, out, ctx)
      case DICTIONARY =>
        val dict = enc.getDictionary
        planInto(dict.getIndices, n, from, until, out, ctx)
        if (ctx.dictionaryItems && !dictionaries.has(column.index, page.index))
          planInto(dict.getItems, dict.getNumDictionaryItems, 0, dict.getNumDictionaryItems, out, ctx)
      case LIST =>
        val list = enc.getList
        planEnds(list.getOffsets, n, from, until, list.getNullOffsetAdjustment, out, ctx)(Some(ctx.listItems))
      case _ => ()
    }
  }

  /** The values of a "no nulls" wrapper (as writers wrap binary offsets). */
  @annotation.tailrec
  private def withoutNoNulls(enc: ArrayEncoding): ArrayEncoding =
    if (enc.hasNullable && enc.getNullable.hasNoNulls) withoutNoNulls(enc.getNullable.getNoNulls.getValues) else enc

  /** A binary page's offsets, then the value bytes they bracket; or, when the
    * batch takes the whole page, its bytes together with its offsets (so that
    * the buffers of adjacent whole pages make one read). */
  private def planBinary(enc: ArrayEncoding, n: Long, from: Long, until: Long, out: ArrayBuffer[PlannedRead],
                         ctx: PlanContext): Unit = {
    val bin = enc.getBinary
    val wholeBytes: Option[ByteRange] =
      if (from > 0 || until < n || !bin.getBytes.hasFlat || bin.getBytes.getFlat.getBitsPerValue != 8) None
      else {
        val b = bin.getBytes.getFlat.getBuffer
        buffersOf(b).flatMap(_.lift(b.getBufferIndex)).flatMap(r => fileRange(b, 0, r.size))
      }
    wholeBytes.foreach(out += PlannedRead(_))
    planEnds(bin.getIndices, n, from, until, bin.getNullAdjustment, out, ctx)(
      if (wholeBytes.isDefined) None else Some((first, last) => flatRange(bin.getBytes, first, last).toSeq))
  }

  /** The end offsets of items [from, until) (with the end of item from-1), and
    * with `follow`, what the range [first, last) they bracket leads to. */
  private def planEnds(offsets: ArrayEncoding, n: Long, from: Long, until: Long, adj: Long,
                       out: ArrayBuffer[PlannedRead], ctx: PlanContext)
                      (follow: Option[(Long, Long) => Seq[ByteRange]]): Unit = {
    val plain = withoutNoNulls(offsets)
    val start = math.max(0, from - 1)
    val width = if (plain.hasFlat) plain.getFlat.getBitsPerValue / 8 else 0L
    flatRange(plain, start, until) match {
      case Some(r) if follow.isDefined && until > from && Set(1L, 2L, 4L, 8L).contains(width) =>
        val next: ByteBuffer => Seq[ByteRange] = buf => {
          def end(i: Long): Long = normalize(width match {
            case 1 => buf.get(i.toInt) & 0xffL
            case 2 => buf.getShort((2 * i).toInt) & 0xffffL
            case 4 => buf.getInt((4 * i).toInt) & 0xffffffffL
            case _ => buf.getLong((8 * i).toInt)
          }, adj)
          val first = if (from > 0) end(0) else 0L
          val last = end(until - start - 1)
          if (last <= first) Nil else follow.get(first, last)
        }
        out += PlannedRead(r, next)
      case Some(r) => out += PlannedRead(r)
      case None    => planInto(offsets, n, start, until, out, ctx)
    }
  }

  private def normalize(v: Long, adj: Long): Long =
    if (adj > 0 && java.lang.Long.compareUnsigned(v, adj) >= 0) v - adj else v

  /** End offsets (binary indices, list offsets) of items [from, until): the
    * page stores each item's end, the first start being an implicit 0; an end
    * at or above `adj` (when adj > 0) marks a null item. `withPrev` says the
    * block starts with the end of item from-1. Offsets come out relative to
    * `first`, the start of item `from`. */
  private final class Ends(val offsets: Array[Long], val validity: Option[Bits], val first: Long, val total: Long)

  private def ends(b: Block, withPrev: Boolean, adj: Long, what: String): Ends = {
      val raw = integers(b, what)
      val skip = if (withPrev) 1 else 0
      val c = raw.length - skip
      val first = if (withPrev) normalize(raw(0), adj) else 0L
      val offsets = new Array[Long](c + 1)
      var anyNull = false
      var i = 0
      while (i < c) {
        val v = raw(i + skip)
        if (adj > 0 && java.lang.Long.compareUnsigned(v, adj) >= 0) anyNull = true
        offsets(i + 1) = normalize(v, adj) - first
        if (offsets(i + 1) < offsets(i)) fail(s"$what decrease at item $i")
        i += 1
      }
      val validity =
        if (anyNull) Some(Bits.tabulate(c)(j => java.lang.Long.compareUnsigned(raw(j + skip), adj) < 0)) else None
      new Ends(offsets, validity, first, offsets(c))
  }

  /** Unsigned integers of a fixed-width block (1, 2, 4 or 8 bytes). */
  private def integers(b: Block, what: String): Array[Long] = b match {
    case FixedBlock(n, width, data) =>
      val count = checkCount(n)
      val out = new Array[Long](count)
      var i = 0
      width match {
        case 1 => while (i < count) { out(i) = data.get(i) & 0xffL; i += 1 }
        case 2 => while (i < count) { out(i) = data.getShort(2 * i) & 0xffffL; i += 1 }
        case 4 => while (i < count) { out(i) = data.getInt(4 * i) & 0xffffffffL; i += 1 }
        case 8 => while (i < count) { out(i) = data.getLong(8 * i); i += 1 }
        case w => fail(s"$what are $w-byte values, not integers")
      }
      out
    case other => fail(s"$what decode to ${other.getClass.getSimpleName}, not integers")
  }
}

object PageDecoder {
  /** The number of items a list page references (its `num_items`), looking
    * through nullable wrappers. */
  def listItems(enc: ArrayEncoding): Option[Long] = enc.getArrayEncodingCase match {
    case ArrayEncoding.ArrayEncodingCase.LIST => Some(enc.getList.getNumItems)
    case ArrayEncoding.ArrayEncodingCase.NULLABLE =>
      val nb = enc.getNullable
      if (nb.hasNoNulls) listItems(nb.getNoNulls.getValues)
      else if (nb.hasSomeNulls) listItems(nb.getSomeNulls.getValues)
      else Some(0L)
    case _ => None
  }
}
