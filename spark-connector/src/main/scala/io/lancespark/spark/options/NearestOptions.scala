package io.lancespark.spark.options

import java.util.Locale

import io.lancespark.table.index.vector.DistanceMetric

/** A read's nearest-neighbour search, from its `nearest.*` options. */
final case class NearestConf(
    column: String,
    vector: Vector[Float],
    k: Int,
    nprobes: Option[Int],
    refineFactor: Option[Int],
    metric: DistanceMetric,
    useIndex: Boolean,
    prefilter: Boolean = true)

/** The read options of a nearest-neighbour search (`spark.read.format("lance")
  * .option("nearest.column", "emb").option("nearest.vector", "[0.1, ...]")
  * .option("nearest.k", 10)`): parsed strictly, errors name the option. Only
  * a read's own options (not session or table defaults). */
object NearestOptions {
  val Column: LanceOption[String] = LanceOption.string("nearest.column", "a column name")(v => Some(v.trim).filter(_.nonEmpty))
  val QueryVector: LanceOption[Vector[Float]] =
    LanceOption("nearest.vector", "a list of numbers such as [0.1, -2, 3e-4]", parseVector)
  val K: LanceOption[Int] = LanceOption.positiveInt("nearest.k")
  val Nprobes: LanceOption[Int] = LanceOption.positiveInt("nearest.nprobes")
  val RefineFactor: LanceOption[Int] = LanceOption.positiveInt("nearest.refine_factor")
  val Metric: LanceOption[DistanceMetric] =
    LanceOption("nearest.metric", "one of l2, cosine, dot", DistanceMetric.parse)
  val UseIndex: LanceOption[Boolean] = LanceOption.boolean("nearest.use_index")
  /** true (default): the read's pushed `where` predicates filter the rows
    * searched; false: they filter the k rows found (pylance's prefilter=False). */
  val Prefilter: LanceOption[Boolean] = LanceOption.boolean("nearest.prefilter")

  val All: Seq[LanceOption[_]] = Seq(Column, QueryVector, K, Nprobes, RefineFactor, Metric, UseIndex, Prefilter)

  val DefaultK: Int = 10

  /** The search the options ask for; None without `nearest.column`. Any
    * other `nearest.*` option without `nearest.column` is an error. */
  def parse(explicit: Map[String, String]): Option[NearestConf] = {
    val src = new OptionSource(explicit, _ => None, Map.empty, All, "read")
    val asked = explicit.keys.map(_.toLowerCase(Locale.ROOT)).filter(_.startsWith("nearest."))
    val unknown = asked.filterNot(k => All.exists(_.key == k))
    if (unknown.nonEmpty)
      throw new IllegalArgumentException(s"unknown nearest-neighbour option(s) ${unknown.toSeq.sorted.mkString(", ")}; " +
        s"known: ${All.map(_.name).mkString(", ")}")
    src.get(Column) match {
      case None =>
        if (asked.nonEmpty)
          throw new IllegalArgumentException(
            s"option(s) ${asked.toSeq.sorted.mkString(", ")} need the option 'nearest.column' (the vector column to search)")
        None
      case Some(column) =>
        val vector = src.get(QueryVector).getOrElse(throw new IllegalArgumentException(
          "option 'nearest.vector' is required with 'nearest.column': the query vector, e.g. [0.1, 0.2, 0.3]"))
        Some(NearestConf(column, vector, src.getOrElse(K, DefaultK), src.get(Nprobes), src.get(RefineFactor),
          src.getOrElse(Metric, DistanceMetric.L2), src.getOrElse(UseIndex, true),
          src.getOrElse(Prefilter, true)))
    }
  }

  /** "[1, 2.5, -3e-2]" (brackets optional): finite numbers, at least one. */
  def parseVector(raw: String): Option[Vector[Float]] = {
    val body = raw.trim.stripPrefix("[").stripSuffix("]").trim
    if (body.isEmpty) None
    else {
      val parts = body.split(",", -1).map(_.trim)
      if (!parts.forall(_.matches(Number))) None
      else Some(parts.map(java.lang.Float.parseFloat).toVector).filter(_.forall(f => !f.isInfinite))
    }
  }

  private val Number: String = "[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?"

  /** The query vector as the option value `nearest.vector` takes. */
  def format(vector: Seq[Float]): String = vector.map(f => java.lang.Float.toString(f)).mkString("[", ", ", "]")
}
