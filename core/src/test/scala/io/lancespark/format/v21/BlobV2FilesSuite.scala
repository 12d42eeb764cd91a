package io.lancespark.format.v21

import java.io.{FileOutputStream, OutputStream}
import java.nio.file.{Files, Path}

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.format.v21.write.{BlobV2Description, BlobV2Files}

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
}
