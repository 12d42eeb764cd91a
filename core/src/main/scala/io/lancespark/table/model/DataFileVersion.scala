package io.lancespark.table.model


/** A Lance data file version this connector writes: 2.0, 2.1 or 2.2. A
  * dataset's manifest names one (`data_format.version`) and every data file
  * added to it is written at that version, as the reference does. */
final case class DataFileVersion(major: Int, minor: Int) {
  def name: String = s"$major.$minor"
  override def toString: String = name
}

object DataFileVersion {
  val V2_0: DataFileVersion = DataFileVersion(2, 0)
  val V2_1: DataFileVersion = DataFileVersion(2, 1)
  val V2_2: DataFileVersion = DataFileVersion(2, 2)

  /** What "stable" means: pylance 14's default. */
  val Stable: DataFileVersion = V2_2

  /** What new datasets get when no version is asked for: what the reference
    * writes by default (pylance 14: "stable"). */
  val Default: DataFileVersion = Stable

  val Written: Seq[DataFileVersion] = Seq(V2_0, V2_1, V2_2)

  /** The accepted spellings, for option errors. */
  val Accepted: String = "2.0, 2.1, 2.2 or stable (= 2.2)"

  /** "2.0", "2.1", "2.2" or "stable" (any case); None for anything else
    * (including 0.1/legacy, which is read but not written, and the
    * reference's unstable "next"). */
  def parse(s: String): Option[DataFileVersion] =
    if (s.trim.equalsIgnoreCase("stable")) Some(Stable) else Written.find(_.name == s.trim)

  /** The version a dataset's manifest names, if this connector writes it. */
  def ofDataset(fileVersion: String): Option[DataFileVersion] = Written.find(_.name == fileVersion)
}
