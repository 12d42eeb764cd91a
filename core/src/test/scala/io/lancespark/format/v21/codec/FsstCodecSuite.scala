package io.lancespark.format.v21.codec

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.charset.StandardCharsets.UTF_8

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.format.arrow.Block.VarBlock
import io.lancespark.format.file.ByteBuilder
import io.lancespark.proto.encodings21.{CompressiveEncoding, Flat, Fsst, Variable}
import io.lancespark.schema.LanceFormatException

/** FSST decoding of whole blocks: values expanded in one loop, their offsets
  * taken from the positions of their first codes. Expected values are the
  * inputs themselves (a round trip through our encoder), and hand-made code
  * streams whose expansion follows from the table by hand. */
final class FsstCodecSuite extends AnyFunSuite {
  private val ctx = new CodecContext("test.lance", "column s")

  private def variable: CompressiveEncoding =
    CompressiveEncoding.newBuilder().setVariable(Variable.newBuilder()
      .setOffsets(CompressiveEncoding.newBuilder().setFlat(Flat.newBuilder().setBitsPerValue(32)))).build()

  private def codec(table: Array[Byte]): FsstCodec =
    FsstCodec(Fsst.newBuilder().setValues(variable).setSymbolTable(com.google.protobuf.ByteString.copyFrom(table)).build())

  /** A block of the given compressed values, stored after `lead` unrelated bytes. */
  private def block(values: Seq[Array[Byte]], lead: Int = 0): VarBlock = {
    val offsets = values.scanLeft(lead.toLong)(_ + _.length).toArray
    val data = new Array[Byte](lead + values.map(_.length).sum)
    values.zip(offsets).foreach { case (v, at) => System.arraycopy(v, 0, data, at.toInt, v.length) }
    VarBlock(values.size, offsets, ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN), None)
  }

  private def strings(b: VarBlock): Seq[String] = (0 until b.length.toInt).map { i =>
    val bytes = new Array[Byte]((b.offsets(i + 1) - b.offsets(i)).toInt)
    b.data.duplicate().position(b.offsets(i).toInt).get(bytes)
    new String(bytes, UTF_8)
  }

  private def decode(c: FsstCodec, b: VarBlock): VarBlock = c.variablePerValue(b, ctx).asInstanceOf[VarBlock]

  /** A table by hand: symbols "ab" (code 0), "c" (code 1), "hello wo" (code 2). */
  private val handTable: Array[Byte] = {
    val syms = Seq("ab", "c", "hello wo").map(_.getBytes(UTF_8))
    val buf = ByteBuffer.allocate(8 + 9 * syms.size).order(ByteOrder.LITTLE_ENDIAN)
    buf.putLong((0x46535354L << 32) | (1L << 24) | syms.size)
    syms.foreach { s => val w = new Array[Byte](8); System.arraycopy(s, 0, w, 0, s.length); buf.put(w) }
    syms.foreach(s => buf.put(s.length.toByte))
    buf.array()
  }

  private def codes(xs: Int*): Array[Byte] = xs.map(_.toByte).toArray

  test("hand-made codes: symbols, escapes, empty values, a value after an escape") {
    val values = Seq(codes(0, 1), codes(), codes(2, 255, 'r', 255, 'l', 255, 'd'), codes(255, 'x'), codes(), codes(1, 1, 0))
    val got = strings(decode(codec(handTable), block(values, lead = 3)))
    assert(got == Seq("abc", "", "hello world", "x", "", "ccab"))
  }

  test("a value ending with an escape is an error naming the value, also before another value") {
    val last = intercept[LanceFormatException](decode(codec(handTable), block(Seq(codes(0), codes(1, 255)))))
    assert(last.getMessage.contains("test.lance") && last.getMessage.contains("value 1 ends with an escape"))
    val middle = intercept[LanceFormatException](decode(codec(handTable), block(Seq(codes(0, 255), codes('q', 1)))))
    assert(middle.getMessage.contains("value 0 ends with an escape"), middle.getMessage)
  }

  test("a code past the table is an error") {
    val e = intercept[LanceFormatException](decode(codec(handTable), block(Seq(codes(0), codes(7)))))
    assert(e.getMessage.contains("FSST code 7 but the table has 3 symbols"))
    // inside a run of codes decoded four at a time
    val inRun = intercept[LanceFormatException](decode(codec(handTable), block(Seq(codes(0, 1, 0, 1, 0, 9, 1, 1)))))
    assert(inRun.getMessage.contains("FSST code 9 but the table has 3 symbols"))
  }

  test("round trip through our encoder: escapes for bytes outside the table, empties, long values") {
    val rnd = new scala.util.Random(7)
    val words = Seq("lance", "spark", "columnar", "vector", "parquet", "", "z\u00e9\u00e8")
    val values: Seq[Array[Byte]] = (0 until 5000).map { i =>
      if (i % 97 == 0) Array.fill(rnd.nextInt(40))(rnd.nextInt(256).toByte) // raw bytes: escapes
      else if (i % 13 == 0) Array.emptyByteArray
      else Seq.fill(1 + rnd.nextInt(6))(words(rnd.nextInt(words.size))).mkString(" ").getBytes(UTF_8)
    }
    val raw = values.flatten.toArray
    val ends = values.scanLeft(0)(_ + _.length).toArray
    val enc = FsstEncoder.train(raw, i => ends(i), i => ends(i + 1), values.size)
    val compressed = values.indices.map { i =>
      val out = new ByteBuilder()
      enc.compress(raw, ends(i), ends(i + 1), out)
      java.util.Arrays.copyOf(out.arr, out.size)
    }
    assert(compressed.map(_.length).sum < raw.length, "the trained table compresses these words")
    val got = decode(codec(enc.serialized), block(compressed, lead = 5))
    assert(got.length == values.size)
    values.indices.foreach { i =>
      val bytes = new Array[Byte]((got.offsets(i + 1) - got.offsets(i)).toInt)
      got.data.duplicate().position(got.offsets(i).toInt).get(bytes)
      assert(java.util.Arrays.equals(bytes, values(i)), s"value $i")
    }
  }

  test("the encoder's codes are the greedy longest match over its own table, also where many symbols share a prefix") {
    // values of one vocabulary behind a common stem ("value-12345"): dozens of
    // learnt symbols begin "val"; and words, raw bytes, short values
    val rnd = new scala.util.Random(11)
    val values: Seq[Array[Byte]] = (0 until 20000).map { i =>
      if (i % 53 == 0) Array.fill(rnd.nextInt(12))(rnd.nextInt(256).toByte)
      else if (i % 31 == 0) Seq.fill(1 + rnd.nextInt(3))(Seq("lance", "valley", "vector", "va")(rnd.nextInt(4))).mkString(" ").getBytes(UTF_8)
      else s"value-${rnd.nextInt() % 100000}".getBytes(UTF_8)
    }
    val raw = values.flatten.toArray
    val ends = values.scanLeft(0)(_ + _.length).toArray
    val enc = FsstEncoder.train(raw, i => ends(i), i => ends(i + 1), values.size)
    // the table as the decoder reads it: symbols by code
    val table = ByteBuffer.wrap(enc.serialized).order(ByteOrder.LITTLE_ENDIAN)
    val n = (table.getLong(0) & 0xff).toInt
    val symbols: Seq[Array[Byte]] = (0 until n).map { c =>
      val len = enc.serialized(8 + 8 * n + c).toInt
      (0 until len).map(k => ((table.getLong(8 + 8 * c) >>> (8 * k)) & 0xff).toByte).toArray
    }
    assert(symbols.count(s => s.length >= 3 && new String(s, UTF_8).startsWith("val")) >= 10, "a crowded prefix")
    def greedy(v: Array[Byte]): Array[Byte] = {
      val out = Array.newBuilder[Byte]
      var p = 0
      while (p < v.length) {
        val best = symbols.indices.filter(c => symbols(c).length <= v.length - p &&
          java.util.Arrays.equals(symbols(c), 0, symbols(c).length, v, p, p + symbols(c).length))
        if (best.isEmpty) { out += 255.toByte; out += v(p); p += 1 }
        else { val c = best.maxBy(c => symbols(c).length); out += c.toByte; p += symbols(c).length }
      }
      out.result()
    }
    values.indices.foreach { i =>
      val out = new ByteBuilder()
      enc.compress(raw, ends(i), ends(i + 1), out)
      val got = java.util.Arrays.copyOf(out.arr, out.size)
      assert(java.util.Arrays.equals(got, greedy(values(i))), s"value $i: ${new String(values(i), UTF_8)}")
    }
  }
}
