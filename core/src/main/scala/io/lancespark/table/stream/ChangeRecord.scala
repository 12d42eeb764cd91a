package io.lancespark.table.stream

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, DataInputStream, DataOutputStream}
import java.util.Base64

import scala.util.control.NonFatal

import org.roaringbitmap.RoaringBitmap

import io.lancespark.schema.LanceFormatException

/** What a row-level change (MERGE) records in its transaction's
  * `transaction_properties` so that the change feed can tell its rows apart:
  * the transaction itself (an Update: rows deleted, new fragments) does not
  * say which deleted rows were updated and which deleted, nor which new rows
  * are updates and which inserts.
  *
  * `insertFiles`: the data files (paths as the manifest names them) of the new
  * fragments holding inserted rows; the other new fragments hold updated rows.
  * `deletedRows`: per fragment id, the row offsets (in the version read)
  * deleted by a DELETE action; the other deleted rows were updated. */
final case class ChangeRecord(command: String, insertFiles: Set[String], deletedRows: Map[Long, RoaringBitmap]) {

  def properties: Map[String, String] = Map(
    ChangeRecord.CommandKey -> command,
    ChangeRecord.InsertFilesKey -> insertFiles.toVector.sorted.mkString(","),
    ChangeRecord.DeletedRowsKey -> ChangeRecord.encodeRows(deletedRows))

  def isInsertFile(path: String): Boolean = insertFiles.contains(path)

  def isDeleted(fragmentId: Long, offset: Long): Boolean =
    deletedRows.get(fragmentId).exists(_.contains(offset.toInt))
}

object ChangeRecord {
  val CommandKey: String = "lance-spark.change.command"
  val InsertFilesKey: String = "lance-spark.change.insert-files"
  val DeletedRowsKey: String = "lance-spark.change.deleted-rows"

  /** The record of a transaction's properties, if it has one. */
  def of(properties: Map[String, String], where: String): Option[ChangeRecord] =
    properties.get(CommandKey).map { cmd =>
      val files = properties.getOrElse(InsertFilesKey, "").split(",").iterator.map(_.trim).filter(_.nonEmpty).toSet
      val rows = try decodeRows(properties.getOrElse(DeletedRowsKey, "")) catch {
        case NonFatal(e) => throw new LanceFormatException(s"$where: unreadable transaction property $DeletedRowsKey: " +
          e.getMessage, e)
      }
      ChangeRecord(cmd, files, rows)
    }

  /** `fragmentId:base64(portable roaring bitmap)` joined by `;`. */
  def encodeRows(rows: Map[Long, RoaringBitmap]): String =
    rows.toVector.filter(!_._2.isEmpty).sortBy(_._1).map { case (id, bm) =>
      bm.runOptimize()
      val out = new ByteArrayOutputStream()
      val data = new DataOutputStream(out)
      bm.serialize(data)
      data.close()
      s"$id:${Base64.getEncoder.encodeToString(out.toByteArray)}"
    }.mkString(";")

  def decodeRows(s: String): Map[Long, RoaringBitmap] =
    s.split(";").iterator.map(_.trim).filter(_.nonEmpty).map { part =>
      val i = part.indexOf(':')
      if (i <= 0) throw new IllegalArgumentException(s"not fragment:rows: '$part'")
      val bm = new RoaringBitmap()
      bm.deserialize(new DataInputStream(new ByteArrayInputStream(Base64.getDecoder.decode(part.substring(i + 1)))))
      part.substring(0, i).toLong -> bm
    }.toMap
}
