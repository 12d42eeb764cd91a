package io.lancespark.table

import java.nio.file.Files
import java.util.concurrent.{Executors, TimeUnit}

import scala.concurrent.{Await, ExecutionContext, Future}
import scala.concurrent.duration._

import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.proto.file.{Field => PbField}
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.commit.{AppendFragments, CommitConflictException, CommitSettings, Committer, Commits, OverwriteDataset, RowLevelChange, RowLevelPart, RowLevelRead, RowLevelWrites, TaskDeletions}
import io.lancespark.table.model.{FeatureFlags, RowIdSequence}
import io.lancespark.table.storage.{Dataset, DatasetStorage, DeletionVector, FragmentDeletion, RowDeletions, TransactionFile}
import io.lancespark.table.model.WrittenFragment
import io.lancespark.table.storage.Snapshot

class CommitterSuite extends AnyFunSuite {

  private val schema: io.lancespark.schema.LanceSchema = io.lancespark.schema.LanceSchema(
    Vector(io.lancespark.schema.LanceField(0, "id", "int64", nullable = true, Vector.empty, Map.empty)), Map.empty)

  private def frag(name: String, rows: Long) = WrittenFragment(name, Vector(0), Vector(0), rows, 100L, DataFileVersion.V2_0)

  private def fresh(): DatasetStorage =
    DatasetStorage(Files.createTempDirectory("lance-commit").resolve("t.lance").toString, new Configuration())

  private def create(s: DatasetStorage, settings: CommitSettings = CommitSettings()): Snapshot =
    Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance", 10)), schema, DataFileVersion.V2_0), settings)

  test("create, then appends get the next versions and fresh fragment ids") {
    val s = fresh()
    assert(create(s).version == 1)
    val v2 = Committer.commit(s, Some(1), AppendFragments(Seq(frag("b.lance", 5), frag("c.lance", 7))), CommitSettings())
    assert(v2.version == 2)
    assert(v2.fragments.map(_.id) == Seq(0L, 1L, 2L))
    assert(v2.manifest.getMaxFragmentId == 2)
    assert(v2.countRows == 22)
    val reopened = Dataset.open(s, None)
    assert(reopened.version == 2 && reopened.manifest.getTransactionFile.startsWith("1-"))
    assert(TransactionFile.read(s, reopened.manifest.getTransactionFile).exists(_.hasAppend))
  }

  test("an append read at an old version rebases onto concurrent appends") {
    val s = fresh()
    create(s)
    Committer.commit(s, Some(1), AppendFragments(Seq(frag("b.lance", 5))), CommitSettings())
    val v3 = Committer.commit(s, Some(1), AppendFragments(Seq(frag("c.lance", 5))), CommitSettings())
    assert(v3.version == 3 && v3.fragments.map(_.id) == Seq(0L, 1L, 2L))
  }

  test("overwrite racing an append: the later one gets a conflict naming the version") {
    val s = fresh()
    create(s)
    Committer.commit(s, Some(1), AppendFragments(Seq(frag("b.lance", 5))), CommitSettings())
    val e = intercept[CommitConflictException] {
      Committer.commit(s, Some(1), OverwriteDataset(Seq(frag("x.lance", 1)), schema, DataFileVersion.V2_0), CommitSettings())
    }
    assert(e.getMessage.contains("version 2") && e.getMessage.contains("overwrite"))
    val s2 = fresh()
    create(s2)
    Committer.commit(s2, Some(1), OverwriteDataset(Seq(frag("x.lance", 1)), schema, DataFileVersion.V2_0), CommitSettings())
    val e2 = intercept[CommitConflictException] {
      Committer.commit(s2, Some(1), AppendFragments(Seq(frag("b.lance", 5))), CommitSettings())
    }
    assert(e2.getMessage.contains("version 2"))
    assert(Dataset.open(s2, None).version == 2)
  }

  test("a concurrent version without a readable transaction file conflicts") {
    val s = fresh()
    create(s)
    val v2 = Committer.commit(s, Some(1), AppendFragments(Seq(frag("b.lance", 5))), CommitSettings())
    s.fs.delete(new org.apache.hadoop.fs.Path(new org.apache.hadoop.fs.Path(s.root, "_transactions"),
      v2.manifest.getTransactionFile), false)
    val e = intercept[CommitConflictException] {
      Committer.commit(s, Some(1), AppendFragments(Seq(frag("c.lance", 5))), CommitSettings())
    }
    assert(e.getMessage.contains("missing"))
  }

  test("creating over an existing dataset is a conflict, not an overwrite") {
    val s = fresh()
    create(s)
    intercept[CommitConflictException](create(s))
    assert(Dataset.open(s, None).version == 1)
  }

  test("stable row ids are assigned from next_row_id") {
    val s = fresh()
    val v1 = create(s, CommitSettings(stableRowIds = true))
    assert((v1.manifest.getReaderFeatureFlags & FeatureFlags.StableRowIds) != 0 && v1.manifest.getNextRowId == 10)
    val v2 = Committer.commit(s, Some(1), AppendFragments(Seq(frag("b.lance", 5))), CommitSettings())
    val ids = RowIdSequence.parse(v2.fragments.last.proto.getInlineRowIds.toByteArray, "t")
    assert(ids.slice(0, 5).toSeq == (10L until 15L) && v2.manifest.getNextRowId == 15)
  }

  test("V1 naming is kept for datasets that use it") {
    val s = fresh()
    create(s, CommitSettings(v2ManifestNaming = false))
    Committer.commit(s, Some(1), AppendFragments(Seq(frag("b.lance", 5))), CommitSettings())
    assert(s.list("_versions").map(_.getPath.getName).filter(_.endsWith(".manifest")).toSet ==
      Set("1.manifest", "2.manifest"))
  }

  test("many writers appending at once: every commit lands exactly once") {
    val s = fresh()
    create(s)
    val pool = Executors.newFixedThreadPool(4)
    implicit val ec: ExecutionContext = ExecutionContext.fromExecutor(pool)
    try {
      val commits = (0 until 24).map { k =>
        Future(Committer.commit(s, Some(1), AppendFragments(Seq(frag(s"f$k.lance", 1))), CommitSettings()).version)
      }
      val versions = Await.result(Future.sequence(commits), 2.minutes)
      assert(versions.sorted == (2L to 25L))
      val last = Dataset.open(s, None)
      assert(last.fragments.map(_.files.head.path).toSet == ((0 until 24).map(k => s"f$k.lance").toSet + "a.lance"))
      assert(last.fragments.map(_.id).distinct.size == 25)
    } finally {
      pool.shutdown()
      pool.awaitTermination(10, TimeUnit.SECONDS)
    }
  }

  private def bits(xs: Int*): org.roaringbitmap.RoaringBitmap = org.roaringbitmap.RoaringBitmap.bitmapOf(xs: _*)

  private def deletedOf(s: DatasetStorage, snap: Snapshot, id: Long): Set[Int] = {
    val f = snap.fragments.find(_.id == id).get
    f.deletion.map(d => DeletionVector.read(s, id, d, f.physicalRows).toArray.toSet).getOrElse(Set.empty)
  }

  /** What an executor would prepare: `rows` of fragment `id` deleted, read at `read`. */
  private def del(s: DatasetStorage, read: Snapshot, id: Long, rows: org.roaringbitmap.RoaringBitmap): FragmentDeletion = {
    val f = read.fragments.find(_.id == id).get
    RowDeletions.prepare(s, id, f.physicalRows, f.deletion, rows, read.version)
  }

  private def change(s: DatasetStorage, read: Snapshot, rows: Map[Long, org.roaringbitmap.RoaringBitmap],
      newFiles: Seq[WrittenFragment] = Nil): RowLevelChange =
    RowLevelChange(rows.toSeq.map { case (id, r) => del(s, read, id, r) }, newFiles)

  private def deletionFiles(s: DatasetStorage): Set[String] =
    s.list("_deletions").map(_.getPath.getName).toSet

  test("two deletes on the same fragment both land: deletion sets are merged on retry") {
    val s = fresh()
    val v1 = Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance", 10000)), schema, DataFileVersion.V2_0), CommitSettings())
    val first = Committer.commit(s, Some(1), RowLevelChange(Seq(del(s, v1, 0, bits(1, 2, 3))), Nil, "a"), CommitSettings())
    assert(first.manifest.getTransactionFile.nonEmpty && deletedOf(s, first, 0) == Set(1, 2, 3))
    // read at version 1, committed after version 2: rebased, nothing lost
    val late = del(s, v1, 0, bits(3, 7000))
    val second = Committer.commit(s, Some(1), RowLevelChange(Seq(late), Nil, "b"), CommitSettings())
    assert(second.version == 3 && deletedOf(s, second, 0) == Set(1, 2, 3, 7000))
    assert(second.fragments.head.deletedRows == 4)
    assert((second.manifest.getReaderFeatureFlags & FeatureFlags.DeletionFiles) != 0)
    assert(TransactionFile.read(s, second.manifest.getTransactionFile).exists(_.hasDelete))
    // the prepared file the merge superseded is gone; the two committed ones stay
    val committed = Seq(first, second).map(v => DeletionVector.relativePath(0, v.fragments.head.deletion.get).stripPrefix("_deletions/"))
    assert(deletionFiles(s) == committed.toSet)
  }

  test("a deletion prepared on an unchanged fragment is committed as the task wrote it") {
    val s = fresh()
    val v1 = Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance", 100), frag("b.lance", 100)), schema,
      DataFileVersion.V2_0), CommitSettings())
    val d = del(s, v1, 1, bits(4, 5))
    Committer.commit(s, Some(1), RowLevelChange(Seq(del(s, v1, 0, bits(9))), Nil), CommitSettings())
    val v3 = Committer.commit(s, Some(1), RowLevelChange(Seq(d), Nil), CommitSettings())
    assert(v3.fragments.find(_.id == 1).get.deletion == d.result)
    assert(deletedOf(s, v3, 0) == Set(9) && deletedOf(s, v3, 1) == Set(4, 5))
  }

  test("an update racing a delete on the same fragment: disjoint rows merge, the same rows conflict") {
    val s = fresh()
    val v1 = Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance", 100), frag("b.lance", 100)), schema,
      DataFileVersion.V2_0), CommitSettings())
    Committer.commit(s, Some(1), change(s, v1, Map(0L -> bits(5))), CommitSettings())
    // the same row: the update would resurrect a deleted row
    val e = intercept[CommitConflictException] {
      Committer.commit(s, Some(1), change(s, v1, Map(0L -> bits(5, 6)), Seq(frag("u.lance", 2))), CommitSettings())
    }
    assert(e.getMessage.contains("version 2") && e.getMessage.contains("fragment 0"), e.getMessage)
    // other rows of the same fragment: both changes land, nothing lost
    val ok = Committer.commit(s, Some(1), change(s, v1, Map(0L -> bits(6))), CommitSettings())
    assert(deletedOf(s, ok, 0) == Set(5, 6))
    val upd = Committer.commit(s, Some(1), change(s, v1, Map(0L -> bits(7), 1L -> bits(1)), Seq(frag("u.lance", 2))),
      CommitSettings())
    assert(upd.version == 4 && upd.fragments.map(_.id) == Seq(0L, 1L, 2L))
    assert(deletedOf(s, upd, 0) == Set(5, 6, 7) && deletedOf(s, upd, 1) == Set(1))
    assert(TransactionFile.read(s, upd.manifest.getTransactionFile).exists(_.hasUpdate))
  }

  test("a delete racing an update on the same rows conflicts; a delete racing a delete of them does not") {
    val s = fresh()
    val v1 = Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance", 100)), schema, DataFileVersion.V2_0), CommitSettings())
    Committer.commit(s, Some(1), change(s, v1, Map(0L -> bits(3)), Seq(frag("u.lance", 1))), CommitSettings())
    val e = intercept[CommitConflictException] {
      Committer.commit(s, Some(1), change(s, v1, Map(0L -> bits(3))), CommitSettings())
    }
    assert(e.getMessage.contains("version 2"), e.getMessage)
    val s2 = fresh()
    val w1 = Committer.commit(s2, None, OverwriteDataset(Seq(frag("a.lance", 100)), schema, DataFileVersion.V2_0), CommitSettings())
    Committer.commit(s2, Some(1), change(s2, w1, Map(0L -> bits(3, 4))), CommitSettings())
    val both = Committer.commit(s2, Some(1), change(s2, w1, Map(0L -> bits(3))), CommitSettings())
    assert(deletedOf(s2, both, 0) == Set(3, 4))
  }

  test("an update of a fragment a concurrent delete removed conflicts; a delete of it is a no-op") {
    val s = fresh()
    val v1 = Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance", 4), frag("b.lance", 4)), schema, DataFileVersion.V2_0),
      CommitSettings())
    val all = new org.roaringbitmap.RoaringBitmap(); all.add(0L, 4L)
    val v2 = Committer.commit(s, Some(1), change(s, v1, Map(0L -> all)), CommitSettings())
    assert(v2.fragments.map(_.id) == Seq(1L))
    intercept[CommitConflictException] {
      Committer.commit(s, Some(1), change(s, v1, Map(0L -> bits(1)), Seq(frag("u.lance", 1))), CommitSettings())
    }
    val v3 = Committer.commit(s, Some(1), change(s, v1, Map(0L -> bits(1), 1L -> bits(2))), CommitSettings())
    assert(v3.fragments.map(_.id) == Seq(1L) && deletedOf(s, v3, 1) == Set(2))
  }

  test("deleting every row of a fragment removes it; large sets are bitmaps, small ones Arrow arrays") {
    val s = fresh()
    val v1 = Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance", 6000), frag("b.lance", 4)), schema,
      DataFileVersion.V2_0), CommitSettings())
    val all = new org.roaringbitmap.RoaringBitmap(); all.add(0L, 4L)
    val big = new org.roaringbitmap.RoaringBitmap(); big.add(0L, 5500L)
    val v2 = Committer.commit(s, Some(1), change(s, v1, Map(0L -> big, 1L -> all)), CommitSettings())
    assert(v2.fragments.map(_.id) == Seq(0L))
    assert(v2.fragments.head.deletion.get.getFileType == io.lancespark.proto.table.DeletionFile.DeletionFileType.BITMAP)
    assert(deletedOf(s, v2, 0).size == 5500)
    val v3 = Committer.commit(s, Some(2), change(s, v2, Map(0L -> bits(5999))), CommitSettings())
    assert(v3.fragments.head.deletion.get.getFileType == io.lancespark.proto.table.DeletionFile.DeletionFileType.BITMAP)
    assert(deletedOf(s, v3, 0).size == 5501)
    val small = Committer.commit(s, Some(3), change(s, v3, Map(0L -> bits())), CommitSettings())
    assert(small.version == 4)
    val s2 = fresh()
    val w1 = Committer.commit(s2, None, OverwriteDataset(Seq(frag("a.lance", 6000)), schema, DataFileVersion.V2_0), CommitSettings())
    val w2 = Committer.commit(s2, Some(1), change(s2, w1, Map(0L -> bits(1, 2))), CommitSettings())
    assert(w2.fragments.head.deletion.get.getFileType ==
      io.lancespark.proto.table.DeletionFile.DeletionFileType.ARROW_ARRAY)
  }

  // Commits.commitOrDiscard / RowLevelWrites: a commit keeps the files its
  // change wrote, a failed one removes them (and nothing else).

  /** A (dummy) data file on disk: the commit only names it. */
  private def written(s: DatasetStorage, name: String, rows: Long): WrittenFragment = {
    val out = s.fs.create(s.dataFile(name), false)
    try out.write(Array[Byte](1, 2, 3)) finally out.close()
    WrittenFragment(name, Vector(0), Vector(0), rows, 3L, DataFileVersion.V2_0)
  }

  private def exists(s: DatasetStorage, name: String): Boolean = s.fs.exists(s.dataFile(name))

  private def overwrite(s: DatasetStorage, files: Seq[WrittenFragment]) =
    OverwriteDataset(files, schema, DataFileVersion.V2_0)

  private def createWritten(s: DatasetStorage): Snapshot =
    Commits.commitOrDiscard(s, None, overwrite(s, Seq(written(s, "a.lance", 10))), CommitSettings())

  test("a commit keeps the data files it names") {
    val s = fresh()
    assert(createWritten(s).version == 1)
    val v2 = Commits.commitOrDiscard(s, Some(1), AppendFragments(Seq(written(s, "b.lance", 5))), CommitSettings())
    assert(v2.version == 2 && v2.countRows == 15)
    assert(exists(s, "a.lance") && exists(s, "b.lance"))
  }

  test("a refused commit removes the data files it names, and only those") {
    val s = fresh()
    createWritten(s)
    Commits.commitOrDiscard(s, Some(1), AppendFragments(Seq(written(s, "b.lance", 5))), CommitSettings())
    val x = written(s, "x.lance", 1)
    intercept[CommitConflictException] {  // an overwrite read at 1 racing the append of 2
      Commits.commitOrDiscard(s, Some(1), overwrite(s, Seq(x)), CommitSettings())
    }
    assert(!exists(s, "x.lance"))
    assert(exists(s, "a.lance") && exists(s, "b.lance"))
  }

  private def deletionFile(s: DatasetStorage, p: RowLevelPart) =
    s.resolve(DeletionVector.relativePath(p.deletions.head.fragmentId, p.deletions.head.result.get), "deletion file")

  private def rowLevelPart(s: DatasetStorage, read: Snapshot, name: String): RowLevelPart = {
    val task = new TaskDeletions(RowLevelRead(read), () => s)
    task.delete(3L)  // fragment 0, offset 3
    task.prepare(Seq(written(s, name, 1)))
  }

  test("a row-level change: committed, its deletion and data files stay") {
    val s = fresh()
    val v1 = createWritten(s)
    val part = rowLevelPart(s, v1, "u.lance")
    assert(s.fs.exists(deletionFile(s, part)))
    val v2 = RowLevelWrites.commitOrDiscard(s, 1, Seq(part), "UPDATE", CommitSettings())
    assert(v2.map(_.version).contains(2L) && v2.get.countRows == 10)
    assert(s.fs.exists(deletionFile(s, part)) && exists(s, "u.lance"))
    assert(RowLevelWrites.commitOrDiscard(s, 2, Seq(RowLevelPart(Nil, Nil)), "DELETE", CommitSettings()).isEmpty)
  }

  test("a row-level change that conflicts removes its deletion and data files") {
    val s = fresh()
    val v1 = createWritten(s)
    val part = rowLevelPart(s, v1, "u.lance")
    Commits.commitOrDiscard(s, Some(1), overwrite(s, Seq(written(s, "o.lance", 4))), CommitSettings())
    intercept[CommitConflictException] {
      RowLevelWrites.commitOrDiscard(s, 1, Seq(part), "UPDATE", CommitSettings())
    }
    assert(!s.fs.exists(deletionFile(s, part)) && !exists(s, "u.lance"))
    assert(exists(s, "o.lance"))
  }

  test("discard (an abort) removes what the parts name") {
    val s = fresh()
    val v1 = createWritten(s)
    val part = rowLevelPart(s, v1, "u.lance")
    RowLevelWrites.discard(s, Seq(part))
    assert(!s.fs.exists(deletionFile(s, part)) && !exists(s, "u.lance") && exists(s, "a.lance"))
  }
}
