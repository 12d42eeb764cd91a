package io.lancespark.spark.options

import java.util.Locale

/** One option of the connector: its name (case-insensitive), the values it
  * accepts (said in errors), and how a value is parsed (None: not accepted). */
final case class LanceOption[T](name: String, accepted: String, parse: String => Option[T],
    sessionName: Option[String] = None) {

  /** The session configuration key that sets a default for every read or write
    * (`spark.lance.<name>` unless the option names its own). */
  def sessionKey: String = sessionName.getOrElse(s"spark.lance.$name")

  def key: String = name.toLowerCase(Locale.ROOT)
}

object LanceOption {

  def positiveLong(name: String): LanceOption[Long] =
    LanceOption(name, "a positive integer", v => scala.util.Try(v.toLong).toOption.filter(_ > 0))

  def positiveInt(name: String): LanceOption[Int] =
    LanceOption(name, "a positive integer (at most 2147483647)", v => scala.util.Try(v.toInt).toOption.filter(_ > 0))

  def nonNegativeLong(name: String): LanceOption[Long] =
    LanceOption(name, "a non-negative integer", v => scala.util.Try(v.toLong).toOption.filter(_ >= 0))

  def boolean(name: String): LanceOption[Boolean] =
    choice(name, "true" -> true, "false" -> false)

  /** One of fixed words (case-insensitive). */
  def choice[T](name: String, values: (String, T)*): LanceOption[T] =
    LanceOption(name, "one of " + values.map(_._1).mkString(", "),
      v => values.find(_._1.equalsIgnoreCase(v)).map(_._2))

  def string(name: String, accepted: String)(parse: String => Option[String]): LanceOption[String] =
    LanceOption(name, accepted, parse)
}
