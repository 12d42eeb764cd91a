package io.lancespark.table.storage

import org.apache.hadoop.conf.Configuration

/** Where one version's manifest lives, as an external manifest store records it:
  * `path` is the manifest's key relative to the bucket (or file system root),
  * as the reference writes it; `size` is its length in bytes when known. */
final case class ManifestRecord(version: Long, path: String, size: Option[Long])

/** A table of (dataset, version) -> manifest with a conditional insert: the
  * commit point of the table format's external manifest store protocol, for
  * object stores without an atomic create-if-absent. Records are keyed by the
  * dataset's base URI as the reference keys them (its path without scheme and
  * bucket), so pylance and Spark writers configured with the same store
  * commit safely against each other. */
trait ExternalManifestStore {

  /** For messages: e.g. "DynamoDB table lance_commits". */
  def description: String

  /** The record of the newest version of `baseUri`, None if it has none. */
  def latest(baseUri: String): Option[ManifestRecord]

  /** The record of `version`, None if absent. */
  def get(baseUri: String, version: Long): Option[ManifestRecord]

  /** Inserts `record` only if `baseUri` has no record for its version; false
    * if one exists (another writer committed that version). */
  def putIfAbsent(baseUri: String, record: ManifestRecord): Boolean

  /** Replaces the existing record of `record.version` (finalizing a commit);
    * false if there is none. */
  def replace(baseUri: String, record: ManifestRecord): Boolean
}

object ExternalManifestStore {

  /** Hadoop configuration key (`spark.hadoop.lance.commit.external-store`): which
    * external manifest store commits go through; unset: none. */
  val KindKey: String = "lance.commit.external-store"

  val Kinds: Seq[String] = Seq("dynamodb")

  /** The store configured in `conf`, if any: `dynamodb`, or the class name of
    * an implementation with a constructor taking the Hadoop Configuration (a
    * store of your own: a SQL table, etcd, ...). A bad setting is an error
    * naming the key. */
  def fromConf(conf: Configuration): Option[ExternalManifestStore] =
    Option(conf.getTrimmed(KindKey)).filter(_.nonEmpty) match {
      case None => None
      case Some(k) if k.equalsIgnoreCase("none") => None
      case Some(k) if k.equalsIgnoreCase("dynamodb") => Some(DynamoDbManifestStore.fromConf(conf))
      case Some(cls) if cls.contains('.') => Some(instantiate(cls, conf))
      case Some(other) => throw new IllegalArgumentException(
        s"spark.hadoop.$KindKey: unknown external manifest store '$other' (known: ${Kinds.mkString(", ")}, " +
          "none, or the class name of an ExternalManifestStore)")
    }

  private def instantiate(cls: String, conf: Configuration): ExternalManifestStore = {
    val loader = Option(Thread.currentThread().getContextClassLoader).getOrElse(getClass.getClassLoader)
    val c = try Class.forName(cls, true, loader)
      catch { case e: ClassNotFoundException =>
        throw new IllegalArgumentException(s"spark.hadoop.$KindKey: class $cls is not on the driver's classpath", e) }
    if (!classOf[ExternalManifestStore].isAssignableFrom(c))
      throw new IllegalArgumentException(s"spark.hadoop.$KindKey: $cls does not implement ${classOf[ExternalManifestStore].getName}")
    try c.getConstructor(classOf[Configuration]).newInstance(conf).asInstanceOf[ExternalManifestStore]
    catch { case e: NoSuchMethodException =>
      throw new IllegalArgumentException(s"spark.hadoop.$KindKey: $cls has no public constructor taking a Configuration", e) }
  }
}
