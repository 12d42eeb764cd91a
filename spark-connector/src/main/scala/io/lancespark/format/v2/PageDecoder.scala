package io.lancespark.format.v2

import java.nio.{ByteBuffer, ByteOrder}

import io.lancespark.format.LanceFormatException
import io.lancespark.format.input.{RandomAccessSource, ReadArena}
import io.lancespark.proto.encodings.{ArrayEncoding, Buffer => PbBuffer, Nullable}
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
  * encoding. With an `arena`, page bytes are read into its memory: the
  * block is then valid until the arena's next reset. */
final class PageDecoder(
    source: RandomAccessSource,
    column: ColumnInfo,
    page: PageInfo,
    globalBuffers: => Vector[Region],
    where: String,
    directDictionary: Boolean,
    dictionaries: DictionaryCache = new DictionaryCache,
    arena: Option[ReadArena] = None) {

  private val path = source.path

  private def fail(problem: String): Nothing =
    throw LanceFormatException(path, s"$where, page ${page.index}: $problem")

  def decode(from: Long, until: Long): Block = {
    if (from < 0 || until < from || until > page.length)
      fail(s"items [$from, $until) requested from a page of ${page.length}")
    decode(page.encoding, page.length, from, until, top = true)
  }

  private def region(b: PbBuffer): Region = {
    val idx = b.getBufferIndex
    val table: Vector[Region] = b.getBufferType match {
      case PbBuffer.BufferType.page   => page.buffers
      case PbBuffer.BufferType.column => column.buffers
      case PbBuffer.BufferType.file   => globalBuffers
      case other                      => fail(s"unknown buffer type $other")
    }
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
    else arena.fold(source.read(r.position + offset, len))(a => source.read(r.position + offset, len, a))
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
        if (bits == 1) {
          val first = from >>> 3
          val buf = bytes(flat.getBuffer, first, (until + 7) / 8 - first, s"a bitmap of $n bits")
          BitBlock(count, new Bits(buf, from & 7))
        } else if (bits > 0 && bits % 8 == 0 && bits <= 8 * 1024 * 1024) {
          val width = (bits / 8).toInt
          FixedBlock(count, width, bytes(flat.getBuffer, from * width, count * width, s"$count values of $width bytes"))
        } else fail(s"unsupported encoding: flat with $bits bits per value")

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
