package io.lancespark.format.file

import org.apache.arrow.memory.ArrowBuf

import io.lancespark.schema.LanceFormatException

/** A growable byte array (little-endian appends). */
private[format] final class ByteBuilder(initial: Int = 1024) {
  var arr: Array[Byte] = new Array[Byte](math.max(initial, 16))
  var size: Int = 0

  def clear(): Unit = size = 0

  def ensure(extra: Long): Unit = {
    val need = size + extra
    if (need > Int.MaxValue - 64) throw new LanceFormatException(s"a page buffer of $need bytes is too large")
    if (need > arr.length) {
      val n = math.min(math.max(need, arr.length.toLong * 2), Int.MaxValue - 64L).toInt
      arr = java.util.Arrays.copyOf(arr, n)
    }
  }

  /** Bulk copy of `len` bytes of `src` from `index`. */
  def append(src: ArrowBuf, index: Long, len: Long): Unit = if (len > 0) {
    ensure(len)
    src.getBytes(index, arr, size, len.toInt)
    size += len.toInt
  }

  def put(src: Array[Byte], from: Int, len: Int): Unit = if (len > 0) {
    ensure(len)
    System.arraycopy(src, from, arr, size, len)
    size += len
  }

  def putZeros(len: Int): Unit = if (len > 0) {
    ensure(len)
    java.util.Arrays.fill(arr, size, size + len, 0.toByte)
    size += len
  }

  def putByte(v: Int): Unit = { ensure(1); arr(size) = v.toByte; size += 1 }

  def putShort(v: Int): Unit = { ensure(2); arr(size) = v.toByte; arr(size + 1) = (v >>> 8).toByte; size += 2 }

  def putInt(v: Int): Unit = {
    ensure(4)
    arr(size) = v.toByte; arr(size + 1) = (v >>> 8).toByte; arr(size + 2) = (v >>> 16).toByte; arr(size + 3) = (v >>> 24).toByte
    size += 4
  }

  /** Zero bytes up to a multiple of `n`. */
  def padTo(n: Int): Unit = putZeros((n - size % n) % n)

  def toArray: Array[Byte] = java.util.Arrays.copyOf(arr, size)

  def putLong(v: Long): Unit = {
    ensure(8)
    var i = 0
    while (i < 8) { arr(size + i) = (v >>> (8 * i)).toByte; i += 1 }
    size += 8
  }

  def getLong(i: Int): Long = RawBytes.uintLE(arr, 8 * i, 8)
}

/** A growable LSB-first bitmap. */
private[format] final class BitBuilder {
  var arr: Array[Byte] = new Array[Byte](128)
  var bits: Long = 0

  def clear(): Unit = { java.util.Arrays.fill(arr, 0, byteSize, 0.toByte); bits = 0 }
  def byteSize: Int = ((bits + 7) >>> 3).toInt
  def get(i: Long): Boolean = ((arr((i >>> 3).toInt) >>> (i & 7).toInt) & 1) != 0

  private def ensure(extraBits: Long): Unit = {
    val need = (bits + extraBits + 7) >>> 3
    if (need > Int.MaxValue - 64) throw new LanceFormatException(s"a bitmap of ${bits + extraBits} bits is too large")
    if (need > arr.length) arr = java.util.Arrays.copyOf(arr, math.min(math.max(need, arr.length.toLong * 2), Int.MaxValue - 64L).toInt)
  }

  /** Appends `count` bits of `src` from bit `from`; returns how many are set.
    * Byte-aligned runs are bulk copies. */
  def append(src: ArrowBuf, from: Long, count: Long): Long = {
    ensure(count)
    var done = 0L
    if ((bits & 7) == 0 && (from & 7) == 0 && count >= 8) {
      val whole = count >>> 3
      src.getBytes(from >>> 3, arr, (bits >>> 3).toInt, whole.toInt)
      done = whole << 3
    }
    while (done < count) {
      val b = from + done
      if (((src.getByte(b >>> 3) >>> (b & 7).toInt) & 1) != 0) setBit(bits + done)
      done += 1
    }
    val start = bits
    bits += count
    countOnes(start, bits)
  }

  def appendOnes(count: Long): Unit = {
    ensure(count)
    var i = 0L
    while (i < count) { setBit(bits + i); i += 1 }
    bits += count
  }

  def appendBit(v: Boolean): Unit = { ensure(1); if (v) setBit(bits); bits += 1 }

  /** `count` bits of value `v`. */
  def appendBits(v: Boolean, count: Long): Unit = if (v) appendOnes(count) else { ensure(count); bits += count }

  private def setBit(i: Long): Unit = {
    val k = (i >>> 3).toInt
    arr(k) = (arr(k) | (1 << (i & 7).toInt)).toByte
  }

  /** Set bits in [from, until). */
  def countOnes(from: Long, until: Long): Long = {
    var n = 0L
    var i = from
    while (i < until && (i & 7) != 0) { if (get(i)) n += 1; i += 1 }
    while (i + 8 <= until) { n += Integer.bitCount(arr((i >>> 3).toInt) & 0xff); i += 8 }
    while (i < until) { if (get(i)) n += 1; i += 1 }
    n
  }
}

/** Where finished pages go: the file writer writes each buffer (64-byte
  * aligned) and records the page in the column's metadata. */

/** A growable array of ints (repetition and definition levels). */
private[format] final class IntBuilder(initial: Int = 1024) {
  var arr: Array[Int] = new Array[Int](math.max(initial, 16))
  var size: Int = 0

  def clear(): Unit = size = 0

  def add(v: Int): Unit = {
    if (size == arr.length) arr = java.util.Arrays.copyOf(arr, math.max(16, arr.length * 2))
    arr(size) = v
    size += 1
  }

  def fill(v: Int, count: Int): Unit = {
    if (size + count > arr.length) arr = java.util.Arrays.copyOf(arr, math.max(size + count, arr.length * 2))
    java.util.Arrays.fill(arr, size, size + count, v)
    size += count
  }

  def apply(i: Int): Int = arr(i)

  /** Keeps elements [from, size) moved to the front. */
  def dropFront(from: Int): Unit = {
    System.arraycopy(arr, from, arr, 0, size - from)
    size -= from
  }
}
