package io.lancespark.table

import java.nio.file.Path

import scala.util.Random

import org.apache.arrow.memory.RootAllocator
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.table.scan.{FragmentBatch, FragmentScanner}
import io.lancespark.table.storage.{DataFiles, Dataset, DatasetStorage, Snapshot}

/** Reads of many scattered row ranges of a fragment in one call
  * (`FragmentScanner.read(ranges)`, what a scan of rows an index or row
  * addresses selected makes): the rows are pylance's rows at those addresses
  * (deleted ones left out), for every file version pylance writes (0.1 files
  * read range by range, their rows copied together) and for
  * flat, string and list columns; and, each page or chunk being fetched once
  * per call, the bytes read for a scattered selection are at most those of a
  * full scan of the same columns (a selection read range by range fetched
  * the same chunk again for every range). */
class ScatteredReadsSuite extends AnyFunSuite {

  private val Rows = 30000

  /** One fragment of `Rows` rows written by pylance at `version`, some rows
    * deleted; and pylance's rows by offset ("id|s|tags" per line, "-" for deleted). */
  private def table(version: String): (Path, Vector[String]) =
    PylanceProcess.tableWithRows("scattered", version,
      """n = 30000
        |keys = np.random.default_rng(3).permutation(n)
        |ids = pa.array(keys.astype(np.int64))
        |s = pa.array([None if k % 29 == 0 else "s%d-" % k + "y" * (k % 37) for k in keys.tolist()])
        |tags = pa.array([None if k % 31 == 0 else ["t%d" % j for j in range(k % 4)] for k in keys.tolist()],
        |                pa.list_(pa.string()))
        |lance.write_dataset(pa.table({"id": ids, "s": s, "tags": tags}), path, data_storage_version=version)
        |ds = lance.dataset(path)
        |ds.delete("id % 17 = 5")
        |t = lance.dataset(path).to_table(with_row_address=True)
        |rows = ["-"] * n
        |def show(v):
        |    return "null" if v is None else (",".join(v) if isinstance(v, list) else str(v))
        |for a, i, x, g in zip(t["_rowaddr"].to_pylist(), t["id"].to_pylist(), t["s"].to_pylist(), t["tags"].to_pylist()):
        |    rows[a & 0xffffffff] = "%s|%s|%s" % (i, show(x), "null" if g is None else "[" + ",".join(g) + "]")
        |open(out, "w").write("\n".join(rows))
        |""".stripMargin)

  private def scanner(snap: Snapshot, allocator: RootAllocator): FragmentScanner = {
    val fields = Seq("id", "s", "tags").map(n => snap.schema.field(n).get)
    new FragmentScanner(snap.storage, snap.version, snap.fragments.head, fields, allocator,
      ref => DataFiles.open(snap.storage, snap.schema, ref))
  }

  private def show(b: FragmentBatch, i: Int): String = {
    def one(k: Int): String = {
      val v = b.vectors(k)
      if (v.isNull(i)) "null"
      else v.getObject(i) match {
        case l: java.util.List[_] => "[" + (0 until l.size).map(j => String.valueOf(l.get(j))).mkString(",") + "]"
        case o => o.toString
      }
    }
    s"${one(0)}|${one(1)}|${one(2)}"
  }

  /** The rows of `ranges` read in one call: (offset, row) pairs, and the bytes read. */
  private def readAll(snap: Snapshot, ranges: IndexedSeq[(Long, Long)]): (Vector[(Int, String)], Long) = {
    val allocator = new RootAllocator()
    try {
      val sc = scanner(snap, allocator)
      try {
        val b = sc.read(ranges)
        val rows: Vector[(Int, String)] =
          try { (0 until b.rowCount).map(i => b.offsets(i) -> show(b, i)).toVector }
          finally b.close()
        (rows, sc.bytesRead)
      } finally sc.close()
    } finally allocator.close()
  }

  /** The bytes a full scan of the columns reads, in batches of 8192 rows. */
  private def fullScanBytes(snap: Snapshot): Long = {
    val allocator = new RootAllocator()
    try {
      val sc = scanner(snap, allocator)
      try {
        (0L until Rows.toLong by 8192L).foreach { from =>
          sc.read(from, math.min(Rows.toLong, from + 8192L)).close()
        }
        sc.bytesRead
      } finally sc.close()
    } finally allocator.close()
  }

  /** Sorted disjoint ranges: `count` starts drawn at random, each 1 to `maxLen` rows long. */
  private def ranges(rnd: Random, count: Int, maxLen: Int): IndexedSeq[(Long, Long)] = {
    val starts = Vector.fill(count)(rnd.nextInt(Rows)).distinct.sorted
    val b = Vector.newBuilder[(Long, Long)]
    var last = 0L
    starts.foreach { s =>
      val from = math.max(s.toLong, last)
      val until = math.min(Rows.toLong, from + 1 + rnd.nextInt(maxLen))
      if (until > from) { b += ((from, until)); last = until }
    }
    b.result()
  }

  test("scattered ranges of a 0.1 (legacy) fragment read in one call are pylance's rows") {
    val (dir, want) = table("legacy")
    val snap = Dataset.open(DatasetStorage(dir.toString, new Configuration()), None)
    val rnd = new Random(1)
    for (round <- 0 until 3) {
      val rs = ranges(rnd, Seq(1, 60, 1500)(round), Seq(1, 3, 40)(round))
      val expected = rs.flatMap { case (a, b) => (a.toInt until b.toInt) }.filter(o => want(o) != "-")
        .map(o => o -> want(o)).toVector
      assert(readAll(snap, rs)._1 == expected, s"round $round: ${rs.size} ranges")
    }
  }

  for (version <- Seq("2.0", "2.1", "2.2")) {
    test(s"scattered ranges of a $version fragment read in one call are pylance's rows, each chunk read once") {
      val (dir, want) = table(version)
      val snap = Dataset.open(DatasetStorage(dir.toString, new Configuration()), None)
      val rnd = new Random(version.hashCode)
      for (round <- 0 until 6) {
        val rs = ranges(rnd, Seq(1, 7, 60, 300, 1500, 4000)(round), Seq(1, 3, 1, 40, 2, 1)(round))
        val (got, _) = readAll(snap, rs)
        val expected = rs.flatMap { case (a, b) => (a.toInt until b.toInt) }.filter(o => want(o) != "-")
          .map(o => o -> want(o)).toVector
        assert(got == expected, s"round $round: ${rs.size} ranges")
      }
      // 1% of the rows, scattered: every chunk holds some, none is fetched twice
      val onePercent = (0 until Rows by 100).map(o => (o.toLong + 37, o.toLong + 38))
      val (rows, bytes) = readAll(snap, onePercent)
      assert(rows.map(_._1) == onePercent.map(_._1.toInt).filter(o => want(o) != "-"))
      val full = fullScanBytes(snap)
      info(s"$version: 1% scattered read $bytes bytes, a full scan $full")
      assert(bytes <= full, s"$bytes bytes for 1% of the rows, $full for all")
      // one row: only the chunks holding it
      val (one, oneBytes) = readAll(snap, Vector((12345L, 12346L)))
      assert(one.map(_._2) == Vector(want(12345)).filter(_ != "-"))
      assert(oneBytes < full / 10, s"$oneBytes bytes for one row, $full for all")
    }
  }
}
