package io.lancespark.table.index

import java.nio.ByteBuffer
import java.util.logging.Logger

import scala.jdk.CollectionConverters._

import org.roaringbitmap.RoaringBitmap

import io.lancespark.proto.table.IndexMetadata
import io.lancespark.schema.LanceField
import io.lancespark.table.storage.Indices
import io.lancespark.table.storage.Snapshot

/** One index of a dataset version, as its manifest describes it.
  * `kind`: the last part of its details' type URL ("BTreeIndexDetails", ...),
  * empty when the manifest records none. `covered`: the fragments the index
  * was built over that still exist in this version (its fragment bitmap; a
  * fragment appended or rewritten since is not in it). `fields`: the indexed
  * columns as paths of names (empty when a field id is not in the schema).
  * `createdAtMillis`: when it was built, if the manifest says. */
final case class IndexEntry(
    name: String,
    uuid: String,
    fieldIds: Vector[Int],
    fields: Vector[Vector[String]],
    kind: String,
    indexVersion: Int,
    datasetVersion: Long,
    covered: RoaringBitmap,
    createdAtMillis: Option[Long],
    private[table] val proto: IndexMetadata) {
  /** The index's directory, relative to the dataset root. */
  def dir: String = s"_indices/$uuid"
  def describe: String = s"index '$name' ($kind, uuid $uuid, built at version $datasetVersion)"
}

/** The indices of a dataset version with what a reader needs of them: type,
  * columns, directory and fragment coverage. Shared by the scalar and vector
  * index readers. */
object IndexCatalog {
  private val log: Logger = Logger.getLogger("io.lancespark.table.index")

  /** Logs (at INFO) why an index is not used; never fails a scan. */
  def skip(what: String): Unit = log.info(s"lance-spark: not using $what")

  /** Every index in `snapshot`'s manifest. */
  def load(snapshot: Snapshot): Vector[IndexEntry] =
    Indices.of(snapshot).toVector.map(entry(snapshot, _))

  def entry(snapshot: Snapshot, m: IndexMetadata): IndexEntry = {
    val existing = new RoaringBitmap()
    snapshot.fragments.foreach(f => existing.add(f.id.toInt))
    val covered = Indices.fragments(m).map(b => RoaringBitmap.and(b, existing)).getOrElse(new RoaringBitmap())
    val ids = m.getFieldsList.asScala.toVector.map(_.intValue)
    val kind = if (m.hasIndexDetails) m.getIndexDetails.getTypeUrl.split('.').last.split('/').last else ""
    IndexEntry(m.getName, uuid(m), ids, ids.flatMap(id => path(snapshot.schema.fields, id)), kind,
      if (m.hasIndexVersion) m.getIndexVersion else 0, m.getDatasetVersion, covered,
      if (m.hasCreatedAt) Some(m.getCreatedAt * 1000L) else None, m)
  }

  /** The hyphenated text form of the index's UUID (its directory name). */
  def uuid(m: IndexMetadata): String = {
    val b = m.getUuid.getUuid.toByteArray
    if (b.length != 16) b.map(x => f"${x & 0xff}%02x").mkString
    else {
      val bb = ByteBuffer.wrap(b)
      new java.util.UUID(bb.getLong, bb.getLong).toString
    }
  }

  /** The names from a top-level field down to the field with id `id`. */
  def path(fields: Seq[LanceField], id: Int): Option[Vector[String]] =
    fields.iterator.map { f =>
      if (f.id == id) Some(Vector(f.name)) else path(f.children, id).map(f.name +: _)
    }.collectFirst { case Some(p) => p }

  /** The field with id `id`, at any depth. */
  def field(fields: Seq[LanceField], id: Int): Option[LanceField] =
    fields.iterator.map(f => if (f.id == id) Some(f) else field(f.children, id)).collectFirst { case Some(f) => f }

  /** Whether the dataset has the system index that remaps row addresses after
    * a compaction whose index remap was deferred: the addresses other indices
    * hold are then not current. */
  def hasFragmentReuseIndex(entries: Seq[IndexEntry]): Boolean =
    entries.exists(e => e.name == "__lance_frag_reuse" || e.kind == "FragmentReuseIndexDetails")
}
