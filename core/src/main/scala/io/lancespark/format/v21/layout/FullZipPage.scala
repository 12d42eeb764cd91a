package io.lancespark.format.v21.layout

import java.nio.ByteBuffer

import scala.collection.mutable.ArrayBuffer

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.VarBlock
import io.lancespark.format.file.{ByteBuilder, PageMeta}
import io.lancespark.format.input.{ByteRange, IntArrayBuilder, LongArrayBuilder, PlannedRead, RandomAccessSource}
import io.lancespark.format.v21.{LeafColumn, LeafRun, RepDef}
import io.lancespark.format.v21.codec.{Codec, CodecContext, FixedSizeListCodec, FlatCodec, VariableCodec}
import io.lancespark.format.v21.write.{LeafBuffer, ValueKind}
import io.lancespark.proto.encodings21.{CompressiveEncoding, FullZipLayout, PageLayout}

/** The full-zip layout, for wide values (strings over a few hundred bytes,
  * large vectors): each entry is stored whole, so any row is found without
  * decoding its neighbours.
  *
  * Page buffer 0 holds the entries back to back: a control word with the
  * entry's repetition level (high bits) and definition level (low bits),
  * `bits_rep + bits_def` rounded up to 1, 2 or 4 bytes (absent when both are
  * 0); then, for a visible entry, its value: fixed-width values always
  * (`bits_per_value`), variable-width ones only when valid, as their size
  * (`bits_per_offset` bits) and bytes. Page buffer 1, present for variable
  * widths and for lists, is the repetition index: where each row starts in
  * buffer 0, one more for the end, each 1, 2, 4 or 8 bytes. */
final class FullZipPage(meta: PageMeta, leaf: LeafColumn, layout: FullZipLayout)
    extends StructuralPage(meta, leaf) {

  private val codec = Codec.of(layout.getValueCompression)
  private val bitsRep = layout.getBitsRep
  private val bitsDef = layout.getBitsDef
  private val cwBytes: Int = {
    val t = bitsRep + bitsDef
    if (t == 0) 0 else if (t <= 8) 1 else if (t <= 16) 2 else 4
  }
  private val fixed: Boolean = layout.getDetailsCase == FullZipLayout.DetailsCase.BITS_PER_VALUE
  private val hasIndex: Boolean = meta.buffers.size > 1

  def describe: String =
    s"full-zip: ${codec.describe}" + (if (fixed) s" (${layout.getBitsPerValue} bits)" else s" (${layout.getBitsPerOffset}-bit sizes)")

  private def checkLayout(path: String): Unit = {
    if (layout.getDetailsCase == FullZipLayout.DetailsCase.DETAILS_NOT_SET)
      fail(path, "a full-zip layout that says neither its value width nor its size width")
    if (fixed && layout.getBitsPerValue % 8 != 0) fail(path, s"full-zip values of ${layout.getBitsPerValue} bits")
    if (!fixed && !Set(8, 16, 32, 64).contains(layout.getBitsPerOffset))
      fail(path, s"full-zip sizes of ${layout.getBitsPerOffset} bits")
    if (!fixed && !hasIndex) fail(path, "variable-width full-zip values without a repetition index")
    if (bitsRep + bitsDef > 32) fail(path, s"control words of ${bitsRep + bitsDef} bits")
  }

  /** Bytes per row when every row is one fixed-width entry (no index). */
  private def rowBytes: Long = cwBytes + layout.getBitsPerValue / 8

  private def indexWidth(path: String): Int = {
    val idx = meta.buffers(1)
    val entries = meta.length + 1
    if (idx.size % entries != 0 || !Set(1L, 2L, 4L, 8L).contains(idx.size / entries))
      fail(path, s"a repetition index of ${idx.size} bytes for ${meta.length} rows")
    (idx.size / entries).toInt
  }

  private def indexEntry(b: ByteBuffer, i: Int, w: Int): Long = w match {
    case 1 => b.get(i) & 0xffL
    case 2 => b.getShort(2 * i) & 0xffffL
    case 4 => b.getInt(4 * i) & 0xffffffffL
    case _ => b.getLong(8 * i)
  }

  /** The index entries of rows [from, until] (until included: the end). */
  private def indexRange(from: Long, until: Long, w: Int): ByteRange =
    ByteRange(meta.buffers(1).position + from * w, (until - from + 1) * w)

  private def dataRange(start: Long, end: Long, path: String): ByteRange = {
    val data = meta.buffers(0)
    if (start < 0 || end < start || end > data.size)
      fail(path, s"the repetition index points at [$start, $end) of a ${data.size}-byte data buffer")
    ByteRange(data.position + start, end - start)
  }

  def plan(from: Long, until: Long, source: RandomAccessSource): Seq[PlannedRead] = {
    if (until <= from) return Nil
    try {
      checkLayout(source.path)
      if (!hasIndex) Seq(PlannedRead(ByteRange(meta.buffers(0).position + from * rowBytes, (until - from) * rowBytes)))
      else {
        val w = indexWidth(source.path)
        Seq(PlannedRead(indexRange(from, until, w), b =>
          Seq(dataRange(indexEntry(b, 0, w), indexEntry(b, (until - from).toInt, w), source.path))))
      }
    } catch { case _: Exception => Nil }
  }

  def decode(from: Long, until: Long, io: PageIO): LeafRun = {
    val path = io.input.path
    val cctx = codecContext(io)
    checkLayout(path)
    val map = defMap(layout.getLayersList, path)
    val data: ByteBuffer =
      if (!hasIndex) {
        if (meta.length * rowBytes > meta.buffers(0).size)
          fail(path, s"${meta.length} rows of $rowBytes bytes in a ${meta.buffers(0).size}-byte buffer")
        io.input.read(meta.buffers(0).position + from * rowBytes, (until - from) * rowBytes)
      } else {
        val w = indexWidth(path)
        val r = indexRange(from, until, w)
        val idx = io.input.read(r.position, r.length)
        val d = dataRange(indexEntry(idx, 0, w), indexEntry(idx, (until - from).toInt, w), path)
        io.input.read(d.position, d.length)
      }
    unzip(data, until - from, map, cctx, path)
  }

  /** The entries of `rows` rows in `data`. */
  private def unzip(data: ByteBuffer, rows: Long, map: Array[Int], cctx: CodecContext, path: String): LeafRun = {
    val size = data.remaining()
    val hasRep = bitsRep > 0
    val hasDef = bitsDef > 0
    val defMask = if (bitsDef == 0) 0 else (1 << bitsDef) - 1
    val pageMaxVisible = maxVisiblePageDef(map)
    val rep = new IntArrayBuilder
    val defs = new IntArrayBuilder
    // fixed: the value bytes of visible entries; variable: (start, end) of valid values, -1 for nulls
    val starts = new LongArrayBuilder
    val ends = new LongArrayBuilder
    val valueBytes = (layout.getBitsPerValue / 8).toInt
    val sizeBytes = layout.getBitsPerOffset / 8
    var at = 0
    var entries = 0
    var rowsSeen = 0L
    var visible = 0
    while (at < size) {
      var word = 0
      if (cwBytes > 0) {
        cctx.check(at, cwBytes, size, s"the control word of entry $entries")
        word = cwBytes match {
          case 1 => data.get(at) & 0xff
          case 2 => data.getShort(at) & 0xffff
          case _ => data.getInt(at)
        }
        at += cwBytes
      }
      val r = if (hasRep) word >>> bitsDef else 0
      val d = if (hasDef) word & defMask else 0
      if (!hasRep || r == leaf.maxRep) rowsSeen += 1
      if (hasRep) rep.add(r)
      if (hasDef) defs.add(d)
      val isVisible = d <= pageMaxVisible
      if (isVisible) {
        visible += 1
        if (fixed) {
          cctx.check(at, valueBytes, size, s"the value of entry $entries")
          starts.add(at)
          at += valueBytes
        } else if (d == 0) {
          cctx.check(at, sizeBytes, size, s"the size of entry $entries")
          val len = sizeBytes match {
            case 1 => data.get(at) & 0xffL
            case 2 => data.getShort(at) & 0xffffL
            case 4 => data.getInt(at) & 0xffffffffL
            case _ => data.getLong(at)
          }
          at += sizeBytes
          cctx.check(at, len, size, s"the value of entry $entries")
          starts.add(at)
          ends.add(at + len)
          at += len.toInt
        } else { starts.add(-1L); ends.add(-1L) }
      }
      entries += 1
    }
    if (rowsSeen != rows) fail(path, s"the entries hold $rowsSeen rows, expected $rows")
    val levels = canonicalLevels(if (hasRep) rep.result() else null, if (hasDef) defs.result() else null, entries, map, path)
    val values: Block =
      if (fixed) {
        val st = starts.result()
        val out = new Array[Byte](st.length * valueBytes)
        var i = 0
        while (i < st.length) {
          val dd = data.duplicate(); dd.position(st(i).toInt); dd.get(out, i * valueBytes, valueBytes)
          i += 1
        }
        codec.fixedPerValue(Codec.wrap(out), visible, cctx)
      } else {
        val st = starts.result()
        val en = ends.result()
        val offsets = new Array[Long](st.length + 1)
        var i = 0
        while (i < st.length) { offsets(i + 1) = offsets(i) + (if (st(i) < 0) 0 else en(i) - st(i)); i += 1 }
        val out = new Array[Byte](offsets(st.length).toInt)
        i = 0
        while (i < st.length) {
          if (st(i) >= 0) { val dd = data.duplicate(); dd.position(st(i).toInt); dd.get(out, offsets(i).toInt, (en(i) - st(i)).toInt) }
          i += 1
        }
        codec.variablePerValue(VarBlock(st.length, offsets, Codec.wrap(out), None), cctx)
      }
    if (values.length != visible) fail(path, s"${values.length} values decoded for $visible visible entries")
    new LeafRun(levels, Vector(LeafRun.whole(values)))
  }

  /** The highest page definition level that still has a value slot. */
  private def maxVisiblePageDef(map: Array[Int]): Int = {
    var m = 0
    var d = 0
    while (d < map.length) { if (map(d) <= leaf.maxVisibleDef) m = d; d += 1 }
    m
  }
}

private[v21] object FullZipPage {
  /** Wide values: each entry a control word (its levels) and, when visible,
    * its value (variable-width ones, when valid, after their size, 32 or 64 bits), with a
    * repetition index of where each row starts. Variable-width values are
    * stored as `perValue(offsetBits)` has them: (bytes, end of each value,
    * encoding). */
  def write(lb: LeafBuffer, levels: PageLevels,
            perValue: Int => (Array[Byte], Int => Long, CompressiveEncoding)): EncodedPage = {
    val layers = levels.layers
    val rep = levels.rep
    val defs = levels.defs
    val maxDef = levels.maxDef
    val maxVisible = levels.maxVisible
    val bitsRep = if (rep == null) 0 else PageLevels.bitsFor(lb.maxRep)
    val bitsDef = if (defs == null) 0 else PageLevels.bitsFor(maxDef)
    val cw = { val t = bitsRep + bitsDef; if (t == 0) 0 else if (t <= 8) 1 else if (t <= 16) 2 else 4 }
    val entries = if (rep == null && defs == null) lb.values else lb.defs.size
    val out = new ByteBuilder(lb.fixed.size + entries * (cw + 4) + 64)
    val rowStarts = new ByteBuilder()
    val layout = FullZipLayout.newBuilder().setBitsRep(bitsRep).setBitsDef(bitsDef)
    val (fixedBytes, encoding, writeValue): (Int, CompressiveEncoding, Int => Unit) = lb.kind match {
      case ValueKind.Var(_) | ValueKind.BlobV2 =>
        // as the reference: zstd per value when values pass 32 KiB, else FSST when it pays
        // (blob descriptions: their own encoding, 32-bit sizes)
        val bits = lb.kind match { case ValueKind.Var(b) => b; case _ => 32 }
        val (data, end, enc) = perValue(bits)
        def start(i: Int): Int = if (i == 0) 0 else end(i - 1).toInt
        (-bits, enc, (i: Int) => {
          val s = start(i)
          val len = end(i).toInt - s
          VariableCodec.putOffset(out, bits / 8, len)
          out.put(data, s, len)
        })
      case ValueKind.Fsl(dim, w) if w > 0 =>
        val validity = lb.itemNulls > 0
        val vbytes = (dim + 7) / 8
        val enc = FixedSizeListCodec.encoding(dim, validity, w)
        ((if (validity) vbytes else 0) + dim * w, enc, (i: Int) => {
          if (validity) out.put(FixedSizeListCodec.bits(lb.itemValidity, i.toLong * dim, dim), 0, vbytes)
          out.put(lb.fixed.arr, i * dim * w, dim * w)
        })
      case ValueKind.Fixed(w) => (w, FlatCodec.encoding(8L * w), (i: Int) => out.put(lb.fixed.arr, i * w, w))
      case other => throw new LanceFormatException(s"${lb.where}: no full-zip layout for $other values")
    }
    // (fixedBytes < 0: variable-width values, -fixedBytes bits of length before each)
    if (fixedBytes >= 0) layout.setBitsPerValue(8 * fixedBytes) else layout.setBitsPerOffset(-fixedBytes)
    var value = 0
    var visible = 0
    var e = 0
    while (e < entries) {
      val r = if (rep == null) 0 else rep(e)
      val d = if (defs == null) 0 else defs(e)
      if (rep == null || r == lb.maxRep) rowStarts.putLong(out.size.toLong)
      if (cw > 0) {
        val word = (r << bitsDef) | d
        cw match {
          case 1 => out.putByte(word)
          case 2 => out.putShort(word)
          case _ => out.putInt(word)
        }
      }
      if (d <= maxVisible) {
        visible += 1
        if (fixedBytes >= 0) writeValue(value)
        else if (d == 0) writeValue(value)
        value += 1
      }
      e += 1
    }
    rowStarts.putLong(out.size.toLong)
    layout.setNumItems(entries).setNumVisibleItems(visible).setValueCompression(encoding)
    layers.foreach(layout.addLayers)
    val buffers = ArrayBuffer(out.toArray)
    if (fixedBytes < 0 || rep != null) {
      // the repetition index: row starts packed to the fewest bytes that hold them
      val rows = rowStarts.size / 8
      val max = rowStarts.getLong(rows - 1)
      val width = if (max < (1L << 8)) 1 else if (max < (1L << 16)) 2 else if (max < (1L << 32)) 4 else 8
      val idx = new ByteBuilder(rows * width)
      var k = 0
      while (k < rows) {
        val x = rowStarts.getLong(k)
        width match {
          case 1 => idx.putByte(x.toInt)
          case 2 => idx.putShort(x.toInt)
          case 4 => idx.putInt(x.toInt)
          case _ => idx.putLong(x)
        }
        k += 1
      }
      buffers += idx.toArray
    }
    EncodedPage(buffers.toSeq, PageLayout.newBuilder().setFullZipLayout(layout).build(), lb.rows)
  }
}
