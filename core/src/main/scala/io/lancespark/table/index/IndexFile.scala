package io.lancespark.table.index

import java.nio.charset.StandardCharsets

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector._

import io.lancespark.format.file.ContainerReader
import io.lancespark.format.v20.V20FileReader
import io.lancespark.format.v21.V21FileReader
import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.table.storage.DatasetStorage

/** A Lance file of an index (`_indices/<uuid>/<name>`), read with the data
  * file readers by its own schema. */
final class IndexFile private (val reader: ContainerReader) extends AutoCloseable {
  def path: String = reader.path
  def numRows: Long = reader.numRows
  def metadata: Map[String, String] = reader.fileSchema.metadata

  def field(name: String): LanceField = reader.fileSchema.field(name).getOrElse(
    throw LanceFormatException(path, s"index file has no column '$name' (columns: " +
      reader.fileSchema.fields.map(_.name).mkString(", ") + ")"))

  /** Rows [from, until) of the named columns. */
  def read(names: Seq[String], from: Long, until: Long, allocator: BufferAllocator): Seq[FieldVector] =
    reader.read(names.map(field), from, until, allocator)

  /** The rows of `ranges` (sorted, disjoint) of the named columns, one after the other. */
  def readRanges(names: Seq[String], ranges: IndexedSeq[(Long, Long)], allocator: BufferAllocator): Seq[FieldVector] =
    reader.readRanges(names.map(field), ranges, allocator, None)

  def bytesRead: Long = reader.bytesRead
  override def close(): Unit = reader.close()
}

object IndexFile {
  def open(storage: DatasetStorage, entry: IndexEntry, name: String): IndexFile = {
    val path = storage.resolve(s"${entry.dir}/$name", "index file")
    val source = storage.open(path)
    try {
      if (source.size < 8) throw LanceFormatException(path.toString, "not a Lance file")
      val b = source.read(source.size - 8, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN)
      val (major, minor) = (b.getShort(0) & 0xffff, b.getShort(2) & 0xffff)
      val r: ContainerReader = (major, minor) match {
        case (0, 3) | (2, 0) => V20FileReader.openStandalone(source)
        case (2, 1) | (2, 2) => V21FileReader.openStandalone(source)
        case _ => throw LanceFormatException(path.toString, s"index file version $major.$minor is not read")
      }
      new IndexFile(r)
    } catch { case e: Throwable => source.close(); throw e }
  }

  /** Value `i` of a vector as [[io.lancespark.format.stats.PageStat]] holds
    * min/max (integers as Long, floats as Double, strings as String, binaries
    * as bytes); None for a null or a type without bounds here. */
  def statValue(v: ValueVector, i: Int): Option[Any] =
    if (v.isNull(i)) None
    else v match {
      case x: BigIntVector => Some(java.lang.Long.valueOf(x.get(i)))
      case x: IntVector => Some(java.lang.Long.valueOf(x.get(i).toLong))
      case x: SmallIntVector => Some(java.lang.Long.valueOf(x.get(i).toLong))
      case x: TinyIntVector => Some(java.lang.Long.valueOf(x.get(i).toLong))
      case x: DateDayVector => Some(java.lang.Long.valueOf(x.get(i).toLong))
      case x: TimeStampVector => Some(java.lang.Long.valueOf(x.get(i)))
      case x: Float8Vector => Some(java.lang.Double.valueOf(x.get(i)))
      case x: Float4Vector => Some(java.lang.Double.valueOf(x.get(i).toDouble))
      case x: VarCharVector => Some(new String(x.get(i), StandardCharsets.UTF_8))
      case x: LargeVarCharVector => Some(new String(x.get(i), StandardCharsets.UTF_8))
      case x: VarBinaryVector => Some(x.get(i))
      case x: LargeVarBinaryVector => Some(x.get(i))
      case x: DecimalVector => Some(x.getObject(i))
      case x: BitVector => Some(java.lang.Boolean.valueOf(x.get(i) == 1))
      case _ => None
    }
}
