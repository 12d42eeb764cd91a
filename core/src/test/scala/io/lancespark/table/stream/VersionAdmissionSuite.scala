package io.lancespark.table.stream

import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

/** Admission control of a change feed stream: batches of whole versions;
  * expected values worked out by hand and, for random sizes and limits, the
  * rules checked on every batch of a run over all versions. */
class VersionAdmissionSuite extends AnyFunSuite {

  private def sizes(xs: (Long, Int)*): Long => VersionSize = v => {
    val (r, f) = xs((v - 1).toInt)
    VersionSize(r, f)
  }

  test("whole versions within the limits, at least one version, empty versions passed on the way") {
    // versions 1..5: 10 rows/1 file, 5/2, 0/0 (a compaction), 30/1, 1/1
    val s = sizes((10L, 1), (5L, 2), (0L, 0), (30L, 1), (1L, 1))
    assert(VersionAdmission.end(1, 5, None, None, s) == 6)
    assert(VersionAdmission.end(1, 5, Some(15L), None, s) == 4)    // 10 + 5, then the compaction, not 30 more
    assert(VersionAdmission.end(1, 5, Some(14L), None, s) == 2)    // 5 more would exceed
    assert(VersionAdmission.end(4, 5, Some(2L), None, s) == 5)     // 30 rows: taken alone, never split
    assert(VersionAdmission.end(1, 5, None, Some(1), s) == 2)
    assert(VersionAdmission.end(2, 5, None, Some(1), s) == 4)      // 2 files: alone, then the compaction
    assert(VersionAdmission.end(3, 5, None, Some(1), s) == 5)      // the compaction, then version 4
    assert(VersionAdmission.end(1, 5, Some(100L), Some(3), s) == 4)
    assert(VersionAdmission.end(6, 5, Some(1L), None, s) == 6)     // nothing committed after 5
    assert(VersionAdmission.end(1, 2, None, None, s) == 3)         // Trigger.AvailableNow's end
  }

  test("random sizes and limits: every version in exactly one batch, each batch within its limits or one version") {
    val rng = new Random(20261127L)
    for (_ <- 0 until 500) {
      val n = 1 + rng.nextInt(30)
      val all = Vector.fill(n)(if (rng.nextInt(4) == 0) VersionSize(0, 0)
        else VersionSize(1L + rng.nextInt(100), 1 + rng.nextInt(4)))
      val maxRows = if (rng.nextBoolean()) Some(1L + rng.nextInt(150)) else None
      val maxFiles = if (rng.nextBoolean()) Some(1 + rng.nextInt(6)) else None
      val size: Long => VersionSize = v => all((v - 1).toInt)
      var from = 1L
      val covered = Vector.newBuilder[Long]
      while (from <= n) {
        val end = VersionAdmission.end(from, n.toLong, maxRows, maxFiles, size)
        assert(end > from, s"no progress at $from")
        val batch = (from until end).map(size)
        val withRows = batch.count(!_.isEmpty)
        assert(withRows >= 1 || end == n + 1L, s"a batch of only empty versions before the end: $from..$end")
        if (withRows > 1) {
          maxRows.foreach(m => assert(batch.map(_.rows).sum <= m))
          maxFiles.foreach(m => assert(batch.map(_.files).sum <= m))
        }
        // the next version with changes would not have fitted
        if (end <= n && withRows >= 1 && !size(end).isEmpty) {
          val rows = batch.map(_.rows).sum + size(end).rows
          val files = batch.map(_.files).sum + size(end).files
          assert(maxRows.exists(rows > _) || maxFiles.exists(files > _), s"version $end fitted into $from..$end")
        }
        covered ++= (from until end)
        from = end
      }
      assert(covered.result() == (1L to n.toLong).toVector)
    }
  }
}
