package io.lancespark.format.v20.codec

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.{AllNullBlock, BitBlock, NullableBlock}
import io.lancespark.format.input.PlannedRead
import io.lancespark.proto.encodings.Nullable

/** Values with a validity bitmap (bit set = valid), or known to have no nulls
  * or only nulls. */
private[v20] final case class NullableCodec(nullable: Nullable) extends ArrayCodec {
  import Nullable.NullabilityCase._

  private val values: Option[ArrayCodec] = nullable.getNullabilityCase match {
    case NO_NULLS   => Some(ArrayCodec.of(nullable.getNoNulls.getValues))
    case SOME_NULLS => Some(ArrayCodec.of(nullable.getSomeNulls.getValues))
    case _          => None
  }
  private val validity: Option[ArrayCodec] =
    if (nullable.hasSomeNulls) Some(ArrayCodec.of(nullable.getSomeNulls.getValidity)) else None

  /** The values' codec when there are no nulls (a "no nulls" wrapper). */
  def noNullValues: Option[ArrayCodec] = if (nullable.hasNoNulls) values else None

  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block =
    nullable.getNullabilityCase match {
      case NO_NULLS  => values.get.decode(n, from, until, top, ctx)
      case ALL_NULLS => AllNullBlock(until - from)
      case SOME_NULLS =>
        val bits = validity.get.decode(n, from, until, top = false, ctx) match {
          case BitBlock(_, b) => b
          case other => ctx.fail(s"nullable validity decodes to ${other.getClass.getSimpleName}, not a bitmap")
        }
        NullableBlock(bits, values.get.decode(n, from, until, top = false, ctx))
      case other => ctx.fail(s"nullable encoding without nullability ($other)")
    }

  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit = {
    validity.foreach(_.plan(n, from, until, ctx, out))
    values.foreach(_.plan(n, from, until, ctx, out))
  }

  override def listItems: Option[Long] = values match {
    case Some(v) => v.listItems
    case None    => Some(0L)
  }
}
