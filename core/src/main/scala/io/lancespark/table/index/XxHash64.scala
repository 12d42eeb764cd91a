package io.lancespark.table.index

/** XXH64 (Yann Collet's xxHash, 64-bit), as the reference's bloom filters
  * hash values with (seed 0). */
object XxHash64 {
  private val P1 = 0x9E3779B185EBCA87L
  private val P2 = 0xC2B2AE3D27D4EB4FL
  private val P3 = 0x165667B19E3779F9L
  private val P4 = 0x85EBCA77C2B2AE63L
  private val P5 = 0x27D4EB2F165667C5L

  private def long(b: Array[Byte], i: Int): Long = {
    var v = 0L; var k = 7
    while (k >= 0) { v = (v << 8) | (b(i + k) & 0xffL); k -= 1 }
    v
  }
  private def int(b: Array[Byte], i: Int): Long =
    (b(i) & 0xffL) | ((b(i + 1) & 0xffL) << 8) | ((b(i + 2) & 0xffL) << 16) | ((b(i + 3) & 0xffL) << 24)

  private def round(acc: Long, in: Long): Long = java.lang.Long.rotateLeft(acc + in * P2, 31) * P1
  private def merge(h: Long, v: Long): Long = (h ^ round(0L, v)) * P1 + P4

  def hash(b: Array[Byte], seed: Long = 0L): Long = {
    val n = b.length
    var i = 0
    var h =
      if (n >= 32) {
        var v1 = seed + P1 + P2; var v2 = seed + P2; var v3 = seed; var v4 = seed - P1
        while (i + 32 <= n) {
          v1 = round(v1, long(b, i)); v2 = round(v2, long(b, i + 8))
          v3 = round(v3, long(b, i + 16)); v4 = round(v4, long(b, i + 24))
          i += 32
        }
        var acc = java.lang.Long.rotateLeft(v1, 1) + java.lang.Long.rotateLeft(v2, 7) +
          java.lang.Long.rotateLeft(v3, 12) + java.lang.Long.rotateLeft(v4, 18)
        acc = merge(acc, v1); acc = merge(acc, v2); acc = merge(acc, v3); merge(acc, v4)
      } else seed + P5
    h += n
    while (i + 8 <= n) { h ^= round(0L, long(b, i)); h = java.lang.Long.rotateLeft(h, 27) * P1 + P4; i += 8 }
    if (i + 4 <= n) { h ^= int(b, i) * P1; h = java.lang.Long.rotateLeft(h, 23) * P2 + P3; i += 4 }
    while (i < n) { h ^= (b(i) & 0xffL) * P5; h = java.lang.Long.rotateLeft(h, 11) * P1; i += 1 }
    h ^= h >>> 33; h *= P2; h ^= h >>> 29; h *= P3; h ^= h >>> 32
    h
  }
}
