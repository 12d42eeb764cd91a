package io.lancespark.table.storage

import io.lancespark.format.DataFileReader
import io.lancespark.format.file.Footer
import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.format.v01.LegacyFileReader
import io.lancespark.format.v20.V20FileReader
import io.lancespark.format.v21.V21FileReader
import io.lancespark.table.model.DataFileRef

/** Opens a fragment's data file with the reader for its file version. */
object DataFiles {

  /** Field id -> column of a 2.x file: as the manifest maps them, or (an entry
    * written as legacy, with no column indices) in the order it lists them. */
  private def columns(ref: DataFileRef): Map[Int, Int] =
    (if (ref.columnIndices.nonEmpty) ref.fieldIds.zip(ref.columnIndices) else ref.fieldIds.zipWithIndex)
      .filter { case (f, c) => f >= 0 && c >= 0 }.toMap

  /** The version a Lance file's own footer states (both legacy and 2.x files
    * end in u16 major, u16 minor, "LANC"): a file the manifest calls legacy is
    * read by what it is, as files of Lance 0.15-0.16 may be 2.0 ("0.3") files
    * under a manifest entry that says otherwise. */
  private def footerVersion(source: io.lancespark.format.input.RandomAccessSource): (Int, Int) = {
    if (source.size < 8) throw LanceFormatException(source.path, s"not a Lance file: only ${source.size} bytes")
    val b = source.read(source.size - 8, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN)
    val magic = Array(b.get(4), b.get(5), b.get(6), b.get(7))
    if (!java.util.Arrays.equals(magic, Footer.Magic))
      throw LanceFormatException(source.path, "not a Lance file: no \"LANC\" at its end")
    (b.getShort(0) & 0xffff, b.getShort(2) & 0xffff)
  }

  def open(storage: DatasetStorage, schema: LanceSchema, ref: DataFileRef): DataFileReader = {
    val path = storage.resolve(ref.relativePath, "data file")
    val source = storage.open(path, ref.sizeBytes)
    try {
      (if (ref.isLegacy) footerVersion(source) else (ref.majorVersion, ref.minorVersion)) match {
        case (0, minor) if minor <= 2 => LegacyFileReader.open(source, schema, ref.fieldIds)
        case (0, 3) | (2, 0) => V20FileReader.open(source, schema, columns(ref))
        case (2, minor) if minor == 1 || minor == 2 => V21FileReader.open(source, schema, columns(ref), minor,
          new DatasetBlobSources(storage, path))
        case (major, minor) =>
          throw LanceFormatException(path.toString,
            s"data file version $major.$minor is not supported (this connector reads 0.1, 2.0, 2.1 and 2.2)")
      }
    } catch {
      case e: Throwable => source.close(); throw e
    }
  }
}
