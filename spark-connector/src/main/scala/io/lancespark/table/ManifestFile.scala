package io.lancespark.table

import com.google.protobuf.InvalidProtocolBufferException
import org.apache.hadoop.fs.Path

import io.lancespark.format.LanceFormatException
import io.lancespark.proto.table.Manifest

/** The manifest file layout: ... | u32 length | Manifest protobuf | i64 position
  * of the length | u16 major | u16 minor | "LANC". Other sections (index
  * metadata) may precede the manifest. */
object ManifestFile {
  val Magic: Array[Byte] = "LANC".getBytes("US-ASCII")
  private val FooterLen = 16

  def read(storage: DatasetStorage, path: Path): Manifest = {
    val bytes = storage.readFully(path)
    parse(bytes, path.toString)
  }

  def parse(bytes: Array[Byte], where: String): Manifest = {
    if (bytes.length < FooterLen + 4)
      throw LanceFormatException(where, s"corrupt manifest: only ${bytes.length} bytes")
    if (!bytes.takeRight(4).sameElements(Magic))
      throw LanceFormatException(where, "corrupt manifest: wrong magic (expected \"LANC\" at the end)")
    val bb = java.nio.ByteBuffer.wrap(bytes).order(java.nio.ByteOrder.LITTLE_ENDIAN)
    val pos = bb.getLong(bytes.length - FooterLen)
    if (pos < 0 || pos + 4 > bytes.length - FooterLen)
      throw LanceFormatException(where, s"corrupt manifest: manifest position $pos is outside the file")
    val len = bb.getInt(pos.toInt).toLong & 0xffffffffL
    if (pos + 4 + len != bytes.length - FooterLen)
      throw LanceFormatException(where,
        s"corrupt manifest: recorded length $len does not match the ${bytes.length - FooterLen - pos - 4} bytes present")
    try Manifest.parseFrom(java.nio.ByteBuffer.wrap(bytes, pos.toInt + 4, len.toInt))
    catch {
      case e: InvalidProtocolBufferException =>
        throw LanceFormatException(where, s"corrupt manifest: ${e.getMessage}", e)
    }
  }
}
