package io.lancespark.format.input

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.file.{Files, Path}

import scala.util.Using

import org.scalatest.funsuite.AnyFunSuite

class CoalescedReadsSuite extends AnyFunSuite {

  private def r(p: Long, l: Long) = ByteRange(p, l)

  test("coalesce merges overlapping and nearby ranges, keeps distant ones apart, caps merged reads") {
    assert(CoalescedReads.coalesce(Nil).isEmpty)
    // adjacent, overlapping, contained, given out of order; empty ranges dropped
    assert(CoalescedReads.coalesce(Seq(r(100, 50), r(0, 100), r(120, 10), r(149, 11), r(500, 0)), maxGap = 0) ==
      Vector(r(0, 160)))
    // a gap of exactly maxGap is bridged, one byte more is not
    assert(CoalescedReads.coalesce(Seq(r(0, 10), r(20, 10)), maxGap = 10) == Vector(r(0, 30)))
    assert(CoalescedReads.coalesce(Seq(r(0, 10), r(21, 10)), maxGap = 10) == Vector(r(0, 10), r(21, 10)))
    // no merged read beyond maxRead
    assert(CoalescedReads.coalesce(Seq(r(0, 60), r(60, 60), r(120, 60)), maxGap = 0, maxRead = 130) ==
      Vector(r(0, 120), r(120, 60)))
  }

  private def withFile[T](n: Int)(body: Path => T): T = {
    val file = Files.createTempFile("coalesce", ".bin")
    try {
      Files.write(file, Array.tabulate[Byte](n)(i => (i * 31 + 7).toByte))
      body(file)
    } finally Files.delete(file)
  }

  private def expectBytes(b: ByteBuffer, position: Long, length: Int): Unit = {
    assert(b.remaining() == length)
    (0 until length by 97).foreach(i => assert(b.get(i) == ((position + i) * 31 + 7).toByte, s"byte $i at $position"))
  }

  test("planned ranges are read in few requests, served as slices; follow-up and unplanned reads work") {
    withFile(1 << 20) { file =>
      Using.resource(new LocalFileSource(file)) { src =>
        val arena = new ReadArena
        // two nearby ranges (one request), one far away, and one whose bytes say where to read next
        val followUp = PlannedRead(r(700000, 8), b => { val at = b.getInt(0) & 0xfffL; Seq(r(900000 + at, 300)) })
        val reads = CoalescedReads.start(src, Seq(PlannedRead(r(0, 1000)), PlannedRead(r(5000, 2000)),
          PlannedRead(r(400000, 4096)), followUp), arena)
        expectBytes(reads.read(5000, 2000), 5000, 2000)
        expectBytes(reads.read(100, 50), 100, 50)
        expectBytes(reads.read(400000, 4096), 400000, 4096)
        reads.awaitAll()
        val at = Using.resource(new LocalFileSource(file))(o => o.read(700000, 4).getInt(0) & 0xfffL)
        val before = src.readRequests
        expectBytes(reads.read(900000 + at + 10, 100), 900000 + at + 10, 100) // from the second round
        assert(src.readRequests == before, "the follow-up range was already read")
        assert(src.readRequests == 4, s"${src.readRequests} requests: [0, 7000), 400000, 700000 and the follow-up")
        expectBytes(reads.read(600000, 10), 600000, 10) // never planned: read on the spot
        assert(src.readRequests == 5)
      }
    }
  }

  test("a failed read surfaces, with its cause, when its bytes are needed; other ranges stay usable") {
    withFile(1 << 18) { file =>
      val src = new LocalFileSource(file) {
        override protected def readFully(position: Long, dst: ByteBuffer): Unit =
          if (position >= 100000) throw new IOException(s"storage failed at $position")
          else super.readFully(position, dst)
      }
      Using.resource(src) { src =>
        val reads = CoalescedReads.start(src, Seq(PlannedRead(r(0, 100)), PlannedRead(r(200000, 100))), new ReadArena)
        val e = intercept[IOException](reads.read(200000, 10))
        assert(e.getMessage.contains("storage failed at 200000"))
        expectBytes(reads.read(0, 100), 0, 100)
        reads.awaitAll()
      }
    }
  }

  test("TailSource: one request for the tail, reads there from memory and elsewhere from the file, byte for byte") {
    withFile(10000) { file =>
      val inner = new LocalFileSource(file)
      Using.resource(new TailSource(inner, 7000)) { tail =>
        val direct = new LocalFileSource(file)
        try {
          assert(tail.size == 10000 && tail.readRequests == 0 && inner.readRequests == 1)
          for ((p, l) <- Seq((7000L, 3000), (9990L, 10), (8123L, 1), (7500L, 0), (6990L, 20), (0L, 500), (6999L, 3001))) {
            val b = tail.read(p, l)
            expectBytes(b, p, l)
            assert(b == direct.read(p, l), s"[$p, ${p + l})")
          }
          // the file itself: the tail, then the three reads that do not lie within it
          assert(tail.readRequests == 7 && inner.readRequests == 4)
          assertThrows[io.lancespark.schema.LanceFormatException](tail.read(9990, 11))
        } finally direct.close()
      }
    }
  }
}
