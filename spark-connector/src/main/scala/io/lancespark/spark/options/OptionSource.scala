package io.lancespark.spark.options

import java.util.Locale

import org.slf4j.LoggerFactory

/** Where one read or write takes its options from, in this order (as
  * Iceberg's SparkReadConf does): the statement's own options (DataFrame
  * reader/writer options), the session configuration (`spark.lance.<name>`),
  * the table's properties. Every value is parsed strictly: a value an option
  * does not accept is an error naming the option, where the value came from
  * and what is accepted. Options no Lance read or write knows are logged. */
final class OptionSource(
    explicit: Map[String, String],
    session: String => Option[String],
    tableProperties: Map[String, String],
    known: Seq[LanceOption[_]],
    what: String) {

  private val lowered: Map[String, String] = explicit.map { case (k, v) => k.toLowerCase(Locale.ROOT) -> v }
  private val props: Map[String, String] = tableProperties.map { case (k, v) => k.toLowerCase(Locale.ROOT) -> v }

  /** The option's value from the first source that sets it, parsed. */
  def get[T](option: LanceOption[T]): Option[T] = {
    val found = lowered.get(option.key).map(_ -> s"the $what option")
      .orElse(session(option.sessionKey).map(_ -> s"session configuration ${option.sessionKey}"))
      .orElse(props.get(option.key).map(_ -> "table property"))
    found.map { case (raw, from) =>
      option.parse(raw.trim).getOrElse(throw new IllegalArgumentException(
        s"option '${option.name}' (from $from) must be ${option.accepted}, got '$raw'"))
    }
  }

  def getOrElse[T](option: LanceOption[T], default: => T): T = get(option).getOrElse(default)

  /** Explicit options no Lance read or write knows (typos, another source's options). */
  def unknown: Seq[String] = {
    val names = (known.map(_.key) ++ OptionSource.Ignored).toSet
    explicit.keys.filterNot(k => names.contains(k.toLowerCase(Locale.ROOT))).toSeq.sorted
  }

  def warnUnknown(): this.type = {
    val u = unknown
    if (u.nonEmpty)
      OptionSource.log.warn(s"Lance $what: ignoring unknown option(s) ${u.mkString(", ")}; " +
        s"known: ${known.map(_.name).mkString(", ")}")
    this
  }
}

object OptionSource {
  private val log = LoggerFactory.getLogger(classOf[OptionSource])

  /** Keys Spark itself puts into a source's options and table properties. */
  val Ignored: Seq[String] = Seq("path", "paths", "provider", "location", "owner", "comment", "external",
    "is_managed_location", "__spark_internal_option_source", "checkpointlocation", "queryname")

  /** The dataset path among a read's or write's options (case-insensitive
    * key "path"); `usage` shows how to give one. */
  def path(explicit: Map[String, String], usage: String): String =
    explicit.collectFirst { case (k, v) if k.equalsIgnoreCase("path") => v }.getOrElse(
      throw new IllegalArgumentException(s"a Lance dataset path is required: $usage"))

  /** The active session's configuration, or none outside a session. (`get` with a default:
    * `getOption` throws and catches an exception for every key not set, a few per option
    * per query.) */
  def activeSession: String => Option[String] = key =>
    org.apache.spark.sql.SparkSession.getActiveSession.flatMap(s => Option(s.conf.get(key, null)))
}
