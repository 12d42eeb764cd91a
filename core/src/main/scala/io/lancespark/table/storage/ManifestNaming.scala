package io.lancespark.table.storage

import io.lancespark.schema.LanceFormatException

/** How manifest files under `_versions/` are named.
  *  - V1: `{version}.manifest`
  *  - V2: `{u64::MAX - version, zero-padded to 20 digits}.manifest` (newest sorts first).
  * A dataset uses one scheme; a mixture is an error. */
sealed trait ManifestNaming {
  def fileName(version: Long): String
}

object ManifestNaming {
  val Dir: String = "_versions"
  private val Suffix = ".manifest"
  private val U64Max: BigInt = (BigInt(1) << 64) - 1

  case object V1 extends ManifestNaming {
    override def fileName(version: Long): String = s"$version$Suffix"
  }

  case object V2 extends ManifestNaming {
    override def fileName(version: Long): String = f"${U64Max - BigInt(version)}%020d$Suffix"
  }

  /** (scheme, version) of a file name in `_versions/`, or None if it is not a manifest. */
  def parse(name: String): Option[(ManifestNaming, Long)] = {
    if (!name.endsWith(Suffix)) None
    else {
      val stem = name.stripSuffix(Suffix)
      if (stem.isEmpty || !stem.forall(_.isDigit)) None
      else if (stem.length == 20) Some(V2 -> (U64Max - BigInt(stem)).toLong)
      else Some(V1 -> stem.toLong)
    }
  }

  /** Versions and scheme of a dataset from the names in `_versions/`. */
  def scan(datasetUri: String, names: Seq[String]): (ManifestNaming, Seq[Long]) = {
    val parsed = names.flatMap(parse)
    val schemes = parsed.map(_._1).distinct
    if (schemes.size > 1)
      throw new LanceFormatException(
        s"$datasetUri: _versions mixes the V1 ({version}.manifest) and V2 (zero-padded, inverted) " +
          "manifest naming schemes; a dataset must use one")
    (schemes.headOption.getOrElse(V2), parsed.map(_._2).sorted)
  }
}
