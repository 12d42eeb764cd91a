package io.lancespark.table.storage

import io.lancespark.format.DataFileReader
import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.format.v01.LegacyFileReader
import io.lancespark.format.v20.V20FileReader
import io.lancespark.format.v21.V21FileReader
import io.lancespark.table.model.DataFileRef

/** Opens a fragment's data file with the reader for its file version. */
object DataFiles {

  def open(storage: DatasetStorage, schema: LanceSchema, ref: DataFileRef): DataFileReader = {
    val path = storage.resolve(ref.relativePath, "data file")
    val source = storage.open(path, ref.sizeBytes)
    try {
      if (ref.isLegacy) LegacyFileReader.open(source, schema, ref.fieldIds)
      else {
        val columns = ref.fieldIds.zip(ref.columnIndices).filter { case (f, c) => f >= 0 && c >= 0 }.toMap
        (ref.majorVersion, ref.minorVersion) match {
          case (2, 0) => V20FileReader.open(source, schema, columns)
          case (2, 1) | (2, 2) => V21FileReader.open(source, schema, columns)
          case (major, minor) =>
            throw LanceFormatException(path.toString,
              s"data file version $major.$minor is not supported (this connector reads 0.1, 2.0, 2.1 and 2.2)")
        }
      }
    } catch {
      case e: Throwable => source.close(); throw e
    }
  }
}
