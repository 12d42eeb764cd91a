package io.lancespark.table.storage

import java.nio.ByteBuffer

import scala.jdk.CollectionConverters._

import com.google.protobuf.ByteString
import org.roaringbitmap.RoaringBitmap

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.{IndexMetadata, IndexSection}
import io.lancespark.table.model.Snapshot

/** The index metadata a manifest carries (its index section). This connector
  * neither builds nor reads index files; it keeps each index's fragment
  * bitmap true to the fragments it covers. */
object Indices {

  /** The indices of `snapshot`'s version (empty when it has none). */
  def of(snapshot: Snapshot): Seq[IndexMetadata] = {
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

  def serialize(indices: Seq[IndexMetadata]): Array[Byte] =
    IndexSection.newBuilder().addAllIndices(indices.asJava).build().toByteArray

  /** The fragments an index covers, if it records them (a portable roaring bitmap). */
  def fragments(index: IndexMetadata): Option[RoaringBitmap] =
    if (index.getFragmentBitmap.isEmpty) None
    else {
      val b = new RoaringBitmap()
      b.deserialize(ByteBuffer.wrap(index.getFragmentBitmap.toByteArray))
      Some(b)
    }

  /** `index` covering `fragments` (serialized without run containers, as the reference writes bitmaps). */
  def withFragments(index: IndexMetadata, fragments: RoaringBitmap): IndexMetadata = {
    val buf = ByteBuffer.allocate(fragments.serializedSizeInBytes())
    fragments.serialize(buf)
    index.toBuilder.setFragmentBitmap(ByteString.copyFrom(buf.array())).build()
  }

  def name(index: IndexMetadata): String = if (index.getName.nonEmpty) index.getName else "(unnamed index)"
}
