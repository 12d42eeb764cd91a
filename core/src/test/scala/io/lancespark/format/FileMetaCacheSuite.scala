package io.lancespark.format

import java.nio.file.{Files, Path, StandardCopyOption}

import org.apache.arrow.memory.RootAllocator
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.format.file.FileMetaCache
import io.lancespark.format.input.LocalFileSource
import io.lancespark.format.v20.ArrowCompare
import io.lancespark.format.v21.V21FileReader

/** The metadata of a file read once is not read again by the next reader of the same file (the
  * same rows come back with fewer requests), and a file replaced at the same path by one of
  * another size is read afresh. Files pylance wrote (tests/fixtures/v21_fixtures.py). */
class FileMetaCacheSuite extends AnyFunSuite with BeforeAndAfterAll {
  private val allocator = new RootAllocator()
  private val tmp: Path = Files.createTempDirectory("file-meta-cache")

  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0, s"leaked ${allocator.getAllocatedMemory} bytes")
    finally allocator.close()
  }

  private def fixture(name: String): Path = ArrowCompare.fixtures.resolve("v2_1").resolve(s"$name.lance")

  /** Every column's values and the read requests the reader made. */
  private def readAll(p: Path): (Seq[Seq[Any]], Long) = {
    val r = V21FileReader.openStandalone(new LocalFileSource(p))
    try {
      val fields = r.fileSchema.fields
      val vs = r.read(fields, 0, r.numRows, allocator)
      try { (vs.map(v => ArrowCompare.values(v).toSeq), r.readRequests) } finally vs.foreach(_.close())
    } finally r.close()
  }

  test("a second reader of a file reads the same rows without reading its metadata again") {
    assume(Files.isRegularFile(fixture("shapes-2.2")), "fixtures not generated")
    val p = tmp.resolve("again.lance")
    Files.copy(fixture("shapes-2.2"), p)
    val (first, firstRequests) = readAll(p)
    val (second, secondRequests) = readAll(p)
    assert(second == first)
    // the first reader read the footer, the global buffer table, the file descriptor, the
    // column metadata table and each column's metadata besides the pages: at least 4 more
    assert(secondRequests >= 1 && secondRequests + 4 <= firstRequests, (firstRequests, secondRequests))
  }

  test("a file replaced at the same path by one of another size is read afresh") {
    assume(Files.isRegularFile(fixture("shapes-2.2")) && Files.isRegularFile(fixture("wide-2.2")), "fixtures not generated")
    assert(Files.size(fixture("shapes-2.2")) != Files.size(fixture("wide-2.2")))
    val p = tmp.resolve("replaced.lance")
    Files.copy(fixture("shapes-2.2"), p)
    assert(readAll(p)._1 == readAll(fixture("shapes-2.2"))._1)
    Files.copy(fixture("wide-2.2"), p, StandardCopyOption.REPLACE_EXISTING)
    assert(readAll(p)._1 == readAll(fixture("wide-2.2"))._1)
    assert(FileMetaCache.size >= 3)
  }

  test("a file whose footer lists no global buffers is refused naming the file (no file descriptor)") {
    assume(Files.isRegularFile(fixture("shapes-2.2")), "fixtures not generated")
    val bytes = Files.readAllBytes(fixture("shapes-2.2"))
    // the footer's u32 count of global buffers, 40 - 24 bytes from the end
    java.nio.ByteBuffer.wrap(bytes).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(bytes.length - 40 + 24, 0)
    val p = tmp.resolve("no-globals.lance")
    Files.write(p, bytes)
    val e = intercept[io.lancespark.schema.LanceFormatException](readAll(p))
    assert(e.getMessage.contains(p.toString) && e.getMessage.contains("no global buffers"), e.getMessage)
  }
}
