package io.lancespark.format.v21

import java.io.{FileOutputStream, OutputStream}
import java.nio.file.{Files, Path}

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.format.v21.write.{BlobV2Description, BlobV2Files}
import io.lancespark.table.PylanceProcess

/** Placement of 2.2 blob values in blob files. The expected descriptions are
  * the ones pylance 14 gives for the same value sizes (`to_table()` of a
  * `lance-encoding:blob` large_binary column written at 2.2; recorded in
  * docs/blobs.md), and the files' names and sizes the ones it writes. */
class BlobV2FilesSuite extends AnyFunSuite {

  private def place(sizes: Seq[Long]): (Vector[BlobV2Description], Map[String, Array[Byte]]) = {
    val dir: Path = Files.createTempDirectory("blobv2")
    val files = new BlobV2Files(name => new FileOutputStream(dir.resolve(name).toFile))
    val descs = try sizes.zipWithIndex.map { case (s, i) =>
      files.place(s, (out: OutputStream) => {
        val chunk = Array.fill[Byte](64 * 1024)((i % 251).toByte)
        var left = s
        while (left > 0) { val n = math.min(left, chunk.length.toLong).toInt; out.write(chunk, 0, n); left -= n }
      })
    }.toVector finally files.close()
    val written = files.fileNames.map(n => n -> Files.readAllBytes(dir.resolve(n))).toMap
    (descs, written)
  }

  private val KiB = 1024L
  private val MiB = 1024L * 1024

  test("kinds, positions and blob ids as pylance assigns them") {
    val (d, files) = place(Seq(0L, 10L, 70000L, MiB, MiB, 5 * MiB, 5 * MiB, 100L))
    assert(d.map(x => (x.kind, x.position, x.size, x.blobId)) == Vector(
      (0, 0L, 0L, 0), (0, 0L, 10L, 0), (1, 0L, 70000L, 1), (1, 70000L, MiB, 1), (1, 70000L + MiB, MiB, 1),
      (2, 0L, 5 * MiB, 2), (2, 0L, 5 * MiB, 3), (0, 0L, 100L, 0)))
    assert(files.keySet == Set("10000000000000000000000000000000.blob",
      "01000000000000000000000000000000.blob", "11000000000000000000000000000000.blob"))
    val packed = files("10000000000000000000000000000000.blob")
    assert(packed.length == 70000 + 2 * MiB)
    assert(packed(0) == 2.toByte && packed(70000) == 3.toByte && packed((70000 + MiB).toInt) == 4.toByte)
    assert(files("01000000000000000000000000000000.blob").length == 5 * MiB)
    assert(files("11000000000000000000000000000000.blob").forall(_ == 6.toByte))
  }

  test("thresholds are inclusive; the packed file gets its id at its first value") {
    val (d, _) = place(Seq(5 * MiB, 64 * KiB, 64 * KiB + 1, 4 * MiB, 4 * MiB + 1))
    assert(d.map(x => (x.kind, x.position, x.blobId)) == Vector(
      (2, 0L, 1), (0, 0L, 0), (1, 0L, 2), (1, 64 * KiB + 1, 2), (2, 0L, 3)))
  }

  test("no blob files for inline values only") {
    val (d, files) = place(Seq(0L, 1L, 64 * KiB))
    assert(d.forall(_.kind == BlobV2Files.Inline) && files.isEmpty)
  }

  test("seeded random sizes: the same descriptions and blob files as pylance 14 writes") {
    val rng = new scala.util.Random(39)
    val bounds = Seq(0L, 1L, 64 * KiB, 64 * KiB + 1, 4 * MiB, 4 * MiB + 1)
    val sizes = Seq.fill(14)(rng.nextInt(4) match {
      case 0 => rng.nextInt(70 * 1024).toLong
      case 1 => 60 * KiB + rng.nextInt((2 * MiB).toInt)
      case 2 => 4 * MiB - 1024 + rng.nextInt(4096)
      case _ => bounds(rng.nextInt(bounds.size))
    })
    val (ours, files) = place(sizes)
    val dir = Files.createTempDirectory("blobv2-pylance")
    val out = PylanceProcess.run(
      """import sys, os, glob, lance, pyarrow as pa
        |sizes = [int(x) for x in sys.argv[2].split(",")]
        |f = pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
        |t = pa.table({"b": [bytes([i % 251]) * s for i, s in enumerate(sizes)]}, schema=pa.schema([f]))
        |ds = lance.write_dataset(t, sys.argv[1], data_storage_version="2.2")
        |for d in ds.to_table().column("b").to_pylist():
        |    print("D", d["kind"], d["position"], d["size"], d["blob_id"])
        |for p in sorted(glob.glob(os.path.join(sys.argv[1], "data", "*", "*.blob"))):
        |    print("F", os.path.basename(p), os.path.getsize(p))
        |""".stripMargin, dir.resolve("t.lance").toString, sizes.mkString(","))
    val lines = out.linesIterator.toVector
    val theirs = lines.filter(_.startsWith("D ")).map(_.split(" ").drop(1).map(_.toLong).toVector)
    // inline positions are data file offsets the data file writer sets; compare them as 0
    assert(theirs.size == sizes.size, out)
    val expected = theirs.map(v => (v(0).toInt, if (v(0) == 0) 0L else v(1), v(2), v(3).toInt))
    assert(ours.map(d => (d.kind, d.position, d.size, d.blobId)) == expected, s"sizes $sizes")
    val theirFiles = lines.filter(_.startsWith("F ")).map(_.split(" ")).map(a => a(1) -> a(2).toLong).toMap
    assert(files.map { case (n, b) => n -> b.length.toLong } == theirFiles)
  }
}
