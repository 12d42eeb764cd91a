package io.lancespark.table

import java.nio.file.Files

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.BigIntVector
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}
import org.apache.hadoop.conf.Configuration
import org.roaringbitmap.RoaringBitmap
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceSchema
import io.lancespark.table.commit._
import io.lancespark.table.maintenance._
import io.lancespark.table.model.{DataFileVersion, RowIdSequence, RowVersions, WrittenFragment}
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.{DataFiles, Dataset, DatasetStorage, FragmentWriter, RowDeletions}
import io.lancespark.table.storage.Snapshot

class CompactionSuite extends AnyFunSuite with BeforeAndAfterAll {

  private val allocator: BufferAllocator = new RootAllocator(Long.MaxValue)
  override def afterAll(): Unit = allocator.close()

  private val schema: LanceSchema = LanceSchema.fromArrow(new Schema(Seq(
    new Field("id", FieldType.nullable(new ArrowType.Int(64, true)), null)).asJava))

  // --- planning ---------------------------------------------------------------

  private def stat(id: Long, rows: Long, deleted: Long = 0, indices: Set[Int] = Set.empty): FragmentStat =
    FragmentStat(id, rows, deleted, indices)

  private def plan(frags: Seq[FragmentStat], target: Long = 500, threshold: Double = 0.1): Vector[Vector[Long]] =
    Compaction.planGroups(frags, CompactionOptions(targetRowsPerFragment = target,
      materializeDeletionsThreshold = threshold)).map(_.map(_.id))

  test("planning: a lone small fragment stays; one past the deletion threshold is rewritten alone") {
    assert(plan(Nil).isEmpty)
    assert(plan(Seq(stat(0, 100))).isEmpty)
    assert(plan(Seq(stat(0, 100, deleted = 20))) == Vector(Vector(0L)))
    assert(plan(Seq(stat(0, 100, deleted = 10))).isEmpty)                          // 10% is not above 10%
    assert(plan(Seq(stat(0, 100, deleted = 20)), threshold = 1.0).isEmpty)          // 100%: never materialized
    assert(Compaction.planGroups(Seq(stat(0, 100, deleted = 50)),
      CompactionOptions(materializeDeletions = false)).isEmpty)
    assert(plan(Seq(stat(0, 1000, deleted = 1)), threshold = 0.0) == Vector(Vector(0L)))
  }

  test("planning: adjacent candidates are binned, cut where they reach the target (the reference's example)") {
    val rows = Seq(100L, 400, 200, 200, 400, 300, 300, 100)
    val frags = rows.zipWithIndex.map { case (r, i) => stat(i.toLong, r, deleted = r / 5) }.map(f =>
      f.copy(physicalRows = f.physicalRows + f.deletedRows))  // live rows as listed, all past the threshold
    assert(plan(frags) == Vector(Vector(0L, 1), Vector(2L, 3, 4), Vector(5L, 6, 7)))
  }

  test("planning: big fragments and a change of index coverage end a bin") {
    val frags = Seq(stat(0, 100), stat(1, 100), stat(2, 900), stat(3, 100), stat(4, 100, indices = Set(0)),
      stat(5, 100, indices = Set(0)), stat(6, 100, indices = Set(0, 1)))
    assert(plan(frags) == Vector(Vector(0L, 1), Vector(4L, 5)))
    // a remainder below the target stays with the last cut
    assert(plan(Seq(stat(0, 300), stat(1, 300), stat(2, 300), stat(3, 100))) == Vector(Vector(0L, 1, 2, 3)))
    assert(plan(Seq(stat(0, 300), stat(1, 300), stat(2, 300), stat(3, 300), stat(4, 100))) ==
      Vector(Vector(0L, 1), Vector(2L, 3, 4)))
  }

  test("row id sequences and row versions: encoded forms read back") {
    def roundTrip(ids: Array[Long]): Unit =
      assert(RowIdSequence.parse(RowIdSequence.encode(ids), "test").slice(0, ids.length).toSeq == ids.toSeq)
    roundTrip((10L until 1000L).toArray)
    roundTrip((0L until 100L).filter(_ % 7 != 3).toArray)                   // a range with holes
    roundTrip(Array(5L, 1L << 40, 3L))                                       // unsorted, wide
    roundTrip((0L until 50L).map(_ * 1000).toArray)                         // sparse, sorted
    roundTrip(Array.empty[Long])
    val v = Array(1L, 1, 1, 4, 4, 2)
    assert(RowVersions.decode(RowVersions.encode(v), 6, "test").toSeq == v.toSeq)
  }

  // --- rewriting and committing --------------------------------------------------

  private def fresh(): DatasetStorage =
    DatasetStorage(Files.createTempDirectory("lance-compact").resolve("t.lance").toString, new Configuration())

  private def write(s: DatasetStorage, ids: Seq[Long]): WrittenFragment = {
    val w = new FragmentWriter(s, schema, DataFileVersion.V2_2, None, "test")
    Using.resource(new BigIntVector("id", allocator)) { v =>
      v.allocateNew(ids.size)
      ids.zipWithIndex.foreach { case (x, i) => v.set(i, x) }
      v.setValueCount(ids.size)
      w.write(Seq(v))
    }
    w.finish()
  }

  /** A dataset with stable row ids of `n` fragments of 10 rows (ids 0 until 10n). */
  private def dataset(n: Int): DatasetStorage = {
    val s = fresh()
    Committer.commit(s, None, OverwriteDataset(Seq(write(s, 0L until 10L)), schema,
      DataFileVersion.V2_2), CommitSettings(stableRowIds = true))
    (1 until n).foreach(k => append(s, (k * 10L) until (k * 10L + 10)))
    s
  }

  private def append(s: DatasetStorage, ids: Seq[Long]): Snapshot =
    Committer.commit(s, Some(Dataset.open(s, None).version), AppendFragments(Seq(write(s, ids))), CommitSettings())

  private def delete(s: DatasetStorage, fragment: Long, offsets: Int*): Snapshot = {
    val snap = Dataset.open(s, None)
    val f = snap.fragments.find(_.id == fragment).get
    val d = RowDeletions.prepare(s, f.id, f.physicalRows, f.deletion, RoaringBitmap.bitmapOf(offsets: _*), snap.version)
    Committer.commit(s, Some(snap.version), RowLevelChange(Seq(d), Nil), CommitSettings())
  }

  /** (id column, stable row id) of every live row, in scan order. */
  private def rows(snap: Snapshot): Seq[(Long, Long)] = snap.fragments.flatMap { f =>
    Using.resource(new FragmentScanner(snap.storage, snap.version, f, schema.fields, allocator,
        ref => DataFiles.open(snap.storage, snap.schema, ref))) { sc =>
      val ids = sc.rowIds(true).get.slice(0, f.physicalRows)
      Using.resource(sc.read(0, f.physicalRows)) { b =>
        val v = b.vectors.head.asInstanceOf[BigIntVector]
        (0 until b.rowCount).map(i => v.get(i) -> ids(b.offsets(i)))
      }
    }
  }

  private val opts = CompactionOptions(targetRowsPerFragment = 25)

  test("run: small fragments merged, deletions materialized, row ids and values kept, old version intact") {
    val s = dataset(6)
    delete(s, 2, 0, 1, 2)
    val before = Dataset.open(s, None)
    val m = Compaction.run(s, opts, allocator)
    val after = Dataset.open(s, None)
    assert(m.newVersion.contains(before.version + 1) && m.fragmentsRemoved == 6 && m.groupsSkipped == 0)
    assert(m.rowsRewritten == 57 && m.deletionsMaterialized == 3 && m.filesRemoved == 7)
    assert(after.fragments.map(_.physicalRows) == Vector(25L, 2, 25, 5))  // bins [0,1,2] (27 live) and [3,4,5]
    assert(after.fragments.forall(_.deletion.isEmpty))
    assert(rows(after) == rows(before))
    assert(after.fragments.map(_.id).zip(after.fragments.map(_.id).tail).forall { case (a, b) => a < b })
    assert(rows(Dataset.open(s, Some(before.version))) == rows(before))
    assert(Compaction.run(s, opts, allocator).newVersion.isEmpty)  // nothing left to do
  }

  test("commit: rebased onto a concurrent append; a concurrent delete of a rewritten fragment drops its group") {
    val s = dataset(6)
    val snap = Dataset.open(s, None)
    val p = Compaction.plan(snap, CompactionOptions(targetRowsPerFragment = 30))
    assert(p.groups.map(_.fragmentIds) == Vector(Vector(0L, 1, 2), Vector(3L, 4, 5)))
    val done = p.groups.map(g => CompactionRewrite.rewrite(s, snap, g, p.options, allocator, "compact-t"))
    append(s, 100L until 105L)
    val deleted = delete(s, 4, 7)
    val m = Compaction.commit(s, p, snap, done)
    assert(m.groupsSkipped == 1 && m.fragmentsRemoved == 3)
    val after = Dataset.open(s, None)
    assert(rows(after).map(_._1).sorted == ((0L until 60L).filter(_ != 47) ++ (100L until 105L)))
    assert(after.fragments.exists(_.deletion.isDefined))                          // fragment 4 kept, with its delete
    assert(after.version == deleted.version + 1)
    // the skipped group's files are gone; nothing else of the compaction is left unreferenced
    val referenced = after.fragments.flatMap(_.files.map(_.path)).toSet
    assert(s.list("data").map(_.getPath.getName).filter(_.startsWith("compact-t")).forall(referenced))
  }

  test("commit: every group changed concurrently fails, naming the version and the fragment") {
    val s = dataset(3)
    val snap = Dataset.open(s, None)
    val p = Compaction.plan(snap, opts)
    val done = p.groups.map(g => CompactionRewrite.rewrite(s, snap, g, p.options, allocator, "compact-u"))
    val d = delete(s, 1, 3)
    val e = intercept[CommitConflictException](Compaction.commit(s, p, snap, done))
    assert(e.getMessage.contains(s"version ${d.version}") && e.getMessage.contains("fragment 1"), e.getMessage)
    assert(!s.list("data").exists(_.getPath.getName.startsWith("compact-u")))
    assert(Dataset.open(s, None).version == d.version)
  }

  test("conflict rules: a delete read before a compaction of its fragment conflicts; of other fragments it lands") {
    val s = dataset(4)
    val read = Dataset.open(s, None)
    val f0 = read.fragments.head
    val f3 = read.fragments.last
    Compaction.run(s, CompactionOptions(targetRowsPerFragment = 25), allocator)  // rewrites 0..3
    val prepared = RowDeletions.prepare(s, f0.id, f0.physicalRows, None, RoaringBitmap.bitmapOf(1), read.version)
    val e = intercept[CommitConflictException](
      Committer.commit(s, Some(read.version), RowLevelChange(Seq(prepared), Nil), CommitSettings()))
    assert(e.getMessage.contains("compacted") && e.getMessage.contains("fragment 0"), e.getMessage)
    val s2 = dataset(4)
    val read2 = Dataset.open(s2, None)
    val q = Compaction.plan(read2, CompactionOptions(targetRowsPerFragment = 20))
    assert(q.groups.map(_.fragmentIds) == Vector(Vector(0L, 1), Vector(2L, 3)))
    Compaction.commit(s2, q, read2, Seq(CompactionRewrite.rewrite(s2, read2, q.groups.head, q.options, allocator, "c")))
    val last = read2.fragments.find(_.id == f3.id).get
    val d = RowDeletions.prepare(s2, last.id, last.physicalRows, None, RoaringBitmap.bitmapOf(0), read2.version)
    Committer.commit(s2, Some(read2.version), RowLevelChange(Seq(d), Nil), CommitSettings())
    assert(rows(Dataset.open(s2, None)).map(_._1).sorted == (0L until 40L).filter(_ != 30))
  }

  test("concurrent compactions: groups over fragments the other one rewrote are dropped, the rest land") {
    val s = dataset(4)
    val snap = Dataset.open(s, None)
    val plan = Compaction.plan(snap, CompactionOptions(targetRowsPerFragment = 20))
    assert(plan.groups.map(_.fragmentIds) == Vector(Vector(0L, 1), Vector(2L, 3)))
    // two compactions of the same version: the first rewrites fragments 0 and 1 only, the second everything
    val first = CompactionRewrite.rewrite(s, snap, plan.groups.head, plan.options, allocator, "cc-a")
    val second = plan.groups.map(g => CompactionRewrite.rewrite(s, snap, g, plan.options, allocator, "cc-b"))
    val a = Compaction.commit(s, plan, snap, Seq(first))
    val b = Compaction.commit(s, plan, snap, second)
    assert(a.fragmentsRemoved == 2 && b.groupsSkipped == 1 && b.fragmentsRemoved == 2)
    val after = Dataset.open(s, None)
    assert(rows(after).map(_._1).sorted == (0L until 40L))                  // every row once
    assert(after.fragments.size == 2)
    val referenced = after.fragments.flatMap(_.files.map(_.path)).toSet
    assert(s.list("data").map(_.getPath.getName).filter(_.startsWith("cc-")).forall(referenced))
    // a third, planned before both, has nothing left that it may commit
    val third = plan.groups.map(g => CompactionRewrite.rewrite(s, snap, g, plan.options, allocator, "cc-c"))
    val e = intercept[CommitConflictException](Compaction.commit(s, plan, snap, third))
    assert(e.getMessage.contains("fragment"), e.getMessage)
    assert(Dataset.open(s, None).version == after.version)
  }

  /** Runs `body` the first time only. */
  private def once(body: => Unit): () => Unit = {
    val done = new java.util.concurrent.atomic.AtomicBoolean(false)
    () => if (done.compareAndSet(false, true)) body
  }

  test("commit: versions committed after the earlier ones were checked, before the version is built, are checked too") {
    val s = dataset(6)
    val snap = Dataset.open(s, None)
    val p = Compaction.plan(snap, CompactionOptions(targetRowsPerFragment = 30))
    val done = p.groups.map(g => CompactionRewrite.rewrite(s, snap, g, p.options, allocator, "compact-w"))
    append(s, 100L until 105L)                                 // checked with the versions before the first lookup
    var deleted = Option.empty[Long]
    val between = once {                                       // committed between the two lookups of an attempt
      append(s, 200L until 205L)
      deleted = Some(delete(s, 4, 7).version)
    }
    val m = Compaction.commit(s, p, snap, done, CommitSettings(betweenLookups = between))
    assert(deleted.isDefined && m.groupsSkipped == 1 && m.fragmentsRemoved == 3)   // fragment 4's group left out
    val after = Dataset.open(s, None)
    assert(after.version == deleted.get + 1)
    assert(rows(after).map(_._1).sorted == ((0L until 60L).filter(_ != 47) ++ (100L until 105L) ++ (200L until 205L)))
  }

  test("commit: an update committed between the lookups of a delete's attempt: disjoint rows merge, the same rows conflict") {
    def race(ourRow: Int): (DatasetStorage, Long, scala.util.Try[Snapshot]) = {
      val s = dataset(3)
      val snap = Dataset.open(s, None)
      val f = snap.fragments.find(_.id == 1).get
      val ours = RowDeletions.prepare(s, f.id, f.physicalRows, f.deletion, RoaringBitmap.bitmapOf(ourRow), snap.version)
      var theirs = -1L
      val between = once {                                     // an update of row 5 of the same fragment
        val d = RowDeletions.prepare(s, f.id, f.physicalRows, f.deletion, RoaringBitmap.bitmapOf(5), snap.version)
        theirs = Committer.commit(s, Some(snap.version), RowLevelChange(Seq(d), Seq(write(s, Seq(1015L)))),
          CommitSettings()).version
      }
      val result = scala.util.Try(Committer.commit(s, Some(snap.version), RowLevelChange(Seq(ours), Nil),
        CommitSettings(betweenLookups = between)))
      (s, theirs, result)
    }
    val (s, theirs, merged) = race(1)
    assert(merged.get.version == theirs + 1)
    assert(rows(Dataset.open(s, None)).map(_._1).sorted == ((0L until 30L).filterNot(Set(11L, 15L)) :+ 1015L))
    // the same row: the update's new copy of it would survive the delete
    val (s2, theirs2, refused) = race(5)
    val e = refused.failed.get
    assert(e.isInstanceOf[CommitConflictException] && e.getMessage.contains(s"version $theirs2") &&
      e.getMessage.contains("same rows"), e.getMessage)
    assert(Dataset.open(s2, None).version == theirs2)
  }
}
