package io.lancespark.format.v2

import java.nio.{ByteBuffer, ByteOrder}

import scala.collection.mutable

import io.lancespark.format.LanceFormatException
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.proto.encodings.{ArrayEncoding, Buffer => PbBuffer, Nullable}
import io.lancespark.format.v2.Block._

/** Decodes one page of a 2.0 file: walks its ArrayEncoding tree, reading only
  * the buffers the tree references, into [[Block]]s.
  *
  * Supported: flat (1 bit and whole bytes, uncompressed), nullable, binary,
  * dictionary (of binary items), fixed_size_list, fixed_size_binary, list
  * (offsets), struct. Everything else is refused with a [[LanceFormatException]]
  * naming the file, column, page and encoding. */
final class PageDecoder(
    source: RandomAccessSource,
    column: ColumnInfo,
    page: PageInfo,
    globalBuffers: => Vector[Region],
    where: String) {

  private val path = source.path
  private val cache = mutable.Map.empty[(Int, Int), ByteBuffer]

  private def fail(problem: String): Nothing =
    throw LanceFormatException(path, s"$where, page ${page.index}: $problem")

  def decode(): Block = decode(page.encoding, page.length)

  private def buffer(b: PbBuffer): ByteBuffer = {
    val idx = b.getBufferIndex
    val table: Vector[Region] = b.getBufferType match {
      case PbBuffer.BufferType.page   => page.buffers
      case PbBuffer.BufferType.column => column.buffers
      case PbBuffer.BufferType.file   => globalBuffers
      case other                      => fail(s"unknown buffer type $other")
    }
    if (idx < 0 || idx >= table.size)
      fail(s"encoding refers to ${b.getBufferType} buffer $idx but there are ${table.size}")
    cache.getOrElseUpdate((b.getBufferTypeValue, idx), {
      val r = table(idx)
      source.read(r.position, r.size)
    }).duplicate().order(ByteOrder.LITTLE_ENDIAN)
  }

  private def checkCount(n: Long): Int = {
    if (n < 0 || n > Int.MaxValue - 1) fail(s"page holds $n items, more than this reader supports")
    n.toInt
  }

  def decode(enc: ArrayEncoding, n: Long): Block = {
    import ArrayEncoding.ArrayEncodingCase._
    enc.getArrayEncodingCase match {
      case FLAT =>
        val flat = enc.getFlat
        if (flat.hasCompression && flat.getCompression.getScheme.nonEmpty)
          fail(s"unsupported encoding: flat with '${flat.getCompression.getScheme}' compression")
        val buf = buffer(flat.getBuffer)
        val bits = flat.getBitsPerValue
        if (bits == 1) {
          val need = (n + 7) / 8
          if (buf.remaining < need) fail(s"bitmap buffer has ${buf.remaining} bytes, $n bits need $need")
          BitBlock(n, new Bits(buf, 0))
        } else if (bits > 0 && bits % 8 == 0 && bits <= 8 * 1024 * 1024) {
          val width = (bits / 8).toInt
          val need = n * width
          if (buf.remaining < need) fail(s"flat buffer has ${buf.remaining} bytes, $n values of $width bytes need $need")
          FixedBlock(n, width, buf)
        } else fail(s"unsupported encoding: flat with $bits bits per value")

      case NULLABLE =>
        val nb = enc.getNullable
        nb.getNullabilityCase match {
          case Nullable.NullabilityCase.NO_NULLS  => decode(nb.getNoNulls.getValues, n)
          case Nullable.NullabilityCase.ALL_NULLS => AllNullBlock(n)
          case Nullable.NullabilityCase.SOME_NULLS =>
            val validity = decode(nb.getSomeNulls.getValidity, n) match {
              case BitBlock(_, bits) => bits
              case other => fail(s"nullable validity decodes to ${other.getClass.getSimpleName}, not a bitmap")
            }
            NullableBlock(validity, decode(nb.getSomeNulls.getValues, n))
          case other => fail(s"nullable encoding without nullability ($other)")
        }

      case FIXED_SIZE_LIST =>
        val fsl = enc.getFixedSizeList
        if (fsl.getHasValidity) fail("unsupported encoding: fixed_size_list with has_validity (a 2.1 layout)")
        val dim = fsl.getDimension
        if (dim <= 0) fail(s"fixed_size_list with dimension $dim")
        FslBlock(n, dim, decode(fsl.getItems, n * dim))

      case FIXED_SIZE_BINARY =>
        val fsb = enc.getFixedSizeBinary
        val w = fsb.getByteWidth.toLong
        val count = checkCount(n)
        decode(fsb.getBytes, n * w) match {
          case FixedBlock(_, 1, data) =>
            VarBlock(n, Array.tabulate(count + 1)(i => i * w), data, None)
          case other => fail(s"fixed_size_binary bytes decode to ${other.getClass.getSimpleName}")
        }

      case BINARY =>
        val bin = enc.getBinary
        val count = checkCount(n)
        val raw = integers(decode(bin.getIndices, n), "binary indices")
        val adj = bin.getNullAdjustment
        val offsets = new Array[Long](count + 1)
        var anyNull = false
        var i = 0
        while (i < count) {
          val v = raw(i)
          if (adj > 0 && java.lang.Long.compareUnsigned(v, adj) >= 0) { anyNull = true; offsets(i + 1) = v - adj }
          else offsets(i + 1) = v
          if (offsets(i + 1) < offsets(i)) fail(s"binary offsets decrease at item $i")
          i += 1
        }
        val validity =
          if (anyNull) Some(Bits.tabulate(count)(j => java.lang.Long.compareUnsigned(raw(j), adj) < 0)) else None
        val total = offsets(count)
        val data = if (total == 0) ByteBuffer.allocate(0) else decode(bin.getBytes, total) match {
          case FixedBlock(_, 1, d) => d
          case other => fail(s"binary bytes decode to ${other.getClass.getSimpleName}, not bytes")
        }
        VarBlock(n, offsets, data, validity)

      case DICTIONARY =>
        val dict = enc.getDictionary
        val count = checkCount(n)
        val items = decode(dict.getItems, dict.getNumDictionaryItems.toLong) match {
          case v: VarBlock => v
          case other => fail(s"unsupported encoding: dictionary items decode to ${other.getClass.getSimpleName} (only strings/binary)")
        }
        val (idxValidity, idxBlock) = decode(dict.getIndices, n) match {
          case NullableBlock(v, inner) => (Some(v), Some(inner))
          case AllNullBlock(_)         => (None, None)
          case other                   => (None, Some(other))
        }
        val idx: Array[Long] = idxBlock.fold(new Array[Long](count))(integers(_, "dictionary indices"))
        // index 0 means null; k > 0 means dictionary item k-1
        def itemOf(i: Int): Int = {
          if (idxBlock.isEmpty || idxValidity.exists(!_.get(i)) || idx(i) == 0) -1
          else {
            val k = idx(i) - 1
            if (k < 0 || k >= items.length) fail(s"dictionary index ${idx(i)} out of range (${items.length} items)")
            if (items.validity.exists(!_.get(k))) -1 else k.toInt
          }
        }
        val which = Array.tabulate(count)(itemOf)
        val offsets = new Array[Long](count + 1)
        var i = 0
        while (i < count) {
          val k = which(i)
          offsets(i + 1) = offsets(i) + (if (k < 0) 0 else items.offsets(k + 1) - items.offsets(k))
          i += 1
        }
        if (offsets(count) > Int.MaxValue - 16) fail("dictionary-decoded page is too large")
        val out = new Array[Byte](offsets(count).toInt)
        i = 0
        while (i < count) {
          val k = which(i)
          if (k >= 0) {
            val len = (items.offsets(k + 1) - items.offsets(k)).toInt
            items.data.get(items.offsets(k).toInt, out, offsets(i).toInt, len)
          }
          i += 1
        }
        val validity = if (which.contains(-1)) Some(Bits.tabulate(count)(j => which(j) >= 0)) else None
        VarBlock(n, offsets, ByteBuffer.wrap(out), validity)

      case LIST =>
        val list = enc.getList
        val count = checkCount(n)
        val raw = integers(decode(list.getOffsets, n), "list offsets")
        val adj = list.getNullOffsetAdjustment
        val offsets = new Array[Long](count + 1)
        var anyNull = false
        var i = 0
        while (i < count) {
          val v = raw(i)
          if (adj > 0 && java.lang.Long.compareUnsigned(v, adj) >= 0) { anyNull = true; offsets(i + 1) = v - adj }
          else offsets(i + 1) = v
          if (offsets(i + 1) < offsets(i)) fail(s"list offsets decrease at list $i")
          i += 1
        }
        if (offsets(count) > list.getNumItems)
          fail(s"list offsets reach item ${offsets(count)} but the page references ${list.getNumItems} items")
        val validity =
          if (anyNull) Some(Bits.tabulate(count)(j => java.lang.Long.compareUnsigned(raw(j), adj) < 0)) else None
        ListBlock(n, offsets, validity)

      case STRUCT => StructBlock(n)

      case other =>
        fail(s"unsupported encoding '${other.name.toLowerCase}' (not written by Lance 2.0 writers; " +
          "this reader supports flat, nullable, binary, dictionary, fixed_size_list, fixed_size_binary, list, struct)")
    }
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
