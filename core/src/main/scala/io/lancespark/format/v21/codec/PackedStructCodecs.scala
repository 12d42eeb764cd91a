package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import scala.jdk.CollectionConverters._

import io.lancespark.format.arrow.Block
import io.lancespark.format.file.RawBytes
import io.lancespark.format.arrow.Block.{FixedBlock, PackedBlock, VarBlock}
import io.lancespark.proto.encodings21.{PackedStruct, VariablePackedStruct}

/** A struct of fixed-width fields stored row by row (opt-in with the field
  * metadata `lance-encoding:packed`): each row is the fields' values back to
  * back, `bits_per_value` bits each (whole bytes); the rows are a flat
  * block of the summed width. The struct is one column; its fields have none. */
final case class PackedStructCodec(packed: PackedStruct) extends Codec {
  private val bits: Vector[Long] = packed.getBitsPerValueList.asScala.map(_.longValue).toVector
  private val rows: Codec = Codec.of(packed.getValues)

  def describe: String = s"packed-struct(${bits.mkString(", ")} bits; ${rows.describe})"

  private def split(block: Block, n: Int, ctx: CodecContext): Block = {
    if (bits.exists(b => b <= 0 || b % 8 != 0)) ctx.unsupported(describe, "page (fields of whole bytes only)")
    val widths = bits.map(b => (b / 8).toInt)
    val rowBytes = widths.sum
    block match {
      case FixedBlock(_, w, data) if w == rowBytes =>
        val src = Codec.bytes(data)
        var at = 0
        val children = widths.map { fw =>
          val out = new Array[Byte](n * fw)
          var i = 0
          while (i < n) { System.arraycopy(src, i * rowBytes + at, out, i * fw, fw); i += 1 }
          at += fw
          FixedBlock(n, fw, Codec.wrap(out)): Block
        }
        PackedBlock(n, children)
      case other => ctx.fail(s"packed rows decode to ${other.getClass.getSimpleName}, not rows of $rowBytes bytes")
    }
  }

  override def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block =
    split(rows.miniBlock(buffers, n, ctx), n, ctx)

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block = split(rows.block(buffer, n, ctx), n, ctx)

  override def fixedBits: Option[Long] = rows.fixedBits

  override def fixedPerValue(data: ByteBuffer, n: Int, ctx: CodecContext): Block =
    split(rows.fixedPerValue(data, n, ctx), n, ctx)
}

/** A struct stored row by row with each field compressed on its own (2.2,
  * full-zip): a row is its fields in order, a fixed-width field as its
  * `bits_per_value` bits (whole bytes), a variable-width one as a
  * `bits_per_length`-bit length and that many bytes; each field's bytes are
  * then decoded by the field's own codec. */
final case class VariablePackedStructCodec(packed: VariablePackedStruct) extends Codec {
  import VariablePackedStructCodec.Field

  private val fields: Vector[Field] = packed.getFieldsList.asScala.toVector.map { f =>
    f.getLayoutCase match {
      case VariablePackedStruct.FieldEncoding.LayoutCase.BITS_PER_VALUE => Field(Codec.of(f.getValue), Some(f.getBitsPerValue), None)
      case VariablePackedStruct.FieldEncoding.LayoutCase.BITS_PER_LENGTH => Field(Codec.of(f.getValue), None, Some(f.getBitsPerLength))
      case _ => Field(Codec.of(f.getValue), None, None)
    }
  }

  def describe: String = s"packed-struct(${fields.map(_.codec.describe).mkString(", ")})"

  override def variablePerValue(stored: VarBlock, ctx: CodecContext): Block = {
    val n = stored.length.toInt
    val src = Codec.array(stored.data)
    val base = Codec.arrayStart(stored.data)
    // per field: (start, end) of each row's value
    val starts = Array.fill(fields.size)(new Array[Int](n))
    val ends = Array.fill(fields.size)(new Array[Int](n))
    var i = 0
    while (i < n) {
      var at = base + stored.offsets(i).toInt
      val rowEnd = base + stored.offsets(i + 1).toInt
      // a null row is stored empty: its fields read as zeros and empty values
      val empty = rowEnd == at
      var k = 0
      while (k < fields.size && empty) { starts(k)(i) = -1; ends(k)(i) = -1; k += 1 }
      while (k < fields.size) {
        val f = fields(k)
        val (s, e) = (f.fixedBits, f.lengthBits) match {
          case (Some(b), _) if b % 8 == 0 => (at, at + (b / 8).toInt)
          case (_, Some(lb)) if Set(8L, 16L, 32L, 64L).contains(lb) =>
            val w = (lb / 8).toInt
            if (at + w > rowEnd) ctx.fail(s"packed field $k of row $i runs past the row")
            val len = RawBytes.uintLE(src, at, w)
            (at + w, (at + w + len).toInt)
          case _ => ctx.unsupported(describe, "page (a field of neither whole-byte width nor length)")
        }
        if (e > rowEnd || e < s) ctx.fail(s"packed field $k of row $i runs past the row")
        starts(k)(i) = s; ends(k)(i) = e
        at = e
        k += 1
      }
      i += 1
    }
    val children = fields.indices.map { k =>
      val f = fields(k)
      f.fixedBits match {
        case Some(b) =>
          val w = (b / 8).toInt
          val out = new Array[Byte](n * w)
          var r = 0
          while (r < n) { if (starts(k)(r) >= 0) System.arraycopy(src, starts(k)(r), out, r * w, w); r += 1 }
          f.codec.fixedPerValue(Codec.wrap(out), n, ctx)
        case None =>
          val offs = new Array[Long](n + 1)
          var r = 0
          while (r < n) { offs(r + 1) = offs(r) + (ends(k)(r) - starts(k)(r)); r += 1 }
          val out = new Array[Byte](offs(n).toInt)
          r = 0
          while (r < n) {
            if (starts(k)(r) >= 0) System.arraycopy(src, starts(k)(r), out, offs(r).toInt, ends(k)(r) - starts(k)(r))
            r += 1
          }
          f.codec.variablePerValue(VarBlock(n, offs, Codec.wrap(out), None), ctx)
      }
    }.toVector
    PackedBlock(n, children)
  }
}

object VariablePackedStructCodec {
  /** A field: its codec, and its width or the width of its length. */
  private final case class Field(codec: Codec, fixedBits: Option[Long], lengthBits: Option[Long])
}
