package io.lancespark.table.maintenance

import java.io.FileNotFoundException
import java.nio.charset.StandardCharsets
import java.time.Instant

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import com.fasterxml.jackson.databind.node.ObjectNode
import org.apache.hadoop.fs.Path

import io.lancespark.schema.LanceFormatException
import io.lancespark.table.storage.{Dataset, DatasetStorage, VersionLookup}

/** A named version of a dataset, as the reference stores it in
  * `_refs/tags/<name>.json`. `branch` None is the main branch (the only one
  * this connector reads); `createdAt`/`updatedAt` are absent in tags written by
  * older reference versions. */
final case class Tag(
    name: String,
    version: Long,
    branch: Option[String],
    manifestSize: Long,
    createdAt: Option[Instant],
    updatedAt: Option[Instant],
    metadata: Map[String, String])

/** A tag operation that cannot be done (missing, already there, bad name). */
final class TagException(message: String) extends RuntimeException(message)

/** Tags of a dataset: `_refs/tags/<name>.json`, a JSON object with `branch`,
  * `version`, `createdAt`, `updatedAt`, `manifestSize` and `metadata` (camel
  * case, as the reference serializes it), so pylance and this connector see
  * each other's tags. */
object Tags {
  val Dir: String = "_refs/tags"
  private val Suffix = ".json"
  private val mapper = new ObjectMapper()

  /** The reference's rule: non-empty; letters, digits, '.', '-', '_'; not
    * starting or ending with '.', no "..", not ending in ".lock". */
  def validateName(storage: DatasetStorage, name: String): Unit = {
    def bad(why: String) = throw new TagException(s"${storage.uri}: '$name' is not a valid tag name: $why")
    if (name.isEmpty) bad("it is empty")
    if (!name.forall(c => c.isLetterOrDigit || c == '.' || c == '-' || c == '_'))
      bad("only letters, digits, '.', '-' and '_' are allowed")
    if (name.startsWith(".") || name.endsWith(".")) bad("it may not start or end with '.'")
    if (name.contains("..")) bad("it may not contain '..'")
    if (name.endsWith(".lock")) bad("it may not end with '.lock'")
  }

  private def path(storage: DatasetStorage, name: String): Path =
    new Path(new Path(storage.root, Dir), name + Suffix)

  /** Every tag, sorted by name. */
  def list(storage: DatasetStorage): Vector[Tag] =
    storage.list(Dir).map(_.getPath.getName).filter(_.endsWith(Suffix)).map(_.stripSuffix(Suffix))
      .sorted.flatMap(find(storage, _)).toVector

  /** The tag `name`, if it exists. */
  def find(storage: DatasetStorage, name: String): Option[Tag] = {
    validateName(storage, name)
    val p = path(storage, name)
    val bytes =
      try Some(storage.readFully(p))
      catch { case e: LanceFormatException if e.getCause.isInstanceOf[FileNotFoundException] => None }
    bytes.map(parse(name, _, p.toString))
  }

  def get(storage: DatasetStorage, name: String): Tag =
    find(storage, name).getOrElse(throw new TagException(s"${storage.uri}: tag '$name' does not exist"))

  /** The version a tag names; refuses tags on other branches. */
  def versionOf(storage: DatasetStorage, name: String): Long = {
    val t = get(storage, name)
    t.branch.foreach(b => throw new TagException(
      s"${storage.uri}: tag '$name' points at version ${t.version} of branch '$b'; branches are not supported"))
    t.version
  }

  /** Creates tag `name` at `version` of the main branch; refuses an existing
    * tag (created atomically: of two racing creators one fails) or a version
    * that does not exist. */
  def create(storage: DatasetStorage, name: String, version: Long): Tag = {
    validateName(storage, name)
    val now = Instant.now()
    val tag = Tag(name, version, None, manifestSize(storage, version, name), Some(now), Some(now), Map.empty)
    val put = storage.requireAtomicPut()
    if (!put.putIfAbsent(storage.fs, path(storage, name), serialize(tag)))
      throw new TagException(s"${storage.uri}: tag '$name' already exists (at version ${get(storage, name).version})")
    tag
  }

  /** Points the existing tag `name` at `version`, keeping its creation time and metadata. */
  def move(storage: DatasetStorage, name: String, version: Long): Tag = {
    val old = get(storage, name)
    val tag = old.copy(version = version, branch = None, manifestSize = manifestSize(storage, version, name),
      updatedAt = Some(Instant.now()))
    val out = storage.fs.create(path(storage, name), true)
    try out.write(serialize(tag)) finally out.close()
    tag
  }

  /** Deletes tag `name`; returns the version it named. */
  def delete(storage: DatasetStorage, name: String): Tag = {
    val old = get(storage, name)
    if (!storage.fs.delete(path(storage, name), false))
      throw new TagException(s"${storage.uri}: could not delete tag '$name'")
    old
  }

  private def manifestSize(storage: DatasetStorage, version: Long, tag: String): Long = {
    val naming = VersionLookup.namingOf(storage, version).getOrElse {
      val (_, versions) = Dataset.versions(storage)  // a listing, only for the message
      throw new TagException(
        s"${storage.uri}: cannot tag version $version as '$tag': it does not exist" +
          (if (versions.isEmpty) "" else s" (versions ${versions.head} to ${versions.last} are present)"))
    }
    storage.fs.getFileStatus(Dataset.manifestPath(storage, naming, version)).getLen
  }

  def serialize(t: Tag): Array[Byte] = {
    val o = mapper.createObjectNode()
    t.branch match {
      case Some(b) => o.put("branch", b)
      case None => o.putNull("branch")
    }
    o.put("version", t.version)
    t.createdAt.foreach(i => o.put("createdAt", i.toString))
    t.updatedAt.foreach(i => o.put("updatedAt", i.toString))
    o.put("manifestSize", t.manifestSize)
    val meta: ObjectNode = o.putObject("metadata")
    t.metadata.toSeq.sortBy(_._1).foreach { case (k, v) => meta.put(k, v) }
    mapper.writerWithDefaultPrettyPrinter().writeValueAsString(o).getBytes(StandardCharsets.UTF_8)
  }

  private def parse(name: String, bytes: Array[Byte], where: String): Tag = {
    val o: JsonNode =
      try mapper.readTree(bytes)
      catch { case e: Exception => throw LanceFormatException(where, s"tag file is not JSON: ${e.getMessage}", e) }
    def field(n: String): Option[JsonNode] = Option(o.get(n)).filterNot(_.isNull)
    def instant(n: String): Option[Instant] = field(n).flatMap(v => scala.util.Try(Instant.parse(v.asText())).toOption)
    val version = field("version").filter(_.canConvertToLong).map(_.asLong()).getOrElse(
      throw LanceFormatException(where, "tag file has no version"))
    Tag(name, version, field("branch").map(_.asText()), field("manifestSize").map(_.asLong()).getOrElse(0L),
      instant("createdAt"), instant("updatedAt"),
      field("metadata").map(_.properties().asScala.map(e => e.getKey -> e.getValue.asText()).toMap).getOrElse(Map.empty))
  }
}
