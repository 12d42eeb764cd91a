package io.lancespark.spark.write

import java.util.Locale

/** Options of `df.write.format("lance")` (case-insensitive). */
final case class LanceWriteOptions(
    path: String,
    maxRowsPerFile: Long,
    maxRowsPerPage: Int,
    vectorColumns: Map[String, Int],
    enableStableRowIds: Boolean,
    v2ManifestPaths: Boolean)

object LanceWriteOptions {
  /** Most rows in one data file (fragment); a task writes several when it has more. */
  val MaxRowsPerFile = "maxRowsPerFile"
  /** Most rows in one page of a column. */
  val MaxRowsPerPage = "maxRowsPerPage"
  /** Lance file version to write; only "2.0" is written today. */
  val FileVersion = "fileVersion"
  /** "emb:768,other:128": ARRAY<FLOAT|DOUBLE> columns stored as fixed-size lists (vectors). */
  val VectorColumns = "vectorColumns"
  /** New datasets only: assign stable row ids. */
  val EnableStableRowIds = "enableStableRowIds"
  /** New datasets only: V2 manifest naming (default) or the legacy V1 scheme. */
  val V2ManifestPaths = "v2ManifestPaths"

  /** Column metadata key that marks an ARRAY<FLOAT|DOUBLE> column as a vector of that dimension. */
  val VectorDimensionMetadata = "lance.vector.dimension"

  val DefaultMaxRowsPerFile: Long = 1024L * 1024L
  val DefaultMaxRowsPerPage: Int = 65536

  def apply(options: Map[String, String]): LanceWriteOptions = {
    val o = options.map { case (k, v) => k.toLowerCase(Locale.ROOT) -> v.trim }
    def get(key: String): Option[String] = o.get(key.toLowerCase(Locale.ROOT))
    def long(key: String, default: Long): Long = get(key).map { v =>
      val n = try v.toLong catch {
        case _: NumberFormatException => throw new IllegalArgumentException(s"option '$key' must be an integer, got '$v'")
      }
      if (n <= 0) throw new IllegalArgumentException(s"option '$key' must be positive, got $n")
      n
    }.getOrElse(default)
    def bool(key: String, default: Boolean): Boolean = get(key).map(_.toLowerCase(Locale.ROOT)) match {
      case None => default
      case Some("true") => true
      case Some("false") => false
      case Some(v) => throw new IllegalArgumentException(s"option '$key' must be true or false, got '$v'")
    }
    get(FileVersion).foreach { v =>
      if (v != "2.0" && v != "stable")
        throw new IllegalArgumentException(
          s"option '$FileVersion' = '$v' is not supported: this connector writes Lance file version 2.0")
    }
    val vectors = get(VectorColumns).toSeq.flatMap(_.split(",").map(_.trim).filter(_.nonEmpty)).map { spec =>
      spec.split(":") match {
        case Array(name, dim) if dim.forall(_.isDigit) && dim.nonEmpty && dim.toInt > 0 => name.trim -> dim.toInt
        case _ => throw new IllegalArgumentException(
          s"option '$VectorColumns' entries look like name:dimension (e.g. emb:768), got '$spec'")
      }
    }.toMap
    LanceWriteOptions(
      path = get("path").getOrElse(throw new IllegalArgumentException(
        "a Lance dataset path is required: df.write.format(\"lance\").save(\"/path/to/dataset\")")),
      maxRowsPerFile = long(MaxRowsPerFile, DefaultMaxRowsPerFile),
      maxRowsPerPage = long(MaxRowsPerPage, DefaultMaxRowsPerPage).toInt,
      vectorColumns = vectors,
      enableStableRowIds = bool(EnableStableRowIds, default = false),
      v2ManifestPaths = bool(V2ManifestPaths, default = true))
  }
}
