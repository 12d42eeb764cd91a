package io.lancespark.format.stats

/** Statistics of one page of one column. `firstRow`/`numRows` are the page's
  * top-level rows. `min`/`max` are lower/upper bounds (None = unknown):
  * java.lang.Long for integers, dates, times and timestamps (unsigned 64-bit
  * values as their raw bits), java.lang.Double for floats (half and single
  * precision widened), java.math.BigDecimal for decimals, java.lang.Boolean,
  * String for strings, Array[Byte] for binary and fixed-size binary.
  * `valueBytes`: the bytes of a string or binary page's values (-1 unknown or
  * another type). */
final case class PageStat(
    columnIndex: Int,
    fieldId: Int,
    pageIndex: Int,
    firstRow: Long,
    numRows: Long,
    nullCount: Long,
    min: Option[Any],
    max: Option[Any],
    valueBytes: Long = -1L)

/** The page statistics of one data file (lance_spark's, or a 0.1 file's). */
final case class PageStatistics(pages: Vector[PageStat], sketches: Map[Int, DistinctSketch] = Map.empty) {
  lazy val byField: Map[Int, Vector[PageStat]] = pages.groupBy(_.fieldId)
  def forField(fieldId: Int): Vector[PageStat] = byField.getOrElse(fieldId, Vector.empty)
  /** The distinct-value sketch of a field's values in the whole file, if the writer left one. */
  def sketchOf(fieldId: Int): Option[DistinctSketch] = sketches.get(fieldId)
}

/** Per-page statistics (see docs/page-statistics.md): computed while writing
  * leaf columns that are not inside a list ([[StatsCollector]]), stored as an
  * Arrow IPC stream in a global buffer that the schema metadata key
  * [[PageStatistics.BufferKey]] points to ([[StatsStore]]). Readers that do
  * not know the key (pylance) ignore the buffer. */
object PageStatistics {
  /** FileDescriptor schema metadata key: the index of the global buffer. */
  val BufferKey = "lance_spark:page_stats_buffer"
  /** Arrow schema metadata key of the IPC stream: layout version. */
  val VersionKey = "lance_spark:page_stats_version"
  /** The layout written: 2 (one pair of binary bound columns for all fields). */
  val Version = "2"
  /** Layouts read: 1 (a struct column per field) and 2. */
  val ReadableVersions: Seq[String] = Seq("1", "2")
  /** FileDescriptor schema metadata key: the index of the global buffer of
    * distinct-value sketches (one per field with statistics, whole file). */
  val SketchBufferKey = "lance_spark:distinct_sketch_buffer"
  /** Arrow schema metadata key of the sketch stream: its layout version. */
  val SketchVersionKey = "lance_spark:distinct_sketch_version"
  val SketchVersion = "1"
  /** Longest binary/string bound kept, in bytes. */
  val MaxBoundBytes = 64
}
