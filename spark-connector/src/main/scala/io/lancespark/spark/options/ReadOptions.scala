package io.lancespark.spark.options

/** A read's settings, resolved once on the driver; serializable, so the scan
  * hands it to the reader factory whole. */
final case class ReadConf(
    batchSize: Int = ReadOptions.DefaultBatchSize,
    splitRows: Option[Long] = None,
    pushdown: Boolean = true,
    readAhead: Option[Boolean] = None,
    aggregatePushdown: Boolean = true,
    aggregateMinRowsPerGroup: Long = ReadOptions.DefaultAggregateMinRowsPerGroup,
    useIndex: Boolean = true,
    batchSizeGiven: Boolean = false,
    localScanRows: Long = ReadOptions.DefaultLocalScanRows)

/** Which dataset a read opens: its path and version or tag (only from the
  * read's own options; at most one of the two). */
final case class ReadTarget(path: String, version: Option[Long], tag: Option[String] = None) {
  /** Whether the read is pinned to one version (not the latest): such a table is read-only. */
  def pinned: Boolean = version.isDefined || tag.isDefined
  def describe: String = tag.map(t => s"tag '$t'").orElse(version.map(v => s"version $v")).getOrElse("the latest version")
}

/** The options of `spark.read.format("lance")` and of scans of catalog tables. */
object ReadOptions {
  /** Dataset version to read (time travel); default: the latest. Only a read's own option. */
  val Version: LanceOption[Long] = LanceOption.nonNegativeLong("version")
  /** The version a tag names (time travel by name); not together with `version`. Only a read's own option. */
  val Tag: LanceOption[String] = LanceOption.string("tag", "a tag name")(v => Some(v.trim).filter(_.nonEmpty))
  /** Rows per columnar batch handed to Spark. */
  val BatchSize: LanceOption[Int] = LanceOption.positiveInt("batchSize")
  /** Most rows one input partition reads; default: sized so every core gets work. */
  val SplitRows: LanceOption[Long] = LanceOption.positiveLong("splitRows")
  /** false turns predicate pushdown off (Spark then filters every row read). */
  val Pushdown: LanceOption[Boolean] = LanceOption.boolean("pushdown")
  /** false: aggregates (SUM, COUNT, MIN, MAX, AVG; grouped or not) are
    * computed by Spark, not partially by the scan. */
  val AggregatePushdown: LanceOption[Boolean] = LanceOption.boolean("aggregatePushdown")
  /** A partial GROUP BY is computed by the scan only when its groups have on
    * average at least this many rows, by the columns' distinct estimates
    * (Spark's generated aggregation is faster over many small groups); 0:
    * whatever the groups. Tables without distinct estimates (other writers'
    * files) are not held back. */
  val AggregateMinRowsPerGroup: LanceOption[Long] = LanceOption.nonNegativeLong("aggregateMinRowsPerGroup")
  /** false: the scan does not use the dataset's scalar indices (docs/indices.md). */
  val UseIndex: LanceOption[Boolean] = LanceOption.boolean("useIndex")
  /** true: storage reads run on the read pool, the next batch's while the
    * current one decodes; false: each task reads a batch, then decodes it;
    * auto (default): true except for local files, whose reads are CPU work
    * that competes with the decode for the same cores. */
  val ReadAhead: LanceOption[Option[Boolean]] =
    LanceOption.choice("readAhead", "auto" -> None, "true" -> Some(true), "false" -> Some(false))

  /** Most rows a scan may have, as planned from the manifest, indices and page
    * statistics, to be read on the driver while Spark optimizes the query
    * (no job; see docs/indices.md, "Lookups without a Spark job"); 0: never. */
  val LocalScanRows: LanceOption[Long] = LanceOption.nonNegativeLong("localScanRows")

  val All: Seq[LanceOption[_]] = Seq(Version, Tag, BatchSize, SplitRows, Pushdown, ReadAhead, AggregatePushdown,
    AggregateMinRowsPerGroup, UseIndex,
    LocalScanRows) ++
    NearestOptions.All ++ StreamOptions.All ++ ChangeFeedOptions.Extra

  val DefaultBatchSize: Int = 8192
  val DefaultLocalScanRows: Long = 4096L
  /** TPC-DS store_sales at scale factor 1 (2.9M rows): grouped by its 7 stores
    * the scan is faster than Spark, by its 90,000 customers or its 18,000
    * items and 7 stores slower. */
  val DefaultAggregateMinRowsPerGroup: Long = 1000L

  def target(explicit: Map[String, String]): ReadTarget = {
    val own = new OptionSource(explicit, _ => None, Map.empty, All, "read")
    val path = OptionSource.path(explicit, "spark.read.format(\"lance\").load(\"/path/to/dataset\")")
    val (version, tag) = (own.get(Version), own.get(Tag))
    if (version.isDefined && tag.isDefined)
      throw new IllegalArgumentException(s"$path: give either the read option version or tag, not both")
    ReadTarget(path, version, tag)
  }

  def conf(source: OptionSource): ReadConf = ReadConf(
    batchSize = source.getOrElse(BatchSize, DefaultBatchSize),
    splitRows = source.get(SplitRows),
    pushdown = source.getOrElse(Pushdown, true),
    readAhead = source.get(ReadAhead).flatten,
    aggregatePushdown = source.getOrElse(AggregatePushdown, true),
    aggregateMinRowsPerGroup = source.getOrElse(AggregateMinRowsPerGroup, DefaultAggregateMinRowsPerGroup),
    useIndex = source.getOrElse(UseIndex, true),
    batchSizeGiven = source.get(BatchSize).isDefined,
    localScanRows = source.getOrElse(LocalScanRows, DefaultLocalScanRows))

  /** A read's settings from its own options, the session and the table's properties. */
  def conf(explicit: Map[String, String], session: String => Option[String],
      tableProperties: Map[String, String]): ReadConf =
    conf(new OptionSource(explicit, session, tableProperties, All, "read").warnUnknown())
}
