package io.lancespark.table.index

import java.nio.{ByteBuffer, ByteOrder}

import scala.collection.mutable

import org.roaringbitmap.RoaringBitmap

import io.lancespark.schema.LanceFormatException

/** Row addresses (fragment id << 32 | offset) grouped by fragment: the
  * offsets of each fragment. */
object RowAddrMap {
  type Rows = Map[Int, RoaringBitmap]

  /** Adds `addr` to `into`. */
  def add(into: mutable.Map[Int, RoaringBitmap], addr: Long): Unit =
    into.getOrElseUpdate((addr >>> 32).toInt, new RoaringBitmap()).add((addr & 0xffffffffL).toInt)

  /** Parses the serialized row address set of the reference's bitmap and
    * label-list indices: u32 entries, then per entry u32 fragment id, u32
    * size and `size` bytes of a portable roaring bitmap of offsets (size 0:
    * every row of the fragment, `rowsOf` gives how many). Adds to `into`. */
  def parseInto(bytes: Array[Byte], rowsOf: Int => Long, into: mutable.Map[Int, RoaringBitmap], where: String): Unit = {
    val b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)
    try {
      val n = b.getInt()
      var k = 0
      while (k < n) {
        val frag = b.getInt()
        val size = b.getInt()
        val set = into.getOrElseUpdate(frag, new RoaringBitmap())
        if (size == 0) set.add(0L, rowsOf(frag))
        else {
          val slice = b.slice().order(ByteOrder.LITTLE_ENDIAN)
          slice.limit(size)
          val r = new RoaringBitmap()
          r.deserialize(slice)
          set.or(r)
          b.position(b.position() + size)
        }
        k += 1
      }
    } catch {
      case e: java.nio.BufferUnderflowException => throw LanceFormatException(where, "truncated row address set", e)
      case e: java.io.IOException => throw LanceFormatException(where, s"corrupt row address set: ${e.getMessage}", e)
      case e: IllegalArgumentException => throw LanceFormatException(where, s"corrupt row address set: ${e.getMessage}", e)
    }
  }

  def freeze(m: mutable.Map[Int, RoaringBitmap]): Rows = m.toMap
}
