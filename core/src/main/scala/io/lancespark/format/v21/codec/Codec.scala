package io.lancespark.format.v21.codec

import java.nio.{ByteBuffer, ByteOrder}

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.VarBlock
import io.lancespark.proto.encodings21.CompressiveEncoding

/** Where a codec reports problems: the file, and the column and page. */
final class CodecContext(val path: String, whereOf: => String, sharedScratch: FastLanes.Scratch = null,
                         val chunkBuffers: Option[ChunkBuffers] = None) {
  /** Where in the file, for messages (formatted only when one is made). */
  lazy val where: String = whereOf

  // the decoding thread's bit-unpacking scratch, looked up once a context (a
  // thread-local lookup a chunk showed in profiles of Spark's task threads),
  // or given by the caller (a batch's decodes share one: PageIO)
  private var unpackScratch: FastLanes.Scratch = sharedScratch

  /** Scratch for [[FastLanes]]' unpacking; a context is used by one thread. */
  def scratch: FastLanes.Scratch = {
    if (unpackScratch == null) unpackScratch = FastLanes.localScratch()
    unpackScratch
  }

  def fail(problem: String): Nothing = throw LanceFormatException(path, s"$where: $problem")

  def unsupported(codec: String, context: String): Nothing =
    fail(s"unsupported encoding: $codec in a $context (this reader cannot decode it)")

  /** Checks that [offset, offset + len) lies within a buffer of `size` bytes. */
  def check(offset: Long, len: Long, size: Long, what: => String): Unit =
    if (offset < 0 || len < 0 || offset + len > size)
      fail(s"$what needs bytes [$offset, ${offset + len}) of $size")

  def count(n: Long, what: => String): Int = {
    if (n < 0 || n > Int.MaxValue - 16) fail(s"$what: $n values, more than this reader handles at once")
    n.toInt
  }
}

/** One node of a 2.1/2.2 compressive encoding tree (a CompressiveEncoding),
  * in the file of its codec. The same encoding message is decoded differently
  * in each of the contexts a page layout puts it in:
  *  - [[miniBlock]]: the value buffers of one mini-block chunk (`n` values);
  *  - [[block]]: one whole buffer (levels, dictionaries, constant pages);
  *  - [[perValue]]: the values of a full-zip page, one at a time: fixed-width
  *    values ([[fixedBits]] bits each) or variable-width ones.
  * A codec that is not defined in a context refuses it, naming itself. */
abstract class Codec {
  /** How `inspect`-style descriptions and errors name this codec. */
  def describe: String

  def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block =
    ctx.unsupported(describe, "mini-block chunk")

  def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block =
    ctx.unsupported(describe, "block buffer")

  /** A mini-block chunk of dictionary indices (unsigned integers), as ints;
    * an index beyond `Int.MaxValue` becomes -1. */
  def miniBlockIndices(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Array[Int] =
    Codec.indices(miniBlock(buffers, n, ctx), ctx, "dictionary indices")

  /** Values `positions` (ascending, below `n`) of a mini-block chunk, in
    * that order, where this codec reaches single values without decoding the
    * chunk (a read of scattered rows wants a few of each chunk's values);
    * None where it does not. */
  def miniBlockAt(buffers: IndexedSeq[ByteBuffer], n: Int, positions: Array[Int], ctx: CodecContext): Option[Block] = None

  /** [[miniBlockAt]] for dictionary indices, as ints. */
  def miniBlockIndicesAt(buffers: IndexedSeq[ByteBuffer], n: Int, positions: Array[Int],
                         ctx: CodecContext): Option[Array[Int]] = None

  /** A block buffer of unsigned integers (`what`: repetition or definition
    * levels), as ints; a value beyond `Int.MaxValue` becomes -1. */
  def blockInts(buffer: ByteBuffer, n: Int, ctx: CodecContext, what: String): Array[Int] =
    Codec.indices(block(buffer, n, ctx), ctx, what)

  /** Bits per value of a fixed-width full-zip value, if this codec has them. */
  def fixedBits: Option[Long] = None

  /** `n` fixed-width values of a full-zip page, back to back in `data`. */
  def fixedPerValue(data: ByteBuffer, n: Int, ctx: CodecContext): Block =
    ctx.unsupported(describe, "full-zip page of fixed-width values")

  /** Variable-width full-zip values as stored (`stored`): their decoded values. */
  def variablePerValue(stored: VarBlock, ctx: CodecContext): Block =
    ctx.unsupported(describe, "full-zip page of variable-width values")
}

object Codec {
  /** Unsigned fixed-width integers (`what`, for errors) as ints (-1 for those beyond `Int.MaxValue`). */
  def indices(block: Block, ctx: CodecContext, what: String): Array[Int] = block match {
    case Block.FixedBlock(n, w, data) =>
      val count = n.toInt
      val out = new Array[Int](count)
      var i = 0
      w match {
        case 1 => while (i < count) { out(i) = data.get(i) & 0xff; i += 1 }
        case 2 => while (i < count) { out(i) = data.getShort(2 * i) & 0xffff; i += 1 }
        case 4 => while (i < count) { val v = data.getInt(4 * i); out(i) = if (v < 0) -1 else v; i += 1 }
        case 8 => while (i < count) {
          val v = data.getLong(8 * i)
          out(i) = if (v < 0 || v > Int.MaxValue) -1 else v.toInt
          i += 1
        }
        case other => ctx.fail(s"$what of $other bytes")
      }
      out
    case other => ctx.fail(s"$what decode to ${other.getClass.getSimpleName}")
  }

  /** The codec of an encoding tree; encodings this reader does not know are
    * refused when they are used, naming the encoding. */
  def of(enc: CompressiveEncoding): Codec = {
    import CompressiveEncoding.CompressionCase._
    enc.getCompressionCase match {
      case FLAT                   => FlatCodec(enc.getFlat)
      case VARIABLE               => VariableCodec(enc.getVariable)
      case CONSTANT               => ConstantCodec(enc.getConstant)
      case OUT_OF_LINE_BITPACKING => OutOfLineBitpackingCodec(enc.getOutOfLineBitpacking)
      case INLINE_BITPACKING      => InlineBitpackingCodec(enc.getInlineBitpacking)
      case FSST                   => FsstCodec(enc.getFsst)
      case RLE                    => RleCodec(enc.getRle)
      case BYTE_STREAM_SPLIT      => ByteStreamSplitCodec(enc.getByteStreamSplit)
      case GENERAL                => GeneralCodec(enc.getGeneral)
      case FIXED_SIZE_LIST        => FixedSizeListCodec(enc.getFixedSizeList)
      case PACKED_STRUCT          => PackedStructCodec(enc.getPackedStruct)
      case VARIABLE_PACKED_STRUCT => VariablePackedStructCodec(enc.getVariablePackedStruct)
      case DICTIONARY             => UnknownCodec("dictionary (as a compressive encoding)")
      case COMPRESSION_NOT_SET    => UnknownCodec("an empty encoding description")
      case other                  => UnknownCodec(other.name.toLowerCase)
    }
  }

  /** A view of `len` bytes of `buf` from `offset`, little-endian, positioned at 0. */
  def slice(buf: ByteBuffer, offset: Int, len: Int): ByteBuffer = {
    val d = buf.duplicate()
    d.position(offset).limit(offset + len)
    d.slice().order(ByteOrder.LITTLE_ENDIAN)
  }

  def wrap(bytes: Array[Byte]): ByteBuffer = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)

  /** The array holding a buffer's bytes (its own array when it has one, else
    * a copy), which start at [[arrayStart]] in it. (Two calls rather than a
    * tuple, whose Int would be boxed on every chunk.) */
  def array(buf: ByteBuffer): Array[Byte] = if (buf.hasArray) buf.array() else bytes(buf)

  /** Where a buffer's bytes start in [[array]]'s array. */
  def arrayStart(buf: ByteBuffer): Int = if (buf.hasArray) buf.arrayOffset() + buf.position() else 0

  /** The bytes of a buffer as an array (a copy unless it wraps a whole array). */
  def bytes(buf: ByteBuffer): Array[Byte] = {
    val out = new Array[Byte](buf.remaining())
    buf.duplicate().get(out)
    out
  }
}

/** An encoding this reader does not know (or a field of the protobuf it was
  * written with that this reader's definition lacks). */
final case class UnknownCodec(name: String) extends Codec {
  def describe: String = name
}

/** The write side of a codec in a mini-block page: how values [v, v + n) of
  * the page are stored as one chunk's buffers (in the file of each codec). */
private[v21] trait MiniBlockValues {
  /** The encoding description of the stored values. */
  def encoding: CompressiveEncoding
  def buffersPerChunk: Int
  /** The largest power-of-two count of values from `v` worth a chunk. */
  def preferred(v: Int): Int
  /** The value buffers of values [v, v + n). */
  def chunk(v: Int, n: Int): Seq[Array[Byte]]
}

private[v21] object MiniBlockValues {
  /** The largest power of two at most `x` (1 for `x` <= 1). */
  def pow2AtMost(x: Int): Int = if (x <= 1) 1 else Integer.highestOneBit(x)
}
