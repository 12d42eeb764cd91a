package io.lancespark.format.file

import java.nio.charset.StandardCharsets

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.input.RandomAccessSource

/** Position and size of one region of the file. */
final case class Region(position: Long, size: Long)

/** The fixed-size tail of a Lance v2 file (2.0 files say 0.3; 2.1+ say 2.x).
  *
  * Layout of the last 40 bytes (little-endian): column-metadata start,
  * column-metadata offset table position, global-buffer offset table position
  * (all u64), number of global buffers, number of columns (u32), major, minor
  * (u16), magic "LANC". */
final case class Footer(
    columnMetadataStart: Long,
    columnMetadataTablePos: Long,
    globalBufferTablePos: Long,
    numGlobalBuffers: Int,
    numColumns: Int,
    major: Int,
    minor: Int) {

  /** "2.0", "2.1", ... as users name the version. */
  def versionName: String = if (major == 0 && minor == 3) "2.0" else s"$major.$minor"
}

object Footer {
  val Size = 40
  val Magic: Array[Byte] = "LANC".getBytes(StandardCharsets.US_ASCII)

  def read(source: RandomAccessSource): Footer = {
    val path = source.path
    if (source.size < Size)
      throw LanceFormatException(path, s"not a Lance file: ${source.size} bytes is shorter than the $Size-byte footer")
    val buf = source.read(source.size - Size, Size)
    val magic = new Array[Byte](4)
    buf.position(36); buf.get(magic); buf.position(0)
    if (!java.util.Arrays.equals(magic, Magic))
      throw LanceFormatException(path,
        s"not a Lance file: bad magic ${magic.map(b => f"${b & 0xff}%02x").mkString} (expected 4c414e43 'LANC')")
    val f = Footer(
      buf.getLong(0), buf.getLong(8), buf.getLong(16),
      buf.getInt(24), buf.getInt(28),
      buf.getShort(32) & 0xffff, buf.getShort(34) & 0xffff)
    val tail = source.size - Size
    def check(ok: Boolean, what: String): Unit =
      if (!ok) throw LanceFormatException(path, s"corrupt footer: $what (file has ${source.size} bytes): $f")
    check(f.numColumns >= 0 && f.numGlobalBuffers >= 0, "negative counts")
    check(f.columnMetadataStart >= 0 && f.columnMetadataStart <= tail, "column metadata start out of range")
    check(f.columnMetadataTablePos >= 0 && f.columnMetadataTablePos + 16L * f.numColumns <= tail,
      "column metadata offset table out of range")
    check(f.globalBufferTablePos >= 0 && f.globalBufferTablePos + 16L * f.numGlobalBuffers <= tail,
      "global buffer offset table out of range")
    f
  }

  /** Reads a table of `count` (u64 position, u64 size) pairs at `pos`, checking
    * every region lies inside the file. */
  def readRegions(source: RandomAccessSource, pos: Long, count: Int, what: String): Vector[Region] = {
    if (count == 0) return Vector.empty
    val buf = source.read(pos, 16L * count)
    Vector.tabulate(count) { i =>
      val r = Region(buf.getLong(16 * i), buf.getLong(16 * i + 8))
      if (r.position < 0 || r.size < 0 || r.position + r.size > source.size || r.position + r.size < 0)
        throw LanceFormatException(source.path,
          s"corrupt file: $what $i at [${r.position}, ${r.position + r.size}) lies outside the file of ${source.size} bytes")
      r
    }
  }
}
