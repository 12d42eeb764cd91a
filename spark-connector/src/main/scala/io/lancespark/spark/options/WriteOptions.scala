package io.lancespark.spark.options

import io.lancespark.schema.LanceFormatException
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.FragmentWriter
import io.lancespark.table.storage.Snapshot

/** A write's settings, resolved once on the driver. `maxRowsPerPage` and
  * `fileVersion`: None when not set (the writer's default; the dataset's
  * version, or [[DataFileVersion.Default]] for a new one). */
final case class WriteConf(
    maxRowsPerFile: Long,
    maxRowsPerPage: Option[Int],
    fileVersion: Option[DataFileVersion],
    disabledCodecs: Set[String],
    vectorColumns: Map[String, Int],
    enableStableRowIds: Boolean,
    v2ManifestPaths: Boolean,
    mergeSchema: Boolean = false,
    blobColumns: Set[String] = Set.empty) {

  /** The file version of the data files a write adds to `existing` (None: a
    * new dataset). Appends and row-level changes write at the dataset's
    * version (a dataset never mixes versions): a different explicit
    * `fileVersion` is refused, not ignored. An overwrite may convert. */
  def versionFor(existing: Option[Snapshot], overwrite: Boolean): DataFileVersion = existing match {
    case None => fileVersion.getOrElse(DataFileVersion.Default)
    case Some(s) =>
      val stored = DataFileVersion.ofDataset(s.fileVersion)
      if (overwrite) fileVersion.orElse(stored).getOrElse(DataFileVersion.Default)
      else {
        val v = stored.getOrElse(throw new LanceFormatException(
          s"${s.storage.uri}: the dataset stores Lance file version ${s.fileVersion}, which this connector reads " +
            s"but does not write (it writes ${DataFileVersion.Written.mkString(", ")}); overwrite the dataset to convert it"))
        fileVersion.filter(_ != v).foreach { asked =>
          throw new IllegalArgumentException(
            s"${s.storage.uri}: option fileVersion=$asked, but the dataset stores file version $v and a dataset " +
              s"may not mix versions; drop the option to write $v files, or overwrite the dataset to convert it")
        }
        v
      }
  }
}

/** The options of `df.write.format("lance")`, of catalog writes and of
  * `CREATE TABLE ... TBLPROPERTIES` (which keeps them as table properties). */
object WriteOptions {
  /** Most rows in one data file (fragment); a task writes several when it has more. */
  val MaxRowsPerFile: LanceOption[Long] = LanceOption.positiveLong("maxRowsPerFile")
  /** Most rows in one page of a column. */
  val MaxRowsPerPage: LanceOption[Int] = LanceOption.positiveInt("maxRowsPerPage")
  /** Lance file version of new datasets (and of overwrites); appends use the dataset's. */
  val FileVersion: LanceOption[DataFileVersion] =
    LanceOption("fileVersion", DataFileVersion.Accepted, DataFileVersion.parse)
  /** "fsst,dictionary": codecs of 2.1/2.2 files not to use (for diagnosis). */
  val DisabledCodecs: LanceOption[Set[String]] =
    LanceOption("disabledCodecs", s"a list of ${FragmentWriter.Codecs.mkString(", ")}", v => {
      val names = v.split(",").map(_.trim.toLowerCase(java.util.Locale.ROOT)).filter(_.nonEmpty).toSet
      if (names.forall(FragmentWriter.Codecs.contains)) Some(names) else None
    })
  /** "emb:768,other:128": ARRAY<FLOAT|DOUBLE> columns stored as fixed-size lists (vectors). */
  val VectorColumns: LanceOption[Map[String, Int]] =
    LanceOption("vectorColumns", "a list of name:dimension entries (e.g. emb:768,other:128)", parseVectors)
  /** New datasets only: assign stable row ids. */
  val EnableStableRowIds: LanceOption[Boolean] = LanceOption.boolean("enableStableRowIds")
  /** New datasets only: V2 manifest naming (default) or the legacy V1 scheme. */
  val V2ManifestPaths: LanceOption[Boolean] = LanceOption.boolean("v2ManifestPaths")

  /** Appends may add the DataFrame's new columns and struct sub-fields to the table's
    * schema (existing rows read them as NULL); session conf `spark.lance.write.mergeSchema`. */
  val MergeSchema: LanceOption[Boolean] =
    LanceOption.boolean("mergeSchema").copy(sessionName = Some("spark.lance.write.mergeSchema"))

  /** "image,audio": BINARY columns stored as Lance blob columns (docs/blobs.md, "Writing"). */
  val BlobColumns: LanceOption[Set[String]] =
    LanceOption("blobColumns", "a list of BINARY column names (e.g. image,audio)", v =>
      Some(v.split(",").map(_.trim).filter(_.nonEmpty).toSet))

  val All: Seq[LanceOption[_]] =
    Seq(MaxRowsPerFile, MaxRowsPerPage, FileVersion, DisabledCodecs, VectorColumns, EnableStableRowIds,
      V2ManifestPaths, MergeSchema, BlobColumns)

  /** Column metadata key that marks an ARRAY<FLOAT|DOUBLE> column as a vector of that dimension. */
  val VectorDimensionMetadata: String = io.lancespark.spark.TypeMapping.VectorDimensionKey

  val DefaultMaxRowsPerFile: Long = 1024L * 1024L

  def path(explicit: Map[String, String]): String =
    OptionSource.path(explicit, "df.write.format(\"lance\").save(\"/path/to/dataset\")")

  def conf(source: OptionSource): WriteConf = {
    WriteConf(
      maxRowsPerFile = source.getOrElse(MaxRowsPerFile, DefaultMaxRowsPerFile),
      maxRowsPerPage = source.get(MaxRowsPerPage),
      fileVersion = source.get(FileVersion),
      disabledCodecs = source.getOrElse(DisabledCodecs, Set.empty[String]),
      vectorColumns = source.getOrElse(VectorColumns, Map.empty[String, Int]),
      enableStableRowIds = source.getOrElse(EnableStableRowIds, false),
      v2ManifestPaths = source.getOrElse(V2ManifestPaths, true),
      mergeSchema = source.getOrElse(MergeSchema, false),
      blobColumns = source.getOrElse(BlobColumns, Set.empty[String]))
  }

  /** A write's settings from its own options, the session and the table's properties. */
  def conf(explicit: Map[String, String], session: String => Option[String],
      tableProperties: Map[String, String]): WriteConf =
    conf(new OptionSource(explicit, session, tableProperties, All, "write").warnUnknown())

  /** The properties a new catalog table keeps: known write options only, each checked. */
  def tableProperties(properties: Map[String, String]): Map[String, String] = {
    val source = new OptionSource(properties, _ => None, Map.empty, All, "table property")
    val unknown = source.unknown
    if (unknown.nonEmpty)
      throw new IllegalArgumentException(
        s"unknown Lance table properties ${unknown.mkString(", ")}; accepted: ${All.map(_.name).mkString(", ")}")
    conf(source)
    properties.filter { case (k, _) => All.exists(_.key == k.toLowerCase(java.util.Locale.ROOT)) }
  }

  /** "emb:768,other:128" as names and dimensions; None when an entry is not `name:positive integer`. */
  def parseVectors(v: String): Option[Map[String, Int]] = {
    val entries = v.split(",").map(_.trim).filter(_.nonEmpty).toSeq.map { spec =>
      spec.split(":") match {
        case Array(name, dim) if name.trim.nonEmpty => scala.util.Try(dim.trim.toInt).toOption.filter(_ > 0).map(name.trim -> _)
        case _ => None
      }
    }
    if (entries.forall(_.isDefined)) Some(entries.flatten.toMap) else None
  }
}
