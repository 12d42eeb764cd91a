package io.lancespark.spark.options

import java.time.{Instant, LocalDate, LocalDateTime, ZoneOffset}

/** Where a stream reading a dataset starts: Snapshot (the latest version's
  * rows, then what later versions append, as Delta's default), a version
  * (what it and later versions append), or a commit time. */
sealed trait StreamStart
object StreamStart {
  case object Snapshot extends StreamStart
  case object Latest extends StreamStart
  final case class AtVersion(version: Long) extends StreamStart
  final case class AtTime(time: Instant) extends StreamStart
}

/** A streaming read's settings (`spark.readStream.format("lance")`). */
final case class StreamConf(
    start: StreamStart = StreamStart.Snapshot,
    maxRowsPerTrigger: Option[Long] = None,
    maxFilesPerTrigger: Option[Int] = None,
    skipChangeCommits: Boolean = false)

object StreamOptions {
  /** A version number, or "latest" (only what is committed after the stream starts). */
  val StartingVersion: LanceOption[StreamStart] = LanceOption("startingVersion",
    "a version number or 'latest'", v =>
      if (v.equalsIgnoreCase("latest")) Some(StreamStart.Latest)
      else scala.util.Try(v.toLong).toOption.filter(_ >= 0).map(StreamStart.AtVersion))
  /** A commit time: the stream starts at the first version committed at or after it. */
  val StartingTimestamp: LanceOption[Instant] = LanceOption("startingTimestamp",
    "a timestamp (2024-05-01, 2024-05-01 12:00:00 or 2024-05-01T12:00:00Z; UTC unless an offset is given)",
    v => parseTime(v))
  /** Most rows (whole fragments, at least one) a micro-batch takes. */
  val MaxRowsPerTrigger: LanceOption[Long] = LanceOption.positiveLong("maxRowsPerTrigger")
  /** Most fragments a micro-batch takes. */
  val MaxFilesPerTrigger: LanceOption[Int] = LanceOption.positiveInt("maxFilesPerTrigger")
  /** true: versions that delete, update or replace rows are skipped (their new rows too); false (default): they
    * stop the stream with an error naming the version. */
  val SkipChangeCommits: LanceOption[Boolean] = LanceOption.boolean("skipChangeCommits")

  val All: Seq[LanceOption[_]] = Seq(StartingVersion, StartingTimestamp, MaxRowsPerTrigger, MaxFilesPerTrigger,
    SkipChangeCommits)

  /** From a read's own options only (a session setting would move every stream's start). */
  def conf(explicit: Map[String, String]): StreamConf = {
    val own = new OptionSource(explicit, _ => None, Map.empty, All, "stream read")
    val start = (own.get(StartingVersion), own.get(StartingTimestamp)) match {
      case (Some(_), Some(_)) =>
        throw new IllegalArgumentException("give either the stream option startingVersion or startingTimestamp, not both")
      case (Some(v), None) => v
      case (None, Some(t)) => StreamStart.AtTime(t)
      case (None, None) => StreamStart.Snapshot
    }
    StreamConf(start, own.get(MaxRowsPerTrigger), own.get(MaxFilesPerTrigger), own.getOrElse(SkipChangeCommits, false))
  }

  private[options] def parseTime(v: String): Option[Instant] = {
    val s = v.trim
    scala.util.Try(Instant.parse(s))
      .orElse(scala.util.Try(java.time.OffsetDateTime.parse(s).toInstant))
      .orElse(scala.util.Try(LocalDateTime.parse(s.replace(' ', 'T')).toInstant(ZoneOffset.UTC)))
      .orElse(scala.util.Try(LocalDate.parse(s).atStartOfDay(ZoneOffset.UTC).toInstant))
      .toOption
  }
}
