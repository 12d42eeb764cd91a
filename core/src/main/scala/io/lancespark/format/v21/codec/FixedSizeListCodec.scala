package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.lancespark.format.arrow.{Bits, Block}
import io.lancespark.format.arrow.Block.{FslBlock, NullableBlock}
import io.lancespark.format.file.BitBuilder
import io.lancespark.proto.encodings21.{CompressiveEncoding, FixedSizeList}

/** Fixed-size lists (vectors) of fixed-width items, flattened: `dim` items
  * per value, and, with `has_validity`, a validity bitmap of the items.
  * Layers nest (a list of lists); the innermost holds flat items.
  *  - mini-block chunk: one bitmap buffer per layer with validity (outermost
  *    first, each covering the chunk's items of that layer), then the items;
  *  - full-zip: per value, each layer's bitmap bytes (ceil(items / 8)), then
  *    the value's items. */
final case class FixedSizeListCodec(fsl: FixedSizeList) extends Codec {

  /** (dimension, has validity) per layer, outermost first, and the items' codec. */
  private val (layers, items): (Vector[(Int, Boolean)], Codec) = {
    def walk(f: FixedSizeList, acc: Vector[(Int, Boolean)]): (Vector[(Int, Boolean)], Codec) = {
      val here = acc :+ ((f.getItemsPerValue.toInt, f.getHasValidity))
      if (f.getValues.getCompressionCase == CompressiveEncoding.CompressionCase.FIXED_SIZE_LIST)
        walk(f.getValues.getFixedSizeList, here)
      else (here, Codec.of(f.getValues))
    }
    walk(fsl, Vector.empty)
  }

  def describe: String =
    layers.map { case (d, v) => s"fsl($d${if (v) ", validity" else ""})" }.mkString("", " ", s" ${items.describe}")

  private def checkDims(ctx: CodecContext): Unit =
    layers.foreach { case (d, _) => if (d <= 0) ctx.fail(s"a fixed-size list of dimension $d") }

  /** Wraps `inner` (the items of `n` values) in the layers, with their bitmaps. */
  private def wrap(n: Int, bitmaps: Vector[Bits], inner: Block): Block = {
    var dims = Vector.empty[Long]
    var cum = n.toLong
    layers.foreach { case (d, _) => dims :+= cum; cum *= d }
    var block = inner
    var bm = bitmaps.reverse
    layers.zip(dims).reverse.foreach { case ((d, v), count) =>
      if (v) { block = NullableBlock(bm.head, block); bm = bm.tail }
      block = FslBlock(count, d, block)
    }
    block
  }

  override def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block = {
    checkDims(ctx)
    val withValidity = layers.count(_._2)
    if (buffers.size != withValidity + 1)
      ctx.fail(s"a fixed-size list chunk of ${buffers.size} buffers, expected ${withValidity + 1}")
    val total = layers.foldLeft(n.toLong)(_ * _._1)
    var cum = n.toLong
    val bitmaps = Vector.newBuilder[Bits]
    var b = 0
    layers.foreach { case (d, v) =>
      cum *= d
      if (v) {
        ctx.check(0, (cum + 7) / 8, buffers(b).remaining(), s"a validity bitmap of $cum items")
        bitmaps += new Bits(buffers(b), 0)
        b += 1
      }
    }
    wrap(n, bitmaps.result(), items.miniBlock(IndexedSeq(buffers.last), ctx.count(total, "fixed-size list items"), ctx))
  }

  override def fixedBits: Option[Long] = items.fixedBits.map { itemBits =>
    var cum = 1L
    var bits = 0L
    layers.foreach { case (d, v) => cum *= d; if (v) bits += 8 * ((cum + 7) / 8) }
    bits + itemBits * cum
  }

  override def fixedPerValue(data: ByteBuffer, n: Int, ctx: CodecContext): Block = {
    checkDims(ctx)
    val itemBits = items.fixedBits.getOrElse(ctx.unsupported(describe, "full-zip page"))
    val cums = layers.scanLeft(1L)(_ * _._1).tail
    val total = cums.last
    if (!layers.exists(_._2)) return wrap(n, Vector.empty, items.fixedPerValue(data, ctx.count(n * total, "items"), ctx))
    if (itemBits % 8 != 0) ctx.unsupported(describe, "full-zip page (items not whole bytes)")
    // per value: each layer's bitmap, then its items; unzip into one bitmap per layer and the items
    val itemBytes = (itemBits / 8 * total).toInt
    val rowBytes = fixedBits.get / 8
    ctx.check(0, rowBytes * n, data.remaining(), s"$n fixed-size lists of $rowBytes bytes")
    val bitmapLayers = layers.zip(cums).filter(_._1._2).map(_._2)
    val bitmaps = bitmapLayers.map(c => new Array[Byte](((c * n + 7) / 8).toInt))
    val itemsOut = new Array[Byte](itemBytes * n)
    var pos = 0
    var i = 0
    while (i < n) {
      bitmapLayers.zipWithIndex.foreach { case (c, k) =>
        val bytes = ((c + 7) / 8).toInt
        var j = 0
        while (j < c) {
          if (((data.get(pos + (j >>> 3)) >>> (j & 7)) & 1) != 0) {
            val bit = i * c + j
            bitmaps(k)((bit >>> 3).toInt) = (bitmaps(k)((bit >>> 3).toInt) | (1 << (bit & 7).toInt)).toByte
          }
          j += 1
        }
        pos += bytes
      }
      val d = data.duplicate(); d.position(pos)
      d.get(itemsOut, i * itemBytes, itemBytes)
      pos += itemBytes
      i += 1
    }
    wrap(n, bitmaps.map(b => new Bits(Codec.wrap(b), 0)),
      items.fixedPerValue(Codec.wrap(itemsOut), ctx.count(n * total, "items"), ctx))
  }
}

object FixedSizeListCodec {
  /** Fixed-size lists of `dim` items of `w` bytes (0: booleans), with a
    * validity bitmap of their items when `validity`. */
  def encoding(dim: Int, validity: Boolean, w: Int): CompressiveEncoding =
    CompressiveEncoding.newBuilder().setFixedSizeList(FixedSizeList.newBuilder()
      .setItemsPerValue(dim).setHasValidity(validity).setValues(FlatCodec.encoding(if (w == 0) 1L else 8L * w))).build()

  /** Bits [from, from + count) of `b` as a bitmap of their own. */
  def bits(b: BitBuilder, from: Long, count: Int): Array[Byte] = {
    val out = new Array[Byte]((count + 7) / 8)
    var i = 0
    while (i < count) { if (b.get(from + i)) out(i >>> 3) = (out(i >>> 3) | (1 << (i & 7))).toByte; i += 1 }
    out
  }
}

/** Fixed-size lists of `dim` items of `w` bytes (`items`; booleans, `w` 0,
  * in `itemBits`): a bitmap of their items' validity (when some are null),
  * then the items. */
private[v21] final class FixedSizeListValues(items: Array[Byte], itemBits: BitBuilder, itemValidity: Option[BitBuilder],
                                             dim: Int, w: Int) extends MiniBlockValues {
  val encoding: CompressiveEncoding = FixedSizeListCodec.encoding(dim, itemValidity.isDefined, w)
  def buffersPerChunk: Int = if (itemValidity.isDefined) 2 else 1
  def preferred(v: Int): Int = MiniBlockValues.pow2AtMost(math.max(1, 8186 / (dim * math.max(w, 1))))
  def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
    val stored = if (w == 0) FixedSizeListCodec.bits(itemBits, v.toLong * dim, n * dim)
      else java.util.Arrays.copyOfRange(items, v * dim * w, (v + n) * dim * w)
    itemValidity.fold(Seq(stored))(b => Seq(FixedSizeListCodec.bits(b, v.toLong * dim, n * dim), stored))
  }
}
