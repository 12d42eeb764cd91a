package io.lancespark.format.file

import java.nio.ByteOrder

/** Unchecked 8-byte loads from byte arrays for the codecs' inner loops.
  *
  * (`MethodHandles.byteArrayViewVarHandle` would be the safe API, but Scala
  * calls a VarHandle through a generic signature, which the JVM adapts on
  * every call: an order of magnitude slower than these loads.) Callers check
  * that `at + 8` is within the array; nothing here does. */
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
