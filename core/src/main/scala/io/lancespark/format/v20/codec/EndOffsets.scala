package io.lancespark.format.v20.codec

import java.nio.ByteBuffer

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.{Bits, Block}
import io.lancespark.format.arrow.Block.FixedBlock
import io.lancespark.format.input.{ByteRange, PlannedRead}

/** End offsets of items [from, until) (binary indices, list offsets): item i
  * ends where the stored value i says, the first start being an implicit 0;
  * with a null adjustment `adj` > 0, a stored end at or above `adj` marks a
  * null item (its end is the value minus `adj`). Offsets come out relative to
  * `first`, the start of item `from`. */
private[v20] final class EndOffsets(val offsets: Array[Long], val validity: Option[Bits], val first: Long,
                                    val total: Long)

private[v20] object EndOffsets {

  /** Decodes the ends of items [from, until) from `codec` (with the end of
    * item from-1 when from > 0). */
  def decode(codec: ArrayCodec, n: Long, from: Long, until: Long, adj: Long, what: String,
             ctx: PageContext): EndOffsets = {
    val withPrev = from > 0
    val raw = integers(codec.decode(n, math.max(0, from - 1), until, top = false, ctx), what, ctx)
    val skip = if (withPrev) 1 else 0
    val c = raw.length - skip
    val first = if (withPrev) normalize(raw(0), adj) else 0L
    val offsets = new Array[Long](c + 1)
    var anyNull = false
    var i = 0
    while (i < c) {
      val v = raw(i + skip)
      if (adj > 0 && java.lang.Long.compareUnsigned(v, adj) >= 0) anyNull = true
      offsets(i + 1) = normalize(v, adj) - first
      if (offsets(i + 1) < offsets(i)) ctx.fail(s"$what decrease at item $i")
      i += 1
    }
    val validity =
      if (anyNull) Some(Bits.tabulate(c)(j => java.lang.Long.compareUnsigned(raw(j + skip), adj) < 0)) else None
    new EndOffsets(offsets, validity, first, offsets(c))
  }

  def normalize(v: Long, adj: Long): Long =
    if (adj > 0 && java.lang.Long.compareUnsigned(v, adj) >= 0) v - adj else v

  /** Unsigned integers of a fixed-width block (1, 2, 4 or 8 bytes). */
  def integers(b: Block, what: String, ctx: PageContext): Array[Long] = b match {
    case FixedBlock(n, width, data) =>
      val count = ctx.checkCount(n)
      val out = new Array[Long](count)
      var i = 0
      width match {
        case 1 => while (i < count) { out(i) = data.get(i) & 0xffL; i += 1 }
        case 2 => while (i < count) { out(i) = data.getShort(2 * i) & 0xffffL; i += 1 }
        case 4 => while (i < count) { out(i) = data.getInt(4 * i) & 0xffffffffL; i += 1 }
        case 8 => while (i < count) { out(i) = data.getLong(8 * i); i += 1 }
        case w => ctx.fail(s"$what are $w-byte values, not integers")
      }
      out
    case other => ctx.fail(s"$what decode to ${other.getClass.getSimpleName}, not integers")
  }

  /** The codec under any "no nulls" wrappers (as writers wrap offsets). */
  @annotation.tailrec
  def withoutNoNulls(codec: ArrayCodec): ArrayCodec = codec match {
    case n: NullableCodec if n.noNullValues.isDefined => withoutNoNulls(n.noNullValues.get)
    case other => other
  }

  /** Plans the ends of items [from, until) (with the end of item from-1), and
    * with `follow`, what the range [first, last) they bracket leads to, once
    * they are read. */
  def plan(codec: ArrayCodec, n: Long, from: Long, until: Long, adj: Long, ctx: PlanContext,
           out: ArrayBuffer[PlannedRead])(follow: Option[(Long, Long) => Seq[ByteRange]]): Unit = {
    val start = math.max(0, from - 1)
    withoutNoNulls(codec) match {
      case flat: FlatCodec =>
        (flat.range(start, until, ctx.page), flat.byteWidth) match {
          case (Some(r), Some(width)) if follow.isDefined && until > from && Set(1, 2, 4, 8).contains(width) =>
            val next: ByteBuffer => Seq[ByteRange] = buf => {
              def end(i: Long): Long = normalize(width match {
                case 1 => buf.get(i.toInt) & 0xffL
                case 2 => buf.getShort((2 * i).toInt) & 0xffffL
                case 4 => buf.getInt((4 * i).toInt) & 0xffffffffL
                case _ => buf.getLong((8 * i).toInt)
              }, adj)
              val first = if (from > 0) end(0) else 0L
              val last = end(until - start - 1)
              if (last <= first) Nil else follow.get(first, last)
            }
            out += PlannedRead(r, next)
          case (Some(r), _) => out += PlannedRead(r)
          case (None, _) => flat.plan(n, start, until, ctx, out)
        }
      case _ => codec.plan(n, start, until, ctx, out)
    }
  }
}
