package io.lancespark.table.index

import scala.jdk.CollectionConverters._

import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.types.pojo.{Field, Schema}

import io.lancespark.format.file.ContainerWriter
import io.lancespark.format.v20.V20FileWriter
import io.lancespark.format.v21.write.V21FileWriter
import io.lancespark.schema.LanceSchema
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.DatasetStorage

/** Writes one Lance file of an index (`_indices/<uuid>/<name>`) at the
  * dataset's file version, as the reference's index store does: the file's
  * own Arrow schema and schema metadata, no page statistics. */
final class IndexFileWriter(storage: DatasetStorage, uuid: String, name: String, fields: Seq[Field],
                            metadata: Map[String, String], version: DataFileVersion) extends AutoCloseable {
  val relativePath: String = s"${IndexFileWriter.dir(uuid)}/$name"
  private val path = storage.resolve(relativePath, "index file")
  private val schema: LanceSchema = LanceSchema.fromArrow(new Schema(fields.asJava,
    if (metadata.isEmpty) null else metadata.asJava))
  private val writer: ContainerWriter = {
    val out = storage.fs.create(path, true)
    try version match {
      case DataFileVersion.V2_0 => new V20FileWriter(out, path.toString, schema, statistics = false)
      case DataFileVersion(2, minor @ (1 | 2)) =>
        new V21FileWriter(out, path.toString, schema, minor, statistics = false)
      case other => throw new IllegalArgumentException(
        s"${storage.uri}: indices are built on datasets of file version 2.0, 2.1 or 2.2, not $other")
    } catch { case e: Throwable => out.close(); throw e }
  }

  def write(columns: Seq[FieldVector]): Unit = writer.write(columns)
  /** Adds a global buffer (after the descriptor); its number in the file. */
  def addGlobalBuffer(bytes: Array[Byte]): Int = writer.addGlobalBuffer(bytes)
  /** Writes the footer; the file's size. */
  def finish(): Long = writer.finish().sizeBytes
  override def close(): Unit = writer.close()
}

object IndexFileWriter {
  def dir(uuid: String): String = s"_indices/$uuid"

  /** Removes an index directory a failed or abandoned build wrote; best effort. */
  def removeDir(storage: DatasetStorage, uuid: String): Unit =
    try { storage.fs.delete(storage.resolve(dir(uuid), "index directory"), true); () }
    catch { case _: Exception => () }
}
