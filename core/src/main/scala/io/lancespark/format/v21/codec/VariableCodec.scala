package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.VarBlock
import io.lancespark.format.file.ByteBuilder
import io.lancespark.proto.encodings21.{CompressiveEncoding, Variable}

/** Variable-width values: offsets and the values' bytes.
  *  - mini-block chunk: one buffer, `n + 1` offsets (32 or 64 bits) that
  *    point into the buffer itself, then the bytes;
  *  - block (dictionaries): a header of the offset width and where the bytes
  *    start (two u32 for 32-bit offsets, two u64 for 64-bit ones), `n + 1`
  *    offsets into the bytes, then the bytes;
  *  - full-zip: each value stored whole (its size precedes it in the page). */
final case class VariableCodec(variable: Variable) extends Codec {

  /** 32 or 64: the width of the offsets (flat offsets only). */
  val offsetBits: Option[Int] =
    if (variable.getOffsets.getCompressionCase == CompressiveEncoding.CompressionCase.FLAT &&
        !variable.getOffsets.getFlat.hasData && Set(32L, 64L).contains(variable.getOffsets.getFlat.getBitsPerValue))
      Some(variable.getOffsets.getFlat.getBitsPerValue.toInt)
    else None

  def describe: String = s"variable(${offsetBits.fold(Codec.of(variable.getOffsets).describe)(b => s"$b-bit offsets")})" +
    (if (variable.hasValues) s"+${GeneralCodec.schemeName(variable.getValues)}" else "")

  private def width(ctx: CodecContext): Int = {
    if (variable.hasValues) ctx.unsupported(describe, "page (compressed value bytes)")
    offsetBits.getOrElse(ctx.unsupported(describe, "page (offsets other than plain 32/64-bit)")) / 8
  }

  /** `n + 1` offsets at `at` in `buf`. */
  private def readOffsets(buf: ByteBuffer, at: Int, n: Int, w: Int, ctx: CodecContext): Array[Long] = {
    ctx.check(at, (n + 1L) * w, buf.remaining(), s"the offsets of $n values")
    val out = new Array[Long](n + 1)
    var i = 0
    if (w == 4) while (i <= n) { out(i) = buf.getInt(at + 4 * i) & 0xffffffffL; i += 1 }
    else while (i <= n) { out(i) = buf.getLong(at + 8 * i); i += 1 }
    out
  }

  private def checkOffsets(offs: Array[Long], size: Long, ctx: CodecContext): Unit = {
    var i = 1
    if (offs(0) < 0) ctx.fail(s"negative offset ${offs(0)}")
    while (i < offs.length) {
      if (offs(i) < offs(i - 1)) ctx.fail(s"offsets decrease at value ${i - 1}")
      i += 1
    }
    if (offs(offs.length - 1) > size) ctx.fail(s"offsets reach byte ${offs(offs.length - 1)} of a $size-byte buffer")
  }

  override def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block = {
    if (buffers.size != 1) ctx.fail(s"variable-width values in ${buffers.size} chunk buffers, expected 1")
    val buf = buffers.head
    val offs = readOffsets(buf, 0, n, width(ctx), ctx)
    checkOffsets(offs, buf.remaining(), ctx)
    VarBlock(n, offs, buf, None)
  }

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block = {
    width(ctx)
    ctx.check(0, 8, buffer.remaining(), "a variable-width block header")
    // Older writers stored a one-byte width and the value count; today's store a
    // 4- or 8-byte width, so bytes 1..3 are zero.
    val oldScheme = buffer.get(1) != 0 || buffer.get(2) != 0 || buffer.get(3) != 0
    val (w, start, offsetsAt) =
      if (oldScheme) (buffer.get(0) & 0xff) match {
        case 32 => (4, buffer.getInt(5) & 0xffffffffL, 9)
        case 64 => ctx.check(0, 17, buffer.remaining(), "a variable-width block header"); (8, buffer.getLong(9), 17)
        case b  => ctx.fail(s"a variable-width block with $b-bit offsets")
      } else buffer.getInt(0) match {
        case 32 => (4, buffer.getInt(4) & 0xffffffffL, 8)
        case 64 => ctx.check(0, 16, buffer.remaining(), "a variable-width block header"); (8, buffer.getLong(8), 16)
        case b  => ctx.fail(s"a variable-width block with $b-bit offsets")
      }
    ctx.check(start, 0, buffer.remaining(), "the bytes of a variable-width block")
    if (start < offsetsAt + (n + 1L) * w) ctx.fail(s"a variable-width block whose bytes start at $start, inside its offsets")
    val offs = readOffsets(buffer, offsetsAt, n, w, ctx)
    val data = Codec.slice(buffer, start.toInt, buffer.remaining() - start.toInt)
    checkOffsets(offs, data.remaining(), ctx)
    VarBlock(n, offs, data, None)
  }

  override def variablePerValue(stored: VarBlock, ctx: CodecContext): Block = {
    if (variable.hasValues) ctx.unsupported(describe, "full-zip page")
    stored
  }
}

object VariableCodec {
  /** Variable-width values with `offsetBits`-bit offsets. */
  def encoding(offsetBits: Int): CompressiveEncoding =
    CompressiveEncoding.newBuilder().setVariable(Variable.newBuilder().setOffsets(FlatCodec.encoding(offsetBits))).build()

  /** Items of variable width as one block buffer (a dictionary): item k is
    * bytes [start(items(k)), end(items(k))) of `data`. The block holds its
    * offset width in bits and where its bytes start (`ob`-byte words), the
    * items' `items.length + 1` offsets into the bytes, then the bytes. */
  def block(data: Array[Byte], start: Int => Int, end: Int => Int, items: Array[Int], ob: Int): Array[Byte] = {
    val head = 2 * ob + ob * (items.length + 1)
    val out = new ByteBuilder(head + data.length / 4)
    putOffset(out, ob, 8L * ob); putOffset(out, ob, head)
    var at = 0L
    putOffset(out, ob, 0)
    items.foreach { v => at += end(v) - start(v); putOffset(out, ob, at) }
    items.foreach(v => out.put(data, start(v), end(v) - start(v)))
    out.toArray
  }

  /** Appends an offset of `ob` bytes (4 or 8). */
  def putOffset(out: ByteBuilder, ob: Int, x: Long): Unit = if (ob == 8) out.putLong(x) else out.putInt(x.toInt)
}

/** Variable-width values: n + 1 offsets into the chunk (`ob` bytes each),
  * the bytes, padding to a multiple of `ob` (readers take the chunk as
  * offset words). `encoding` says what the bytes are (plain, or FSST codes);
  * value i ends at `end(i)` in `data`. */
private[v21] final class VariableValues(data: Array[Byte], end: Int => Long, ob: Int, val encoding: CompressiveEncoding,
                                   val values: Int) extends MiniBlockValues {
  def buffersPerChunk: Int = 1
  private def start(v: Int): Long = if (v == 0) 0L else end(v - 1)
  def preferred(v: Int): Int = {
    // the most values (a power of two) whose offsets and bytes stay within 4 KiB
    var k = 1
    while (k < (1 << 14) && start(math.min(v + 2 * k, values)) - start(v) + ob.toLong * (2 * k + 1) <= 4096 &&
      v + k < values) k *= 2
    k
  }
  def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
    val s = start(v)
    val bytes = (start(v + n) - s).toInt
    val head = ob * (n + 1)
    val out = new ByteBuilder(head + bytes + 8)
    var i = 0
    while (i <= n) { VariableCodec.putOffset(out, ob, head + start(v + i) - s); i += 1 }
    out.put(data, s.toInt, bytes)
    out.putZeros((ob - (head + bytes) % ob) % ob)
    Seq(out.toArray)
  }
}
