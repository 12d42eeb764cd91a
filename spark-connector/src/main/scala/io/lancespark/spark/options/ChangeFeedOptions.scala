package io.lancespark.spark.options

import java.time.Instant

/** A bound of a change feed read: a version number or a commit time. */
sealed trait ChangeFeedBound
object ChangeFeedBound {
  final case class AtVersion(version: Long) extends ChangeFeedBound
  final case class AtTime(time: Instant) extends ChangeFeedBound
}

/** `readChangeFeed`: the row changes of the versions from `start` to `end`
  * (both included; end None: the latest version). */
final case class ChangeFeedConf(start: ChangeFeedBound, end: Option[ChangeFeedBound])

/** The options of a change feed read (`option("readChangeFeed", "true")`), as Delta names them. */
object ChangeFeedOptions {
  val ReadChangeFeed: LanceOption[Boolean] = LanceOption.boolean("readChangeFeed")
  /** The first version whose changes are read (included). */
  val StartingVersion: LanceOption[Long] = LanceOption.nonNegativeLong("startingVersion")
  val StartingTimestamp: LanceOption[Instant] = LanceOption("startingTimestamp",
    "a timestamp (2024-05-01, 2024-05-01 12:00:00 or 2024-05-01T12:00:00Z; UTC unless an offset is given)",
    v => StreamOptions.parseTime(v))
  /** The last version whose changes are read (included); default: the latest. */
  val EndingVersion: LanceOption[Long] = LanceOption.nonNegativeLong("endingVersion")
  val EndingTimestamp: LanceOption[Instant] = LanceOption("endingTimestamp",
    "a timestamp (2024-05-01, 2024-05-01 12:00:00 or 2024-05-01T12:00:00Z; UTC unless an offset is given)",
    v => StreamOptions.parseTime(v))

  /** Options only a change feed read has (the starting ones are also a stream's). */
  val Extra: Seq[LanceOption[_]] = Seq(ReadChangeFeed, EndingVersion, EndingTimestamp)

  private val All: Seq[LanceOption[_]] = Seq(ReadChangeFeed, StartingVersion, StartingTimestamp, EndingVersion,
    EndingTimestamp)

  /** Whether the read's own options ask for its change feed (`readChangeFeed` true). */
  def requested(explicit: Map[String, String]): Boolean =
    new OptionSource(explicit, _ => None, Map.empty, All, "change feed read").getOrElse(ReadChangeFeed, false)

  /** The batch read's change feed, when its own options ask for one (`readChangeFeed` true). */
  def parse(explicit: Map[String, String]): Option[ChangeFeedConf] = {
    val own = new OptionSource(explicit, _ => None, Map.empty, All, "change feed read")
    if (!own.getOrElse(ReadChangeFeed, false)) None
    else {
      def bound(version: LanceOption[Long], time: LanceOption[Instant]): Option[ChangeFeedBound] =
        (own.get(version), own.get(time)) match {
          case (Some(_), Some(_)) => throw new IllegalArgumentException(
            s"readChangeFeed: give either the option ${version.name} or ${time.name}, not both")
          case (Some(v), None) => Some(ChangeFeedBound.AtVersion(v))
          case (None, Some(t)) => Some(ChangeFeedBound.AtTime(t))
          case (None, None) => None
        }
      val start = bound(StartingVersion, StartingTimestamp).getOrElse(throw new IllegalArgumentException(
        "readChangeFeed needs the option startingVersion (a version number; its changes are included) or " +
          "startingTimestamp"))
      Some(ChangeFeedConf(start, bound(EndingVersion, EndingTimestamp)))
    }
  }
}
