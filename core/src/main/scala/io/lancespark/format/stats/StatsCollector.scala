package io.lancespark.format.stats

import java.nio.charset.StandardCharsets

import org.apache.arrow.memory.util.Float16

import io.lancespark.format.stats.PageStatistics.MaxBoundBytes
import io.lancespark.format.stats.StatsValues._

/** The values of one written page, as statistics read them. */
private[format] trait PageValues {
  def rows: Int
  def nullCount: Long
  def isValid(i: Int): Boolean
  /** Fixed-width values back to back (booleans as bits), or the bytes of variable-width ones. */
  def values: Array[Byte]
  /** The end of variable-width value i in `values`. */
  def end(i: Int): Long
}

/** Computes the bounds of written pages. */
private[format] object StatsCollector {
  /** Statistics of one written page, bounds as raw little-endian values (or
    * the bytes of strings/binaries; booleans as one byte 0/1); null = unknown. */
  private[format] final case class RawStat(
      columnIndex: Int, fieldId: Int, pageIndex: Int, firstRow: Long, numRows: Long,
      nullCount: Long, min: Array[Byte], max: Array[Byte], valueBytes: Long = -1L)

  /** The bytes of the values of rows [from, until) of a page of strings or
    * binaries (nulls hold none); -1 for other kinds, whose width is their type's. */
  private[format] def valueBytes(kind: Kind, page: PageValues, from: Int, until: Int): Long = kind match {
    case VarKind(_) if until > from => page.end(until - 1) - (if (from == 0) 0L else page.end(from - 1))
    case VarKind(_) => 0L
    case _ => -1L
  }



  /** The null count and bounds of rows [from, until) of a page (all of it by
    * default). */
  private[format] def collect(kind: Kind, page: PageValues, from: Int = 0, until: Int = -1): (Long, Array[Byte], Array[Byte]) = {
    val n = if (until < 0) page.rows else until
    require(from >= 0 && from <= n && n <= page.rows, s"rows [$from, $n) of a page of ${page.rows}")
    val nullCount: Long =
      if (from == 0 && n == page.rows) page.nullCount
      else {
        var c = 0L
        var r = from
        while (r < n) { if (!page.isValid(r)) c += 1; r += 1 }
        c
      }
    val vals = page.values
    var minI = -1
    var maxI = -1
    kind match {
      case IntKind(w, signed) =>
        var lo = 0L; var hi = 0L
        var i = from
        while (i < n) {
          if (page.isValid(i)) {
            val v = intAt(vals, i, w, signed)
            if (minI < 0) { minI = i; maxI = i; lo = v; hi = v }
            else if (signed) {
              if (v < lo) { lo = v; minI = i }
              if (v > hi) { hi = v; maxI = i }
            } else {
              if (java.lang.Long.compareUnsigned(v, lo) < 0) { lo = v; minI = i }
              if (java.lang.Long.compareUnsigned(v, hi) > 0) { hi = v; maxI = i }
            }
          }
          i += 1
        }
        if (minI < 0) {
          val (mn, mx) =
            if (signed) (leLong(Long.MinValue >> (64 - 8 * w), w), leLong(Long.MaxValue >>> (64 - 8 * w), w))
            else (new Array[Byte](w), Array.fill[Byte](w)(-1))
          (nullCount, mn, mx)
        } else (nullCount, slice(vals, minI * w, w), slice(vals, maxI * w, w))

      case FloatKind(w) =>
        var lo = 0.0; var hi = 0.0
        var i = from
        while (i < n) {
          if (page.isValid(i)) {
            val v = floatAt(vals, i, w)
            if (!v.isNaN) {
              if (minI < 0) { minI = i; maxI = i; lo = v; hi = v }
              else {
                if (v < lo) { lo = v; minI = i }
                if (v > hi) { hi = v; maxI = i }
              }
            }
          }
          i += 1
        }
        def enc(d: Double): Array[Byte] = w match {
          case 2 => leLong(Float16.toFloat16(d.toFloat).toLong, 2)
          case 4 => leLong(java.lang.Float.floatToIntBits(d.toFloat).toLong, 4)
          case _ => leLong(java.lang.Double.doubleToLongBits(d), 8)
        }
        if (minI < 0) (nullCount, enc(Double.NegativeInfinity), enc(Double.PositiveInfinity))
        else {
          val mn = if (lo == 0.0) enc(-0.0) else slice(vals, minI * w, w)
          val mx = if (hi == 0.0) enc(0.0) else slice(vals, maxI * w, w)
          (nullCount, mn, mx)
        }

      case DecimalKind(w, p) =>
        var i = from
        while (i < n) {
          if (page.isValid(i)) {
            if (minI < 0) { minI = i; maxI = i }
            else {
              if (compareDecimal(vals, i, minI, w) < 0) minI = i
              if (compareDecimal(vals, i, maxI, w) > 0) maxI = i
            }
          }
          i += 1
        }
        if (minI < 0) {
          val m = BigInt(10).pow(p) - 1
          (nullCount, le(-m, w), le(m, w))
        } else (nullCount, slice(vals, minI * w, w), slice(vals, maxI * w, w))

      case BoolKind =>
        var anyTrue = false; var anyFalse = false
        var i = from
        while (i < n) {
          if (page.isValid(i)) {
            if (((vals(i >>> 3) >>> (i & 7)) & 1) != 0) anyTrue = true else anyFalse = true
          }
          i += 1
        }
        val mn: Byte = if (anyFalse || !anyTrue) 0 else 1
        val mx: Byte = if (anyTrue || !anyFalse) 1 else 0
        (nullCount, Array(mn), Array(mx))

      case FixedBinaryKind(w) =>
        var i = from
        while (i < n) {
          if (page.isValid(i)) {
            if (minI < 0) { minI = i; maxI = i }
            else {
              if (java.util.Arrays.compareUnsigned(vals, i * w, i * w + w, vals, minI * w, minI * w + w) < 0) minI = i
              if (java.util.Arrays.compareUnsigned(vals, i * w, i * w + w, vals, maxI * w, maxI * w + w) > 0) maxI = i
            }
          }
          i += 1
        }
        if (minI < 0) (nullCount, null, null)
        else (nullCount, slice(vals, minI * w, w), slice(vals, maxI * w, w))

      case VarKind(utf8) =>
        def start(i: Int): Int = if (i == 0) 0 else page.end(i - 1).toInt
        def end(i: Int): Int = page.end(i).toInt
        // each value's first 8 bytes as an unsigned big-endian key (zero
        // padded) decide most comparisons; equal keys fall back to the bytes
        var minKey = 0L
        var maxKey = 0L
        var i = from
        while (i < n) {
          if (page.isValid(i)) {
            val s = start(i); val e = end(i)
            val key = prefixKey(vals, s, e)
            if (minI < 0) { minI = i; maxI = i; minKey = key; maxKey = key }
            else {
              val byKeyMin = java.lang.Long.compareUnsigned(key, minKey)
              val belowMin =
                if (byKeyMin != 0) byKeyMin < 0
                else tieOrder(vals, s, e, start(minI), end(minI)) < 0
              if (belowMin) { minI = i; minKey = key }
              val byKeyMax = java.lang.Long.compareUnsigned(key, maxKey)
              val aboveMax =
                if (byKeyMax != 0) byKeyMax > 0
                else tieOrder(vals, s, e, start(maxI), end(maxI)) > 0
              if (aboveMax) { maxI = i; maxKey = key }
            }
          }
          i += 1
        }
        if (minI < 0) (nullCount, null, null)
        else {
          val mn = slice(vals, start(minI), end(minI) - start(minI))
          val mx = slice(vals, start(maxI), end(maxI) - start(maxI))
          (nullCount, truncateMin(mn, utf8), truncateMax(mx, utf8))
        }
    }
  }

  /** Adds the non-null values of rows [from, until) of a page to `sketch`
    * (hashed as [[DistinctSketch]] defines). */
  private[format] def addTo(sketch: DistinctSketch, kind: Kind, page: PageValues, from: Int, until: Int): Unit = {
    val vals = page.values
    val allValid = page.nullCount == 0
    var i = from
    kind match {
      case IntKind(8, _) =>
        require(until.toLong * 8 <= vals.length, s"rows up to $until of a page of ${vals.length / 8} values")
        while (i < until) {
          if (allValid || page.isValid(i)) sketch.add(DistinctSketch.hashLong(io.lancespark.format.file.RawBytes.longLE(vals, 8 * i)))
          i += 1
        }
      case IntKind(w, signed) =>
        while (i < until) { if (allValid || page.isValid(i)) sketch.add(DistinctSketch.hashLong(intAt(vals, i, w, signed))); i += 1 }
      case FloatKind(w) =>
        while (i < until) {
          if (allValid || page.isValid(i)) sketch.add(DistinctSketch.hashLong(DistinctSketch.floatBits(floatAt(vals, i, w))))
          i += 1
        }
      case BoolKind =>
        while (i < until) {
          if (allValid || page.isValid(i)) sketch.add(DistinctSketch.hashLong(((vals(i >>> 3) >>> (i & 7)) & 1).toLong))
          i += 1
        }
      case DecimalKind(w, _) =>
        while (i < until) { if (allValid || page.isValid(i)) sketch.add(DistinctSketch.hashBytes(vals, i * w, i * w + w)); i += 1 }
      case FixedBinaryKind(w) =>
        while (i < until) { if (allValid || page.isValid(i)) sketch.add(DistinctSketch.hashBytes(vals, i * w, i * w + w)); i += 1 }
      case VarKind(_) =>
        while (i < until) {
          if (allValid || page.isValid(i)) {
            val s = if (i == 0) 0 else page.end(i - 1).toInt
            sketch.add(DistinctSketch.hashBytes(vals, s, page.end(i).toInt))
          }
          i += 1
        }
    }
  }

  /** Bytes [s, e) of `v` up to the first 8, big-endian, zero padded: keys
    * that differ order their values as unsigned byte-wise comparison does. */
  private[stats] def prefixKey(v: Array[Byte], s: Int, e: Int): Long =
    if (e - s >= 8) io.lancespark.format.file.RawBytes.longBE(v, s)
    else if (s >= 0 && s + 8 <= v.length)
      // a shorter value with 8 bytes of the array from it: its bytes, the rest zeroed
      io.lancespark.format.file.RawBytes.longBE(v, s) & ~(-1L >>> (8 * math.max(0, e - s)))
    else {
      var k = 0L
      var j = 0
      while (j < 8) {
        k = (k << 8) | (if (s + j < e) v(s + j) & 0xffL else 0L)
        j += 1
      }
      k
    }

  /** The order of values [s, e) and [s2, e2) of `v` whose prefix keys are
    * equal: when both fit their keys (8 bytes or fewer) the longer one only
    * adds zero bytes, so it is the greater; otherwise their bytes decide. */
  private def tieOrder(v: Array[Byte], s: Int, e: Int, s2: Int, e2: Int): Int =
    if (e - s <= 8 && e2 - s2 <= 8) Integer.compare(e - s, e2 - s2)
    else java.util.Arrays.compareUnsigned(v, s, e, v, s2, e2)

  /** Longest prefix of at most MaxBoundBytes bytes (whole UTF-8 characters
    * when `utf8`): a lower bound of `v`. */
  private[format] def truncateMin(v: Array[Byte], utf8: Boolean): Array[Byte] =
    if (v.length <= MaxBoundBytes) v else java.util.Arrays.copyOf(v, prefixLength(v, utf8))

  private def prefixLength(v: Array[Byte], utf8: Boolean): Int = {
    var len = math.min(v.length, MaxBoundBytes)
    // do not cut a UTF-8 character: back up over continuation bytes
    if (utf8 && len < v.length) while (len > 0 && (v(len) & 0xc0) == 0x80) len -= 1
    len
  }

  /** An upper bound of `v` of at most MaxBoundBytes bytes: `v` itself if
    * short enough, else its prefix with the last byte (character, when `utf8`)
    * that can be incremented incremented and what follows dropped; null if
    * there is none. */
  private[format] def truncateMax(v: Array[Byte], utf8: Boolean): Array[Byte] = {
    if (v.length <= MaxBoundBytes) return v
    val len = prefixLength(v, utf8)
    if (!utf8) {
      var k = len - 1
      while (k >= 0 && v(k) == -1) k -= 1
      if (k < 0) null
      else {
        val out = java.util.Arrays.copyOf(v, k + 1)
        out(k) = (out(k) + 1).toByte
        out
      }
    } else {
      val s = new String(v, 0, len, StandardCharsets.UTF_8)
      val cps = s.codePoints().toArray
      var k = cps.length - 1
      while (k >= 0) {
        var c = cps(k) + 1
        if (c >= 0xd800 && c <= 0xdfff) c = 0xe000
        if (c <= 0x10ffff) {
          val prefix = new String(cps, 0, k) + new String(Character.toChars(c))
          val bytes = prefix.getBytes(StandardCharsets.UTF_8)
          if (bytes.length <= MaxBoundBytes) return bytes
        }
        k -= 1
      }
      null
    }
  }

}
