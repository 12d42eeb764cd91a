package io.lancespark.table.index

import java.nio.ByteBuffer
import java.util.{Locale, UUID}

import scala.collection.mutable.ArrayBuffer
import scala.util.Using

import com.google.protobuf.ByteString
import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.roaringbitmap.RoaringBitmap

import io.lancespark.proto.table.{IndexDetails, IndexMetadata, UUID => PbUuid}
import io.lancespark.schema.LanceField
import io.lancespark.table.commit.{CommitSettings, Committer, CreateIndices}
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.DataFiles
import io.lancespark.table.storage.Snapshot

/** An index type this connector builds. `detailsType`: the last part of its
  * details' type URL. */
sealed abstract class BuiltIndexType(val name: String, val detailsType: String)

object BuiltIndexType {
  case object BTree extends BuiltIndexType("BTREE", ScalarIndex.BTree)
  case object Bitmap extends BuiltIndexType("BITMAP", ScalarIndex.Bitmap)
  case object ZoneMap extends BuiltIndexType("ZONEMAP", ScalarIndex.ZoneMap)
  case object BloomFilter extends BuiltIndexType("BLOOMFILTER", ScalarIndex.BloomFilter)
  /** A BITMAP over a list column's elements (`array_has_any`/`array_has_all`, `array_contains`). */
  case object LabelList extends BuiltIndexType("LABEL_LIST", "LabelListIndexDetails")
  val All: Seq[BuiltIndexType] = Seq(BTree, Bitmap, ZoneMap, BloomFilter, LabelList)

  /** The type URL of its details in the manifest, as pylance 14 writes it. */
  def typeUrl(t: BuiltIndexType): String =
    if (t == BloomFilter) s"/lance.index.pb.${t.detailsType}" else s"/lance.table.${t.detailsType}"

  def parse(s: String): BuiltIndexType = All.find(_.name == s.trim.toUpperCase(Locale.ROOT).replace("LABELLIST", "LABEL_LIST")).getOrElse(
    throw new IllegalArgumentException(s"index type '$s' is not built by this connector (it builds: " +
      All.map(_.name.toLowerCase(Locale.ROOT)).mkString(", ") + ")"))
}

/** What a build of one index over one column of a dataset version does,
  * checked before any work: the column exists and its type is indexed by
  * `indexType`, no index of that name exists, the dataset stores 2.x files
  * and addresses rows by fragment and offset (no stable row ids). The index
  * covers `fragments` (those of `snapshot`); its files go to `_indices/<uuid>/`. */
final case class IndexBuildPlan(snapshot: Snapshot, column: String, field: LanceField, indexType: BuiltIndexType,
                                name: String, uuid: String, fragments: RoaringBitmap, fileVersion: DataFileVersion,
                                options: Map[String, String] = Map.empty, replacing: Option[IndexEntry] = None) {
  def where: String = s"${snapshot.storage.uri} (version ${snapshot.version})"
}

/** The build side of scalar indices: plan (validation), the writer of the
  * index's files from sorted (value, row address) pairs, and the commit of
  * a CreateIndex transaction whose index metadata pylance reads as its own. */
object IndexBuild {

  def plan(snapshot: Snapshot, column: String, indexType: BuiltIndexType, name: Option[String],
           options: Map[String, String] = Map.empty, replacing: Option[IndexEntry] = None): IndexBuildPlan = {
    val where = s"${snapshot.storage.uri} (version ${snapshot.version})"
    val field = snapshot.schema.field(column).orElse(nested(snapshot.schema.fields, column.split('.').toList))
      .getOrElse(throw new IllegalArgumentException(s"$where: no column '$column' to index (columns: " +
        snapshot.schema.fields.map(_.name).mkString(", ") + ")"))
    val listItem = if (field.isList) field.children.headOption else None
    if (indexType == BuiltIndexType.LabelList && !listItem.exists(i => !i.isStruct && !i.isList && IndexValues.supported(i.arrowType)))
      throw new IllegalArgumentException(s"$where: a LABEL_LIST index is not built over column '$column' " +
        s"of type ${field.logicalType} (built over lists of signed integers, floats, strings, binaries, dates, " +
        "timestamps, booleans and decimals)")
    if (indexType != BuiltIndexType.LabelList && !IndexValues.supported(field.arrowType))
      throw new IllegalArgumentException(s"$where: a ${indexType.name} index is not built over column '$column' " +
        s"of type ${field.logicalType} (built over signed integers, floats, strings, binaries, dates, " +
        "timestamps, booleans and decimals)")
    if (indexType == BuiltIndexType.BloomFilter && !ZoneIndexWriter.bloomSupported(field.arrowType))
      throw new IllegalArgumentException(s"$where: a BLOOMFILTER index is not built over column '$column' " +
        s"of type ${field.logicalType} (built over signed integers, floats, strings, binaries, dates and timestamps)")
    if (ZoneIndexWriter.zoned(indexType)) ZoneIndexWriter.params(indexType, options, where)
    val indexName = name.map(_.trim).filter(_.nonEmpty).getOrElse(s"${column}_idx")
    if (IndexCatalog.load(snapshot).exists(e => e.name == indexName && !replacing.exists(_.uuid == e.uuid)))
      throw new IllegalArgumentException(s"$where: an index named '$indexName' already exists")
    if (snapshot.hasStableRowIds)
      throw new IllegalArgumentException(s"$where: building indices on a dataset with stable row ids is not supported")
    val version = DataFileVersion.parse(snapshot.fileVersion).filter(DataFileVersion.Written.contains).getOrElse(
      throw new IllegalArgumentException(s"$where: indices are built on datasets of file version 2.0, 2.1 or 2.2, " +
        s"not ${snapshot.fileVersion}"))
    val frags = new RoaringBitmap()
    snapshot.fragments.foreach(f => frags.add(f.id.toInt))
    IndexBuildPlan(snapshot, column, field, indexType, indexName, UUID.randomUUID().toString, frags, version, options,
      replacing)
  }

  private def nested(fields: Seq[LanceField], path: List[String]): Option[LanceField] = path match {
    case Nil => None
    case h :: Nil => fields.find(_.name == h).filter(f => !f.isStruct)
    case h :: t => fields.find(f => f.name == h && f.isStruct).flatMap(f => nested(f.children, t))
  }

  /** The writer of `plan`'s files; fed (value, row address) pairs in
    * [[IndexValues.ordering]], then finished or aborted. */
  def writer(plan: IndexBuildPlan, allocator: BufferAllocator): SortedIndexWriter = plan.indexType match {
    case BuiltIndexType.BTree =>
      new BTreeIndexWriter(plan.snapshot.storage, plan.uuid, plan.field.arrowType, plan.fileVersion, allocator)
    case BuiltIndexType.Bitmap =>
      new BitmapIndexWriter(plan.snapshot.storage, plan.uuid, plan.field.arrowType, plan.fileVersion, allocator)
    case BuiltIndexType.LabelList =>
      // the format before pylance 14's `lance:label_list_nulls` (which adds the null lists' rows as the
      // file's second global buffer, not written here): pylance reads it, warning that NOT filters on
      // nullable lists may be wrong
      new BitmapIndexWriter(plan.snapshot.storage, plan.uuid, plan.field.children.head.arrowType, plan.fileVersion,
        allocator)
    case other => throw new IllegalArgumentException(s"a ${other.name} index is written from zones (ZoneIndexWriter)")
  }

  /** The manifest's record of the index `plan` built, as pylance 14 writes
    * it: details of the type with an empty value, index version 0, the
    * dataset version it was built at and the fragments it covers. */
  def metadata(plan: IndexBuildPlan): IndexMetadata =
    record(plan.uuid, plan.field.id, plan.name, plan.snapshot.version, plan.fragments,
      IndexDetails.newBuilder().setTypeUrl(BuiltIndexType.typeUrl(plan.indexType)).build(), indexVersion = 0)

  /** An index's record in the manifest as pylance 14 writes it: its uuid, the
    * field it covers, its name, the dataset version it was built at, the
    * fragments it covers (a serialized roaring bitmap), its details and index
    * version, the time it was made. */
  def record(uuid: String, fieldId: Int, name: String, datasetVersion: Long, fragments: RoaringBitmap,
             details: IndexDetails, indexVersion: Int): IndexMetadata = {
    val u = UUID.fromString(uuid)
    val uuidBytes = ByteBuffer.allocate(16).putLong(u.getMostSignificantBits).putLong(u.getLeastSignificantBits).array()
    val bitmap = {
      val b = fragments.clone()
      val out = ByteBuffer.allocate(b.serializedSizeInBytes())
      b.serialize(out)
      out.array()
    }
    IndexMetadata.newBuilder()
      .setUuid(PbUuid.newBuilder().setUuid(ByteString.copyFrom(uuidBytes)))
      .addFields(fieldId)
      .setName(name)
      .setDatasetVersion(datasetVersion)
      .setFragmentBitmap(ByteString.copyFrom(bitmap))
      .setIndexDetails(details)
      .setIndexVersion(indexVersion)
      .setCreatedAt(System.currentTimeMillis())
      .build()
  }

  /** Commits the index `plan`'s files (written) as a CreateIndex transaction
    * read at the plan's version; on any failure removes the files. */
  def commit(plan: IndexBuildPlan, settings: CommitSettings): Snapshot =
    try Committer.commit(plan.snapshot.storage, Some(plan.snapshot.version),
      CreateIndices(Seq(metadata(plan)), plan.replacing.map(_.proto).toSeq), settings)
    catch { case e: Throwable => IndexFileWriter.removeDir(plan.snapshot.storage, plan.uuid); throw e }

  /** The rebuild of index `entry` over every fragment of `snapshot` under
    * its name, type, column and options (those its file records), committed
    * as a CreateIndex that adds the new index and removes the old one (the
    * reference's optimize merges a delta instead; the result covers the same
    * fragments); None when it covers them all already. Only the types built
    * here are rebuilt. */
  def rebuildPlan(snapshot: Snapshot, entry: IndexEntry): Option[IndexBuildPlan] = {
    val where = s"${snapshot.storage.uri} (version ${snapshot.version})"
    val t = BuiltIndexType.All.find(_.detailsType == entry.kind).getOrElse(throw new IllegalArgumentException(
      s"$where: ${entry.describe} is not rebuilt here (rebuilds: ${BuiltIndexType.All.map(_.name).mkString(", ")})"))
    if (entry.fields.size != 1) throw new IllegalArgumentException(s"$where: ${entry.describe}: its column is not in the schema")
    val all = new RoaringBitmap()
    snapshot.fragments.foreach(f => all.add(f.id.toInt))
    if (entry.covered.equals(all)) None
    else {
      val options: Map[String, String] = t match {
        case BuiltIndexType.ZoneMap | BuiltIndexType.BloomFilter =>
          val file = if (t == BuiltIndexType.ZoneMap) ZoneMapIndex.File else BloomFilterIndex.File
          val md = Using.resource(IndexFile.open(snapshot.storage, entry, file))(_.metadata)
          Seq("rows_per_zone" -> "rows_per_zone", "bloomfilter_item" -> "number_of_items",
            "bloomfilter_probability" -> "probability").flatMap { case (k, o) => md.get(k).map(o -> _) }.toMap
        case _ => Map.empty
      }
      Some(plan(snapshot, entry.fields.head.mkString("."), t, Some(entry.name), options, Some(entry)))
    }
  }

  /** Drops the index named `name` (a CreateIndex removing it, as the
    * reference's drop_index commits); its files stay until a cleanup. */
  def drop(snapshot: Snapshot, name: String, settings: CommitSettings = CommitSettings()): Snapshot = {
    val entry = IndexCatalog.load(snapshot).find(_.name == name).getOrElse(
      throw new IllegalArgumentException(s"${snapshot.storage.uri} (version ${snapshot.version}): no index named " +
        s"'$name' (indices: ${IndexCatalog.load(snapshot).map(_.name).mkString(", ")})"))
    Committer.commit(snapshot.storage, Some(snapshot.version), CreateIndices(Nil, Seq(entry.proto)), settings)
  }

  /** Reads the column's live rows with their row addresses (every fragment
    * of the plan's version), sorts them in memory, writes and commits the
    * index: the build without Spark, for tables whose column fits in memory. */
  def buildInMemory(plan: IndexBuildPlan, settings: CommitSettings = CommitSettings()): Snapshot =
    Using.resource(new RootAllocator()) { allocator =>
      writeInMemory(plan, allocator)
      commit(plan, settings)
    }

  /** Writes (does not commit) the index `plan` builds from its column read
    * and sorted in this process: a keyed column as sorted runs of primitive
    * keys ([[KeyRuns]]; a run per core, of at least `rowsPerThread` rows,
    * each read and sorted in a thread), merged; others as sorted (value,
    * address) pairs.
    * Returns the files written with their sizes. */
  def writeInMemory(plan: IndexBuildPlan, allocator: BufferAllocator, rowsPerThread: Long = 250000L): Seq[(String, Long)] =
    if (ZoneIndexWriter.zoned(plan.indexType)) {
      val params = ZoneIndexWriter.params(plan.indexType, plan.options, plan.where)
      val zones = plan.snapshot.fragments.iterator.flatMap(f =>
        ZoneIndexWriter.fragmentZones(plan.snapshot, plan.field.id, f.id, plan.indexType, params, allocator))
      ZoneIndexWriter.write(plan, params, zones, allocator)
    } else keyCodec(plan) match {
      case Some(codec) =>
        // a run per core (runs of at least `rowsPerThread` rows), read and sorted in threads of their own
        val total = plan.snapshot.fragments.map(_.physicalRows).sum
        val threads = math.max(1L, math.min(Runtime.getRuntime.availableProcessors().toLong,
          total / math.max(1L, rowsPerThread))).toInt
        val groups = KeyRuns.plan(plan.snapshot, threads, Long.MaxValue)
        val runs = try KeyRuns.parallel(groups.map(g => () => KeyRuns.read(plan.snapshot, plan.field.id, codec, g, allocator)))
          catch { case e: Throwable => IndexFileWriter.removeDir(plan.snapshot.storage, plan.uuid); throw e }
        writeRuns(plan, codec, runs.map(KeyRuns.source), allocator)
      case None =>
        val pairs = ArrayBuffer.empty[(Any, Long)]
        plan.snapshot.fragments.sortBy(_.id).foreach(f =>
          scanFragment(plan.snapshot, plan.field.id, f.id, allocator)((v, a) => pairs += (v -> a)))
        val ordering: Ordering[(Any, Long)] = Ordering.Tuple2(IndexValues.ordering, Ordering.Long)
        write(plan, pairs.sorted(ordering).iterator, allocator)
    }

  /** Writes (does not commit) the index `plan` builds over a keyed column
    * from the run files `runs` (numbers, in row address order) its tasks
    * wrote, merged as they are read; then removes the run files. On a failure
    * removes the index's files. */
  def writeFromRunFiles(plan: IndexBuildPlan, codec: KeyCodec, runs: Seq[Int],
                        allocator: BufferAllocator): Seq[(String, Long)] = {
    val storage = plan.snapshot.storage
    try {
      val sources = ArrayBuffer.empty[KeyRuns.Source]
      try {
        runs.foreach(i => sources += KeyRuns.open(storage, KeyRuns.runPath(plan.uuid, i)))
        writeRuns(plan, codec, sources.toVector, allocator)
      } finally sources.foreach(_.close())
    } catch { case e: Throwable => IndexFileWriter.removeDir(storage, plan.uuid); throw e }
    finally removeRuns(plan)
  }

  /** Removes the run files of `plan`'s build (best effort). */
  def removeRuns(plan: IndexBuildPlan): Unit =
    try { plan.snapshot.storage.fs.delete(plan.snapshot.storage.resolve(KeyRuns.buildDir(plan.uuid), "index build runs"), true); () }
    catch { case _: Exception => () }

  /** The build of a keyed column in sorted runs of at most `maxRunRows`
    * rows spilled to files and merged, in this process: what the Spark job
    * does with a task per run. Writes, does not commit. */
  def writeInRuns(plan: IndexBuildPlan, codec: KeyCodec, maxRunRows: Long, allocator: BufferAllocator): Seq[(String, Long)] = {
    val groups = KeyRuns.plan(plan.snapshot, 1, maxRunRows)
    try groups.zipWithIndex.foreach { case (g, i) =>
      KeyRuns.sortToFile(plan.snapshot, plan.field.id, codec, plan.uuid, i, g, allocator)
    } catch { case e: Throwable => IndexFileWriter.removeDir(plan.snapshot.storage, plan.uuid); throw e }
    writeFromRunFiles(plan, codec, groups.indices, allocator)
  }

  /** The codec of the keys a sorted build of `plan` (BTREE, BITMAP,
    * LABEL_LIST) sorts, when its column (a list's elements for LABEL_LIST) is keyed. */
  def keyCodec(plan: IndexBuildPlan): Option[KeyCodec] =
    if (ZoneIndexWriter.zoned(plan.indexType)) None
    else if (plan.indexType == BuiltIndexType.LabelList) plan.field.children.headOption.flatMap(c => KeyCodec.of(c.arrowType))
    else KeyCodec.of(plan.field.arrowType)

  /** Writes the index's files from sorted runs (in row address order),
    * merged as they are read; on a failure removes what it wrote. Returns
    * the files written with their sizes. */
  def writeRuns(plan: IndexBuildPlan, codec: KeyCodec, runs: IndexedSeq[KeyRuns.Source],
                allocator: BufferAllocator): Seq[(String, Long)] = {
    val w = writer(plan, allocator)
    try {
      // the merge in a thread of its own, the page encoding in this one
      KeyRuns.piped(w, codec)(into => KeyRuns.merge(runs, codec, into))
      w.finish()
    } catch { case e: Throwable => w.abort(); throw e }
  }

  /** Writes the index's files from pairs in [[IndexValues.ordering]]; on a
    * failure removes what it wrote. Returns the files written with their sizes. */
  def write(plan: IndexBuildPlan, sorted: Iterator[(Any, Long)], allocator: BufferAllocator): Seq[(String, Long)] = {
    val w = writer(plan, allocator)
    try {
      sorted.foreach { case (v, a) => w.add(v, a) }
      w.finish()
    } catch { case e: Throwable => w.abort(); throw e }
  }

  /** The live rows of fragment `fragmentId` of `snapshot`: each row's value
    * of field `fieldId` (as [[IndexValues]] holds values) and row address,
    * in row order, given to `emit`. */
  def scanFragment(snapshot: Snapshot, fieldId: Int, fragmentId: Long, allocator: BufferAllocator)
                  (emit: (Any, Long) => Unit): Unit = {
    val physical = fragment(snapshot, fragmentId).physicalRows
    scanBatches(snapshot, fieldId, fragmentId, 0L, physical, allocator) { (v, selection, offsets, n) =>
      val base = fragmentId << 32
      var i = 0
      v match {
        case l: org.apache.arrow.vector.complex.BaseListVector =>
          // a list column (LABEL_LIST): one pair per element of each non-null list
          val items = l.getChildrenFromFields.get(0)
          while (i < n) {
            val row = if (selection == null) i else selection(i)
            if (!l.isNull(row)) {
              var j = l.getElementStartIndex(row)
              val end = l.getElementEndIndex(row)
              while (j < end) { emit(IndexValues.get(items, j), base | offsets(i).toLong); j += 1 }
            }
            i += 1
          }
        case _ =>
          while (i < n) {
            emit(IndexValues.get(v, if (selection == null) i else selection(i)), base | offsets(i).toLong)
            i += 1
          }
      }
    }
  }

  private def fragment(snapshot: Snapshot, fragmentId: Long) = snapshot.fragments.find(_.id == fragmentId).getOrElse(
    throw new IllegalStateException(s"${snapshot.storage.uri} (version ${snapshot.version}) has no fragment $fragmentId"))

  /** Physical rows [from, until) of fragment `fragmentId` of `snapshot`, in
    * batches of field `fieldId`'s vector (its column, or the child of a
    * struct): `visit(vector, selection, offsets, n)` for each batch of `n`
    * live rows, row i being the vector's position `selection(i)` (or i when
    * `selection` is null) at physical offset `offsets(i)`. Only the column's
    * top-level field is read; storage reads of the next batch overlap the
    * decoding of this one. */
  def scanBatches(snapshot: Snapshot, fieldId: Int, fragmentId: Long, from: Long, until: Long,
                  allocator: BufferAllocator)
                 (visit: (org.apache.arrow.vector.ValueVector, Array[Int], Array[Int], Int) => Unit): Unit = {
    val f = fragment(snapshot, fragmentId)
    val top = snapshot.schema.fields.find(t => t.id == fieldId || contains(t, fieldId)).getOrElse(
      throw new IllegalStateException(s"${snapshot.storage.uri} (version ${snapshot.version}) has no field id $fieldId"))
    val path = IndexCatalog.path(snapshot.schema.fields, fieldId).getOrElse(Vector.empty).drop(1)
    val end = math.min(until, f.physicalRows)
    Using.resource(new FragmentScanner(snapshot.storage, snapshot.version, f, Seq(top), allocator,
        ref => DataFiles.open(snapshot.storage, snapshot.schema, ref))) { scanner =>
      var at = math.max(0L, from)
      while (at < end) {
        val stop = math.min(end, at + ScanBatchRows)
        val next = if (stop < end) Some((stop, math.min(end, stop + ScanBatchRows))) else None
        Using.resource(scanner.readView(at, stop, next)) { batch =>
          val v = path.foldLeft(batch.vectors.head: org.apache.arrow.vector.ValueVector)((acc, name) =>
            acc.asInstanceOf[org.apache.arrow.vector.complex.StructVector].getChild(name))
          visit(v, batch.selection.orNull, batch.offsets, batch.rowCount)
        }
        at = stop
      }
    }
  }

  /** Physical rows read per batch by a build's scan. */
  val ScanBatchRows: Long = 65536L

  private def contains(f: LanceField, id: Int): Boolean = f.children.exists(c => c.id == id || contains(c, id))
}
