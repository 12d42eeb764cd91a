package io.lancespark.format.v21.codec

import java.nio.{ByteBuffer, ByteOrder}

import io.airlift.compress.zstd.ZstdCompressor
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.proto.encodings21.{BufferCompression, CompressionScheme}
import io.lancespark.schema.LanceFormatException

/** The zstd decompressor a thread reuses (GeneralCodec): a corrupt frame is a
  * clear error, and the frames the same thread decodes after it are exact. */
class ZstdReuseSuite extends AnyFunSuite {
  private val scheme = BufferCompression.newBuilder().setScheme(CompressionScheme.COMPRESSION_ALGORITHM_ZSTD).build()
  private def ctx = new CodecContext("test.lance", "column 0 chunk 0")

  /** The writers' layout: the uncompressed size as a u64, then the zstd frame. */
  private def framed(raw: Array[Byte]): Array[Byte] = {
    val c = new ZstdCompressor()
    val out = new Array[Byte](c.maxCompressedLength(raw.length))
    val n = c.compress(raw, 0, raw.length, out, 0, out.length)
    val b = ByteBuffer.allocate(8 + n).order(ByteOrder.LITTLE_ENDIAN)
    b.putLong(raw.length.toLong).put(out, 0, n)
    b.array()
  }

  private def decode(bytes: Array[Byte]): Array[Byte] = {
    val out = GeneralCodec.decompress(scheme, ByteBuffer.wrap(bytes), ctx)
    val a = new Array[Byte](out.remaining()); out.get(a); a
  }

  test("a corrupt frame fails naming the file; good frames decoded after it on the same thread are exact") {
    val rnd = new scala.util.Random(11)
    val raws = Seq.fill(4)(Array.tabulate[Byte](50000)(i => ((i / 7) % 13 + rnd.nextInt(3)).toByte))
    val good = raws.map(framed)
    assert(decode(good(0)).sameElements(raws(0)))
    val bad = good(1).clone()
    (20 until bad.length by 5).foreach(i => bad(i) = (bad(i) ^ 0x5a).toByte)
    val e = intercept[LanceFormatException](decode(bad))
    assert(e.getMessage.contains("test.lance") && e.getMessage.contains("column 0 chunk 0"), e.getMessage)
    raws.zip(good).foreach { case (raw, g) => assert(decode(g).sameElements(raw)) }
  }
}
