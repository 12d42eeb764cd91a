package io.lancespark.format.v21.codec

import java.nio.ByteBuffer

import io.airlift.compress.MalformedInputException
import io.airlift.compress.lz4.Lz4Decompressor
import io.airlift.compress.zstd.ZstdDecompressor

import io.lancespark.format.arrow.Block
import io.lancespark.format.arrow.Block.VarBlock
import io.lancespark.proto.encodings21.{BufferCompression, CompressiveEncoding, CompressionScheme, General}

/** General-purpose compression over the output of another codec:
  *  - mini-block chunk: the chunk's first value buffer is compressed;
  *  - block: the whole buffer;
  *  - full-zip: each value on its own.
  * zstd buffers carry their uncompressed size as a u64 before the zstd frame
  * (older writers wrote the bare frame); lz4 buffers are an LZ4 block after
  * its uncompressed size as a u32. Decoded in pure Java (aircompressor). */
final case class GeneralCodec(general: General) extends Codec {
  private val inner: Codec = Codec.of(general.getValues)

  def describe: String = s"${GeneralCodec.schemeName(general.getCompression)}(${inner.describe})"

  override def miniBlock(buffers: IndexedSeq[ByteBuffer], n: Int, ctx: CodecContext): Block = {
    if (buffers.isEmpty) ctx.fail("a compressed chunk without buffers")
    val out: Int => Array[Byte] = ctx.chunkBuffers.fold(GeneralCodec.fresh)(_.lend)
    inner.miniBlock(buffers.updated(0, GeneralCodec.decompress(general.getCompression, buffers.head, ctx, out)), n, ctx)
  }

  override def block(buffer: ByteBuffer, n: Int, ctx: CodecContext): Block =
    inner.block(GeneralCodec.decompress(general.getCompression, buffer, ctx), n, ctx)

  override def variablePerValue(stored: VarBlock, ctx: CodecContext): Block = {
    val n = stored.length.toInt
    val parts = new Array[Array[Byte]](n)
    val offsets = new Array[Long](n + 1)
    var i = 0
    while (i < n) {
      val s = stored.offsets(i).toInt
      val e = stored.offsets(i + 1).toInt
      val out =
        if (e == s) Array.emptyByteArray
        else Codec.bytes(GeneralCodec.decompress(general.getCompression, Codec.slice(stored.data, s, e - s), ctx))
      parts(i) = out
      offsets(i + 1) = offsets(i) + out.length
      i += 1
    }
    if (offsets(n) > Int.MaxValue - 16) ctx.fail(s"${offsets(n)} bytes of decompressed values in one batch")
    val data = new Array[Byte](offsets(n).toInt)
    i = 0
    while (i < n) { System.arraycopy(parts(i), 0, data, offsets(i).toInt, parts(i).length); i += 1 }
    inner.variablePerValue(VarBlock(n, offsets, Codec.wrap(data), stored.validity), ctx)
  }
}

object GeneralCodec {
  /** `values` compressed by `scheme`. */
  def encoding(scheme: CompressionScheme, values: CompressiveEncoding): CompressiveEncoding =
    CompressiveEncoding.newBuilder().setGeneral(General.newBuilder()
      .setCompression(BufferCompression.newBuilder().setScheme(scheme)).setValues(values)).build()

  /** `len` bytes of `src` compressed for a general encoding: lz4 as its
    * uncompressed size (u32) and an LZ4 block; zstd as its size (u64) and a frame. */
  def compress(scheme: CompressionScheme, src: Array[Byte], from: Int, len: Int): Array[Byte] = scheme match {
    case CompressionScheme.COMPRESSION_ALGORITHM_LZ4 =>
      val c = new io.airlift.compress.lz4.Lz4Compressor()
      val out = new Array[Byte](4 + c.maxCompressedLength(len))
      val n = c.compress(src, from, len, out, 4, out.length - 4)
      out(0) = len.toByte; out(1) = (len >>> 8).toByte; out(2) = (len >>> 16).toByte; out(3) = (len >>> 24).toByte
      java.util.Arrays.copyOf(out, 4 + n)
    case CompressionScheme.COMPRESSION_ALGORITHM_ZSTD =>
      val c = new io.airlift.compress.zstd.ZstdCompressor()
      val out = new Array[Byte](8 + c.maxCompressedLength(len))
      val n = c.compress(src, from, len, out, 8, out.length - 8)
      var b = 0
      while (b < 8) { out(b) = (len.toLong >>> (8 * b)).toByte; b += 1 }
      java.util.Arrays.copyOf(out, 8 + n)
    case other => throw new IllegalArgumentException(s"no compressor for $other")
  }

  private val ZstdMagic = 0xFD2FB528

  def schemeName(c: BufferCompression): String = c.getScheme match {
    case CompressionScheme.COMPRESSION_ALGORITHM_ZSTD => "zstd"
    case CompressionScheme.COMPRESSION_ALGORITHM_LZ4  => "lz4"
    case other => s"compression ${other.getNumber}"
  }

  /** The uncompressed bytes of `buf` (read in place from its array when it
    * has one: a mini-block chunk's buffer is a view of the chunk's bytes). */
  def decompress(c: BufferCompression, buf: ByteBuffer, ctx: CodecContext): ByteBuffer = decompress(c, buf, ctx, fresh)

  /** A new array of `size` bytes (decompressed data that outlives a batch). */
  val fresh: Int => Array[Byte] = size => new Array[Byte](size)

  /** As [[decompress]], into an array of the uncompressed size from `out`. */
  def decompress(c: BufferCompression, buf: ByteBuffer, ctx: CodecContext, out: Int => Array[Byte]): ByteBuffer = {
    val len = buf.remaining()
    if (len == 0) return Codec.wrap(Array.emptyByteArray)
    val in = Codec.array(buf)
    val start = Codec.arrayStart(buf)
    try c.getScheme match {
      case CompressionScheme.COMPRESSION_ALGORITHM_ZSTD => Codec.wrap(zstd(in, start, len, ctx, out))
      case CompressionScheme.COMPRESSION_ALGORITHM_LZ4  => Codec.wrap(lz4(in, start, len, ctx, out))
      case _ => ctx.fail(s"unsupported general compression scheme ${c.getScheme} (this reader knows zstd and lz4)")
    } catch {
      case e: MalformedInputException => ctx.fail(s"corrupt ${schemeName(c)} data: ${e.getMessage}")
      case e: IndexOutOfBoundsException => ctx.fail(s"corrupt ${schemeName(c)} data: $e")
    }
  }

  private def le32(a: Array[Byte], at: Int): Int =
    (a(at) & 0xff) | ((a(at + 1) & 0xff) << 8) | ((a(at + 2) & 0xff) << 16) | ((a(at + 3) & 0xff) << 24)

  private def le64(a: Array[Byte], at: Int): Long =
    (le32(a, at) & 0xffffffffL) | (le32(a, at + 4).toLong << 32)

  /** One zstd decompressor per thread, reused: building one allocates its
    * entropy tables, which cost as much as decoding a mini-block chunk (a
    * third of a zstd column's decode time when made per chunk). */
  private val Decompressors: ThreadLocal[ZstdDecompressor] =
    ThreadLocal.withInitial[ZstdDecompressor](() => new ZstdDecompressor())

  /** `len` bytes of `in` from `start`: a zstd frame, bare or after its size. */
  private def zstd(in: Array[Byte], start: Int, len: Int, ctx: CodecContext, alloc: Int => Array[Byte]): Array[Byte] = {
    // a bare frame starts with the magic and has the frame header's reserved bit clear
    val bare = len < 8 || (le32(in, start) == ZstdMagic && (in(start + 4) & 0x10) == 0)
    val (from, size) =
      if (bare) {
        val s = ZstdDecompressor.getDecompressedSize(in, start, len)
        if (s < 0) ctx.fail("a zstd frame without its content size")
        (start, s)
      } else (start + 8, le64(in, start))
    if (size < 0 || size > Int.MaxValue - 16 || (size > (256L << 20) && size > 4096L * len))
      ctx.fail(s"zstd data of $len bytes claims to hold $size bytes")
    val out = alloc(size.toInt)
    val got = try Decompressors.get().decompress(in, from, start + len - from, out, 0, out.length) catch {
      case e: Throwable =>
        Decompressors.remove()  // (a fresh one after a failure: no state carried into the next frame)
        throw e
    }
    if (got != size) ctx.fail(s"zstd data decompressed to $got bytes, expected $size")
    out
  }

  /** `len` bytes of `in` from `start`: an LZ4 block after its size as a u32. */
  private def lz4(in: Array[Byte], start: Int, len: Int, ctx: CodecContext, alloc: Int => Array[Byte]): Array[Byte] = {
    if (len < 4) ctx.fail("lz4 data shorter than its size")
    val size = le32(in, start)
    if (size < 0 || (size > (256L << 20) && size > 256L * len))
      ctx.fail(s"lz4 data of $len bytes claims to hold $size bytes")
    val out = alloc(size)
    val got = if (size == 0) 0 else new Lz4Decompressor().decompress(in, start + 4, len - 4, out, 0, out.length)
    if (got != size) ctx.fail(s"lz4 data decompressed to $got bytes, expected $size")
    out
  }
}

/** Another storage's chunks with their first buffer compressed by `scheme`
  * (wide values that neither bit-pack nor repeat, e.g. decimal prices),
  * `perChunk` values a chunk. */
private[v21] final class CompressedValues(inner: MiniBlockValues, perChunk: Int, scheme: CompressionScheme)
    extends MiniBlockValues {
  val encoding: CompressiveEncoding = GeneralCodec.encoding(scheme, inner.encoding)
  def buffersPerChunk: Int = inner.buffersPerChunk
  def preferred(v: Int): Int = perChunk
  def chunk(v: Int, n: Int): Seq[Array[Byte]] = {
    val buffers = inner.chunk(v, n)
    buffers.updated(0, GeneralCodec.compress(scheme, buffers.head, 0, buffers.head.length))
  }
}
