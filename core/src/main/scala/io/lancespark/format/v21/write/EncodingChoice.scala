package io.lancespark.format.v21.write

import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.format.file.ByteBuilder
import io.lancespark.format.v21.codec.{BitpackedValues, BoolValues, ByteStreamSplitCodec, CompressedValues, FixedSizeListValues, FlatCodec,
  FlatValues, FsstCodec, FsstEncoder, FsstPages, GeneralCodec, InlineBitpackingCodec, MiniBlockValues, RleCodec,
  RleValues, SplitValues, VariableCodec, VariableValues}
import io.lancespark.format.v21.layout.{BlobPage, BlobV2Page, ConstantPage, EncodedPage, FullZipPage, MiniBlockPage, PageLevels}
import io.lancespark.proto.encodings21.{CompressiveEncoding, CompressionScheme}

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

/** Chooses how the rows buffered for one leaf column are stored as one
  * 2.1/2.2 page, and has the layout's writer encode them: all null
  * (constant, with levels), one value (2.2's constant with its value
  * inline), full-zip for wide values, otherwise mini-block with codecs chosen
  * from the data (RLE for runs, bit-packing for small integers, dictionaries
  * for repeated values, FSST for other strings where it pays, lz4 or zstd
  * over wide values that compress). One per file writer: it keeps each
  * string column's last FSST table for the column's next pages. */
private[v21] final class EncodingChoice(version: Int, codecs: WriteCodecs) {
  private val large = version >= 2 // 2.2: 32-bit chunk words and buffer sizes

  /** Values at least this wide go to full-zip pages. */
  private val FullZipBytes = 256

  private val fsstPages = new FsstPages

  // ------------------------------------------------------------- layouts

  def encode(lb: LeafBuffer): EncodedPage = {
    lazy val levels = PageLevels.of(lb)
    val wide = lb.kind match {
      case ValueKind.Var(_) => lb.values > 0 && lb.fixed.size / lb.values >= FullZipBytes
      case ValueKind.Fsl(dim, w) => dim.toLong * math.max(w, 1) >= FullZipBytes
      case ValueKind.Fixed(w) => w >= FullZipBytes
      case _ => false
    }
    lazy val same = if (large && codecs.constant) ConstantPage.valueOf(lb) else None
    if (lb.kind == ValueKind.Blob) BlobPage.write(lb, large)
    else if (lb.kind == ValueKind.BlobV2) BlobV2Page.write(lb, levels)
    else if (levels.validValues == 0 || lb.kind == ValueKind.Nothing) ConstantPage.allNull(lb, levels)
    else if (same.isDefined) ConstantPage.withValue(lb, same.get, levels)
    else if (wide && codecs.fullZip) fullZip(lb, levels)
    else {
      val (values, dict) = chooseValues(lb)
      MiniBlockPage.write(lb, levels, values, dict, large).getOrElse(fullZip(lb, levels))
    }
  }

  private def fullZip(lb: LeafBuffer, levels: PageLevels): EncodedPage =
    FullZipPage.write(lb, levels, bits => perValue(lb, bits))

  // ------------------------------------------------------------- mini-block values

  /** The values' storage in a mini-block page, chosen from the data, and the
    * dictionary (its encoding, its buffer, its items) when the values stored
    * are its indices. */
  private def chooseValues(lb: LeafBuffer): (MiniBlockValues, Option[(CompressiveEncoding, Array[Byte], Int)]) =
    lb.kind match {
      case ValueKind.Bool => (new BoolValues(lb.bits), None)
      case ValueKind.Fsl(dim, w) =>
        (new FixedSizeListValues(lb.fixed.arr, lb.bits, if (lb.itemNulls > 0) Some(lb.itemValidity) else None, dim, w),
          None)
      case ValueKind.Fixed(w) if lb.values > 0 =>
        val src = lb.fixed.arr
        val n = lb.values
        val runs = if (codecs.rle && Set(1, 2, 4, 8).contains(w)) RleCodec.runs(src, 0, n, w, limit = n / 2) else n
        // (not floats: their bits, sign and exponent on top, do not pack)
        val floating = lb.field.arrowType.isInstanceOf[ArrowType.FloatingPoint]
        val packed =
          if (codecs.bitpacking && !floating && Set(1, 2, 4, 8).contains(w)) InlineBitpackingCodec.packedBytes(src, n, w)
          else Long.MaxValue
        val (plain, plainBytes) =
          if (runs < n / 2) (new RleValues(src, w), runs.toLong * (w + 1))
          else if (packed < 0.9 * n * w) (new BitpackedValues(src, w), packed)
          else (new FlatValues(src, w), n.toLong * w)
        // a dictionary when it takes at most MaxShare of the plain values, its
        // items counted as stored (sorted and compressed when that pays)
        val dictionary = FixedDictionary.build(src, n, w, codecs.dictionary, plainBytes).map { found =>
          val d = if (w <= 8) FixedDictionary.sorted(found, w) else found
          (d, compressedDictionary(FlatCodec.encoding(8L * w), d.items))
        }.filter { case (d, (_, stored)) =>
          (if (codecs.bitpacking) FixedDictionary.indexBytes(n, d.count) else 4L * n) + stored.length <=
            FixedDictionary.MaxShare * plainBytes
        }
        dictionary match {
          case Some((d, (dictEncoding, dictBytes))) => (indexValues(d.indices), Some((dictEncoding, dictBytes, d.count)))
          case None => (plain match {
            case f: FlatValues if w >= 8 || (w == 4 && floating) => compressedIfItPays(f, src, w, n)
            case other => other
          }, None)
        }
      case ValueKind.Fixed(w) => (new FlatValues(lb.fixed.arr, w), None)
      case ValueKind.Var(bits) =>
        dictionary(lb, bits / 8) match {
          case Some((dict, indices, count)) => (indexValues(indices), Some((dict._1, dict._2, count)))
          case None =>
            val plain = VariableCodec.encoding(bits)
            fsst(lb) match {
              case Some((table, data, ends)) =>
                (new VariableValues(data, i => ends(i), bits / 8, FsstCodec.encoding(plain, table), lb.values), None)
              case None =>
                (new VariableValues(lb.fixed.arr, i => lb.ends.getLong(i), bits / 8, plain, lb.values), None)
            }
        }
      case ValueKind.Nothing => throw new IllegalStateException("no values to store")
      case ValueKind.Blob => throw new IllegalStateException("blob values are stored by BlobPage")
      case ValueKind.BlobV2 => throw new IllegalStateException("blob values are stored by BlobV2Page")
    }

  /** Dictionary indices (u32 each), bit-packed when that is allowed. */
  private def indexValues(indices: Array[Byte]): MiniBlockValues =
    if (codecs.bitpacking) new BitpackedValues(indices, 4) else new FlatValues(indices, 4)

  /** Flat values of `w` >= 8 bytes (or 4-byte floats), compressed by chunks
    * of 16 KiB when a sample chunk shrinks to 70% or less: with lz4 when its
    * output is at most 1.75 times zstd's (lz4 decodes several times faster:
    * these are the values every scan of the column decompresses, e.g. TPC-H
    * prices, which lz4 takes to 32% and zstd to 21%), else with zstd. When
    * only lz4's 90% or less is within reach (random doubles with nulls, whose
    * zeroed null slots it takes out), with lz4. Values of 4 or 8 bytes are
    * also tried split into byte streams (pylance's byte-stream-split, which
    * its reader takes at those widths), kept where that compresses to 70% or
    * less of the values and 90% or less of them unsplit: smooth doubles, whose
    * sign and exponent bytes repeat, go from zstd's 17-46% to lz4's 5-10%;
    * random doubles in [0, 1), whose split bytes come to about 80%, stay flat
    * (every scan would pay the decompression for a fifth of their bytes). */
  private def compressedIfItPays(values: FlatValues, src: Array[Byte], w: Int, n: Int): MiniBlockValues = {
    if (!codecs.general || n < 64) return values
    val perChunk = MiniBlockValues.pow2AtMost(16 * 1024 / w)
    val sampled = math.min(perChunk, n)
    val flat = values.chunk(0, sampled).head
    val split = if (w == 4 || w == 8) Some(ByteStreamSplitCodec.split(src, 0, sampled, w)) else None
    def size(scheme: CompressionScheme, sample: Array[Byte]): Int =
      GeneralCodec.compress(scheme, sample, 0, sample.length).length
    // (the smaller of the unsplit and split sizes under `scheme`, and whether split)
    def best(scheme: CompressionScheme): (Int, Boolean) = {
      val whole = size(scheme, flat)
      split.map(size(scheme, _)).filter(s => s <= 0.9 * whole && s <= 0.7 * flat.length).map(s => (s, true))
        .getOrElse((whole, false))
    }
    val (zstd, zstdSplit) = best(CompressionScheme.COMPRESSION_ALGORITHM_ZSTD)
    val (lz4, lz4Split) = best(CompressionScheme.COMPRESSION_ALGORITHM_LZ4)
    def stored(splitValues: Boolean): MiniBlockValues = if (splitValues) new SplitValues(src, w) else values
    val zstdPays = zstd <= 0.7 * flat.length
    if ((zstdPays && lz4 <= 0.7 * flat.length && lz4 <= 1.75 * zstd) || (!zstdPays && lz4 <= 0.9 * flat.length))
      new CompressedValues(stored(lz4Split), perChunk, CompressionScheme.COMPRESSION_ALGORITHM_LZ4)
    else if (zstdPays)
      new CompressedValues(stored(zstdSplit), perChunk, CompressionScheme.COMPRESSION_ALGORITHM_ZSTD)
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
      else (GeneralCodec.encoding(scheme, plain), packed)
    }

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
    val (dictEncoding, stored) =
      compressedDictionary(VariableCodec.encoding(8 * ob), VariableCodec.block(data, start, end, dict.items, ob))
    // worth it when it takes less than FSST could at best: the values'
    // offsets alone and about a third of their bytes (pages of a few
    // distinct values always are; of a vocabulary of names or words, when
    // each is repeated a few times in the page)
    val indexBytes = if (codecs.bitpacking) FixedDictionary.indexBytes(n, count) else 4L * n
    if (indexBytes + stored.length > ob.toLong * n + 0.3 * end(n - 1)) None
    else Some(((dictEncoding, stored), dict.indices, count))
  }

  // ------------------------------------------------------------- strings

  /** Longest value and total bytes of a variable-width leaf's buffered values. */
  private def varStats(lb: LeafBuffer): (Long, Long) = {
    var max = 0L
    var prev = 0L
    var i = 0
    while (i < lb.values) { val e = lb.ends.getLong(i); max = math.max(max, e - prev); prev = e; i += 1 }
    (max, prev)
  }

  /** The values FSST-compressed (the table, the codes, each value's end),
    * when that pays ([[FsstPages]]). */
  private def fsst(lb: LeafBuffer): Option[(Array[Byte], Array[Byte], Array[Long])] =
    if (!codecs.fsst) None
    else {
      val (maxLen, total) = varStats(lb)
      fsstPages.compress(lb.column, lb.fixed.arr, i => lb.ends.getLong(i), lb.values, maxLen, total)
    }

  /** A full-zip page's variable-width values as stored: (bytes, end of each
    * value, encoding). Values over 32 KiB are each zstd-compressed (when the
    * page holds at least 32 KiB and it makes them smaller); otherwise FSST as
    * for mini-blocks; otherwise plain. */
  private def perValue(lb: LeafBuffer, bits: Int): (Array[Byte], Int => Long, CompressiveEncoding) = {
    val plain = VariableCodec.encoding(bits)
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
        else Some((out.arr, (i: Int) => ends(i),
          GeneralCodec.encoding(CompressionScheme.COMPRESSION_ALGORITHM_ZSTD, plain)))
      }
    zstd.orElse(fsst(lb).map { case (table, data, ends) =>
      (data, (i: Int) => ends(i), FsstCodec.encoding(plain, table))
    }).getOrElse((lb.fixed.arr, (i: Int) => lb.ends.getLong(i), plain))
  }
}
