package io.lancespark.format.stats

/** An estimate of the number of distinct values of a column (HyperLogLog,
  * Flajolet et al. 2007, with linear counting for small counts): 2^`precision`
  * one-byte registers, each the longest run of leading zeros (plus one) seen
  * among the hashes that select it. Sketches of the same precision merge by
  * register-wise maximum (the sketch of the union), so a scan's estimate over
  * many files costs no data read. Standard error about 1.04 / sqrt(2^precision):
  * 2.3% at the precision written (11). Mutable while a file is written;
  * read-only once decoded. */
final class DistinctSketch private (val precision: Int, private val registers: Array[Byte]) {

  private val m = 1 << precision

  /** Adds a value by its 64-bit hash ([[DistinctSketch.hashLong]] or [[DistinctSketch.hashBytes]]). */
  def add(hash: Long): Unit = {
    val idx = (hash >>> (64 - precision)).toInt
    // leading zeros of the remaining bits, the guard bit bounding the run
    val rank = (java.lang.Long.numberOfLeadingZeros((hash << precision) | (1L << (precision - 1))) + 1).toByte
    if (rank > registers(idx)) registers(idx) = rank
  }

  /** The sketch of the union of this sketch's values and `other`'s. */
  def merge(other: DistinctSketch): DistinctSketch = {
    require(other.precision == precision, s"merging sketches of precision $precision and ${other.precision}")
    val out = new Array[Byte](m)
    var i = 0
    while (i < m) { out(i) = math.max(registers(i), other.registers(i)).toByte; i += 1 }
    new DistinctSketch(precision, out)
  }

  /** The estimated number of distinct values added: Ertl's improved raw
    * estimator ("New cardinality estimation algorithms for HyperLogLog
    * sketches", 2017), unbiased over the whole range without empirical
    * correction tables, from the histogram of register values. */
  def estimate: Long = {
    val q = 64 - precision
    val counts = new Array[Int](q + 2)
    var i = 0
    while (i < m) { counts(registers(i)) += 1; i += 1 }
    var z = m * DistinctSketch.tau(1.0 - counts(q + 1).toDouble / m)
    var k = q
    while (k >= 1) { z = 0.5 * (z + counts(k)); k -= 1 }
    z += m * DistinctSketch.sigma(counts(0).toDouble / m)
    math.round(m.toDouble * m / (2 * math.log(2)) / z)
  }

  /** One byte of precision, then the registers. */
  def toBytes: Array[Byte] = {
    val out = new Array[Byte](1 + m)
    out(0) = precision.toByte
    System.arraycopy(registers, 0, out, 1, m)
    out
  }
}

object DistinctSketch {
  /** The precision written: 2,048 registers (2 KiB per column of a file). */
  val Precision = 11

  def empty(precision: Int = Precision): DistinctSketch = {
    require(precision >= 4 && precision <= 16, s"sketch precision $precision not in [4, 16]")
    new DistinctSketch(precision, new Array[Byte](1 << precision))
  }

  /** A sketch as [[DistinctSketch.toBytes]] wrote it; Left(reason) when the bytes are not one. */
  def fromBytes(bytes: Array[Byte]): Either[String, DistinctSketch] = {
    if (bytes.isEmpty) return Left("an empty sketch")
    val p = bytes(0).toInt
    if (p < 4 || p > 16) Left(s"sketch precision $p not in [4, 16]")
    else if (bytes.length != 1 + (1 << p)) Left(s"a sketch of precision $p in ${bytes.length} bytes, not ${1 + (1 << p)}")
    else if (bytes.iterator.drop(1).exists(r => r < 0 || r > 64 - p + 1)) Left("a sketch register out of range")
    else Right(new DistinctSketch(p, java.util.Arrays.copyOfRange(bytes, 1, bytes.length)))
  }

  /** The hash of a fixed-width value given as a 64-bit integer (integers,
    * dates, times, timestamps sign-extended; floats as their normalized
    * bits): the finalizer of MurmurHash3 (x64), a bijection that spreads every
    * input bit over the output. Part of the file format: changing it makes
    * sketches of old and new files disagree. */
  def hashLong(x: Long): Long = {
    var h = x
    h ^= h >>> 33
    h *= 0xff51afd7ed558ccdL
    h ^= h >>> 33
    h *= 0xc4ceb9fe1a85ec53L
    h ^= h >>> 33
    h
  }

  /** The hash of bytes [s, e) of `v` (strings as UTF-8, binaries, decimals'
    * little-endian two's complement, fixed-size binaries): 8 bytes at a time
    * little-endian, each word mixed into the state, then the length, through
    * [[hashLong]]. Part of the file format. */
  def hashBytes(v: Array[Byte], s: Int, e: Int): Long = {
    var h = 0x9e3779b97f4a7c15L
    var i = s
    require(s >= 0 && s <= e && e <= v.length, s"bytes [$s, $e) of an array of ${v.length}")
    while (i + 8 <= e) {
      h = java.lang.Long.rotateLeft(h ^ hashLong(io.lancespark.format.file.RawBytes.longLE(v, i)), 27) * 5 + 0x52dce729
      i += 8
    }
    if (i < e) h = java.lang.Long.rotateLeft(h ^ hashLong(io.lancespark.format.file.RawBytes.uintLE(v, i, e - i)), 27) * 5 + 0x52dce729
    hashLong(h ^ (e - s).toLong)
  }

  /** sum over k >= 1 of x^(2^k) 2^(k-1), plus x (Ertl's sigma). */
  private def sigma(x0: Double): Double = {
    if (x0 == 1.0) return Double.PositiveInfinity
    var x = x0
    var y = 1.0
    var z = x0
    var prev = -1.0
    while (z != prev) { x *= x; prev = z; z += x * y; y += y }
    z
  }

  /** Ertl's tau: (1 - x - sum over k >= 1 of (1 - x^(2^-k))^2 2^-k) / 3. */
  private def tau(x0: Double): Double = {
    if (x0 == 0.0 || x0 == 1.0) return 0.0
    var x = x0
    var y = 1.0
    var z = 1 - x0
    var prev = -1.0
    while (z != prev) { x = math.sqrt(x); prev = z; y *= 0.5; z -= (1 - x) * (1 - x) * y }
    z / 3
  }

  /** The bits a float hashes as: -0.0 as 0.0 and every NaN as one NaN, as
    * Spark counts them as one value. */
  def floatBits(d: Double): Long =
    if (d == 0.0) 0L else if (d.isNaN) java.lang.Double.doubleToLongBits(Double.NaN) else java.lang.Double.doubleToLongBits(d)
}
