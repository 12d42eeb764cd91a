package io.lancespark.format.input

import java.nio.file.Files

import scala.util.Using

import org.scalatest.funsuite.AnyFunSuite

class ReadArenaSuite extends AnyFunSuite {

  test("reads into the arena reuse its memory after a reset and keep earlier buffers intact when it grows") {
    val file = Files.createTempFile("arena", ".bin")
    try {
      Files.write(file, Array.tabulate[Byte](1 << 18)(i => (i * 31).toByte))
      Using.resource(new LocalFileSource(file)) { src =>
        val arena = new ReadArena
        val a = src.read(0, 1000, arena)
        val b = src.read(5000, 70000, arena) // does not fit the first block: a larger one replaces it
        assert(a.get(999) == (999 * 31).toByte && b.get(0) == (5000 * 31).toByte)
        assert(b.remaining() == 70000 && b.order() == java.nio.ByteOrder.LITTLE_ENDIAN)
        val grown = arena.capacity
        assert(grown >= 70000)
        arena.reset()
        val c = src.read(100, 60000, arena)
        assert(arena.capacity == grown, "a batch that fits reuses the block")
        assert(c.get(0) == (100 * 31).toByte && c.get(59999) == ((60099 * 31).toByte))
        assert(src.bytesRead == 1000 + 70000 + 60000)
        // the same bytes as a plain read
        assert(c == src.read(100, 60000))
      }
    } finally Files.delete(file)
  }
}
