package io.lancespark.format.v21.layout

import java.nio.ByteBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.{AllNullBlock, BitBlock, FixedBlock, FslBlock, VarBlock}
import io.lancespark.format.arrow.Bits
import io.lancespark.format.file.{ByteBuilder, PageMeta}
import io.lancespark.format.input.{PlannedRead, RandomAccessSource}
import io.lancespark.format.v21.{LeafColumn, LeafRun, Levels, RepDef}
import io.lancespark.format.v21.write.{LeafBuffer, ValueKind}
import io.lancespark.format.v21.codec.Codec
import io.lancespark.proto.encodings21.{ConstantLayout, PageLayout}

/** The constant layout (2.1's "all null" layout uses the same message): every
  * visible valid entry has the same value, or there is none (all null).
  * The value is `inline_value` (fixed width, up to 32 bytes) or page buffer 0
  * (a count of Arrow buffers, their sizes, then the buffers: for a string,
  * its two offsets and its bytes). Repetition and definition levels,
  * when the layers need them, are the last two buffers: raw u16s, or
  * compressed as `rep_compression` / `def_compression` say. Without an
  * inline value the buffers are: none (all null), one (the value), two
  * (levels, all null) or three (the value and levels). */
final class ConstantPage(meta: PageMeta, leaf: LeafColumn, layout: ConstantLayout)
    extends StructuralPage(meta, leaf) {

  private val repCodec = StructuralPage.codec(layout.hasRepCompression, layout.getRepCompression)
  private val defCodec = StructuralPage.codec(layout.hasDefCompression, layout.getDefCompression)
  private val inline = layout.hasInlineValue

  /** (value buffer index, level buffers index), or a failure. */
  private def buffers(path: String): (Option[Int], Option[Int]) = (inline, meta.buffers.size) match {
    case (true, 0)  => (None, None)
    case (true, 2)  => (None, Some(0))
    case (false, 0) => (None, None)
    case (false, 1) => (Some(0), None)
    case (false, 2) => (None, Some(0))
    case (false, 3) => (Some(0), Some(1))
    case (i, n) => fail(path, s"a constant page with ${if (i) "an inline value" else "no inline value"} and $n buffers")
  }

  private def allNull: Boolean = !inline && (meta.buffers.size == 0 || meta.buffers.size == 2)

  def describe: String =
    if (allNull) "constant: all null" else s"constant${if (inline) " (inline)" else ""}" +
      repCodec.fold("")(c => s", rep ${c.describe}") + defCodec.fold("")(c => s", def ${c.describe}")

  /** The page's levels (canonical), read once. */
  @volatile private var cached: Levels = _

  private def pageLevels(source: RandomAccessSource, path: String): Levels = {
    var l = cached
    if (l == null) synchronized {
      l = cached
      if (l == null) {
        val cctx = codecContext(path)
        val map = defMap(layout.getLayersList, path)
        l = buffers(path)._2 match {
          case None => canonicalLevels(null, null, meta.length.toInt, map, path)
          case Some(i) =>
            val rb = meta.buffers(i)
            val db = meta.buffers(i + 1)
            def count(b: Long, n: Long, codec: Option[Any]): Int =
              cctx.count(if (codec.isDefined) n else b / 2, "levels")
            val rep = if (rb.size == 0) null
              else levels(source.read(rb.position, rb.size), count(rb.size, layout.getNumRepValues, repCodec), repCodec, "repetition", cctx)
            val defs = if (db.size == 0) null
              else levels(source.read(db.position, db.size), count(db.size, layout.getNumDefValues, defCodec), defCodec, "definition", cctx)
            val n = if (rep != null) rep.length else if (defs != null) defs.length else meta.length.toInt
            canonicalLevels(rep, defs, n, map, path)
        }
        cached = l
      }
    }
    l
  }

  /** The value of every valid entry: (bytes, fixed width or -1 for variable). */
  @volatile private var value: Array[Byte] = _

  private def theValue(source: RandomAccessSource, path: String): Array[Byte] = {
    var v = value
    if (v == null) {
      v =
        if (inline) layout.getInlineValue.toByteArray
        else buffers(path)._1 match {
          case None => Array.emptyByteArray
          case Some(i) =>
            val b = meta.buffers(i)
            parseValueBuffer(source.read(b.position, b.size), path)
        }
      value = v
    }
    v
  }

  /** A value buffer: a u32 count of Arrow buffers, their sizes (u32 each),
    * then the buffers. A fixed-width value is one buffer (its bytes); a
    * variable-width one two: its offsets (two, 32 or 64 bits) and its bytes. */
  private def parseValueBuffer(b: ByteBuffer, path: String): Array[Byte] = {
    val cctx = codecContext(path)
    cctx.check(0, 4, b.remaining(), "a constant value buffer")
    val count = b.getInt(0)
    if (count < 1 || count > 2) cctx.fail(s"a constant value of $count buffers")
    cctx.check(4, 4L * count, b.remaining(), "a constant value buffer")
    val sizes = (0 until count).map(k => b.getInt(4 + 4 * k))
    var at = 4 + 4 * count
    val parts = sizes.zipWithIndex.map { case (len, k) =>
      cctx.check(at, len, b.remaining(), s"constant value part $k")
      val part = Codec.slice(b, at, len)
      at += len
      part
    }
    if (count == 1) Codec.bytes(parts.head)
    else {
      val offs = parts(0)
      val (start, end) = offs.remaining() match {
        case 8  => (offs.getInt(0).toLong, offs.getInt(4).toLong)
        case 16 => (offs.getLong(0), offs.getLong(8))
        case other => cctx.fail(s"constant value offsets of $other bytes")
      }
      cctx.check(start, end - start, parts(1).remaining(), "the constant value")
      Codec.bytes(Codec.slice(parts(1), start.toInt, (end - start).toInt))
    }
  }

  def plan(from: Long, until: Long, source: RandomAccessSource): Seq[PlannedRead] = Nil

  /** Entries [a, b) of the page's levels holding rows [from, until). */
  private def entries(l: Levels, from: Long, until: Long, path: String): (Int, Int) =
    if (leaf.maxRep == 0) (from.toInt, until.toInt)
    else {
      val (a, b) = l.rowEntries(leaf.maxRep, from, until)
      if (a < 0) fail(path, s"row $from not found in the page's levels")
      (a, b)
    }

  def decode(from: Long, until: Long, io: PageIO): LeafRun = {
    val path = io.input.path
    val l = pageLevels(io.source, path)
    val (a, b) = entries(l, from, until, path)
    if (leaf.maxRep == 0 && l.size != meta.length) fail(path, s"${l.size} levels for ${meta.length} rows")
    val rep = if (l.rep == null) null else java.util.Arrays.copyOfRange(l.rep, a, b)
    val defs = if (l.defs == null) null else java.util.Arrays.copyOfRange(l.defs, a, b)
    val n = RepDef.visible(defs, 0, b - a, leaf.maxVisibleDef)
    val values: Block =
      if (allNull) AllNullBlock(n)
      else {
        val v = theValue(io.source, path)
        val arrow = leaf.field.arrowType
        arrow match {
          case _: org.apache.arrow.vector.types.pojo.ArrowType.Bool =>
            val bit = v.nonEmpty && v(0) != 0
            val bytes = new Array[Byte]((n + 7) / 8)
            if (bit) java.util.Arrays.fill(bytes, 0xff.toByte)
            BitBlock(n, new Bits(Codec.wrap(bytes), 0))
          case _: org.apache.arrow.vector.types.pojo.ArrowType.Utf8 | _: org.apache.arrow.vector.types.pojo.ArrowType.LargeUtf8 |
               _: org.apache.arrow.vector.types.pojo.ArrowType.Binary | _: org.apache.arrow.vector.types.pojo.ArrowType.LargeBinary =>
            VarBlock(n, Array.tabulate(n + 1)(i => i.toLong * v.length), repeat(v, n), None)
          case f: org.apache.arrow.vector.types.pojo.ArrowType.FixedSizeList =>
            val dim = f.getListSize
            if (v.isEmpty || v.length % dim != 0) fail(path, s"a constant vector of ${v.length} bytes for dimension $dim")
            FslBlock(n, dim, FixedBlock(n.toLong * dim, v.length / dim, repeat(v, n)))
          case _ =>
            if (v.isEmpty) fail(path, "a constant page of fixed-width values with an empty value")
            FixedBlock(n, v.length, repeat(v, n))
        }
      }
    new LeafRun(new Levels(rep, defs, b - a), Vector(LeafRun.whole(values)))
  }

  private def repeat(v: Array[Byte], n: Int): ByteBuffer = {
    val out = new Array[Byte](v.length * n)
    var i = 0
    while (i < n) { System.arraycopy(v, 0, out, i * v.length, v.length); i += 1 }
    Codec.wrap(out)
  }
}

private[v21] object ConstantPage {

  /** Every value null (or every list empty): a constant page with levels. */
  def allNull(lb: LeafBuffer, levels: PageLevels): EncodedPage = {
    val rep = levels.rep
    val defs = levels.defs
    val layout = ConstantLayout.newBuilder()
    levels.layers.foreach(layout.addLayers)
    val buffers =
      if (rep == null && defs == null) Nil
      else Seq(if (rep == null) Array.emptyByteArray else u16s(rep), if (defs == null) Array.emptyByteArray else u16s(defs))
    EncodedPage(buffers, PageLayout.newBuilder().setConstantLayout(layout).build(), lb.rows)
  }

  /** Every valid value `value`: a constant page holding it inline, with levels. */
  def withValue(lb: LeafBuffer, value: Array[Byte], levels: PageLevels): EncodedPage = {
    val page = allNull(lb, levels)
    val layout = page.layout.getConstantLayout.toBuilder.setInlineValue(com.google.protobuf.ByteString.copyFrom(value))
    EncodedPage(page.buffers, PageLayout.newBuilder().setConstantLayout(layout).build(), page.rows)
  }

  /** The value, when every valid value is the same fixed-width value of at
    * most 32 bytes outside lists (2.2 stores it once, in the page's description). */
  def valueOf(lb: LeafBuffer): Option[Array[Byte]] = lb.kind match {
    case ValueKind.Fixed(w) if w <= 32 && lb.values > 0 && lb.rep == null =>
      // (outside lists, value i is entry i: valid where its level is 0)
      val a = lb.fixed.arr
      (0 until lb.values).find(i => lb.defs(i) == 0).filter { f =>
        var i = f + 1
        var same = true
        while (same && i < lb.values) {
          if (lb.defs(i) == 0) {
            var b = 0
            while (b < w && a(i * w + b) == a(f * w + b)) b += 1
            same = b == w
          }
          i += 1
        }
        same
      }.map(f => java.util.Arrays.copyOfRange(a, f * w, f * w + w))
    case _ => None
  }

  private def u16s(levels: Array[Int]): Array[Byte] = {
    val out = new ByteBuilder(2 * levels.length + 16)
    levels.foreach(out.putShort)
    out.toArray
  }
}
