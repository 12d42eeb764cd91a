package io.lancespark.format.input

import java.nio.file.Files

import scala.util.Using

import org.scalatest.funsuite.AnyFunSuite

class ReadArenaSuite extends AnyFunSuite {

  test("reads into the arena reuse one block sized to a batch; buffers taken earlier stay intact") {
    val file = Files.createTempFile("arena", ".bin")
    try {
      Files.write(file, Array.tabulate[Byte](1 << 18)(i => (i * 31).toByte))
      Using.resource(new LocalFileSource(file)) { src =>
        val arena = new ReadArena
        val a = src.read(0, 1000, arena)
        val b = src.read(5000, 70000, arena) // the first batch does not fit the (empty) block
        assert(a.get(999) == (999 * 31).toByte && b.get(0) == (5000 * 31).toByte)
        assert(b.remaining() == 70000 && b.order() == java.nio.ByteOrder.LITTLE_ENDIAN)
        arena.reset()
        val sized = arena.capacity
        assert(sized >= 71000 && sized <= 71000 * 9 / 8, s"block of $sized bytes for a batch of 71000")
        val c = src.read(100, 60000, arena)
        val d = src.read(70000, 11000, arena)
        assert(c.get(0) == (100 * 31).toByte && c.get(59999) == ((60099 * 31).toByte))
        assert(d.get(10999) == ((80999 * 31).toByte))
        assert(c.array() eq d.array(), "a batch that fits is served from the one block")
        arena.reset()
        assert(arena.capacity == sized, "a smaller batch keeps the block")
        assert(src.bytesRead == 1000 + 70000 + 60000 + 11000)
        // the same bytes as a plain read
        assert(c == src.read(100, 60000))
      }
    } finally Files.delete(file)
  }
}
