package io.lancespark.format.v21.layout

import java.nio.ByteBuffer

import scala.collection.mutable.ArrayBuffer

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.arrow.{AllNullValues, Block, DictionaryItems, DictionaryValues, FixedValues, Slice, VarValues}
import io.lancespark.format.arrow.Block.{AllNullBlock, DictBlock, FixedBlock, FixedDictBlock, VarBlock}
import io.lancespark.format.file.{ByteBuilder, PageMeta}
import io.lancespark.format.input.{ByteRange, PlannedRead, RandomAccessSource, RowRangeSums}
import io.lancespark.format.v21.{LeafColumn, LeafRun, Levels, RepDef}
import io.lancespark.format.v21.codec.{Codec, CodecContext, FastLanes, MiniBlockValues, OutOfLineBitpackingCodec}
import io.lancespark.format.v21.write.LeafBuffer
import io.lancespark.proto.encodings21.{CompressiveEncoding, MiniBlockLayout, PageLayout}

/** The mini-block layout: the page's values cut into chunks of a few KiB
  * (up to 64 KiB and more in 2.2), each chunk decoded whole.
  *
  * Page buffers: 0, one chunk word per chunk (u16 in 2.1, u32 with
  * `has_large_chunk`): the low 4 bits are log2 of the chunk's value count
  * (0 for the last chunk, which holds the rest), the others the chunk's size
  * in 8-byte words, minus one; 1, the chunks back to back; 2, the dictionary
  * if there is one; last, with lists, the repetition index: per chunk
  * `repetition_index_depth + 1` u64s, of which the first two are the number
  * of rows that end in the chunk and the number of entries of a row that
  * continues into the next chunk (0 if none).
  *
  * A chunk: u16 number of levels; u16 size of the repetition levels and of
  * the definition levels, each if the page has them; the size of each value
  * buffer (u16, or u32 with `has_large_chunk`); padding to 8 bytes; then the
  * repetition levels, the definition levels and the value buffers, each padded
  * to 8 bytes. Values are stored for visible entries only. */
final class MiniBlockPage(meta: PageMeta, leaf: LeafColumn, layout: MiniBlockLayout)
    extends StructuralPage(meta, leaf) {

  private val repCodec = StructuralPage.codec(layout.hasRepCompression, layout.getRepCompression)
  private val defCodec = StructuralPage.codec(layout.hasDefCompression, layout.getDefCompression)
  private val valueCodec = Codec.of(layout.getValueCompression)
  private val dictCodec = StructuralPage.codec(layout.hasDictionary, layout.getDictionary)
  private val numBuffers = layout.getNumBuffers.toInt
  private val large = layout.getHasLargeChunk
  private val repIndexDepth = layout.getRepetitionIndexDepth

  def describe: String =
    s"mini-block: ${valueCodec.describe}" + dictCodec.fold("")(d => s" + dictionary(${layout.getNumDictionaryItems}: ${d.describe})") +
      repCodec.fold("")(c => s", rep ${c.describe}") + defCodec.fold("")(c => s", def ${c.describe}")

  /** What the page's metadata buffers say: per chunk its byte offset in
    * buffer 1, size, value count, first row, the rows that start in it and
    * whether it continues a row from the previous chunk. */
  private final class State(
      val offset: Array[Long], val size: Array[Int], val values: Array[Int],
      val firstRow: Array[Long], val rowsStarting: Array[Long], val hasPreamble: Array[Boolean],
      val dictionary: Option[DictionaryValues]) {
    def chunks: Int = offset.length
  }

  @volatile private var loaded: State = _

  private def state(source: RandomAccessSource): State = {
    var s = loaded
    if (s == null) synchronized {
      s = loaded
      if (s == null) { s = load(source); loaded = s }
    }
    s
  }

  private def load(source: RandomAccessSource): State = {
    val path = source.path
    val cctx = codecContext(path)
    val metaBuf = buffer(0, path, "chunk metadata")
    val chunksBuf = buffer(1, path, "chunks")
    val wordBytes = if (large) 4 else 2
    if (metaBuf.size % wordBytes != 0) fail(path, s"chunk metadata of ${metaBuf.size} bytes is not whole $wordBytes-byte words")
    val n = (metaBuf.size / wordBytes).toInt
    val words = source.read(metaBuf.position, metaBuf.size)
    val offset = new Array[Long](n)
    val size = new Array[Int](n)
    val values = new Array[Int](n)
    val itemsInPage = layout.getNumItems
    var at = 0L
    var counted = 0L
    var i = 0
    while (i < n) {
      val w = if (large) words.getInt(4 * i) & 0xffffffffL else words.getShort(2 * i) & 0xffffL
      val log = (w & 0xf).toInt
      val bytes = ((w >>> 4) + 1) * 8
      val v = if (i < n - 1) 1L << log else itemsInPage - counted
      if (v < 0 || v > Int.MaxValue || (i < n - 1 && log == 0))
        fail(path, s"chunk $i: its metadata word $w gives ${if (v < 0) v else 1L << log} values of a page of $itemsInPage")
      if (at + bytes > chunksBuf.size)
        fail(path, s"chunk $i: [$at, ${at + bytes}) lies outside the ${chunksBuf.size}-byte chunk buffer")
      offset(i) = at; size(i) = bytes.toInt; values(i) = v.toInt
      at += bytes
      counted += v
      i += 1
    }
    if (n == 0 && itemsInPage > 0) fail(path, s"no chunks for $itemsInPage values")
    val firstRow = new Array[Long](n)
    val rowsStarting = new Array[Long](n)
    val hasPreamble = new Array[Boolean](n)
    if (repIndexDepth > 0) {
      val idx = buffer(meta.buffers.size - 1, path, "repetition index")
      val stride = repIndexDepth + 1
      if (idx.size != 8L * stride * n)
        fail(path, s"a repetition index of ${idx.size} bytes for $n chunks of ${stride} u64 each")
      val b = source.read(idx.position, idx.size)
      var rows = 0L
      var preamble = false
      i = 0
      while (i < n) {
        val ends = b.getLong(8 * stride * i)
        val partial = b.getLong(8 * stride * i + 8)
        val trailer = partial > 0
        val starts = ends + (if (trailer) 1 else 0) - (if (preamble) 1 else 0)
        if (ends < 0 || partial < 0 || starts < 0) fail(path, s"chunk $i: repetition index entry ($ends, $partial)")
        firstRow(i) = rows; rowsStarting(i) = starts; hasPreamble(i) = preamble
        rows += starts
        preamble = trailer
        i += 1
      }
      if (rows != meta.length) fail(path, s"the repetition index counts $rows rows, the page has ${meta.length}")
    } else {
      var rows = 0L
      i = 0
      while (i < n) { firstRow(i) = rows; rowsStarting(i) = values(i); rows += values(i); i += 1 }
      if (rows != meta.length) fail(path, s"the chunks hold $rows values, the page has ${meta.length} rows")
    }
    val dictionary = dictCodec.map { c =>
      val d = buffer(2, path, "dictionary")
      val count = cctx.count(layout.getNumDictionaryItems, "dictionary")
      val stored = source.read(d.position, d.size)
      def decoded: DictionaryValues = c.block(stored, count, cctx) match {
        case b @ (_: VarBlock | _: FixedBlock) => DictionaryItems(None, b, count, 0, cctx.fail).values
        case other => cctx.fail(s"a dictionary that decodes to ${other.getClass.getSimpleName}")
      }
      val enc = layout.getDictionary
      if (enc.hasGeneral || enc.hasFsst) DecodedDictionaries(enc.toByteString, count, stored)(decoded) else decoded
    }
    new State(offset, size, values, firstRow, rowsStarting, hasPreamble, dictionary)
  }

  /** The chunk where row r starts: the last chunk whose first row is at most
    * r (stepping back over chunks that only continue a row). */
  private def chunkOf(s: State, r: Long): Int = {
    var lo = 0
    var hi = s.chunks - 1
    while (lo < hi) {
      val mid = (lo + hi + 1) >>> 1
      if (s.firstRow(mid) <= r) lo = mid else hi = mid - 1
    }
    var c = lo
    while (c > 0 && s.rowsStarting(c) == 0) c -= 1
    c
  }

  /** Chunks [first, last] holding rows [from, until). */
  private def chunks(s: State, from: Long, until: Long): (Int, Int) = {
    val a = chunkOf(s, from)
    val b = chunkOf(s, until - 1)
    var last = b
    // the last row continues into the next chunks
    if (repIndexDepth > 0 && until - 1 == s.firstRow(b) + s.rowsStarting(b) - 1 && b + 1 < s.chunks && s.hasPreamble(b + 1)) {
      last = b + 1
      while (last + 1 < s.chunks && s.rowsStarting(last) == 0) last += 1
    }
    (a, last)
  }

  def plan(from: Long, until: Long, source: RandomAccessSource): Seq[PlannedRead] = {
    if (until <= from) return Nil
    val s = state(source)
    if (leaf.maxRep > 0 && repIndexDepth == 0) return Nil
    val (a, b) = chunks(s, from, until)
    val buf = meta.buffers(1)
    Seq(PlannedRead(ByteRange(buf.position + s.offset(a), s.offset(b) + s.size(b) - s.offset(a))))
  }

  /** Each run of chunks the ranges need, read once (ranges in one chunk, or
    * in adjacent chunks, make one read). */
  override def planRanges(ranges: IndexedSeq[(Long, Long)], source: RandomAccessSource): Seq[PlannedRead] = {
    val s = state(source)
    if (leaf.maxRep > 0 && repIndexDepth == 0) return Nil
    val buf = meta.buffers(1)
    val out = Vector.newBuilder[PlannedRead]
    var runA = -1
    var runB = -1
    def emit(): Unit =
      if (runA >= 0) out += PlannedRead(ByteRange(buf.position + s.offset(runA), s.offset(runB) + s.size(runB) - s.offset(runA)))
    val flat = leaf.maxRep == 0
    ranges.foreach { case (from, until) =>
      // scattered rows mostly fall in the chunk of the range before
      val inLast = flat && runB >= 0 && from >= s.firstRow(runB) && runB + 1 < s.chunks && until <= s.firstRow(runB + 1)
      if (until > from && !inLast) {
        val (a, b) = chunks(s, from, until)
        if (runA >= 0 && a <= runB + 1) runB = math.max(runB, b)
        else { emit(); runA = a; runB = b }
      }
    }
    emit()
    out.result()
  }

  private def pad8(x: Int): Int = (x + 7) & ~7

  /** One decoded chunk: its levels (page numbering; null when absent), how
    * many entries it has, and its values (`selected`: only those of the rows
    * asked for, in row order). */
  private final class Chunk(val rep: Array[Int], val defs: Array[Int], val entries: Int, val values: Block,
                            val selected: Boolean = false)

  /** Chunks [first, first + chunks.length) as one decode made them. */
  private final class Decoded(first: Int, chunks: Array[Chunk]) {
    def chunk(c: Int): Option[Chunk] = if (c >= first && c - first < chunks.length) Some(chunks(c - first)) else None
  }

  private def decodeChunk(bytes: ByteBuffer, values: Int, dictionary: Option[DictionaryValues], cctx: CodecContext,
                          i: Int, positions: Array[Int] = null): Chunk = {
    val size = bytes.remaining()
    var at = 0
    val headerBytes = 2 + (if (repCodec.isDefined) 2 else 0) + (if (defCodec.isDefined) 2 else 0) +
      numBuffers * (if (large) 4 else 2)
    if (headerBytes > size) cctx.fail(s"chunk $i: a header of $headerBytes bytes in a chunk of $size")
    val numLevels = bytes.getShort(0) & 0xffff
    at = 2
    val repSize = if (repCodec.isDefined) { val v = bytes.getShort(at) & 0xffff; at += 2; v } else 0
    val defSize = if (defCodec.isDefined) { val v = bytes.getShort(at) & 0xffff; at += 2; v } else 0
    val sizes = new Array[Int](numBuffers)
    var k = 0
    while (k < numBuffers) {
      if (large) { sizes(k) = bytes.getInt(at); at += 4 } else { sizes(k) = bytes.getShort(at) & 0xffff; at += 2 }
      k += 1
    }
    at = pad8(at)
    var rep: Array[Int] = null
    var defs: Array[Int] = null
    if (repCodec.isDefined) {
      cctx.check(at, repSize, size, s"chunk $i: repetition levels")
      rep = levels(Codec.slice(bytes, at, repSize), numLevels, repCodec, "repetition", cctx)
      at = pad8(at + repSize)
    }
    if (defCodec.isDefined) {
      cctx.check(at, defSize, size, s"chunk $i: definition levels")
      defs = levels(Codec.slice(bytes, at, defSize), numLevels, defCodec, "definition", cctx)
      at = pad8(at + defSize)
    }
    val bufs = new Array[ByteBuffer](numBuffers)
    k = 0
    while (k < numBuffers) {
      val len = sizes(k)
      if (len < 0) cctx.fail(s"chunk $i: value buffer $k of $len bytes")
      cctx.check(at, len, size, s"chunk $i: value buffer $k")
      bufs(k) = Codec.slice(bytes, at, len)
      at = pad8(at + len)
      k += 1
    }
    val n = if (rep == null && defs == null) values else numLevels
    val wrapped = scala.collection.compat.immutable.ArraySeq.unsafeWrapArray(bufs)
    val only = if (positions == null || rep != null || defs != null) None else dictionary match {
      case Some(d) => valueCodec.miniBlockIndicesAt(wrapped, values, positions, cctx).map(lookup(_, d, cctx))
      case None    => valueCodec.miniBlockAt(wrapped, values, positions, cctx)
    }
    only match {
      case Some(block) => new Chunk(null, null, n, block, selected = true)
      case None =>
        val block = dictionary match {
          case Some(d) => lookup(valueCodec.miniBlockIndices(wrapped, values, cctx), d, cctx)
          case None    => valueCodec.miniBlock(wrapped, values, cctx)
        }
        new Chunk(rep, defs, n, block)
    }
  }

  /** Dictionary indices to values. */
  private def lookup(idx: Array[Int], dict: DictionaryValues, cctx: CodecContext): Block = {
    val items = layout.getNumDictionaryItems
    var i = 0
    while (i < idx.length) {
      val k = idx(i)
      if (k < 0 || k >= items) cctx.fail(s"dictionary index $k out of range ($items items)")
      i += 1
    }
    dict match {
      case v: VarValues   => DictBlock(idx.length, idx, v, None)
      case v: FixedValues => FixedDictBlock(idx.length, idx, v)
      case AllNullValues  => AllNullBlock(idx.length)
    }
  }

  /** Rows of many ranges of a page without lists: each chunk they touch is
    * decoded once (or taken from the batch before), and the ranges' levels and
    * values are taken from it directly (a row is an entry and a value slot).
    * Pages of lists, and chunks some of whose entries have no value slot,
    * decode range by range. */
  override def decodeRanges(ranges: IndexedSeq[(Long, Long)], io: PageIO): LeafRun =
    if (leaf.maxRep > 0) super.decodeRanges(ranges, io)
    else {
      val path = io.input.path
      val cctx = codecContext(io)
      val map = defMap(layout.getLayersList, path)
      val everyLevelVisible = everyLevelHasASlot(map)
      val s = state(io.source)
      val chunkBuf = meta.buffers(1)
      val before: Option[Decoded] = recalled(io)
      val total = RowRangeSums.rows(ranges)
      if (total > Int.MaxValue) fail(path, s"$total rows in one batch")
      val defs = new Array[Int](total.toInt)
      var withDef = false
      val values = Vector.newBuilder[Slice]
      var last: Slice = null
      var at = 0
      var index = -1
      var chunk: Chunk = null
      var allVisible = true
      var taken = 0 // values of a selected chunk used so far
      var ri = 0
      while (ri < ranges.length && allVisible) {
        val (from, until) = ranges(ri)
        var r = from
        while (r < until && allVisible) {
          val c = if (index >= 0 && r >= s.firstRow(index) && r < s.firstRow(index) + chunk.entries) index else chunkOf(s, r)
          if (c != index) {
            chunk = before.flatMap(_.chunk(c)).getOrElse(
              decodeChunk(io.input.read(chunkBuf.position + s.offset(c), s.size(c)), s.values(c), s.dictionary, cctx, c,
                if (repCodec.isEmpty && defCodec.isEmpty) few(s, c, ranges, ri, r) else null))
            index = c
            taken = 0
            if (chunk.rep != null) allVisible = false
            else if (chunk.defs != null && !everyLevelVisible) {
              // every entry has a value slot (its canonical level at most the leaf's visible one)
              var k = 0
              while (k < chunk.entries && allVisible) {
                val d = chunk.defs(k)
                if (d >= 0 && d < map.length && map(d) > leaf.maxVisibleDef) allVisible = false
                k += 1
              }
            }
          }
          val first = s.firstRow(c)
          val end = math.min(until, first + chunk.entries)
          if (end <= r) fail(path, s"row $r not in chunk $c (rows [$first, ${first + chunk.entries}))")
          if (allVisible) {
            val n = (end - r).toInt
            val a = if (chunk.selected) { taken += n; taken - n } else (r - first).toInt
            if (chunk.defs != null) { System.arraycopy(chunk.defs, a, defs, at, n); withDef = true }
            if (last != null && (last.block eq chunk.values) && last.start + last.count == a) last = Slice(last.block, last.start, last.count + n)
            else { if (last != null) values += last; last = Slice(chunk.values, a, n) }
            at += n
          }
          r = end
        }
        ri += 1
      }
      if (!allVisible) super.decodeRanges(ranges, io)
      else {
        if (last != null) values += last
        if (index >= 0 && !chunk.selected) io.keep(this, new Decoded(index, Array(chunk)))
        if (withDef) RepDef.mapDefs(defs, 0, at, map, fail(path, _))
        new LeafRun(new Levels(null, if (withDef) defs else null, at), values.result())
      }
    }

  /** The positions in chunk `c` (no levels: a row is a value) of the rows of
    * `ranges` from row `r` of range `ri` on, when they are few of its values
    * (a read of scattered rows then takes them alone); else null. */
  private def few(s: State, c: Int, ranges: IndexedSeq[(Long, Long)], ri: Int, r: Long): Array[Int] = {
    val first = s.firstRow(c)
    val n = s.values(c)
    val end = first + n
    val limit = n / 16
    val out = new Array[Int](limit + 1)
    var k = 0
    var i = ri
    var from = r
    while (i < ranges.length && k <= limit && from < end) {
      val until = math.min(ranges(i)._2, end)
      var x = from
      while (x < until && k <= limit) { out(k) = (x - first).toInt; k += 1; x += 1 }
      i += 1
      if (i < ranges.length) from = math.max(ranges(i)._1, from)
    }
    if (k == 0 || k > limit) null else java.util.Arrays.copyOf(out, k)
  }

  /** Whether each canonical level `map` gives has a value slot (a nullable
    * column outside lists): no entry's level need then be checked for one. */
  private def everyLevelHasASlot(map: Array[Int]): Boolean = map.forall(_ <= leaf.maxVisibleDef)

  /** What this page decoded last in the batch `io` reads (a match, not a
    * partial function: this runs for every page of every batch). */
  private def recalled(io: PageIO): Option[Decoded] = io.recall(this) match {
    case Some(d: Decoded @unchecked) => Some(d)  // (kept under this page: its own)
    case _ => None
  }

  def decode(from: Long, until: Long, io: PageIO): LeafRun = {
    val path = io.input.path
    val cctx = codecContext(io)
    val map = defMap(layout.getLayersList, path)
    val s = state(io.source)
    if (leaf.maxRep > 0 && repIndexDepth == 0) fail(path, "a page of lists without a repetition index")
    val (a, b) = chunks(s, from, until)
    val chunkBuf = meta.buffers(1)
    // chunks the batch's previous range of rows decoded are not read nor decoded again
    val before: Option[Decoded] = recalled(io)
    // the chunks' levels together (canonical), and their values
    val decoded = new Array[Chunk](b - a + 1)
    var entries = 0
    var withRep = false
    var withDef = false
    var c = a
    while (c <= b) {
      val ch = before.flatMap(_.chunk(c)).getOrElse(
        decodeChunk(io.input.read(chunkBuf.position + s.offset(c), s.size(c)), s.values(c), s.dictionary, cctx, c))
      decoded(c - a) = ch
      entries += ch.entries
      withRep |= ch.rep != null
      withDef |= ch.defs != null
      c += 1
    }
    io.keep(this, new Decoded(a, decoded))
    val lv = {
      val rep = if (withRep) new Array[Int](entries) else null
      val defs = if (withDef) new Array[Int](entries) else null
      var at = 0
      decoded.foreach { ch =>
        if (ch.rep != null) System.arraycopy(ch.rep, 0, rep, at, ch.entries)
        if (ch.defs != null) System.arraycopy(ch.defs, 0, defs, at, ch.entries)
        at += ch.entries
      }
      canonicalLevels(rep, defs, entries, map, path)
    }
    val values = decoded.iterator.map(ch => LeafRun.whole(ch.values)).toVector
    val (ls, le) =
      if (leaf.maxRep == 0) ((from - s.firstRow(a)).toInt, (until - s.firstRow(a)).toInt)
      else {
        // row k of chunk a's rows starts at the k-th entry with the highest repetition level
        val (start, end) = lv.rowEntries(leaf.maxRep, from - s.firstRow(a), until - s.firstRow(a))
        if (start < 0) fail(path, s"row $from not found in chunks $a to $b")
        (start, end)
      }
    if (ls < 0 || le > lv.size || ls > le) fail(path, s"rows [$from, $until) map to levels [$ls, $le) of ${lv.size}")
    // canonical levels (checked) are the map's values: when each has a value slot, every entry has
    val everyVisible = leaf.maxRep == 0 && everyLevelHasASlot(map)
    val vs = if (everyVisible) ls else RepDef.visible(lv.defs, 0, ls, leaf.maxVisibleDef)
    val ve = vs + (if (everyVisible) le - ls else RepDef.visible(lv.defs, ls, le, leaf.maxVisibleDef))
    val total = values.iterator.map(_.count).sum
    if (ve > total) fail(path, s"levels mark $ve visible values, the chunks hold $total")
    // (the levels were made for this call: rows that are the chunks' whole levels take them as they are)
    val whole = ls == 0 && le == lv.size
    val rep = if (lv.rep == null) null else if (whole) lv.rep else java.util.Arrays.copyOfRange(lv.rep, ls, le)
    val defs = if (lv.defs == null) null else if (whole) lv.defs else java.util.Arrays.copyOfRange(lv.defs, ls, le)
    new LeafRun(new Levels(rep, defs, le - ls), LeafRun.sliceValues(values, vs, ve))
  }
}

private[v21] object MiniBlockPage {
  /** Most bytes in a mini-block chunk (2.1's 12-bit words allow 32 KiB). */
  private val MaxChunk = 32 * 1024

  /** A mini-block page of `values` (their storage chosen from the data)
    * with `dictionary` (its encoding, its buffer, its items) if they are its
    * indices; 2.2's (`large`) chunk words and buffer sizes are 32-bit. None
    * if its entries cannot be cut into chunks (a chunk holds at most 65535
    * levels). */
  def write(lb: LeafBuffer, levels: PageLevels, values: MiniBlockValues,
            dict: Option[(CompressiveEncoding, Array[Byte], Int)], large: Boolean): Option[EncodedPage] = {
    val layers = levels.layers
    val rep = levels.rep
    val defs = levels.defs
    val maxDef = levels.maxDef
    val maxVisible = levels.maxVisible
    val entries = if (rep == null && defs == null) lb.values else lb.defs.size
    val totalValues = lb.values
    // the entry of each value (entries are values when there are no levels)
    val entryOf: Int => Int =
      if (defs == null) {  // every entry valid: entry v is value v
        if (entries != totalValues)
          throw new LanceFormatException(s"${lb.where}: $entries value slots for $totalValues values")
        identity
      } else {
        val table = new Array[Int](totalValues + 1)
        var v = 0
        var e = 0
        while (e < entries) {
          val d = if (defs == null) 0 else defs(e)
          if (d <= maxVisible) { table(v) = e; v += 1 }
          e += 1
        }
        if (v != totalValues) throw new LanceFormatException(s"${lb.where}: $v value slots for ${totalValues} values")
        table(totalValues) = entries
        table
      }
    val maxRep = lb.maxRep
    val repW = if (rep == null) 0 else math.max(1, PageLevels.bitsFor(maxRep))
    val defW = if (defs == null) 0 else math.max(1, PageLevels.bitsFor(maxDef))
    val chunks = new ByteBuilder(lb.fixed.size / 2 + 1024)
    val words = new ByteBuilder()
    val repIndex = new ByteBuilder()
    var v = 0
    var e = 0
    var chunkIndex = 0
    while (v < totalValues) {
      var count = math.min(values.preferred(v), totalValues - v)
      if (v + count < totalValues) count = MiniBlockValues.pow2AtMost(count)
      var encoded: ByteBuilder = null
      while (encoded == null) {
        val last = v + count == totalValues
        val e1 = if (last) entries else entryOf(v + count)
        val chunk = if (e1 - e > 65535) null else serializeChunk(values, v, count, rep, defs, e, e1, repW, defW, large)
        if (chunk != null && (chunk.size <= MaxChunk || count == 1)) {
          if (chunk.size > (if (large) Int.MaxValue else 4096 * 8)) return None
          encoded = chunk
          if (rep != null) {
            // repetition index: rows ending in the chunk, entries of a row continuing into the next
            var starts = 0
            var lastStart = -1
            var k = e
            while (k < e1) { if (rep(k) == maxRep) { starts += 1; lastStart = k }; k += 1 }
            val preamble = rep(e) != maxRep
            val trailer = e1 < entries && rep(e1) != maxRep
            repIndex.putLong(starts - (if (trailer) 1 else 0) + (if (preamble) 1 else 0))
            repIndex.putLong(if (trailer) e1 - math.max(lastStart, e) else 0)
          }
          val log = if (last) 0 else Integer.numberOfTrailingZeros(count)
          val word = ((chunk.size / 8 - 1).toLong << 4) | log
          if (large) words.putInt(word.toInt) else words.putShort(word.toInt)
          chunks.put(chunk.arr, 0, chunk.size)
          v += count
          e = e1
        } else if (count == 1) return None
        else count = MiniBlockValues.pow2AtMost(count / 2)
      }
      chunkIndex += 1
    }
    val layout = MiniBlockLayout.newBuilder().setValueCompression(values.encoding)
      .setNumBuffers(values.buffersPerChunk).setNumItems(totalValues).setHasLargeChunk(large)
    layers.foreach(layout.addLayers)
    if (rep != null) layout.setRepCompression(OutOfLineBitpackingCodec.levelsEncoding(repW)).setRepetitionIndexDepth(1)
    if (defs != null) layout.setDefCompression(OutOfLineBitpackingCodec.levelsEncoding(defW))
    val buffers = ArrayBuffer(words.toArray, chunks.toArray)
    dict.foreach { case (enc, bytes, count) =>
      layout.setDictionary(enc).setNumDictionaryItems(count)
      buffers += bytes
    }
    if (rep != null) buffers += repIndex.toArray
    Some(EncodedPage(buffers.toSeq, PageLayout.newBuilder().setMiniBlockLayout(layout).build(), lb.rows))
  }

  /** One chunk: its header, levels and value buffers, each padded to 8 bytes. */
  private def serializeChunk(values: MiniBlockValues, v: Int, n: Int, rep: Array[Int], defs: Array[Int], e0: Int,
                             e1: Int, repW: Int, defW: Int, large: Boolean): ByteBuilder = {
    // (builders sized up front: levels take at most a packed group per 1,024 and a raw tail)
    def levelBytes(w: Int): Int = ((e1 - e0) / FastLanes.GroupSize + 1) * FastLanes.packedBytes(w) + 2 * FastLanes.GroupSize
    val repBytes = if (rep == null) null else {
      val b = new ByteBuilder(levelBytes(repW)); OutOfLineBitpackingCodec.encodeLevels(rep, e0, e1 - e0, repW, b); b
    }
    val defBytes = if (defs == null) null else {
      val b = new ByteBuilder(levelBytes(defW)); OutOfLineBitpackingCodec.encodeLevels(defs, e0, e1 - e0, defW, b); b
    }
    val bufs = values.chunk(v, n)
    if (!large && (bufs.exists(_.length > 65535) || (repBytes != null && repBytes.size > 65535) ||
        (defBytes != null && defBytes.size > 65535))) return null
    if (repBytes != null && repBytes.size > 65535 || defBytes != null && defBytes.size > 65535) return null
    val out = new ByteBuilder(16 + 4 * bufs.size + (if (repBytes == null) 0 else repBytes.size + 8) +
      (if (defBytes == null) 0 else defBytes.size + 8) + bufs.map(_.length + 8).sum)
    out.putShort(if (rep == null && defs == null) 0 else e1 - e0)
    if (repBytes != null) out.putShort(repBytes.size)
    if (defBytes != null) out.putShort(defBytes.size)
    bufs.foreach(b => if (large) out.putInt(b.length) else out.putShort(b.length))
    out.padTo(8)
    if (repBytes != null) { out.put(repBytes.arr, 0, repBytes.size); out.padTo(8) }
    if (defBytes != null) { out.put(defBytes.arr, 0, defBytes.size); out.padTo(8) }
    bufs.foreach { b => out.put(b, 0, b.length); out.padTo(8) }
    out
  }
}
