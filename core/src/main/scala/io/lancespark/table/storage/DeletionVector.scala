package io.lancespark.table.storage

import java.nio.{ByteBuffer, ByteOrder}

import scala.util.Using

import org.apache.arrow.compression.CommonsCompressionFactory
import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.{IntVector, UInt4Vector}
import org.apache.arrow.vector.ipc.{ArrowFileReader, SeekableReadChannel}
import org.apache.arrow.vector.util.ByteArrayReadableSeekableByteChannel
import org.roaringbitmap.RoaringBitmap

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.DeletionFile

/** Row offsets deleted from one fragment. Two file flavours:
  *  - `.arrow`: an Arrow IPC file with one batch of one uint32 (or int32) column;
  *  - `.bin`: a roaring bitmap in the portable serialization. */
object DeletionVector {

  def relativePath(fragmentId: Long, d: DeletionFile): String =
    io.lancespark.table.model.FragmentInfo.deletionPath(fragmentId, d)

  def read(storage: DatasetStorage, fragmentId: Long, d: DeletionFile, physicalRows: Long): RoaringBitmap = {
    val rel = relativePath(fragmentId, d)
    val path = storage.resolve(rel, "deletion file")
    val bytes = storage.readFully(path)
    val bitmap =
      if (d.getFileType == DeletionFile.DeletionFileType.BITMAP) fromRoaring(bytes, path.toString)
      else fromArrow(bytes, path.toString)
    val last = if (bitmap.isEmpty) -1L else bitmap.last().toLong & 0xffffffffL
    if (last >= physicalRows)
      throw LanceFormatException(path.toString,
        s"deletion file lists row offset $last but fragment $fragmentId has only $physicalRows rows")
    bitmap
  }

  /** Portable roaring serialization (what `.bin` files hold). */
  def toRoaringBytes(rows: RoaringBitmap): Array[Byte] = {
    rows.runOptimize()
    val buf = ByteBuffer.allocate(rows.serializedSizeInBytes()).order(ByteOrder.LITTLE_ENDIAN)
    rows.serialize(buf)
    buf.array()
  }

  /** An Arrow IPC file with one batch of one non-null uint32 column "row_id"
    * (what `.arrow` files hold). */
  def toArrowBytes(rows: RoaringBitmap): Array[Byte] = {
    val out = new java.io.ByteArrayOutputStream()
    Using.resource(new RootAllocator()) { alloc =>
      val field = new org.apache.arrow.vector.types.pojo.Field("row_id",
        new org.apache.arrow.vector.types.pojo.FieldType(false, new org.apache.arrow.vector.types.pojo.ArrowType.Int(32, false), null), null)
      val schema = new org.apache.arrow.vector.types.pojo.Schema(java.util.Collections.singletonList(field))
      Using.resource(org.apache.arrow.vector.VectorSchemaRoot.create(schema, alloc)) { root =>
        val v = root.getVector(0).asInstanceOf[UInt4Vector]
        val n = rows.getCardinality
        v.allocateNew(n)
        val it = rows.getIntIterator
        var i = 0
        while (it.hasNext) { v.set(i, it.next()); i += 1 }
        v.setValueCount(n)
        root.setRowCount(n)
        Using.resource(new org.apache.arrow.vector.ipc.ArrowFileWriter(root, null,
            java.nio.channels.Channels.newChannel(out))) { w =>
          w.start(); w.writeBatch(); w.end()
        }
      }
    }
    out.toByteArray
  }

  private def fromRoaring(bytes: Array[Byte], where: String): RoaringBitmap = {
    val bm = new RoaringBitmap()
    try bm.deserialize(ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN))
    catch {
      case e: Exception => throw LanceFormatException(where, s"corrupt roaring bitmap deletion file: $e", e)
    }
    bm
  }

  private def fromArrow(bytes: Array[Byte], where: String): RoaringBitmap = {
    val bm = new RoaringBitmap()
    try {
      Using.resource(new RootAllocator()) { alloc =>
        Using.resource(new ArrowFileReader(
            new SeekableReadChannel(new ByteArrayReadableSeekableByteChannel(bytes)), alloc,
            CommonsCompressionFactory.INSTANCE)) { reader =>
          while (reader.loadNextBatch()) {
            val root = reader.getVectorSchemaRoot
            if (root.getFieldVectors.size() != 1)
              throw LanceFormatException(where, s"deletion file must have one column, found ${root.getFieldVectors.size()}")
            root.getVector(0) match {
              case v: UInt4Vector => (0 until v.getValueCount).foreach(i => bm.add(v.get(i)))
              case v: IntVector   => (0 until v.getValueCount).foreach(i => bm.add(v.get(i)))
              case other =>
                throw LanceFormatException(where, s"deletion file column has type ${other.getField.getType}, expected uint32")
            }
          }
        }
      }
    } catch {
      case e: LanceFormatException => throw e
      case e: Exception => throw LanceFormatException(where, s"corrupt Arrow deletion file: $e", e)
    }
    bm
  }
}
