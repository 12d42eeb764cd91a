package io.lancespark.format.v21

import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.types.pojo.{ArrowType, Schema}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceSchema
import io.lancespark.format.WriterTestKit
import io.lancespark.format.input.LocalFileSource
import io.lancespark.format.v20.ArrowCompare.{firstMismatch, values}
import io.lancespark.format.v21.codec.{ByteStreamSplitCodec, GeneralCodec}
import io.lancespark.format.v21.write.{V21FileWriter, WriteCodecs}
import io.lancespark.proto.encodings21.CompressionScheme

/** The codec the writer picks for data of a known shape is the one the
  * reference picks, and the page is smaller than plain; pylance reads it. */
class V21CodecChoiceSuite extends AnyFunSuite with BeforeAndAfterAll with WriterTestKit {

  protected val allocator = new RootAllocator()
  private val tmp: Path = Files.createTempDirectory("v21codecs")
  private val plain = WriteCodecs(bitpacking = false, rle = false, dictionary = false, fsst = false, general = false,
    constant = false)

  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0, s"leaked ${allocator.getAllocatedMemory} bytes")
    finally {
      allocator.close()
      if (!sys.env.contains("LANCE_KEEP_TEST_FILES"))
        Files.walk(tmp).sorted(java.util.Comparator.reverseOrder[Path]()).forEach(p => Files.deleteIfExists(p))
    }
  }

  /** Writes one column at 2.`minor` with `codecs`; returns the file and its pages' layouts. */
  private def write(name: String, t: ArrowType, vals: IndexedSeq[Any], minor: Int,
                    codecs: WriteCodecs, pageBytes: Long = V21FileWriter.DefaultMaxPageBytes * 8): (Path, Vector[String]) = {
    val schema = LanceSchema.fromArrow(new Schema(Seq(f("c", t)).asJava))
    val p = tmp.resolve(s"$name.lance")
    withVectors(vectors(schema, Seq(vals))) { vs =>
      val w = new V21FileWriter(Files.newOutputStream(p), p.toString, schema, minor, vals.size.max(1),
        pageBytes, codecs)
      try { w.write(vs); w.finish() } finally w.close()
      val r = V21FileReader.openStandalone(new LocalFileSource(p))
      try {
        withVectors(r.read(r.fileSchema.fields, 0, r.numRows, allocator)) { got =>
          firstMismatch(name, values(got.head), values(vs.head)).foreach(m => fail(m))
        }
        (p, r.pageLayouts(r.fileSchema.fields.head).flatMap(_._2))
      } finally r.close()
    }
  }

  /** The chosen layout contains `expected`, the file is smaller than plain,
    * and pylance reads it. */
  private def chooses(name: String, t: ArrowType, vals: IndexedSeq[Any], expected: String, minor: Int = 2,
                      pageBytes: Long = V21FileWriter.DefaultMaxPageBytes * 8): Unit = {
    val (p, layouts) = write(s"$name-2.$minor", t, vals, minor, WriteCodecs(), pageBytes)
    assert(layouts.nonEmpty && layouts.forall(_.contains(expected)), s"$name: $layouts")
    val (q, plainLayouts) = write(s"$name-plain-2.$minor", t, vals, minor, plain, pageBytes)
    assert(Files.size(p) < Files.size(q), s"$name: ${Files.size(p)} bytes, plain ${Files.size(q)} ($plainLayouts)")
    withVectors(vectors(LanceSchema.fromArrow(new Schema(Seq(f("c", t)).asJava)), Seq(vals))) { vs =>
      writeIpc(tmp.resolve(s"$name-2.$minor.arrow"), vs)
    }
    pylanceReads(tmp, s"$name-2.$minor")
  }

  private val n = 50000
  private val utf8 = ArrowType.Utf8.INSTANCE

  test("a constant: inline in a constant page at 2.2, runs at 2.1") {
    chooses("constant", int(64), IndexedSeq.fill(n)(7L), "constant (inline)")
    chooses("constant", int(64), IndexedSeq.fill(n)(7L), "rle", minor = 1)
  }

  test("a constant with nulls keeps its levels") {
    chooses("constant_nulls", int(32), IndexedSeq.tabulate(n)(i => if (i % 3 == 0) null else 5), "constant (inline)")
  }

  test("sorted keys and small ints: bit-packed") {
    chooses("sorted", int(64), IndexedSeq.tabulate(n)(i => 1000000L + i), "bitpack(inline, 64-bit)")
    chooses("three_bits", int(32), IndexedSeq.tabulate(n)(i => (i * 7919) % 8), "bitpack(inline, 32-bit)")
  }

  test("runs: run-length encoded") {
    chooses("runs", int(32), IndexedSeq.tabulate(n)(i => i / 100), "rle")
  }

  test("short runs (1 to 40 values, as a fact table's keys repeat per ticket) of random 32- and 64-bit values, with nulls: run-length encoded, read back exactly") {
    val rnd = new scala.util.Random(17)
    // the values of a run are one draw: a block of one value per run
    def blocks[A](draw: () => A): IndexedSeq[Any] = {
      val out = IndexedSeq.newBuilder[Any]
      var i = 0
      var run = 0
      while (i < n) {
        val v = draw()
        val len = math.min(1 + run % 40, n - i)
        (0 until len).foreach(k => out += (if ((i + k) % 17 == 5) null else v))
        i += len; run += 1
      }
      out.result()
    }
    chooses("short_runs_32", int(32), blocks(() => rnd.nextInt()), "rle")
    chooses("short_runs_64", int(64), blocks(() => rnd.nextLong()), "rle")
    chooses("short_runs_32_v21", int(32), blocks(() => rnd.nextInt()), "rle", minor = 1)
  }

  test("four distinct strings: a dictionary") {
    val words = Vector("alpha", "beta", "gamma", "delta")
    chooses("four_words", utf8, IndexedSeq.tabulate(n)(i => words(i * 31 % 4)), "dictionary")
  }

  test("words of a vocabulary larger than a sample (20,000 words, each some 6 times a page): a zstd-compressed dictionary, under half of FSST") {
    val rnd = new scala.util.Random(3)
    val vocabulary = IndexedSeq.fill(20000)(Iterator.fill(4 + rnd.nextInt(9))(('a' + rnd.nextInt(26)).toChar).mkString)
    val words = IndexedSeq.fill(2 * n)(vocabulary(rnd.nextInt(vocabulary.size)))
    chooses("vocabulary", utf8, words, "dictionary")
    val (p, layouts) = write("vocabulary_layout", utf8, words, 2, WriteCodecs())
    assert(layouts.forall(_.contains("zstd(variable")), layouts)
    val (q, fsstLayouts) = write("vocabulary_fsst", utf8, words, 2, WriteCodecs(dictionary = false))
    assert(fsstLayouts.forall(_.contains("fsst")), fsstLayouts)
    assert(Files.size(p) < 0.5 * Files.size(q), s"${Files.size(p)} vs FSST ${Files.size(q)}")
  }

  test("unique values (hex digests) are not tried as a dictionary") {
    val hex = IndexedSeq.tabulate(2 * n)(i => f"${i.toLong * 0x9E3779B97F4A7C15L}%016x")
    val (_, layouts) = write("digests", utf8, hex, 2, WriteCodecs())
    assert(layouts.forall(l => !l.contains("dictionary")), layouts)
  }

  test("URLs: FSST") {
    val hosts = Vector("example.com", "shop.example.org", "cdn.images.net")
    chooses("urls", utf8, IndexedSeq.tabulate(n)(i =>
      s"https://${hosts(i % 3)}/products/category-${i % 97}/item-${i * 7919 % 1000003}?ref=campaign-${i % 13}"),
      "fsst(variable(32-bit offsets))")
  }

  test("FSST over many pages: a column's table serves its next pages, and is learnt again when the values change") {
    val hosts = Vector("example.com", "shop.example.org", "cdn.images.net")
    // 60 pages of URLs, then pages of hex digests (which the URLs' table compresses badly), then URLs again
    val urls = IndexedSeq.tabulate(3 * n)(i => s"https://${hosts(i % 3)}/item-${i * 7919 % 1000003}?ref=c${i % 13}")
    val hex = IndexedSeq.tabulate(n)(i => f"${i.toLong * 0x9E3779B97F4A7C15L}%016x${i * 31}%08x")
    val vals = urls.take(2 * n) ++ hex ++ urls.drop(2 * n)
    chooses("fsst_pages", utf8, vals, "fsst(variable(32-bit offsets))", pageBytes = 128 * 1024)
    val (_, layouts) = write("fsst_pages_count", utf8, vals, 2, WriteCodecs(), 128 * 1024)
    assert(layouts.size >= 40, s"${layouts.size} pages")
  }

  private val decimal = new ArrowType.Decimal(15, 2, 128)
  private val double = new ArrowType.FloatingPoint(org.apache.arrow.vector.types.FloatingPointPrecision.DOUBLE)
  private val float = new ArrowType.FloatingPoint(org.apache.arrow.vector.types.FloatingPointPrecision.SINGLE)

  test("decimal quantities (50 distinct) and prices of few values: a dictionary of fixed-width items") {
    chooses("quantities", decimal, IndexedSeq.tabulate(n)(i => java.math.BigDecimal.valueOf(100L * (1 + i * 31 % 50), 2)),
      "dictionary")
    chooses("few_prices", double, IndexedSeq.tabulate(n)(i => Seq(9.99, 19.99, 4.5, 100.0, 0.25)(i * 7 % 5)),
      "dictionary", minor = 1)
  }

  test("prices of a few thousand values: a sorted dictionary, zstd-compressed") {
    val rnd = new scala.util.Random(8)
    val prices = IndexedSeq.fill(n)(math.round(rnd.nextDouble() * rnd.nextDouble() * 8000) / 100.0)
    chooses("many_prices", double, prices, "zstd(flat(64")
    val (_, layouts) = write("many_prices_layout", double, prices, 2, WriteCodecs())
    assert(layouts.forall(_.contains("dictionary")), layouts)
  }

  test("Zipf-distributed user ids (thousands of distinct, a few frequent): a sorted dictionary, zstd-compressed, under 0.9x bit-packed") {
    // ids below 100,000 drawn with P(k) proportional to 1 / k^1.3: a page of
    // 50,000 holds some 6,000 distinct, 13 bits of index against 17 bit-packed
    val rnd = new scala.util.Random(5)
    val cdf: Array[Double] = (1 to 100000).map(k => math.pow(k.toDouble, -1.3)).scanLeft(0.0)(_ + _).tail.toArray
    val total = cdf.last
    val ids = IndexedSeq.fill(n) {
      val u = rnd.nextDouble() * total
      val k = java.util.Arrays.binarySearch(cdf, u)
      (if (k >= 0) k else -k - 1).toLong
    }
    chooses("zipf_ids", int(64), ids, "dictionary")
    val (p, layouts) = write("zipf_ids_layout", int(64), ids, 2, WriteCodecs())
    assert(layouts.forall(_.contains("zstd(flat(64")), layouts)
    val (q, _) = write("zipf_ids_bitpacked", int(64), ids, 2, WriteCodecs(dictionary = false))
    assert(Files.size(p) <= 0.9 * Files.size(q), s"${Files.size(p)} vs bit-packed ${Files.size(q)}")
  }

  test("a compressed dictionary decoded once serves only pages storing the same bytes") {
    // the same file name and item count, other prices (each shifted by 1000):
    // what the second file holds is read, not the first one's cached dictionary
    val rnd = new scala.util.Random(1)
    val prices = IndexedSeq.fill(n)(math.round(rnd.nextDouble() * rnd.nextDouble() * 8000) / 100.0)
    Seq(prices, prices.map(_ + 1000.0), prices).foreach { vals =>
      val (_, layouts) = write("cached_dictionary", double, vals, 2, WriteCodecs())
      assert(layouts.forall(_.contains("dictionary")), layouts)
    }
  }

  test("decimal prices of many values: lz4 over flat 128-bit chunks (within 1.75x of zstd, faster to decode)") {
    val rnd = new scala.util.Random(5)
    chooses("prices", decimal, IndexedSeq.fill(n)(java.math.BigDecimal.valueOf(90000L + rnd.nextInt(10000000), 2)),
      "lz4(flat(128")
  }

  test("lz4 chunks decompressed into arrays reused across batches: every batch keeps its own values, also when batches of two files interleave") {
    val rnd = new scala.util.Random(11)
    def prices(k: Int): IndexedSeq[Any] =
      IndexedSeq.fill(n)(if (rnd.nextInt(9) == 0) null else java.math.BigDecimal.valueOf(k * 7L + rnd.nextInt(10000000), 2))
    val data = IndexedSeq(prices(1), prices(2))
    val files = data.zipWithIndex.map { case (vals, k) =>
      val (p, layouts) = write(s"reused_$k", decimal, vals, 2, WriteCodecs())
      assert(layouts.forall(_.contains("lz4(flat(128")), layouts)
      p
    }
    val readers = files.map(p => V21FileReader.openStandalone(new LocalFileSource(p)))
    try {
      // batches of rows that start and end inside chunks, alternating between the files;
      // every batch's vectors stay open until all are read, then are compared again
      val cuts = (0 to n by 3001) :+ n
      val batches = for {
        (a, b) <- cuts.zip(cuts.tail)
        k <- 0 to 1
      } yield {
        val got = readers(k).read(readers(k).fileSchema.fields, a, b, allocator)
        firstMismatch(s"file $k rows [$a, $b)", values(got.head), data(k).slice(a, b).toVector).foreach(m => fail(m))
        (k, a, b, got)
      }
      try batches.foreach { case (k, a, b, got) =>
        firstMismatch(s"file $k rows [$a, $b), after all batches", values(got.head), data(k).slice(a, b).toVector)
          .foreach(m => fail(m))
      } finally batches.foreach(_._4.foreach(_.close()))
    } finally readers.foreach(_.close())
  }

  test("random doubles with a fifth null: lz4 over flat chunks (it takes out the zeroed null slots)") {
    val rnd = new scala.util.Random(7)
    chooses("nullable_doubles", double, IndexedSeq.fill(n)(if (rnd.nextInt(5) == 0) null else rnd.nextDouble() * 0.5),
      "lz4(flat(64")
  }

  test("smooth doubles and float readings: split into byte streams under lz4, smaller than zstd over them unsplit; pylance reads them") {
    // a sensor-like double (steps of 1.5 over a slow drift) and a random walk of floats with nulls
    val smooth = IndexedSeq.tabulate[Any](n)(i => 1000.0 + (i % 7) * 1.5 + i / 1000.0)
    chooses("smooth_doubles", double, smooth, "lz4(byte-stream-split(64)")
    val (p, _) = write("smooth_doubles_zstd", double, smooth, 2, WriteCodecs())
    val rnd = new scala.util.Random(9)
    var x = 20.0
    val walk = IndexedSeq.fill[Any](n) { x += rnd.nextGaussian() * 0.01; if (rnd.nextInt(10) == 0) null else x.toFloat }
    chooses("float_readings", float, walk, "byte-stream-split(32)")
    // the split bytes under lz4 against what zstd makes of the unsplit values (the choice before splitting)
    val raw = java.nio.ByteBuffer.allocate(8 * n).order(java.nio.ByteOrder.LITTLE_ENDIAN)
    smooth.foreach(v => raw.putDouble(v.asInstanceOf[Double]))
    val zstdFlat = GeneralCodec.compress(CompressionScheme.COMPRESSION_ALGORITHM_ZSTD, raw.array(), 0, 8 * n).length
    assert(Files.size(p) < zstdFlat, s"${Files.size(p)} bytes split under lz4, zstd over the unsplit values $zstdFlat")
  }

  test("split values of every width join back exactly (4 and 8 bytes, the fast paths; 2 and 16, the general one)") {
    val rnd = new scala.util.Random(3)
    Seq(2, 4, 8, 16).foreach { w =>
      Seq(1, 7, 512, 2049).foreach { count =>
        val src = Array.fill[Byte](count * w + 5)(rnd.nextInt(256).toByte)
        val split = ByteStreamSplitCodec.split(src, 5, count, w)
        // byte k of value i is the i-th byte of stream k (first principles of the layout)
        (0 until count).foreach(i => (0 until w).foreach(k => assert(split(k * count + i) == src(5 + i * w + k))))
        val back = ByteStreamSplitCodec.join(split, count, w)
        assert(java.util.Arrays.equals(back, java.util.Arrays.copyOfRange(src, 5, 5 + count * w)), s"w=$w count=$count")
      }
    }
  }

  test("random doubles stay flat") {
    val rnd = new scala.util.Random(6)
    val (_, layouts) = write("random_doubles", double, IndexedSeq.fill(n)(rnd.nextDouble()), 2, WriteCodecs())
    assert(layouts.forall(l => l.contains("flat(64") && !l.contains("dictionary") && !l.contains("zstd")), layouts)
  }

  test("1 MB values: full-zip, each value zstd-compressed") {
    val text = (0 until 20000).map(i => s"line $i of a long document; ").mkString.take(1 << 20)
    chooses("blobs", utf8, IndexedSeq.tabulate(12)(i => s"$i:$text"), "full-zip: zstd")
  }
}
