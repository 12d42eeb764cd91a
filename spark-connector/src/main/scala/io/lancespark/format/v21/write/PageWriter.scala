package io.lancespark.format.v21.write

import scala.collection.mutable.ArrayBuffer

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.file.{ByteBuilder, RawBytes}
import io.lancespark.format.v21.LayerKind
import io.lancespark.format.v21.codec.{FsstEncoder, GeneralCodec, InlineBitpackingCodec, OutOfLineBitpackingCodec, RleCodec}
import io.lancespark.proto.encodings21._

/** An encoded page: its buffers and its layout. */
private[v21] final case class EncodedPage(buffers: Seq[Array[Byte]], layout: PageLayout, rows: Long)

/** The codecs a writer may use; each can be turned off (for diagnosis).
  * `general`: zstd of very large values; `constant`: 2.2's constant pages. */
final case class WriteCodecs(
    bitpacking: Boolean = true,
    rle: Boolean = true,
    dictionary: Boolean = true,
    fsst: Boolean = true,
    general: Boolean = true,
    fullZip: Boolean = true,
    constant: Boolean = true)

/** Encodes the rows buffered for one leaf column into one 2.1/2.2 page: the
  * page's own layer meanings (only the levels its data uses), then the
  * layout: all null (constant, with levels), full-zip for wide values,
  * otherwise mini-block with codecs chosen from the data (RLE for runs,
  * bit-packing for small integers, dictionaries for repeated strings, FSST
  * for other strings where it pays). */
private[v21] final class PageWriter(version: Int, codecs: WriteCodecs) {
  private val large = version >= 2 // 2.2: 32-bit chunk words and buffer sizes

  /** Most bytes in a mini-block chunk (2.1's 12-bit words allow 32 KiB). */
  private val MaxChunk = 32 * 1024
  /** Values at least this wide go to full-zip pages. */
  private val FullZipBytes = 256

  // ------------------------------------------------------------- levels

  /** The page's layers, and canonical -> page definition levels. */
  private def pageLayers(lb: LeafBuffer): (Vector[RepDefLayer], Array[Int]) = {
    val path = lb.path
    val canonicalLevels = path.map { case LayerKind.Item => 1; case LayerKind.List => 2 }
    val bases = canonicalLevels.scanLeft(0)(_ + _)
    val seen = new Array[Boolean](bases.last + 1)
    var i = 0
    while (i < lb.defs.size) { seen(lb.defs(i)) = true; i += 1 }
    val map = new Array[Int](bases.last + 1)
    var pb = 0
    val layers = path.indices.map { j =>
      val b = bases(j)
      path(j) match {
        case LayerKind.Item =>
          if (seen(b + 1)) { pb += 1; map(b + 1) = pb; RepDefLayer.REPDEF_NULLABLE_ITEM }
          else RepDefLayer.REPDEF_ALL_VALID_ITEM
        case LayerKind.List =>
          (seen(b + 1), seen(b + 2)) match {
            case (true, true) => map(b + 1) = pb + 1; map(b + 2) = pb + 2; pb += 2; RepDefLayer.REPDEF_NULL_AND_EMPTY_LIST
            case (true, false) => pb += 1; map(b + 1) = pb; RepDefLayer.REPDEF_NULLABLE_LIST
            case (false, true) => pb += 1; map(b + 2) = pb; RepDefLayer.REPDEF_EMPTYABLE_LIST
            // a list with neither nulls nor empties under a null struct or list: declared nullable
            // (its level unused), as readers (pylance) attribute levels above an all-valid list
            // to the items below it
            case _ if seen.indexWhere(identity, bases(j + 1) + 1) >= 0 =>
              pb += 1; map(b + 1) = pb; RepDefLayer.REPDEF_NULLABLE_LIST
            case _ => RepDefLayer.REPDEF_ALL_VALID_LIST
          }
      }
    }.toVector
    (layers, map)
  }

  private def bitsFor(max: Int): Int = 32 - Integer.numberOfLeadingZeros(max)

  // ------------------------------------------------------------- pages

  def encode(lb: LeafBuffer): EncodedPage = {
    val (layers, map) = pageLayers(lb)
    val n = lb.defs.size
    // the page's definition levels, their maximum and the valid entries, in
    // one loop over primitive ints (no boxing: this runs for every page)
    val defs = new Array[Int](n)
    var maxDef = 0
    var validValues = 0
    var i = 0
    while (i < n) {
      val d = map(lb.defs(i))
      defs(i) = d
      if (d > maxDef) maxDef = d
      if (d == 0) validValues += 1
      i += 1
    }
    val rep = if (lb.rep == null) null else java.util.Arrays.copyOf(lb.rep.arr, n)
    // entries with a value slot: valid ones, and nulls of items inside the innermost list
    val maxVisible = {
      val itemLevels = lb.path.takeWhile(_ == LayerKind.Item).size
      (0 to itemLevels).map(c => if (c < map.length) map(c) else 0).max
    }
    val wide = lb.kind match {
      case ValueKind.Var(_) => lb.values > 0 && lb.fixed.size / lb.values >= FullZipBytes
      case ValueKind.Fsl(dim, w) => dim.toLong * math.max(w, 1) >= FullZipBytes
      case ValueKind.Fixed(w) => w >= FullZipBytes
      case _ => false
    }
    lazy val same = if (large && codecs.constant) constantValue(lb) else None
    if (validValues == 0 || lb.kind == ValueKind.Nothing) allNull(lb, layers, rep, if (maxDef > 0) defs else null)
    else if (same.isDefined) constant(lb, same.get, layers, rep, if (maxDef > 0) defs else null)
    else if (wide && codecs.fullZip) fullZip(lb, layers, rep, if (maxDef > 0) defs else null, maxDef, maxVisible)
    else miniBlock(lb, layers, rep, if (maxDef > 0) defs else null, maxDef, maxVisible)
      .getOrElse(fullZip(lb, layers, rep, if (maxDef > 0) defs else null, maxDef, maxVisible))
  }

  private def u16s(levels: Array[Int]): Array[Byte] = {
    val out = new ByteBuilder(2 * levels.length + 16)
    levels.foreach(out.putShort)
    out.toArray
  }

  /** Every value null (or every list empty): a constant page with levels. */
  private def allNull(lb: LeafBuffer, layers: Vector[RepDefLayer], rep: Array[Int], defs: Array[Int]): EncodedPage = {
    val layout = ConstantLayout.newBuilder()
    layers.foreach(layout.addLayers)
    val buffers =
      if (rep == null && defs == null) Nil
      else Seq(if (rep == null) Array.emptyByteArray else u16s(rep), if (defs == null) Array.emptyByteArray else u16s(defs))
    EncodedPage(buffers, PageLayout.newBuilder().setConstantLayout(layout).build(), lb.rows)
  }

  /** The value, when every valid value is the same fixed-width value of at
    * most 32 bytes outside lists (2.2 stores it once, in the page's description). */
  private def constantValue(lb: LeafBuffer): Option[Array[Byte]] = lb.kind match {
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

  /** Every valid value `value`: a constant page holding it inline, with levels. */
  private def constant(lb: LeafBuffer, value: Array[Byte], layers: Vector[RepDefLayer], rep: Array[Int],
                       defs: Array[Int]): EncodedPage = {
    val page = allNull(lb, layers, rep, defs)
    val layout = page.layout.getConstantLayout.toBuilder.setInlineValue(com.google.protobuf.ByteString.copyFrom(value))
    EncodedPage(page.buffers, PageLayout.newBuilder().setConstantLayout(layout).build(), page.rows)
  }

  // ------------------------------------------------------------- mini-block

  /** How the values of a mini-block page are stored. */
  private sealed trait Values {
    def encoding: CompressiveEncoding
    def buffersPerChunk: Int
    /** The largest power-of-two count of values from `v` worth a chunk. */
    def preferred(v: Int): Int
    /** The value buffers of values [v, v + n). */
    def chunk(v: Int, n: Int): Seq[Array[Byte]]
  }

  private def flat(bits: Long): CompressiveEncoding =
    CompressiveEncoding.newBuilder().setFlat(Flat.newBuilder().setBitsPerValue(bits)).build()

  private def pow2AtMost(x: Int): Int = if (x <= 1) 1 else Integer.highestOneBit(x)

  /** Fixed-width values stored as they are. */
  private final class FlatValues(src: Array[Byte], w: Int) extends Values {
    val encoding: CompressiveEncoding = flat(8L * w)
    def buffersPerChunk: Int = 1
    def preferred(v: Int): Int = pow2AtMost(math.max(1, 8186 / w))
    def chunk(v: Int, n: Int): Seq[Array[Byte]] = Seq(java.util.Arrays.copyOfRange(src, v * w, (v + n) * w))
  }

  /** Another storage's chunks with their first buffer compressed by `scheme`
    * (wide values that neither bit-pack nor repeat, e.g. decimal prices),
    * `perChunk` values a chunk. */
  private final class CompressedValues(inner: Values, perChunk: Int, scheme: CompressionScheme) extends Values {
    val encoding: CompressiveEncoding = CompressiveEncoding.newBuilder().setGeneral(General.newBuilder()
      .setCompression(BufferCompression.newBuilder().setScheme(scheme)).setValues(inner.encoding)).build()
    def buffersPerChunk: Int = inner.buffersPerChunk
    def preferred(v: Int): Int = perChunk
    def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
      val buffers = inner.chunk(v, n)
      buffers.updated(0, GeneralCodec.compress(scheme, buffers.head, 0, buffers.head.length))
    }
  }

  /** Flat values of `w` >= 8 bytes, compressed by chunks of 16 KiB when a
    * sample chunk shrinks to 70% or less: with lz4 when its output is at most
    * 1.75 times zstd's (lz4 decodes several times faster: these are the
    * values every scan of the column decompresses, e.g. TPC-H prices, which
    * lz4 takes to 32% and zstd to 21%), else with zstd. When only lz4's 90%
    * or less is within reach (random doubles with nulls, whose zeroed null
    * slots it takes out), with lz4. */
  private def compressedIfItPays(values: FlatValues, w: Int, n: Int): Values = {
    if (!codecs.general || n < 64) return values
    val perChunk = pow2AtMost(16 * 1024 / w)
    val sample = values.chunk(0, math.min(perChunk, n)).head
    def size(scheme: CompressionScheme): Int = GeneralCodec.compress(scheme, sample, 0, sample.length).length
    val zstd = size(CompressionScheme.COMPRESSION_ALGORITHM_ZSTD)
    val lz4 = size(CompressionScheme.COMPRESSION_ALGORITHM_LZ4)
    val zstdPays = zstd <= 0.7 * sample.length
    if ((zstdPays && lz4 <= 0.7 * sample.length && lz4 <= 1.75 * zstd) || (!zstdPays && lz4 <= 0.9 * sample.length))
      new CompressedValues(values, perChunk, CompressionScheme.COMPRESSION_ALGORITHM_LZ4)
    else if (zstdPays)
      new CompressedValues(values, perChunk, CompressionScheme.COMPRESSION_ALGORITHM_ZSTD)
    else values
  }

  /** A dictionary (fixed-width items, or a block of variable-width ones)
    * zstd-compressed when that saves a fifth or more (sorted items, e.g.
    * prices of a few thousand values, shrink to a third or less; words to
    * about half): a dictionary is stored, and decoded, once per page. */
  private def compressedDictionary(plain: CompressiveEncoding, items: Array[Byte]): (CompressiveEncoding, Array[Byte]) =
    if (!codecs.general || items.length < FixedDictionary.MinCompressedBytes) (plain, items)
    else {
      val scheme = CompressionScheme.COMPRESSION_ALGORITHM_ZSTD
      val packed = GeneralCodec.compress(scheme, items, 0, items.length)
      if (packed.length > 0.8 * items.length) (plain, items)
      else (CompressiveEncoding.newBuilder().setGeneral(General.newBuilder()
        .setCompression(BufferCompression.newBuilder().setScheme(scheme)).setValues(plain)).build(), packed)
    }

  /** Booleans: a bitmap per chunk. */
  private final class BoolValues(lb: LeafBuffer) extends Values {
    val encoding: CompressiveEncoding = flat(1)
    def buffersPerChunk: Int = 1
    def preferred(v: Int): Int = 8192
    def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
      val out = new Array[Byte]((n + 7) / 8)
      var i = 0
      while (i < n) { if (lb.bits.get(v + i)) out(i >>> 3) = (out(i >>> 3) | (1 << (i & 7))).toByte; i += 1 }
      Seq(out)
    }
  }

  /** Integers bit-packed in groups of 1024, each with its own width. */
  private final class BitpackedValues(src: Array[Byte], w: Int) extends Values {
    val encoding: CompressiveEncoding = CompressiveEncoding.newBuilder()
      .setInlineBitpacking(InlineBitpacking.newBuilder().setUncompressedBitsPerValue(8L * w)).build()
    def buffersPerChunk: Int = 1
    def preferred(v: Int): Int = 1024
    def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
      val group = new Array[Long](1024)
      readGroup(src, v, n, w, group)
      val out = new ByteBuilder(8 * 1024 + 16)
      InlineBitpackingCodec.encodeGroup(group, 8 * w, out)
      Seq(out.toArray)
    }
  }

  private def readGroup(src: Array[Byte], v: Int, n: Int, w: Int, group: Array[Long]): Unit = {
    var i = 0
    while (i < n) { group(i) = RawBytes.uintLE(src, (v + i) * w, w); i += 1 }
    java.util.Arrays.fill(group, n, 1024, 0L)
  }

  /** Runs of equal values: run values, then u8 run lengths. */
  private final class RleValues(src: Array[Byte], w: Int) extends Values {
    val encoding: CompressiveEncoding = CompressiveEncoding.newBuilder().setRle(Rle.newBuilder()
      .setValues(flat(8L * w)).setRunLengths(flat(8))).build()
    def buffersPerChunk: Int = 2
    def preferred(v: Int): Int = 2048
    def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
      val values = new ByteBuilder()
      val lengths = new ByteBuilder()
      RleCodec.encode(src, v * w, n, w, values, lengths)
      Seq(values.toArray, lengths.toArray)
    }
  }

  /** Variable-width values: n + 1 offsets into the chunk (`ob` bytes each),
    * the bytes, padding to a multiple of `ob` (readers take the chunk as
    * offset words). `encoding` says what the bytes are (plain, or FSST codes). */
  private final class VarValues(data: Array[Byte], end: Int => Long, ob: Int, val encoding: CompressiveEncoding,
                                val values: Int) extends Values {
    def buffersPerChunk: Int = 1
    private def start(v: Int): Long = if (v == 0) 0L else end(v - 1)
    def preferred(v: Int): Int = {
      // the most values (a power of two) whose offsets and bytes stay within 4 KiB
      var k = 1
      while (k < (1 << 14) && start(math.min(v + 2 * k, values)) - start(v) + ob.toLong * (2 * k + 1) <= 4096 &&
        v + k < values) k *= 2
      k
    }
    def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
      val s = start(v)
      val bytes = (start(v + n) - s).toInt
      val head = ob * (n + 1)
      val out = new ByteBuilder(head + bytes + 8)
      var i = 0
      while (i <= n) { putOffset(out, ob, head + start(v + i) - s); i += 1 }
      out.put(data, s.toInt, bytes)
      out.putZeros((ob - (head + bytes) % ob) % ob)
      Seq(out.toArray)
    }
  }

  private def variable(offsetBits: Int): CompressiveEncoding =
    CompressiveEncoding.newBuilder().setVariable(Variable.newBuilder().setOffsets(flat(offsetBits))).build()

  private def putOffset(out: ByteBuilder, ob: Int, x: Long): Unit = if (ob == 8) out.putLong(x) else out.putInt(x.toInt)

  /** Fixed-size lists: a bitmap of their items' validity (when some are
    * null), then the items. */
  private final class FslValues(lb: LeafBuffer, dim: Int, w: Int) extends Values {
    private val validity = lb.itemNulls > 0
    val encoding: CompressiveEncoding = CompressiveEncoding.newBuilder().setFixedSizeList(FixedSizeList.newBuilder()
      .setItemsPerValue(dim).setHasValidity(validity).setValues(flat(if (w == 0) 1L else 8L * w))).build()
    def buffersPerChunk: Int = if (validity) 2 else 1
    def preferred(v: Int): Int = pow2AtMost(math.max(1, 8186 / (dim * math.max(w, 1))))
    private def bits(b: io.lancespark.format.file.BitBuilder, from: Long, count: Int): Array[Byte] = {
      val out = new Array[Byte]((count + 7) / 8)
      var i = 0
      while (i < count) { if (b.get(from + i)) out(i >>> 3) = (out(i >>> 3) | (1 << (i & 7))).toByte; i += 1 }
      out
    }
    def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
      val items = if (w == 0) bits(lb.bits, v.toLong * dim, n * dim)
        else java.util.Arrays.copyOfRange(lb.fixed.arr, v * dim * w, (v + n) * dim * w)
      if (validity) Seq(bits(lb.itemValidity, v.toLong * dim, n * dim), items) else Seq(items)
    }
  }

  /** The values' storage, chosen from the data. */
  private def chooseValues(lb: LeafBuffer): (Values, Option[(CompressiveEncoding, Array[Byte], Int)]) = lb.kind match {
    case ValueKind.Bool => (new BoolValues(lb), None)
    case ValueKind.Fsl(dim, w) => (new FslValues(lb, dim, w), None)
    case ValueKind.Fixed(w) if lb.values > 0 =>
      val src = lb.fixed.arr
      val n = lb.values
      val runs = if (codecs.rle && Set(1, 2, 4, 8).contains(w)) RleCodec.runs(src, 0, n, w, limit = n / 2) else n
      val packed = if (codecs.bitpacking && Set(1, 2, 4, 8).contains(w)) bitpackedBytes(src, n, w) else Long.MaxValue
      val (plain, plainBytes) =
        if (runs < n / 2) (new RleValues(src, w), runs.toLong * (w + 1))
        else if (packed < 0.9 * n * w) (new BitpackedValues(src, w), packed)
        else (new FlatValues(src, w), n.toLong * w)
      // a dictionary when it takes at most MaxShare of the plain values, its
      // items counted as stored (sorted and compressed when that pays)
      val dictionary = FixedDictionary.build(src, n, w, codecs.dictionary, plainBytes).map { found =>
        val d = if (w <= 8) FixedDictionary.sorted(found, w) else found
        (d, compressedDictionary(flat(8L * w), d.items))
      }.filter { case (d, (_, stored)) =>
        (if (codecs.bitpacking) FixedDictionary.indexBytes(n, d.count) else 4L * n) + stored.length <=
          FixedDictionary.MaxShare * plainBytes
      }
      dictionary match {
        case Some((d, (dictEncoding, dictBytes))) =>
          val idxValues = if (codecs.bitpacking) new BitpackedValues(d.indices, 4) else new FlatValues(d.indices, 4)
          (idxValues, Some((dictEncoding, dictBytes, d.count)))
        case None => (plain match {
          case f: FlatValues if w >= 8 => compressedIfItPays(f, w, n)
          case other => other
        }, None)
      }
    case ValueKind.Fixed(w) => (new FlatValues(lb.fixed.arr, w), None)
    case ValueKind.Var(bits) =>
      dictionary(lb, bits / 8) match {
        case Some((dict, indices, count)) =>
          val idxValues = if (codecs.bitpacking) new BitpackedValues(indices, 4) else new FlatValues(indices, 4)
          (idxValues, Some((dict._1, dict._2, count)))
        case None =>
          val plain = variable(bits)
          fsst(lb) match {
            case Some((table, data, ends)) =>
              val enc = CompressiveEncoding.newBuilder().setFsst(Fsst.newBuilder().setValues(plain)
                .setSymbolTable(com.google.protobuf.ByteString.copyFrom(table))).build()
              (new VarValues(data, i => ends(i), bits / 8, enc, lb.values), None)
            case None => (new VarValues(lb.fixed.arr, i => lb.ends.getLong(i), bits / 8, plain, lb.values), None)
          }
      }
    case ValueKind.Nothing => throw new IllegalStateException("no values to store")
  }

  /** Bytes of the values bit-packed in groups of 1024, each at its own width. */
  private def bitpackedBytes(src: Array[Byte], n: Int, w: Int): Long = {
    val group = new Array[Long](1024)
    var packed = 0L
    var v = 0
    while (v < n) {
      val k = math.min(1024, n - v)
      readGroup(src, v, k, w, group)
      packed += w + 1024L * io.lancespark.format.v21.codec.FastLanes.width(group, k) / 8
      v += k
    }
    packed
  }

  /** Longest value and total bytes of a variable-width leaf's buffered values. */
  private def varStats(lb: LeafBuffer): (Long, Long) = {
    var max = 0L
    var prev = 0L
    var i = 0
    while (i < lb.values) { val e = lb.ends.getLong(i); max = math.max(max, e - prev); prev = e; i += 1 }
    (max, prev)
  }

  /** A column's last FSST table, kept for its next pages: `ratio` is what it
    * made of the page it was learnt from, `pages` how many pages used it. */
  private final class LearntTable(val encoder: FsstEncoder, val serialized: Array[Byte], val ratio: Double,
                                  var pages: Int)
  private val learnt = scala.collection.mutable.LongMap.empty[LearntTable]

  /** The values FSST-compressed (the table, the codes, each value's end), as
    * the reference does when values reach 5 bytes and the page 32 KiB, if
    * that makes them smaller. A column's table is learnt from one page and
    * used for its next ones (each page stores its table) while it compresses
    * them nearly as well (a learning costs a sixth of a page's compression),
    * and learnt again at least every `RelearnPages` pages. */
  private def fsst(lb: LeafBuffer): Option[(Array[Byte], Array[Byte], Array[Long])] = {
    val (maxLen, total) = varStats(lb)
    if (!codecs.fsst || maxLen < FsstEncoder.MinMaxLength || total < FsstEncoder.MinInputBytes) return None
    val n = lb.values
    def start(i: Int): Int = if (i == 0) 0 else lb.ends.getLong(i - 1).toInt
    def end(i: Int): Int = lb.ends.getLong(i).toInt
    def compress(enc: FsstEncoder): (ByteBuilder, Array[Long]) = {
      val out = new ByteBuilder((total / 2).toInt + 1024)
      val ends = new Array[Long](n)
      var i = 0
      while (i < n) { enc.compress(lb.fixed.arr, start(i), end(i), out); ends(i) = out.size; i += 1 }
      (out, ends)
    }
    val reused = learnt.get(lb.column.toLong).filter(_.pages < RelearnPages).flatMap { t =>
      val (out, ends) = compress(t.encoder)
      if (out.size <= total * t.ratio * ReuseSlack) { t.pages += 1; Some((t.serialized, out, ends)) } else None
    }
    val (table, out, ends) = reused.getOrElse {
      val enc = FsstEncoder.train(lb.fixed.arr, start, end, n)
      val (out, ends) = compress(enc)
      val serialized = enc.serialized
      learnt.update(lb.column.toLong, new LearntTable(enc, serialized, out.size.toDouble / total, 1))
      (serialized, out, ends)
    }
    if (out.size + FsstEncoder.TableBytes < 0.9 * total) Some((table, out.arr, ends)) else None
  }

  /** Pages a learnt FSST table serves at most, and how much worse than on
    * the page it was learnt from it may compress the next ones. */
  private val RelearnPages = 16
  private val ReuseSlack = 1.03

  /** For strings of few distinct values: ((dictionary encoding, its buffer),
    * the indices (u32 each), the number of items). */
  private def dictionary(lb: LeafBuffer, ob: Int): Option[((CompressiveEncoding, Array[Byte]), Array[Byte], Int)] = {
    if (!codecs.dictionary || lb.values < 16) return None
    val n = lb.values
    val data = lb.fixed.arr
    def start(i: Int): Int = if (i == 0) 0 else lb.ends.getLong(i - 1).toInt
    def end(i: Int): Int = lb.ends.getLong(i).toInt
    val dict = StringDictionary.build(data, start, end, n, n / 2) match {
      case Some(d) => d
      case None => return None
    }
    val count = dict.count
    val indices = dict.indices
    // (a block: offset width in bits, where the bytes start, the offsets, the bytes; the header words are `ob` wide)
    val head = 2 * ob + ob * (count + 1)
    val out = new ByteBuilder(head + data.length / 4)
    putOffset(out, ob, 8L * ob); putOffset(out, ob, head)
    var at = 0L
    putOffset(out, ob, 0)
    dict.items.foreach { v => at += end(v) - start(v); putOffset(out, ob, at) }
    dict.items.foreach(v => out.put(data, start(v), end(v) - start(v)))
    val (dictEncoding, stored) = compressedDictionary(variable(8 * ob), out.toArray)
    // worth it when it takes less than FSST could at best: the values'
    // offsets alone and about a third of their bytes (pages of a few
    // distinct values always are; of a vocabulary of names or words, when
    // each is repeated a few times in the page)
    val indexBytes = if (codecs.bitpacking) FixedDictionary.indexBytes(n, count) else 4L * n
    if (indexBytes + stored.length > ob.toLong * n + 0.3 * end(n - 1)) None
    else Some(((dictEncoding, stored), indices, count))
  }

  private def levelsEncoding(w: Int): CompressiveEncoding = CompressiveEncoding.newBuilder().setOutOfLineBitpacking(
    OutOfLineBitpacking.newBuilder().setUncompressedBitsPerValue(16).setValues(flat(w))).build()

  /** A mini-block page, or None if its entries cannot be cut into chunks
    * (a chunk holds at most 65535 levels). */
  private def miniBlock(lb: LeafBuffer, layers: Vector[RepDefLayer], rep: Array[Int], defs: Array[Int], maxDef: Int,
                        maxVisible: Int): Option[EncodedPage] = {
    val (values, dict) = chooseValues(lb)
    val entries = if (rep == null && defs == null) lb.values else lb.defs.size
    val totalValues = lb.values
    // the entry of each value (entries are values when there are no levels)
    val entryOf: Int => Int =
      if (rep == null && defs == null) identity
      else {
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
    val repW = if (rep == null) 0 else math.max(1, bitsFor(maxRep))
    val defW = if (defs == null) 0 else math.max(1, bitsFor(maxDef))
    val chunks = new ByteBuilder(lb.fixed.size / 2 + 1024)
    val words = new ByteBuilder()
    val repIndex = new ByteBuilder()
    var v = 0
    var e = 0
    var chunkIndex = 0
    while (v < totalValues) {
      var count = math.min(values.preferred(v), totalValues - v)
      if (v + count < totalValues) count = pow2AtMost(count)
      var encoded: ByteBuilder = null
      while (encoded == null) {
        val last = v + count == totalValues
        val e1 = if (last) entries else entryOf(v + count)
        val chunk = if (e1 - e > 65535) null else serializeChunk(values, v, count, rep, defs, e, e1, repW, defW)
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
        else count = pow2AtMost(count / 2)
      }
      chunkIndex += 1
    }
    val layout = MiniBlockLayout.newBuilder().setValueCompression(values.encoding)
      .setNumBuffers(values.buffersPerChunk).setNumItems(totalValues).setHasLargeChunk(large)
    layers.foreach(layout.addLayers)
    if (rep != null) layout.setRepCompression(levelsEncoding(repW)).setRepetitionIndexDepth(1)
    if (defs != null) layout.setDefCompression(levelsEncoding(defW))
    val buffers = ArrayBuffer(words.toArray, chunks.toArray)
    dict.foreach { case (enc, bytes, count) =>
      layout.setDictionary(enc).setNumDictionaryItems(count)
      buffers += bytes
    }
    if (rep != null) buffers += repIndex.toArray
    Some(EncodedPage(buffers.toSeq, PageLayout.newBuilder().setMiniBlockLayout(layout).build(), lb.rows))
  }

  /** One chunk: its header, levels and value buffers, each padded to 8 bytes. */
  private def serializeChunk(values: Values, v: Int, n: Int, rep: Array[Int], defs: Array[Int], e0: Int, e1: Int,
                             repW: Int, defW: Int): ByteBuilder = {
    val repBytes = if (rep == null) null else { val b = new ByteBuilder(); OutOfLineBitpackingCodec.encodeLevels(rep, e0, e1 - e0, repW, b); b }
    val defBytes = if (defs == null) null else { val b = new ByteBuilder(); OutOfLineBitpackingCodec.encodeLevels(defs, e0, e1 - e0, defW, b); b }
    val bufs = values.chunk(v, n)
    if (!large && (bufs.exists(_.length > 65535) || (repBytes != null && repBytes.size > 65535) ||
        (defBytes != null && defBytes.size > 65535))) return null
    if (repBytes != null && repBytes.size > 65535 || defBytes != null && defBytes.size > 65535) return null
    val out = new ByteBuilder()
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

  // ------------------------------------------------------------- full-zip

  /** A full-zip page's variable-width values as stored: (bytes, end of each
    * value, encoding). Values over 32 KiB are each zstd-compressed (when the
    * page holds at least 32 KiB and it makes them smaller); otherwise FSST as
    * for mini-blocks; otherwise plain. */
  private def perValue(lb: LeafBuffer, bits: Int): (Array[Byte], Int => Long, CompressiveEncoding) = {
    val plain = variable(bits)
    val (maxLen, total) = varStats(lb)
    def start(i: Int): Int = if (i == 0) 0 else lb.ends.getLong(i - 1).toInt
    def zstd: Option[(Array[Byte], Int => Long, CompressiveEncoding)] =
      if (!codecs.general || maxLen <= 32 * 1024 || total < FsstEncoder.MinInputBytes) None
      else {
        val out = new ByteBuilder((total / 2).toInt + 1024)
        val ends = new Array[Long](lb.values)
        var i = 0
        while (i < lb.values) {
          val c = GeneralCodec.compress(CompressionScheme.COMPRESSION_ALGORITHM_ZSTD, lb.fixed.arr, start(i),
            lb.ends.getLong(i).toInt - start(i))
          out.put(c, 0, c.length)
          ends(i) = out.size
          i += 1
        }
        if (out.size >= 0.9 * total) None
        else Some((out.arr, (i: Int) => ends(i), CompressiveEncoding.newBuilder().setGeneral(General.newBuilder()
          .setCompression(BufferCompression.newBuilder().setScheme(CompressionScheme.COMPRESSION_ALGORITHM_ZSTD))
          .setValues(plain)).build()))
      }
    zstd.orElse(fsst(lb).map { case (table, data, ends) =>
      (data, (i: Int) => ends(i), CompressiveEncoding.newBuilder().setFsst(Fsst.newBuilder().setValues(plain)
        .setSymbolTable(com.google.protobuf.ByteString.copyFrom(table))).build())
    }).getOrElse((lb.fixed.arr, (i: Int) => lb.ends.getLong(i), plain))
  }

  /** Wide values: each entry a control word (its levels) and, when visible,
    * its value (variable-width ones, when valid, after their size, 32 or 64 bits), with a
    * repetition index of where each row starts. */
  private def fullZip(lb: LeafBuffer, layers: Vector[RepDefLayer], rep: Array[Int], defs: Array[Int], maxDef: Int,
                      maxVisible: Int): EncodedPage = {
    val bitsRep = if (rep == null) 0 else bitsFor(lb.maxRep)
    val bitsDef = if (defs == null) 0 else bitsFor(maxDef)
    val cw = { val t = bitsRep + bitsDef; if (t == 0) 0 else if (t <= 8) 1 else if (t <= 16) 2 else 4 }
    val entries = if (rep == null && defs == null) lb.values else lb.defs.size
    val out = new ByteBuilder(lb.fixed.size + entries * (cw + 4) + 64)
    val rowStarts = new ByteBuilder()
    val layout = FullZipLayout.newBuilder().setBitsRep(bitsRep).setBitsDef(bitsDef)
    val (fixedBytes, encoding, writeValue): (Int, CompressiveEncoding, Int => Unit) = lb.kind match {
      case ValueKind.Var(bits) =>
        // as the reference: zstd per value when values pass 32 KiB, else FSST when it pays
        val (data, end, enc) = perValue(lb, bits)
        def start(i: Int): Int = if (i == 0) 0 else end(i - 1).toInt
        (-bits, enc, (i: Int) => {
          val s = start(i)
          val len = end(i).toInt - s
          putOffset(out, bits / 8, len)
          out.put(data, s, len)
        })
      case ValueKind.Fsl(dim, w) if w > 0 =>
        val validity = lb.itemNulls > 0
        val vbytes = (dim + 7) / 8
        val enc = CompressiveEncoding.newBuilder().setFixedSizeList(FixedSizeList.newBuilder()
          .setItemsPerValue(dim).setHasValidity(validity).setValues(flat(8L * w))).build()
        ((if (validity) vbytes else 0) + dim * w, enc, (i: Int) => {
          if (validity) {
            val b = new Array[Byte](vbytes)
            var k = 0
            while (k < dim) { if (lb.itemValidity.get(i.toLong * dim + k)) b(k >>> 3) = (b(k >>> 3) | (1 << (k & 7))).toByte; k += 1 }
            out.put(b, 0, vbytes)
          }
          out.put(lb.fixed.arr, i * dim * w, dim * w)
        })
      case ValueKind.Fixed(w) => (w, flat(8L * w), (i: Int) => out.put(lb.fixed.arr, i * w, w))
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
