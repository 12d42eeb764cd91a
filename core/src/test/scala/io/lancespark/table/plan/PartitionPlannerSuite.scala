package io.lancespark.table.plan

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.proto.table.{DataFragment, DeletionFile}
import io.lancespark.table.filter.RowRanges
import io.lancespark.table.model.{DataFileRef, FragmentInfo}

/** Partition planning without a dataset or Spark: packing row ranges into
  * partitions, at clustering cuts or anywhere, a LIMIT's partitions, and the
  * rows per partition from the fragments' bytes. */
class PartitionPlannerSuite extends AnyFunSuite {

  private def fragment(id: Long, rows: Long, bytes: Long = 0L, deleted: Long = 0L): FragmentInfo =
    FragmentInfo(id, Vector(DataFileRef(s"$id.lance", Vector(0), Vector(0), 2, 0, bytes)),
      if (deleted == 0) None else Some(DeletionFile.newBuilder().setNumDeletedRows(deleted).build()),
      rows, DataFragment.getDefaultInstance)

  test("partition planning cuts row ranges into partitions of at most splitRows rows") {
    val ranges = Vector(0L -> 10L, 20L -> 25L, 30L -> 31L)
    assert(PartitionPlanner.chunks(ranges, 4) ==
      Vector(Vector(0L -> 4L), Vector(4L -> 8L), Vector(8L -> 10L, 20L -> 22L), Vector(22L -> 25L, 30L -> 31L)))
    assert(PartitionPlanner.chunks(ranges, 100) == Vector(ranges))
    assert(PartitionPlanner.chunks(Vector.empty, 3).isEmpty)
    // every row once, in order, whatever the split
    for (split <- 1L to 17L) {
      val rows = PartitionPlanner.chunks(ranges, split).flatten.flatMap { case (s, e) => s until e }
      assert(rows == ranges.flatMap { case (s, e) => s until e })
      assert(PartitionPlanner.chunks(ranges, split).forall(_.map { case (s, e) => e - s }.sum <= split))
    }
    intercept[IllegalArgumentException](PartitionPlanner.chunks(ranges, 0))
  }

  test("partitions span fragments: small fragments share a task, large ones are cut, every row once") {
    val frags = Vector("a" -> Vector(0L -> 3L), "b" -> Vector(0L -> 2L, 5L -> 6L), "c" -> Vector(10L -> 19L))
    assert(PartitionPlanner.pack(frags, 4) == Vector(
      Vector("a" -> Vector(0L -> 3L), "b" -> Vector(0L -> 1L)),
      Vector("b" -> Vector(1L -> 2L, 5L -> 6L), "c" -> Vector(10L -> 12L)),
      Vector("c" -> Vector(12L -> 16L)),
      Vector("c" -> Vector(16L -> 19L))))
    assert(PartitionPlanner.pack(frags, 100) == Vector(frags))
    for (split <- 1L to 20L) {
      val parts = PartitionPlanner.pack(frags, split)
      assert(parts.flatten.flatMap { case (k, rs) => rs.flatMap { case (s, e) => (s until e).map(k -> _) } } ==
        frags.flatMap { case (k, rs) => rs.flatMap { case (s, e) => (s until e).map(k -> _) } })
      assert(parts.forall(_.flatMap(_._2).map { case (s, e) => e - s }.sum <= split))
      assert(parts.forall(p => p.map(_._1).distinct.size == p.size))   // one piece per fragment and partition
    }
  }

  test("clustered partitions end only at cuts, once they hold splitRows rows; pieces list the cuts inside them") {
    // fragment a: rows 0-9, cuts at 0, 4, 10; b: rows 0-5 and 8-12 read, cuts at 3 and 7 (not 0: a's last
    // value goes on in b); c: rows 0-4, no cut inside
    val frags = Vector("a" -> Vector(0L -> 10L), "b" -> Vector(0L -> 5L, 8L -> 12L), "c" -> Vector(0L -> 4L))
    val cuts = Map("a" -> Vector(0L, 4L, 10L), "b" -> Vector(3L, 7L), "c" -> Vector.empty[Long])
    val within = (k: String, from: Long, until: Long) => cuts(k).filter(c => c >= from && c <= until)
    assert(PartitionPlanner.packAtCuts(frags, 3, within) == Vector(
      Vector(("a", Vector(0L -> 4L), Vector.empty)),
      Vector(("a", Vector(4L -> 10L), Vector.empty), ("b", Vector(0L -> 3L), Vector.empty)),
      Vector(("b", Vector(3L -> 5L, 8L -> 12L), Vector(8L)), ("c", Vector(0L -> 4L), Vector.empty))))
    // one partition: the cuts inside it, each where it may hand out its groups; ranges not cut there
    assert(PartitionPlanner.packAtCuts(frags, 100, within) == Vector(Vector(
      ("a", Vector(0L -> 10L), Vector(4L)), ("b", Vector(0L -> 5L, 8L -> 12L), Vector(3L, 8L)),
      ("c", Vector(0L -> 4L), Vector.empty))))
    for (split <- 1L to 30L) {
      val parts = PartitionPlanner.packAtCuts(frags, split, within)
      // every row once, in order
      assert(parts.flatten.flatMap { case (k, rs, _) => rs.flatMap { case (s, e) => (s until e).map(k -> _) } } ==
        frags.flatMap { case (k, rs) => rs.flatMap { case (s, e) => (s until e).map(k -> _) } })
      // each partition but the first starts at a cut, or past one with no row read between
      parts.drop(1).foreach { p =>
        val (k, rs, _) = p.head
        val before = frags.find(_._1 == k).get._2.flatMap { case (s, e) => s until e }.takeWhile(_ < rs.head._1)
        assert(within(k, before.lastOption.fold(0L)(_ + 1), rs.head._1).nonEmpty, (split, parts))
      }
    }
  }

  test("partitions of planned fragments: pieces mark each fragment's first, a LIMIT keeps those it needs") {
    // a: 10 rows, 4..5 and 7..9 planned, 3 deleted; b: 6 rows, all planned
    val a = fragment(0, 10, deleted = 3)
    val b = fragment(1, 6)
    val plans = Vector(FragmentPlan(a, RowRanges.of(2L -> 5L, 7L -> 10L), RowRanges.of()),
      FragmentPlan(b, RowRanges.all(6), RowRanges.all(6)))
    val all = PartitionPlanner.partitions(plans, 4)
    assert(all == Vector(
      Vector(FragmentPiece(a, Vector(2L -> 5L, 7L -> 8L), first = true)),
      Vector(FragmentPiece(a, Vector(8L -> 10L), first = false), FragmentPiece(b, Vector(0L -> 2L), first = true)),
      Vector(FragmentPiece(b, Vector(2L -> 6L), first = false))))
    // rows each partition surely returns (a piece's deleted rows may all be in it): 1, 2, 4
    assert(PartitionPlanner.partitions(plans, 4, Some(1L)) == all.take(1))
    assert(PartitionPlanner.partitions(plans, 4, Some(0L)) == all.take(1))
    assert(PartitionPlanner.partitions(plans, 4, Some(3L)) == all.take(2))
    assert(PartitionPlanner.partitions(plans, 4, Some(4L)) == all)
    assert(PartitionPlanner.partitions(plans, 4, Some(100L)) == all)
    assert(PartitionPlanner.partitions(Vector.empty, 4, Some(1L)).isEmpty)
  }

  test("rows per partition by default: as many partitions as a file scan makes of the same bytes, whole waves") {
    val mb = 1L << 20
    val spark = SplitTarget(maxPartitionBytes = 128 * mb, openCostBytes = 4 * mb, cores = 4)
    // a small table: one partition
    assert(PartitionPlanner.defaultSplit(Vector(fragment(0, 1000, mb)), 100, spark) == 1000)
    // eight fragments of 100 MB: a partition each, two waves of four
    val large = Vector.tabulate(8)(i => fragment(i, 1000, 100 * mb))
    assert(PartitionPlanner.defaultSplit(large, 100, spark) == 1000)
    // on three cores, three waves: nine partitions
    assert(PartitionPlanner.defaultSplit(large, 100, spark.copy(cores = 3)) == 889)
    // a hundred fragments of 1 MB on two cores: 26 fragments (their bytes and open costs) a partition, four
    val small = Vector.tabulate(100)(i => fragment(i, 10, mb))
    assert(PartitionPlanner.defaultSplit(small, 100, spark.copy(cores = 2)) == 250)
    // no file sizes in the manifest: the rows' estimated bytes
    assert(PartitionPlanner.fragmentBytes(fragment(0, 1000), 24.0) == 24000.0)
    assert(PartitionPlanner.fragmentBytes(fragment(0, 1000, 5000), 24.0) == 5000.0)
    val unsized = Vector.tabulate(8)(i => fragment(i, 1000))
    assert(PartitionPlanner.defaultSplit(unsized, 100.0 * mb / 1000, spark) == 1000)
    // no cores or no rows: still at least one row a partition
    assert(PartitionPlanner.defaultSplit(large, 100, spark.copy(cores = 0)) == 1000)
    assert(PartitionPlanner.defaultSplit(Vector.empty, 100, spark) == 1)
  }

  test("rows per partition of a scan of a few columns: by the bytes it reads, at least a partition per core the whole files would fill") {
    val mb = 1L << 20
    val two = SplitTarget(maxPartitionBytes = 128 * mb, openCostBytes = 4 * mb, cores = 2)
    // one fragment of 1.5 GB: twelve partitions of its whole bytes; a tenth of them read (150 MB): two
    val wide = Vector(fragment(0, 1200000, 1536 * mb))
    assert(PartitionPlanner.defaultSplit(wide, 100, two) == 100000)
    assert(PartitionPlanner.defaultSplit(wide, 100, two, share = 0.1) == 600000)
    // one fragment of 60 MB of which 3 MB are read: below the open cost, yet a partition per core (the whole
    // bytes make two), not one task on two cores
    val mid = Vector(fragment(0, 400000, 60 * mb))
    assert(PartitionPlanner.defaultSplit(mid, 100, two) == 200000)
    assert(PartitionPlanner.defaultSplit(mid, 100, two, share = 0.05) == 200000)
    // never more than a partition per core from the floor: on four cores the whole bytes make four partitions
    assert(PartitionPlanner.defaultSplit(mid, 100, two.copy(cores = 4), share = 0.05) == 100000)
    // a table of a few MB stays one partition
    val small = Vector(fragment(0, 1000, 3 * mb))
    assert(PartitionPlanner.defaultSplit(small, 100, two, share = 0.5) == 1000)
    // the planned rows alike: half of the 60 MB fragment kept (30 MB whole, 1.5 MB read): two partitions
    val half = mid.map(f => FragmentPlan(f, RowRanges.of(0L -> 200000L), RowRanges.of()))
    assert(PartitionPlanner.plannedSplit(half, 100, two, share = 0.05) == 100000)
  }

  test("rows per partition over the planned rows: a plan pruned at run time still gets a partition per core") {
    val mb = 1L << 20
    val spark = SplitTarget(maxPartitionBytes = 128 * mb, openCostBytes = 4 * mb, cores = 4)
    // twelve fragments of 40 MB and 1,000,000 rows: four partitions of three fragments
    val frags = Vector.tabulate(12)(i => fragment(i, 1000000, 40 * mb))
    assert(PartitionPlanner.defaultSplit(frags, 100, spark) == 3000000)
    // a fifth of four fragments kept (pages of days a join keeps): 8 MB each, 32 MB in all, a partition per
    // core (the whole table's split would pack them into one)
    val kept = frags.take(4).map(f => FragmentPlan(f, RowRanges.of(0L -> 200000L), RowRanges.of()))
    assert(PartitionPlanner.plannedSplit(kept, 100, spark) == 200000)
    assert(PartitionPlanner.partitions(kept, PartitionPlanner.plannedSplit(kept, 100, spark)).size == 4)
    // every row kept: the same split as the table's
    val all = frags.map(f => FragmentPlan(f, RowRanges.all(1000000), RowRanges.all(1000000)))
    assert(PartitionPlanner.plannedSplit(all, 100, spark) == PartitionPlanner.defaultSplit(frags, 100, spark))
    // a few kept rows in two fragments: a partition each, as Spark packs two small files with their open costs
    val few = frags.take(2).map(f => FragmentPlan(f, RowRanges.of(0L -> 1000L), RowRanges.of()))
    assert(PartitionPlanner.plannedSplit(few, 100, spark) == 1000)
    assert(PartitionPlanner.plannedSplit(Vector.empty, 100, spark) == 1)
  }
}
