package io.lancespark.table.storage

import com.google.protobuf.InvalidProtocolBufferException
import org.apache.hadoop.fs.Path

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.Manifest

/** The manifest file layout: ... | u32 length | Manifest protobuf | i64 position
  * of the length | u16 major | u16 minor | "LANC". Other sections (index
  * metadata) may precede the manifest. */
object ManifestFile {
  val Magic: Array[Byte] = "LANC".getBytes("US-ASCII")
  private val FooterLen = 16
  // the manifest footer's format version, as the reference writes it
  private val Major: Short = 0
  private val Minor: Short = 2

  /** `manifest` as [[serialize]] stores it: its index section at the start of the file, or none. */
  def stored(manifest: Manifest, indexSection: Option[Array[Byte]]): Manifest =
    if (indexSection.isDefined) manifest.toBuilder.setIndexSection(0L).build()
    else manifest.toBuilder.clearIndexSection().build()

  /** The file bytes of `manifest`, with an optional index section (a serialized
    * IndexSection) placed before it and `index_section` pointing at it. */
  def serialize(manifest: Manifest, indexSection: Option[Array[Byte]]): Array[Byte] = {
    val out = new java.io.ByteArrayOutputStream()
    def u32(n: Int): Unit = out.write(java.nio.ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(n).array())
    indexSection.foreach { section => u32(section.length); out.write(section) }
    val m = stored(manifest, indexSection)
    val pos = out.size().toLong
    val body = m.toByteArray
    u32(body.length); out.write(body)
    val tail = java.nio.ByteBuffer.allocate(FooterLen).order(java.nio.ByteOrder.LITTLE_ENDIAN)
      .putLong(pos).putShort(Major).putShort(Minor).put(Magic)
    out.write(tail.array())
    out.toByteArray
  }

  /** The serialized IndexSection a manifest file carries at `index_section`, if any. */
  def indexSection(bytes: Array[Byte], manifest: Manifest, where: String): Option[Array[Byte]] =
    if (!manifest.hasIndexSection) None
    else {
      val pos = manifest.getIndexSection
      val bb = java.nio.ByteBuffer.wrap(bytes).order(java.nio.ByteOrder.LITTLE_ENDIAN)
      if (pos < 0 || pos + 4 > bytes.length)
        throw LanceFormatException(where, s"corrupt manifest: index section position $pos is outside the file")
      val len = bb.getInt(pos.toInt)
      if (len < 0 || pos + 4 + len > bytes.length)
        throw LanceFormatException(where, s"corrupt manifest: index section length $len runs past the file")
      Some(java.util.Arrays.copyOfRange(bytes, pos.toInt + 4, pos.toInt + 4 + len))
    }

  def read(storage: DatasetStorage, path: Path): Manifest = {
    val bytes = storage.readFully(path)
    parse(bytes, path.toString)
  }

  def parse(bytes: Array[Byte], where: String): Manifest = {
    val (pos, len) = body(bytes, where)
    try Manifest.parseFrom(java.nio.ByteBuffer.wrap(bytes, pos + 4, len))
    catch {
      case e: InvalidProtocolBufferException =>
        throw LanceFormatException(where, s"corrupt manifest: ${e.getMessage}", e)
    }
  }

  /** Only the name of the transaction file a manifest names ("" for none),
    * without building its fragments: what a conflict check needs of every
    * version committed since it read, however many fragments they hold. */
  def transactionFileOf(storage: DatasetStorage, path: Path): String =
    transactionFileOf(storage.readFully(path), path.toString)

  def transactionFileOf(bytes: Array[Byte], where: String): String = {
    val (pos, len) = body(bytes, where)
    try {
      val in = com.google.protobuf.CodedInputStream.newInstance(bytes, pos + 4, len)
      var name = ""
      var done = false
      while (!done) {
        val tag = in.readTag()
        if (tag == 0) done = true
        else if (tag == TransactionFileTag) name = in.readString()
        else if (!in.skipField(tag)) done = true
      }
      name
    } catch {
      case e: InvalidProtocolBufferException =>
        throw LanceFormatException(where, s"corrupt manifest: ${e.getMessage}", e)
    }
  }

  /** Only the commit time a manifest records (None: it records none), without
    * building its fragments: what a search by time needs of each version it
    * looks at. */
  def timestampOf(bytes: Array[Byte], where: String): Option[java.time.Instant] = {
    val (pos, len) = body(bytes, where)
    try {
      val in = com.google.protobuf.CodedInputStream.newInstance(bytes, pos + 4, len)
      var found: Option[java.time.Instant] = None
      var done = false
      while (!done) {
        val tag = in.readTag()
        if (tag == 0) done = true
        else if (tag == TimestampTag) {
          val t = com.google.protobuf.Timestamp.parseFrom(in.readBytes())
          found = Some(java.time.Instant.ofEpochSecond(t.getSeconds, t.getNanos.toLong))
        } else if (!in.skipField(tag)) done = true
      }
      found
    } catch {
      case e: InvalidProtocolBufferException =>
        throw LanceFormatException(where, s"corrupt manifest: ${e.getMessage}", e)
    }
  }

  private val TimestampTag: Int = (Manifest.TIMESTAMP_FIELD_NUMBER << 3) | 2

  // field 12 (transaction_file), length-delimited
  private val TransactionFileTag: Int = (Manifest.TRANSACTION_FILE_FIELD_NUMBER << 3) | 2

  /** The position of the manifest's length word and the manifest's length. */
  private def body(bytes: Array[Byte], where: String): (Int, Int) = {
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
    (pos.toInt, len.toInt)
  }
}
