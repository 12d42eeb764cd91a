package io.lancespark.format.v01

import java.nio.charset.StandardCharsets

import com.google.protobuf.InvalidProtocolBufferException

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.proto.file.Metadata
import io.lancespark.proto.table.Manifest

/** The tail of a 0.1 file: a 16-byte footer (i64 metadata position, u16 major,
  * u16 minor, "LANC") pointing at a length-prefixed `Metadata` message.
  * `batchOffsets` are the cumulative row counts of the batches, starting at 0.
  * `statistics`: the page statistics section pylance writes (see [[LegacyStatistics]]). */
final case class LegacyFooter(
    major: Int,
    minor: Int,
    batchOffsets: Array[Long],
    pageTablePosition: Long,
    manifestPosition: Long,
    statistics: Option[Metadata.StatisticsMetadata] = None) {

  def numBatches: Int = math.max(0, batchOffsets.length - 1)
  def numRows: Long = if (batchOffsets.isEmpty) 0L else batchOffsets.last
  def batchStart(b: Int): Long = batchOffsets(b)
  def batchEnd(b: Int): Long = batchOffsets(b + 1)
}

object LegacyFooter {
  val FooterSize = 16
  val Magic: Array[Byte] = "LANC".getBytes(StandardCharsets.US_ASCII)

  def read(source: RandomAccessSource): LegacyFooter = {
    val path = source.path
    if (source.size < FooterSize)
      throw LanceFormatException(path, s"not a Lance file: ${source.size} bytes is shorter than the $FooterSize-byte footer")
    val tail = source.read(source.size - FooterSize, FooterSize)
    val magic = new Array[Byte](4)
    tail.position(12)
    tail.get(magic)
    if (!java.util.Arrays.equals(magic, Magic))
      throw LanceFormatException(path, s"not a Lance file: wrong magic bytes ${magic.map(b => f"${b & 0xff}%02x").mkString} at the end (expected 'LANC')")
    val metadataPos = tail.getLong(0)
    val major = tail.getShort(8) & 0xffff
    val minor = tail.getShort(10) & 0xffff
    if (major != 0 || (minor != 1 && minor != 2))
      throw LanceFormatException(path, s"file format version $major.$minor is not 0.1 (legacy); this reader reads legacy files only")
    val metadata = readMessage(source, metadataPos, "metadata block")(Metadata.parseFrom)

    val offsets = new Array[Long](metadata.getBatchOffsetsCount)
    var i = 0
    while (i < offsets.length) {
      offsets(i) = metadata.getBatchOffsets(i).toLong
      if (offsets(i) < 0 || (i > 0 && offsets(i) < offsets(i - 1)) || (i == 0 && offsets(0) != 0))
        throw LanceFormatException(path, s"corrupt metadata: batch offsets ${offsets.take(i + 1).mkString(",")} do not start at 0 and grow")
      i += 1
    }
    val pageTablePos = metadata.getPageTablePosition
    if (pageTablePos < 0 || pageTablePos > metadataPos)
      throw LanceFormatException(path, s"corrupt metadata: page table position $pageTablePos is outside the file body [0, $metadataPos)")
    LegacyFooter(major, minor, offsets, pageTablePos, metadata.getManifestPosition,
      if (metadata.hasStatistics && metadata.getStatistics.getSchemaCount > 0) Some(metadata.getStatistics) else None)
  }

  /** The Manifest copy a self-describing 0.1 file carries (schema with the
    * dictionary positions of this file), if it has one. */
  def readManifest(source: RandomAccessSource, footer: LegacyFooter): Option[Manifest] =
    if (footer.manifestPosition <= 0) None
    else Some(readMessage(source, footer.manifestPosition, "embedded manifest")(Manifest.parseFrom))

  /** A u32 length followed by that many bytes of protobuf. */
  private def readMessage[M](source: RandomAccessSource, pos: Long, what: String)(parse: Array[Byte] => M): M = {
    val path = source.path
    if (pos < 0 || pos + 4 > source.size - FooterSize)
      throw LanceFormatException(path, s"truncated or corrupt: $what position $pos is outside the file (${source.size} bytes)")
    val len = source.read(pos, 4).getInt(0).toLong & 0xffffffffL
    if (pos + 4 + len > source.size)
      throw LanceFormatException(path, s"truncated or corrupt: $what at $pos claims $len bytes but the file has ${source.size}")
    val buf = source.read(pos + 4, len)
    val bytes = new Array[Byte](len.toInt)
    buf.get(bytes)
    try parse(bytes)
    catch {
      case e: InvalidProtocolBufferException =>
        throw LanceFormatException(path, s"corrupt $what at $pos: ${e.getMessage}", e)
    }
  }
}
