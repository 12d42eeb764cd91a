package io.lancespark.table.index

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}

import scala.collection.mutable

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.{BigIntVector, UInt8Vector}
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.table.filter.{CompareOp, Filter, Lit}
import io.lancespark.table.filter.Filter._
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.{DataFiles, Dataset, DatasetStorage}
import io.lancespark.table.PylanceProcess
import io.lancespark.table.storage.Snapshot
import io.lancespark.table.plan.ScanPlanner

/** Scalar indices pylance builds (BTREE, BITMAP; others ignored), read by the
  * table layer: what they select of each covered fragment holds every row
  * pylance's filter returns there (row addresses from pylance), fragments
  * appended or rewritten after the build are left undecided, and a scan
  * planned with the indices returns exactly pylance's rows. */
class ScalarIndexSuite extends AnyFunSuite {

  private def py(script: String, args: String*): String = PylanceProcess.run(script, args: _*)

  /** 5000 rows in 5 fragments; BTREE on id and v, BITMAP on k and s, a
    * ZONEMAP on v (not read: ignored); then deletes, an append and an update. */
  private lazy val dir: Path = {
    val d = Files.createTempDirectory("scalar-index").resolve("t")
    py(
      """import sys, lance, pyarrow as pa
        |path = sys.argv[1]
        |def tab(start, n):
        |    ids = list(range(start, start + n))
        |    ids = ids[::2] + ids[1::2]
        |    return pa.table({"id": pa.array(ids, pa.int64()),
        |        "k": pa.array([None if i % 9 == 0 else i % 7 for i in ids], pa.int32()),
        |        "s": pa.array([None if i % 11 == 0 else "w%d" % (i % 5) for i in ids]),
        |        "v": pa.array([None if i % 13 == 0 else (i % 100) / 4.0 for i in ids], pa.float64()),
        |        "p": pa.array([None if i % 17 == 0 else "a payload longer than thirty-two bytes #%d" % i for i in ids]),
        |        "tags": pa.array([None if i % 19 == 0 else ["t%d" % (i % 3)] for i in ids], pa.list_(pa.string()))})
        |lance.write_dataset(tab(0, 5000), path, max_rows_per_file=1000)
        |ds = lance.dataset(path)
        |ds.create_scalar_index("id", "BTREE")
        |ds.create_scalar_index("v", "BTREE")
        |ds.create_scalar_index("k", "BITMAP")
        |ds.create_scalar_index("s", "BITMAP")
        |ds.create_scalar_index("v", "ZONEMAP", name="v_zones")
        |ds.create_scalar_index("p", "BLOOMFILTER")
        |ds.create_scalar_index("id", "BLOOMFILTER", name="id_bloom")
        |ds.create_scalar_index("tags", "LABEL_LIST")
        |ds = lance.dataset(path)
        |ds.delete("id % 10 = 4")
        |lance.write_dataset(tab(5000, 500), path, mode="append")
        |lance.dataset(path).update({"k": "k + 1"}, where="id < 100")
        |""".stripMargin, d.toString)
    d
  }

  private def snapshot: Snapshot = Dataset.open(DatasetStorage(dir.toString, new Configuration()), None)

  private def col(n: String): Column = Vector(n)
  private def long(v: Long): Lit = Lit.LongLit(v)

  /** Filters with their SQL text for pylance. */
  private val cases: Seq[(Filter, String)] = Seq(
    Compare(col("id"), CompareOp.Eq, long(1235)) -> "id = 1235",
    Compare(col("id"), CompareOp.Eq, long(50)) -> "id = 50",
    In(col("id"), Vector(long(3), long(777), long(4001), long(5100))) -> "id IN (3, 777, 4001, 5100)",
    And(Compare(col("id"), CompareOp.GtEq, long(1500)), Compare(col("id"), CompareOp.Lt, long(1530))) ->
      "id >= 1500 AND id < 1530",
    Compare(col("k"), CompareOp.Eq, long(3)) -> "k = 3",
    IsNull(col("k")) -> "k IS NULL",
    In(col("s"), Vector(Lit.string("w1"), Lit.string("w4"))) -> "s IN ('w1', 'w4')",
    IsNull(col("s")) -> "s IS NULL",
    Compare(col("v"), CompareOp.Gt, Lit.DoubleLit(24.0)) -> "v > 24.0",
    IsNull(col("v")) -> "v IS NULL",
    Or(Compare(col("id"), CompareOp.Eq, long(10)), Compare(col("s"), CompareOp.Eq, Lit.string("w2"))) ->
      "id = 10 OR s = 'w2'",
    Not(Compare(col("k"), CompareOp.NotEq, long(2))) -> "NOT (k <> 2)",
    And(Compare(col("k"), CompareOp.Eq, long(1)), Not(IsNull(col("s")))) -> "k = 1 AND NOT (s IS NULL)",
    Or(Compare(col("id"), CompareOp.Lt, long(5)), Compare(col("v"), CompareOp.Eq, Lit.DoubleLit(3.25))) ->
      "id < 5 OR v = 3.25",
    Compare(col("p"), CompareOp.Eq, Lit.string("a payload longer than thirty-two bytes #2222")) ->
      "p = 'a payload longer than thirty-two bytes #2222'",
    In(col("p"), Vector(Lit.string("a payload longer than thirty-two bytes #7"), Lit.string("nope"))) ->
      "p IN ('a payload longer than thirty-two bytes #7', 'nope')",
    IsNull(col("p")) -> "p IS NULL",
    Not(Compare(col("p"), CompareOp.Eq, Lit.string("a payload longer than thirty-two bytes #2222"))) ->
      "NOT (p = 'a payload longer than thirty-two bytes #2222')",
    And(StartsWith(col("s"), "w1".getBytes(UTF_8)), Compare(col("id"), CompareOp.Lt, long(2000))) ->
      "s LIKE 'w1%' AND id < 2000")

  /** pylance's matching row addresses and ids of each case. */
  private lazy val oracle: Seq[(Seq[Long], Seq[Long])] = {
    val out = py(
      """import sys, lance
        |ds = lance.dataset(sys.argv[1])
        |for f in sys.argv[2:]:
        |    t = ds.to_table(columns=["id"], filter=f, with_row_address=True)
        |    print(" ".join(map(str, t["_rowaddr"].to_pylist())) + "|" + " ".join(map(str, t["id"].to_pylist())))
        |""".stripMargin, (dir.toString +: cases.map(_._2)): _*)
    out.linesIterator.toSeq.map { l =>
      val Array(a, i) = l.split("\\|", -1)
      def nums(s: String): Seq[Long] = s.split(' ').filter(_.nonEmpty).map(_.toLong).toSeq
      (nums(a), nums(i).sorted)
    }
  }

  test("indices are listed with their types and fragment coverage; appended fragments are not covered") {
    val snap = snapshot
    val entries = IndexCatalog.load(snap)
    assert(entries.map(_.kind).toSet == Set("BTreeIndexDetails", "BitmapIndexDetails", "ZoneMapIndexDetails",
      "BloomFilterIndexDetails", "LabelListIndexDetails"))
    entries.foreach(e => assert(e.covered.toArray.toSeq == Seq(0, 1, 2, 3, 4), e.describe))
    assert(snap.fragments.map(_.id.toInt).toSet.size == 7)
    assert(entries.forall(e => Files.isDirectory(dir.resolve(e.dir))))
  }

  test("a version's indices come from the manifest bytes read to open it, not from a second read") {
    // a copy whose manifest is removed once the version is open: reading the file again would fail
    val copy = Files.createTempDirectory("scalar-index-once").resolve("t")
    val files = Files.walk(dir)
    try files.forEach(p => Files.copy(p, copy.resolve(dir.relativize(p).toString)))
    finally files.close()
    val snap = Dataset.open(DatasetStorage(copy.toString, new Configuration()), None)
    val manifest = Dataset.manifestPath(snap.storage, snap.naming, snap.version)
    assert(snap.storage.fs.delete(manifest, false), manifest)
    val names = py("""import sys, lance
        |print("\n".join(sorted(i["name"] for i in lance.dataset(sys.argv[1]).list_indices())))
        |""".stripMargin, dir.toString).linesIterator.filter(_.nonEmpty).toSeq
    assert(names.size == 8, names)
    assert(snap.indices.map(_.getName).distinct.sorted == names)
  }

  test("what the indices select of each covered fragment holds every row pylance returns there") {
    val snap = snapshot
    var used = 0
    cases.zip(oracle).foreach { case ((f, sql), (addrs, _)) => withClue(sql) {
      val sel = IndexSelection(snap, f).getOrElse(fail("no index used"))
      if (sel.indicesUsed.nonEmpty) used += 1
      assert(sel.selected.keySet.subsetOf(Set(0, 1, 2, 3, 4)))
      val byFrag = addrs.groupBy(a => (a >>> 32).toInt)
      sel.selected.foreach { case (frag, rows) =>
        byFrag.getOrElse(frag, Nil).foreach(a => assert(rows.contains((a & 0xffffffffL).toInt), s"fragment $frag row $a"))
      }
    } }
    // all but NOT (p = ...): a bloom filter cannot tell where a value is absent
    assert(used == cases.size - 1)
  }

  test("a LABEL_LIST index answers label terms (array_contains/arrays_overlap), exactly, in the fragments it covers") {
    val snap = snapshot
    val t1 = LabelClause(Vector(LabelTerm(col("tags"), Vector(Lit.string("t1")))))
    val p = ScanPlanner(snap, None).withLabels(Vector(t1))
    assert(p.indicesUsed == Vector("tags_idx"))
    assert(p.fragmentsDecidedByIndex == 5)
    // the build saw ids 0..4999 (rows deleted or moved by the update since are still in it): tags = [t1]
    // where id % 3 == 1 and id % 19 != 0
    assert(p.rowsSelectedByIndex == (0 until 5000).count(i => i % 3 == 1 && i % 19 != 0))
    // the appended and the updated rows' fragments are read in full
    val uncovered = snap.fragments.filterNot(f => f.id < 5)
    uncovered.foreach(f => assert(p.plans.exists(x => x.fragment.id == f.id && x.mayMatch.count == f.physicalRows)))
    val sel = IndexSelection(snap, None, Vector(t1)).get
    val addrs = py(
      """import sys, lance
        |t = lance.dataset(sys.argv[1]).to_table(columns=["id"], filter="array_has_any(tags, ['t1'])", with_row_address=True)
        |print(" ".join(map(str, t["_rowaddr"].to_pylist())))
        |""".stripMargin, dir.toString).trim.split(' ').filter(_.nonEmpty).map(_.toLong)
    addrs.filter(a => (a >>> 32) < 5).foreach { a =>
      assert(sel.selected((a >>> 32).toInt).contains((a & 0xffffffffL).toInt), s"row address $a")
    }
    // an OR of terms unites, values no list holds select nothing, a NULL value never matches
    val none = LabelClause(Vector(LabelTerm(col("tags"), Vector(Lit.string("zz"), Lit.NullLit))))
    assert(ScanPlanner(snap, None).withLabels(Vector(none)).fragmentsPrunedByIndex == 5)
    val either = LabelClause(Vector(LabelTerm(col("tags"), Vector(Lit.string("t1"))),
      LabelTerm(col("tags"), Vector(Lit.string("t2"), Lit.string("zz")))))
    assert(ScanPlanner(snap, None).withLabels(Vector(either)).rowsSelectedByIndex ==
      (0 until 5000).count(i => i % 3 != 0 && i % 19 != 0))
    // ANDed with the filter: the BTREE's rows intersected with the label's
    val both = ScanPlanner(snap, Some(Compare(col("id"), CompareOp.Lt, long(30)))).withLabels(Vector(t1))
    assert(both.indicesUsed.toSet == Set("id_idx", "tags_idx"))
    assert(both.rowsSelectedByIndex == (0 until 30).count(i => i % 3 == 1 && i % 19 != 0))
  }

  test("a LABEL_LIST index does not answer the filter's leaves on its list column; the scan plans every row") {
    val snap = snapshot
    val f = IsNull(col("tags"))
    assert(IndexSelection(snap, f).isEmpty)
    val p = ScanPlanner(snap, Some(f))
    assert(p.indicesUsed.isEmpty && p.fragmentsDecidedByIndex == 0)
    assert(p.plans.map(_.mayMatch.count).sum == snap.fragments.map(_.physicalRows).sum)
  }

  test("XXH64 of known inputs") {
    assert(XxHash64.hash(Array.emptyByteArray) == 0xEF46DB3751D8E999L)
    assert(XxHash64.hash("abc".getBytes(UTF_8)) == 0x44BC2CF5AD770999L)
  }

  test("a bloom filter lookup prunes the fragments whose filters cannot hold the value") {
    val p = ScanPlanner(snapshot, Some(Compare(col("p"), CompareOp.Eq,
      Lit.string("a payload longer than thirty-two bytes #2222"))))
    assert(p.indicesUsed == Vector("p_idx"))
    assert(p.fragmentsDecidedByIndex == 5)
    assert(p.fragmentsPrunedByIndex >= 3, "a 1000-row zone's filter at the default false positive rate")
  }

  test("IS NOT NULL beside an equality on its column (as Spark pushes `k = 6`) is not asked of the index") {
    val snap = snapshot
    val eq = Compare(col("k"), CompareOp.Eq, long(6))
    val both = IndexSelection(snap, And(IsNotNull(col("k")), eq)).getOrElse(fail("no index used"))
    val alone = IndexSelection(snap, eq).getOrElse(fail("no index used"))
    assert(both.selected == alone.selected)
    assert(both.selected.values.map(_.getCardinality).sum > 0)
    // asked alone, IS NOT NULL reads the bitmap of every value (7 here); beside k = 6 only 6's
    val notNull = IndexSelection(snap, IsNotNull(col("k"))).getOrElse(fail("no index used"))
    assert(both.bytesRead < notNull.bytesRead, s"${both.bytesRead} bytes read for k = 6, ${notNull.bytesRead} for IS NOT NULL")
    // not under a NOT: NOT (k IS NOT NULL AND k = 6) keeps the NULL rows
    val negated = IndexSelection(snap, Not(And(IsNotNull(col("k")), eq)))
    val nulls = IndexSelection(snap, IsNull(col("k"))).get.selected
    negated.foreach(n => n.selected.foreach { case (frag, rows) =>
      assert(nulls.get(frag).forall(x => org.roaringbitmap.RoaringBitmap.andNot(x, rows).isEmpty), s"fragment $frag")
    })
  }

  test("a point lookup selects one row of one fragment and prunes the others") {
    val p = ScanPlanner(snapshot, Some(Compare(col("id"), CompareOp.Eq, long(1235))))
    assert(p.rowsSelectedByIndex == 1)
    assert(p.fragmentsDecidedByIndex == 5)
    assert(p.fragmentsPrunedByIndex == 4)
    // the appended and the updated rows' fragments are scanned
    assert(p.plans.size == 3)
  }

  test("scans planned with the indices return exactly pylance's rows, and the same rows without them") {
    val snap = snapshot
    cases.zip(oracle).foreach { case ((f, sql), (_, ids)) => withClue(sql) {
      assert(scan(snap, f, useIndex = true) == ids)
      assert(scan(snap, f, useIndex = false) == ids)
    } }
  }

  private def scan(snap: Snapshot, f: Filter, useIndex: Boolean): Seq[Long] = {
    val allocator = new RootAllocator()
    val out = mutable.ArrayBuffer.empty[Long]
    try {
      val fields = Seq(snap.schema.field("id").get)
      val filterFields = f.columns.toSeq.map(c => snap.schema.field(c.head).get)
      ScanPlanner(snap, Some(f), useIndex).plans.foreach { plan =>
        val s = new FragmentScanner(snap.storage, snap.version, plan.fragment, fields, allocator,
          ref => DataFiles.open(snap.storage, snap.schema, ref), Some(f), filterFields)
        try plan.mayMatch.ranges.foreach { case (a, b) =>
          val batch = s.read(a, b)
          try {
            val v = batch.vectors.head.asInstanceOf[BigIntVector]
            (0 until batch.rowCount).foreach(i => out += v.get(i))
          } finally batch.close()
        } finally s.close()
      }
    } finally allocator.close()
    out.sorted.toSeq
  }

  test("BTREE equality and IN over integers: a merged walk of the keys over a sorted page equals a test of every value") {
    val rnd = new scala.util.Random(5)
    val allocator = new RootAllocator()
    try { (0 until 300).foreach { round =>
      val n = 1 + rnd.nextInt(300)
      val nulls = if (round % 3 == 0) rnd.nextInt(n) else 0
      val vals = Vector.fill(n - nulls)(rnd.nextInt(60).toLong - 30).sorted
      val v = new BigIntVector("values", allocator)
      val ids = new UInt8Vector("ids", allocator)
      try {
        v.allocateNew(n)
        ids.allocateNew(n)
        (0 until nulls).foreach(v.setNull)
        vals.zipWithIndex.foreach { case (x, i) => v.set(nulls + i, x) }
        (0 until n).foreach(i => ids.set(i, 7L * i + (1L << 32)))
        v.setValueCount(n)
        ids.setValueCount(n)
        val lits: Vector[Lit] = Vector.fill(1 + rnd.nextInt(8))(
          if (rnd.nextInt(10) == 0) Lit.NullLit else Lit.LongLit(rnd.nextInt(80).toLong - 40))
        val leaf = if (round % 4 == 0) Compare(Vector("values"), CompareOp.Eq, lits.find(!_.isNull).getOrElse(Lit.LongLit(0)))
          else In(Vector("values"), lits)
        val keys = BTreeIndex.integerKeys(leaf, outcome = true).get
        // a slice of the read, as pages of a longer read are
        val from = if (round % 2 == 0) 0 else nulls / 2
        val want = (math.max(from, nulls) until n).filter(i => keys.contains(v.get(i))).map(i => 7L * i + (1L << 32)).toVector
        val page = BTreeIndex.SortedPage.of(v, ids, from, n)
        assert(page.isDefined, s"$leaf over ${vals.take(20)}")
        val got = Vector.newBuilder[Long]
        page.get.find(keys, 0, keys.length, a => got += a)
        assert(got.result() == want, s"$leaf over ${vals.take(20)}")
        assert(BTreeIndex.integerKeys(leaf, outcome = false).isEmpty)
        if (vals.distinct.size > 1) {  // out of order: not answered by the walk
          v.set(n - 1, vals.head - 1)
          assert(BTreeIndex.SortedPage.of(v, ids, from, n).isEmpty)
        }
      } finally { v.close(); ids.close() }
    } } finally allocator.close()
  }
}
