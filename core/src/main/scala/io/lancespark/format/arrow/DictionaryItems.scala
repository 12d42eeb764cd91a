package io.lancespark.format.arrow

import java.nio.{ByteBuffer, ByteOrder}

import scala.collection.mutable

import io.lancespark.format.arrow.Block._

/** The decoded items of one dictionary page, ready for lookups: `remap(raw)`
  * is the item a stored index `raw` stands for, or -1 for null (index 0 when
  * the writer reserves it for null, or an item that is itself null). */
private[format] final class DictionaryItems(val remap: Array[Int], val values: DictionaryValues)

private[format] sealed trait DictionaryValues
/** Item k is bytes [offsets(k), offsets(k + 1)) of `bytes`. */
private[format] final case class VarValues(offsets: Array[Long], bytes: Array[Byte]) extends DictionaryValues
/** Item k is bytes [k * width, (k + 1) * width) of `bytes`. */
private[format] final case class FixedValues(width: Int, bytes: Array[Byte]) extends DictionaryValues {
  /** The items as little-endian integers for lookups: 8-byte words (items
    * of 8 or 16 bytes), 4- or 2-byte integers (by `width`). */
  lazy val longs: Array[Long] = typed(8)(b => { val a = new Array[Long](b.remaining() / 8); b.asLongBuffer().get(a); a })
  lazy val ints: Array[Int] = typed(4)(b => { val a = new Array[Int](b.remaining() / 4); b.asIntBuffer().get(a); a })
  lazy val shorts: Array[Short] = typed(2)(b => { val a = new Array[Short](b.remaining() / 2); b.asShortBuffer().get(a); a })

  /** How many items (the bytes end in [[DictionaryItems.Padding]] zero bytes). */
  def count: Int = (bytes.length - DictionaryItems.Padding) / width

  /** Item k as a signed integer of its width (items of 16 bytes: their low
    * word), as a filter compares a row's key; made once per dictionary page. */
  lazy val keys: Array[Long] = {
    val out = new Array[Long](count)
    var k = 0
    width match {
      case 1 => while (k < out.length) { out(k) = bytes(k).toLong; k += 1 }
      case 2 => val s = shorts; while (k < out.length) { out(k) = s(k).toLong; k += 1 }
      case 4 => val s = ints; while (k < out.length) { out(k) = s(k).toLong; k += 1 }
      case 8 => ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(out)
      case 16 => FixedValues.lowWords(bytes, out)
      case w => throw new IllegalStateException(s"no integer keys for items of $w bytes")
    }
    out
  }

  private def typed[A](w: Int)(read: ByteBuffer => A): A = {
    require(width == w || (w == 8 && width == 16), s"$width-byte items read as $w-byte integers")
    read(ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN))
  }
}
private[format] object FixedValues {
  /** `out(k)` = the low little-endian word of 16-byte item k of `bytes`: a
    * loop of its own, compiled on its own (a page's items are tens of
    * thousands, read once a page). */
  private def lowWords(bytes: Array[Byte], out: Array[Long]): Unit = {
    val b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)
    var k = 0
    while (k < out.length) { out(k) = b.getLong(k << 4); k += 1 }
  }
}

/** Every item is null. */
private[format] case object AllNullValues extends DictionaryValues

private[format] object DictionaryItems {

  /** From the decoded items block; `shift` is 1 when index 0 means null. */
  def apply(itemValidity: Option[Bits], items: Block, numItems: Int, shift: Int,
            fail: String => Nothing): DictionaryItems = {
    val remap = new Array[Int](numItems + shift)
    if (shift == 1) remap(0) = -1
    var k = 0
    while (k < numItems) {
      remap(k + shift) = if (itemValidity.exists(!_.get(k))) -1 else k
      k += 1
    }
    val values = items match {
      case AllNullBlock(_)               => AllNullValues
      case VarBlock(_, offsets, data, _) => VarValues(offsets, bytesOf(data, offsets(numItems)))
      case FixedBlock(_, w, data)        => FixedValues(w, bytesOf(data, w.toLong * numItems))
      case other => fail(s"unsupported encoding: dictionary items decode to ${other.getClass.getSimpleName}")
    }
    new DictionaryItems(remap, values)
  }

  /** Rows as plain values: `which(i)` is row i's item, -1 for null. */
  def toVarBlock(which: Array[Int], v: VarValues, validity: Option[Bits], fail: String => Nothing): VarBlock = {
    val c = which.length
    val offsets = new Array[Long](c + 1)
    var i = 0
    while (i < c) {
      val k = which(i)
      offsets(i + 1) = offsets(i) + (if (k < 0) 0 else v.offsets(k + 1) - v.offsets(k))
      i += 1
    }
    if (offsets(c) > Int.MaxValue - 16) fail("dictionary-decoded page is too large")
    val out = new Array[Byte](offsets(c).toInt)
    i = 0
    while (i < c) {
      val k = which(i)
      if (k >= 0) System.arraycopy(v.bytes, v.offsets(k).toInt, out, offsets(i).toInt, (v.offsets(k + 1) - v.offsets(k)).toInt)
      i += 1
    }
    VarBlock(c.toLong, offsets, ByteBuffer.wrap(out), validity)
  }

  def toFixedBlock(which: Array[Int], v: FixedValues, validity: Option[Bits], fail: String => Nothing): Block = {
    val c = which.length
    val w = v.width
    if (c.toLong * w > Int.MaxValue - 16) fail("dictionary-decoded page is too large")
    val out = ByteBuffer.wrap(new Array[Byte](c * w)).order(ByteOrder.LITTLE_ENDIAN)
    var i = 0
    // a typed load and store per row for the common widths (a copy call per
    // 8-byte value costs more than the copy); null rows (k < 0) are zero
    w match {
      case 8 =>
        val src = v.longs
        while (i < c) { val k = which(i); if (k >= 0) out.putLong(i << 3, src(k)); i += 1 }
      case 16 => // (128-bit decimals: two words an item)
        val src = v.longs
        while (i < c) {
          val k = which(i)
          if (k >= 0) { out.putLong(i << 4, src(2 * k)); out.putLong((i << 4) + 8, src(2 * k + 1)) }
          i += 1
        }
      case 4 =>
        val src = v.ints
        while (i < c) { val k = which(i); if (k >= 0) out.putInt(i << 2, src(k)); i += 1 }
      case 2 =>
        val src = v.shorts
        while (i < c) { val k = which(i); if (k >= 0) out.putShort(i << 1, src(k)); i += 1 }
      case 1 =>
        val dst = out.array()
        while (i < c) { val k = which(i); if (k >= 0) dst(i) = v.bytes(k); i += 1 }
      case _ =>
        val dst = out.array()
        while (i < c) { val k = which(i); if (k >= 0) System.arraycopy(v.bytes, k * w, dst, i * w, w); i += 1 }
    }
    val fb = FixedBlock(c.toLong, w, out)
    validity.fold[Block](fb)(NullableBlock(_, fb))
  }

  /** Zero bytes after the items' bytes, so that they can be read in 8-byte words. */
  val Padding: Int = 8

  private def bytesOf(b: ByteBuffer, n: Long): Array[Byte] = {
    val out = new Array[Byte](n.toInt + Padding)
    b.duplicate().get(out, 0, n.toInt)
    out
  }
}

/** The dictionary of the page last read of each column: every batch of a page
  * uses the same dictionary, which is then read and decoded once. */
final class DictionaryCache {
  private final class Entry(val page: Int, val items: DictionaryItems)
  private val byColumn = mutable.LongMap.empty[Entry]

  /** Whether the dictionary of this page is the one cached for its column. */
  private[format] def has(column: Int, page: Int): Boolean = {
    val cached = byColumn.getOrNull(column.toLong)
    cached != null && cached.page == page
  }

  private[format] def apply(column: Int, page: Int)(load: => DictionaryItems): DictionaryItems = {
    val cached = byColumn.getOrNull(column.toLong)
    if (cached != null && cached.page == page) cached.items
    else {
      val items = load
      byColumn.update(column.toLong, new Entry(page, items))
      items
    }
  }
}
