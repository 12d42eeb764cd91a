package io.lancespark.format.file

import java.nio.ByteOrder

/** Unchecked 8-byte loads from byte arrays for the codecs' inner loops.
  *
  * (`MethodHandles.byteArrayViewVarHandle` would be the safe API, but Scala
  * calls a VarHandle through a generic signature, which the JVM adapts on
  * every call: an order of magnitude slower than these loads.) Callers check
  * that `at + 8` is within the array; nothing here does. Codecs also store
  * through [[U]] (RleCodec's short runs), with the same duty to check. */
private[format] object RawBytes {
  val U: sun.misc.Unsafe = {
    val f = classOf[sun.misc.Unsafe].getDeclaredField("theUnsafe")
    f.setAccessible(true)
    f.get(null).asInstanceOf[sun.misc.Unsafe]
  }
  val ByteBase: Long = U.arrayBaseOffset(classOf[Array[Byte]]).toLong
  val IntBase: Long = U.arrayBaseOffset(classOf[Array[Int]]).toLong
  val NativeLittleEndian: Boolean = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN

  /** Bytes [at, at + 8) of `a` as a little-endian long. */
  def longLE(a: Array[Byte], at: Int): Long = {
    val x = U.getLong(a, ByteBase + at)
    if (NativeLittleEndian) x else java.lang.Long.reverseBytes(x)
  }

  /** Bytes [at, at + len) of `a` (len 0 to 8) as a little-endian unsigned
    * integer; unlike the loads above, bounds are checked. */
  def uintLE(a: Array[Byte], at: Int, len: Int): Long = {
    if (len < 0 || len > 8 || at < 0 || at > a.length - len)
      throw new IndexOutOfBoundsException(s"$len bytes at $at of an array of ${a.length}")
    if (at <= a.length - 8) longLE(a, at) & (if (len == 8) -1L else (1L << (8 * len)) - 1) // a word, masked
    else len match {
      case 8 => longLE(a, at)
      case 4 => intLE(a, at) & 0xffffffffL
      case _ =>
        var v = 0L
        var k = len - 1
        while (k >= 0) { v = (v << 8) | (a(at + k) & 0xffL); k -= 1 }
        v
    }
  }

  /** Bytes [at, at + 4) of `a` as a little-endian int. */
  def intLE(a: Array[Byte], at: Int): Int = {
    val x = U.getInt(a, ByteBase + at)
    if (NativeLittleEndian) x else java.lang.Integer.reverseBytes(x)
  }

  /** Bytes [at, at + 8) of `a` as a big-endian long. */
  def longBE(a: Array[Byte], at: Int): Long = {
    val x = U.getLong(a, ByteBase + at)
    if (NativeLittleEndian) java.lang.Long.reverseBytes(x) else x
  }
}
