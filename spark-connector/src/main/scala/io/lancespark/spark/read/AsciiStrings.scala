package io.lancespark.spark.read

import java.lang.invoke.{MethodHandles, VarHandle}
import java.lang.reflect.Modifier

import scala.util.Try

import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String

/** Strings whose character count is known when they are made.
  *
  * Spark's `UTF8String` counts its characters byte by byte the first time an
  * expression asks (`length`, `substring`, padding, ...) and keeps the count in a
  * private field. When a batch of string values holds no byte at or above 0x80
  * (checked eight bytes at a time, once per batch and only if a string is read),
  * every value's character count is its byte count, and the column hands Spark
  * strings with that count already in place.
  *
  * The field is Spark's, not an API: it is found once by name and type; when a
  * Spark version does not have it, strings are made as before (Spark counts). */
private[read] object AsciiStrings {

  private val numChars: Option[VarHandle] = Try {
    val f = classOf[UTF8String].getDeclaredField("numChars")
    require(f.getType == Integer.TYPE && !Modifier.isStatic(f.getModifiers) && !Modifier.isFinal(f.getModifiers))
    MethodHandles.privateLookupIn(classOf[UTF8String], MethodHandles.lookup())
      .findVarHandle(classOf[UTF8String], "numChars", Integer.TYPE)
  }.toOption

  /** Whether strings can be given their character count (the field was found). */
  val available: Boolean = numChars.isDefined

  private val handle: VarHandle = numChars.orNull

  /** `s`, its character count set to `chars` (which must be its true count). */
  def withChars(s: UTF8String, chars: Int): UTF8String = {
    handle.set(s, chars)
    s
  }

  /** Whether the `length` bytes at `address` are all below 0x80. */
  def isAscii(address: Long, length: Long): Boolean = {
    val HighBits = 0x8080808080808080L
    var at = address
    val end = address + length
    var acc = 0L
    while (at + 32 <= end) {
      acc |= Platform.getLong(null, at) | Platform.getLong(null, at + 8) |
        Platform.getLong(null, at + 16) | Platform.getLong(null, at + 24)
      if ((acc & HighBits) != 0L) return false
      at += 32
    }
    while (at + 8 <= end) { acc |= Platform.getLong(null, at); at += 8 }
    while (at < end) { acc |= Platform.getByte(null, at) & 0xffL; at += 1 }
    (acc & HighBits) == 0L
  }
}
