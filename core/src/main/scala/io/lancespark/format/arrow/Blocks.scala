package io.lancespark.format.arrow

import java.nio.{ByteBuffer, ByteOrder}

/** A read-only LSB-first bitmap starting `bitOffset` bits into `buf`. */
final class Bits(val buf: ByteBuffer, val bitOffset: Long) {
  def get(i: Long): Boolean = {
    val b = bitOffset + i
    ((buf.get((b >>> 3).toInt) >>> (b & 7).toInt) & 1) != 0
  }
}

object Bits {
  /** No bits (a placeholder where a bitmap is not consulted). */
  val Empty: Bits = new Bits(ByteBuffer.allocate(0), 0)

  /** A bitmap of `n` bits from a predicate over the index. */
  def tabulate(n: Int)(valid: Int => Boolean): Bits = {
    val arr = new Array[Byte]((n + 7) >>> 3)
    var i = 0
    while (i < n) {
      if (valid(i)) arr(i >>> 3) = (arr(i >>> 3) | (1 << (i & 7))).toByte
      i += 1
    }
    new Bits(ByteBuffer.wrap(arr).order(ByteOrder.LITTLE_ENDIAN), 0)
  }
}

/** A range of one page (or of one part of a page's encoding tree) decoded
  * into plain buffers; item 0 of a block is the first item decoded. */
sealed trait Block { def length: Long }

object Block {
  /** Booleans (or a validity bitmap). */
  final case class BitBlock(length: Long, bits: Bits) extends Block
  /** Fixed-width values, value i at bytes [i*width, (i+1)*width) of `data`. */
  final case class FixedBlock(length: Long, width: Int, data: ByteBuffer) extends Block
  /** Variable-width values: value i is bytes [offsets(i), offsets(i+1)) of data. */
  final case class VarBlock(length: Long, offsets: Array[Long], data: ByteBuffer, validity: Option[Bits]) extends Block
  /** Dictionary-encoded variable-width values: row i is item `which(i)` of
    * `items`, or null when it is -1 (then `validity` is defined). */
  private[format] final case class DictBlock(length: Long, which: Array[Int], items: VarValues, validity: Option[Bits])
      extends Block
  /** Dictionary-encoded fixed-width values: row i is item `which(i)` of
    * `items` (every index in range; nulls come from the levels). Left as ids
    * so that the vector loader looks items up straight into the vector. */
  private[format] final case class FixedDictBlock(length: Long, which: Array[Int], items: FixedValues) extends Block
  /** Values with a validity bitmap (bit set = valid). */
  final case class NullableBlock(validity: Bits, values: Block) extends Block {
    def length: Long = values.length
  }
  final case class AllNullBlock(length: Long) extends Block
  /** Fixed-size lists: `items` holds length * dimension items. */
  final case class FslBlock(length: Long, dimension: Int, items: Block) extends Block
  /** Lists of one page: list i is items [firstItem + offsets(i), firstItem +
    * offsets(i+1)) of the items the page references (counted from the page's
    * item base in the item column); offsets(0) is 0. */
  final case class ListBlock(length: Long, offsets: Array[Long], validity: Option[Bits], firstItem: Long) extends Block
  /** A struct page holds nothing but its length (2.0 structs have no validity). */
  final case class StructBlock(length: Long) extends Block
  /** A struct stored row by row ("packed"): its fields' values, one block each. */
  final case class PackedBlock(length: Long, children: Vector[Block]) extends Block
}

/** A part [start, start + count) of a block. */
final case class Slice(block: Block, start: Long, count: Long)
