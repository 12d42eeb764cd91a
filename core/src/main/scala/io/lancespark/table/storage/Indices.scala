package io.lancespark.table.storage

import java.nio.ByteBuffer

import scala.jdk.CollectionConverters._

import org.roaringbitmap.RoaringBitmap

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.{IndexMetadata, IndexSection}

/** The index metadata a manifest carries (its index section), and the
  * fragments each index covers. */
object Indices {

  /** The indices of `snapshot`'s version (empty when it has none), read once per snapshot. */
  def of(snapshot: Snapshot): Seq[IndexMetadata] = snapshot.indices

  /** The index section read from the manifest file; a manifest without one is not read again. */
  private[storage] def read(snapshot: Snapshot): Seq[IndexMetadata] =
    if (!snapshot.manifest.hasIndexSection) Nil
    else {
      val path = Dataset.manifestPath(snapshot.storage, snapshot.naming, snapshot.version)
      val bytes = snapshot.storage.readFully(path)
      ManifestFile.indexSection(bytes, snapshot.manifest, path.toString).map(parse(_, path.toString)).getOrElse(Nil)
    }

  def parse(section: Array[Byte], where: String): Seq[IndexMetadata] =
    try IndexSection.parseFrom(section).getIndicesList.asScala.toSeq
    catch {
      case e: com.google.protobuf.InvalidProtocolBufferException =>
        throw LanceFormatException(where, s"corrupt index section: ${e.getMessage}", e)
    }

  /** The fragments an index covers, if it records them (a portable roaring bitmap). */
  def fragments(index: IndexMetadata): Option[RoaringBitmap] =
    if (index.getFragmentBitmap.isEmpty) None
    else {
      val b = new RoaringBitmap()
      b.deserialize(ByteBuffer.wrap(index.getFragmentBitmap.toByteArray))
      Some(b)
    }
}
