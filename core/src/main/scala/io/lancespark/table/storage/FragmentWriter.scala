package io.lancespark.table.storage

import java.util.UUID

import org.apache.arrow.vector.FieldVector
import org.apache.hadoop.fs.Path

import io.lancespark.format.file.DataFileWriter
import io.lancespark.format.v20.V20FileWriter
import io.lancespark.format.v21.write.{V21FileWriter, WriteCodecs}
import io.lancespark.schema.LanceSchema
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.model.WrittenFragment

/** Writes the data file of one new fragment: named `<prefix>-<uuid>.lance`
  * under the dataset's data directory, at `version` (the dataset's file
  * version). `maxRowsPerPage`: None for the writer's default. Nothing is
  * visible until a commit lists the fragment; `abort` removes the file. The
  * writer next to FragmentScanner, the reader. */
final class FragmentWriter(storage: DatasetStorage, schema: LanceSchema, version: DataFileVersion,
    maxRowsPerPage: Option[Int], prefix: String, disabledCodecs: Set[String] = Set.empty) {

  val name: String = s"$prefix-${UUID.randomUUID()}.lance"
  private val path: Path = storage.dataFile(name)
  private val writer: DataFileWriter = {
    val out = storage.fs.create(path, false)
    try version match {
      case DataFileVersion.V2_0 =>
        new V20FileWriter(out, path.toString, schema, maxRowsPerPage.getOrElse(FragmentWriter.V20RowsPerPage))
      case DataFileVersion(2, minor @ (1 | 2)) =>
        new V21FileWriter(out, path.toString, schema, minor, maxRowsPerPage.getOrElse(V21FileWriter.DefaultMaxRowsPerPage),
          codecs = FragmentWriter.codecs(disabledCodecs),
          blobFiles = Some((blob: String) => storage.fs.create(new Path(FragmentWriter.blobDir(storage, name), blob), false)))
      case other => throw new IllegalArgumentException(s"file version $other is not written by this connector")
    } catch {
      case e: Throwable =>  // a schema the version cannot store: no file is left behind
        try out.close() finally FragmentWriter.delete(storage, name)
        throw e
    }
  }

  /** One batch: a vector per top-level field of `schema`, in order. */
  def write(columns: Seq[FieldVector]): Unit = writer.write(columns)

  /** Writes the file's footer; the fragment a commit can now add. */
  def finish(): WrittenFragment = {
    val done = writer.finish()
    WrittenFragment(name, done.fieldIds, done.columnIndices, done.numRows, done.sizeBytes, version)
  }

  /** Closes and deletes the file (a failed or cancelled task). */
  def abort(): Unit = {
    try writer.close() catch { case _: Exception => () }
    FragmentWriter.delete(storage, name)
  }
}

object FragmentWriter {
  /** The codecs of 2.1/2.2 files a write can turn off (for diagnosis). */
  val Codecs: Seq[String] = Seq("bitpacking", "rle", "dictionary", "fsst", "zstd", "fullzip", "constant")

  private def codecs(off: Set[String]): WriteCodecs = WriteCodecs(
    bitpacking = !off("bitpacking"), rle = !off("rle"), dictionary = !off("dictionary"), fsst = !off("fsst"),
    general = !off("zstd"), fullZip = !off("fullzip"), constant = !off("constant"))

  /** Rows per page of 2.0 files when not set: a 2.0 page is decoded whole,
    * so this bounds a scan's memory per column. */
  val V20RowsPerPage: Int = 65536

  /** The directory of a data file's blob files (2.2 blob columns): `data/<data file stem>/`. */
  def blobDir(storage: DatasetStorage, name: String): Path =
    storage.dataFile(if (name.endsWith(".lance")) name.dropRight(".lance".length) else name)

  /** Deletes a data file this connector wrote and never committed, and its
    * blob files; best effort. */
  def delete(storage: DatasetStorage, name: String): Unit = {
    try storage.fs.delete(storage.dataFile(name), false) catch { case _: Exception => () }
    if (name.endsWith(".lance"))
      try { val dir = blobDir(storage, name); if (storage.fs.exists(dir)) storage.fs.delete(dir, true) }
      catch { case _: Exception => () }
  }

  /** Whether files of `schema` written at `version` can be joined by
    * [[join]]: 2.1 or later, and no blob column (its pages hold positions in
    * their file). */
  def joinable(schema: LanceSchema, version: DataFileVersion): Boolean =
    (version.major > 2 || (version.major == 2 && version.minor >= 1)) && !schema.allFields.exists(io.lancespark.table.scan.BlobColumns.isBlob)

  /** One new data file (named `<prefix>-<uuid>.lance`) holding the rows of
    * the uncommitted data files `names` in order, each of the same columns
    * at 2.1 or later (pieces of one fragment's file written by several
    * tasks), joined without decoding ([[io.lancespark.format.FileConcat]]);
    * the pieces are deleted once it is written. `like` names the pieces'
    * field ids and column indices (any piece's). */
  def join(storage: DatasetStorage, names: Seq[String], prefix: String, like: WrittenFragment): WrittenFragment = {
    val name = s"$prefix-${UUID.randomUUID()}.lance"
    val path = storage.dataFile(name)
    val inputs = names.map(n => storage.open(storage.dataFile(n)))
    val joined = try {
      val out = storage.fs.create(path, false)
      try io.lancespark.format.FileConcat.write(inputs, out, path.toString)
      catch { case e: Throwable => try out.close() finally delete(storage, name); throw e }
    } finally inputs.foreach(i => try i.close() catch { case _: Throwable => () })
    names.foreach(delete(storage, _))
    like.copy(path = name, physicalRows = joined.rows, sizeBytes = joined.size)
  }

  /** Deletes the data files a failed job's tasks wrote (their names start with
    * the job's prefix), including those of tasks whose results never arrived. */
  def sweep(storage: DatasetStorage, prefix: String): Unit =
    storage.list(DatasetStorage.DataDir).filter(_.getPath.getName.startsWith(prefix + "-"))
      .foreach(st => delete(storage, st.getPath.getName))
}
