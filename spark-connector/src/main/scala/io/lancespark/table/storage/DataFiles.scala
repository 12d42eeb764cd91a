package io.lancespark.table.storage

import io.lancespark.format.DataFileReader
import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.format.v01.LegacyFileReader
import io.lancespark.format.v20.V20FileReader
import io.lancespark.table.model.DataFileRef

/** Opens a fragment's data file with the reader for its file version. */
object DataFiles {

  def open(storage: DatasetStorage, schema: LanceSchema, ref: DataFileRef): DataFileReader = {
    val path = storage.resolve(ref.relativePath, "data file")
    val source = storage.open(path)
    try {
      if (ref.isLegacy) LegacyFileReader.open(source, schema, ref.fieldIds)
      else if (ref.majorVersion == 2 && ref.minorVersion == 0) {
        val columns = ref.fieldIds.zip(ref.columnIndices).filter { case (f, c) => f >= 0 && c >= 0 }.toMap
        V20FileReader.open(source, schema, columns)
      } else
        throw LanceFormatException(path.toString,
          s"data file version ${ref.majorVersion}.${ref.minorVersion} is not supported (this connector reads 0.1 and 2.0)")
    } catch {
      case e: Throwable => source.close(); throw e
    }
  }
}
