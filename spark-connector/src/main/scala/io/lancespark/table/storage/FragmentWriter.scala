package io.lancespark.table.storage

import java.util.UUID

import org.apache.arrow.vector.FieldVector
import org.apache.hadoop.fs.Path

import io.lancespark.format.v20.V20FileWriter
import io.lancespark.schema.LanceSchema
import io.lancespark.table.commit.WrittenFragment

/** Writes the data file of one new fragment: named `<prefix>-<uuid>.lance`
  * under the dataset's data directory, in the file version this connector
  * writes. Nothing is visible until a commit lists the fragment; `abort`
  * removes the file. The writer next to FragmentScanner, the reader. */
final class FragmentWriter(storage: DatasetStorage, schema: LanceSchema, maxRowsPerPage: Int, prefix: String) {

  val name: String = s"$prefix-${UUID.randomUUID()}.lance"
  private val path: Path = storage.dataFile(name)
  private val writer = new V20FileWriter(storage.fs.create(path, false), path.toString, schema, maxRowsPerPage)

  /** One batch: a vector per top-level field of `schema`, in order. */
  def write(columns: Seq[FieldVector]): Unit = writer.write(columns)

  /** Writes the file's footer; the fragment a commit can now add. */
  def finish(): WrittenFragment = {
    val done = writer.finish()
    WrittenFragment(name, done.fieldIds, done.columnIndices, done.numRows, done.sizeBytes)
  }

  /** Closes and deletes the file (a failed or cancelled task). */
  def abort(): Unit = {
    try writer.close() catch { case _: Exception => () }
    FragmentWriter.delete(storage, name)
  }
}

object FragmentWriter {
  /** The Lance file version of the data files this connector writes. */
  val FileVersion: String = "2.0"

  /** Deletes a data file this connector wrote and never committed; best effort. */
  def delete(storage: DatasetStorage, name: String): Unit =
    try storage.fs.delete(storage.dataFile(name), false) catch { case _: Exception => () }

  /** Deletes the data files a failed job's tasks wrote (their names start with
    * the job's prefix), including those of tasks whose results never arrived. */
  def sweep(storage: DatasetStorage, prefix: String): Unit =
    storage.list(DatasetStorage.DataDir).filter(_.getPath.getName.startsWith(prefix + "-"))
      .foreach(st => delete(storage, st.getPath.getName))
}
