package io.lancespark.table.index

import java.nio.file.{Files, Path}

import scala.util.Using

import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.table.filter.{CompareOp, Lit}
import io.lancespark.table.filter.Filter._
import io.lancespark.table.storage.{Dataset, DatasetStorage}
import io.lancespark.table.PylanceProcess
import io.lancespark.table.storage.Snapshot
import io.lancespark.table.plan.ScanPlanner

/** BTREE and BITMAP indices built by this connector on pylance-written
  * tables (several fragments, nulls, deleted rows; file versions 2.0, 2.1
  * and 2.2): pylance lists them, plans its queries with them
  * (`ScalarIndexQuery` in `explain_plan`) and returns the same rows as
  * without them; our scan planner selects rows with them. */
class IndexBuildSuite extends AnyFunSuite {

  private def py(script: String, args: String*): String = PylanceProcess.run(script, args: _*)

  /** 6000 rows in 6 fragments (ids shuffled), nulls in every indexed
    * column but id, rows deleted before the build. */
  private def table(version: String): Path = {
    val d = Files.createTempDirectory("index-build").resolve("t")
    py(
      """import sys, lance, pyarrow as pa, numpy as np
        |path, version = sys.argv[1], sys.argv[2]
        |rng = np.random.default_rng(7)
        |ids = rng.permutation(6000)
        |t = pa.table({"id": pa.array(ids, pa.int64()),
        |    "k": pa.array([None if i % 9 == 0 else int(i % 7) for i in ids], pa.int32()),
        |    "s": pa.array([None if i % 11 == 0 else "w%d" % (i % 5) for i in ids]),
        |    "v": pa.array([None if i % 13 == 0 else float(i % 100) / 4.0 for i in ids], pa.float64()),
        |    "b": pa.array([None if i % 5 == 0 else bool(i % 2) for i in ids], pa.bool_())})
        |lance.write_dataset(t, path, max_rows_per_file=1000, data_storage_version=version)
        |lance.dataset(path).delete("id % 10 = 4")
        |""".stripMargin, d.toString, version)
    d
  }

  private def open(d: Path): Snapshot = Dataset.open(DatasetStorage(d.toString, new Configuration()), None)

  private def build(d: Path, column: String, t: BuiltIndexType, name: Option[String] = None): Snapshot =
    IndexBuild.buildInMemory(IndexBuild.plan(open(d), column, t, name))

  private val filters: Seq[String] = Seq(
    "id = 1235", "id = 4", "id IN (3, 777, 4001, 5999)", "id >= 1500 AND id < 1530", "id > 5990", "id < 0",
    "v IS NULL", "v > 24.0", "v = 3.25", "v <= 0.5",
    "s = 'w1'", "s IN ('w2', 'w4')", "s IS NULL", "s > 'w3'",
    "k = 3", "k IS NULL", "k IN (1, 6)", "k IS NOT NULL",
    "b = true", "b IS NULL")

  /** pylance on `d`: its indices (name, type, field), then per filter
    * whether its plan uses a scalar index and whether its rows (ids) equal
    * the rows without indices; failures as text. */
  private def pylanceReport(d: Path): String = py(
    """import sys, lance
      |ds = lance.dataset(sys.argv[1])
      |for ix in sorted(ds.list_indices(), key=lambda i: i["name"]):
      |    print("INDEX", ix["name"], ix["type"], ",".join(ix["fields"]), sorted(ix["fragment_ids"]))
      |for d in ds.describe_indices():
      |    print("DESCRIBE", d.name, d.num_rows_indexed)
      |for f in sys.argv[2:]:
      |    plan = ds.scanner(filter=f, columns=["id"]).explain_plan(True)
      |    a = sorted(ds.to_table(filter=f, columns=["id"])["id"].to_pylist())
      |    b = sorted(ds.to_table(filter=f, columns=["id"], use_scalar_index=False)["id"].to_pylist())
      |    print("FILTER", f, "|", "ScalarIndexQuery" in plan, "|", a == b, len(a))
      |""".stripMargin, (d.toString +: filters): _*)

  Seq("2.0", "2.1", "2.2").foreach { version =>
    test(s"pylance uses BTREE and BITMAP indices built here on a $version table, with the same rows") {
      val d = table(version)
      val live = open(d).countRows
      build(d, "id", BuiltIndexType.BTree)
      build(d, "v", BuiltIndexType.BTree)
      build(d, "s", BuiltIndexType.Bitmap)
      build(d, "k", BuiltIndexType.Bitmap)
      build(d, "b", BuiltIndexType.BTree, Some("b_tree"))
      val out = pylanceReport(d)
      val lines = out.linesIterator.toSeq
      val indices = lines.filter(_.startsWith("INDEX "))
      assert(indices == Seq(
        "INDEX b_tree BTree b [0, 1, 2, 3, 4, 5]",
        "INDEX id_idx BTree id [0, 1, 2, 3, 4, 5]",
        "INDEX k_idx Bitmap k [0, 1, 2, 3, 4, 5]",
        "INDEX s_idx Bitmap s [0, 1, 2, 3, 4, 5]",
        "INDEX v_idx BTree v [0, 1, 2, 3, 4, 5]"), out)
      lines.filter(_.startsWith("DESCRIBE ")).foreach(l => assert(l.endsWith(s" $live"), out))
      val results = lines.filter(_.startsWith("FILTER "))
      assert(results.size == filters.size, out)
      results.foreach { l =>
        val Array(_, usesIndex, same) = l.split(" \\| ")
        assert(usesIndex == "True", s"pylance's plan does not use our index: $l\n$out")
        assert(same.startsWith("True"), s"rows differ with our index: $l\n$out")
      }
      // the filters select something (the comparison is not vacuous)
      assert(results.count(!_.endsWith(" 0")) >= filters.size - 2, out)

      // our planner uses them as well
      val snap = open(d)
      val p = ScanPlanner(snap, Some(Compare(Vector("id"), CompareOp.Eq, Lit.LongLit(1235))))
      assert(p.indicesUsed == Vector("id_idx"))
      assert(p.rowsSelectedByIndex == 1 && p.fragmentsDecidedByIndex == 6 && p.fragmentsPrunedByIndex == 5)
      val q = ScanPlanner(snap, Some(Compare(Vector("s"), CompareOp.Eq, Lit.string("w1"))))
      assert(q.indicesUsed == Vector("s_idx"))
      assert(q.rowsSelectedByIndex == pylanceCount(d, "s = 'w1'"))
    }
  }

  private def pylanceCount(d: Path, f: String): Long = py(
    "import sys, lance; print(lance.dataset(sys.argv[1]).count_rows(filter=sys.argv[2]))", d.toString, f).trim.toLong

  test("the commit is a CreateIndex read at the built version; appended fragments are not covered") {
    val d = table("2.2")
    val before = open(d)
    val after = build(d, "id", BuiltIndexType.BTree)
    assert(after.version == before.version + 1)
    val e = IndexCatalog.load(after).find(_.name == "id_idx").get
    assert(e.datasetVersion == before.version && e.indexVersion == 0 && e.kind == "BTreeIndexDetails")
    assert(e.covered.toArray.toSeq == Seq(0, 1, 2, 3, 4, 5))
    assert(Files.isRegularFile(d.resolve(e.dir).resolve("page_data.lance")))
    assert(Files.isRegularFile(d.resolve(e.dir).resolve("page_lookup.lance")))
    val out = py(
      """import sys, lance, pyarrow as pa
        |path = sys.argv[1]
        |lance.write_dataset(pa.table({"id": pa.array([1235, 7000], pa.int64()), "k": pa.array([1, 2], pa.int32()),
        |    "s": pa.array(["x", None]), "v": pa.array([1.0, None]), "b": pa.array([True, False])}), path, mode="append")
        |ds = lance.dataset(path)
        |print(type(ds.get_transactions(2)[1].operation).__name__)
        |print(sorted(ds.to_table(filter="id = 1235", columns=["id"])["id"].to_pylist()))
        |print(ds.stats.index_stats("id_idx")["num_unindexed_fragments"])
        |""".stripMargin, d.toString)
    assert(out.linesIterator.toSeq == Seq("CreateIndex", "[1235, 1235]", "1"), out)
    val p = ScanPlanner(open(d), Some(Compare(Vector("id"), CompareOp.Eq, Lit.LongLit(1235))))
    assert(p.fragmentsDecidedByIndex == 6 && p.rowsSelectedByIndex == 1)
    assert(p.plans.size == 2, "the covered fragment holding the row and the appended one")
  }

  test("bad input fails before any file is written: unknown column, unsupported type, duplicate name, bad type") {
    val d = Files.createTempDirectory("index-build-bad").resolve("t")
    py(
      """import sys, lance, pyarrow as pa
        |lance.write_dataset(pa.table({"id": pa.array([1, 2], pa.int64()),
        |    "l": pa.array([[1], [2]], pa.list_(pa.int32())), "u": pa.array([1, 2], pa.uint32())}), sys.argv[1])
        |lance.dataset(sys.argv[1]).create_scalar_index("id", "BTREE")
        |""".stripMargin, d.toString)
    val snap = open(d)
    val e1 = intercept[IllegalArgumentException](IndexBuild.plan(snap, "nope", BuiltIndexType.BTree, None))
    assert(e1.getMessage.contains("no column 'nope'"))
    val e2 = intercept[IllegalArgumentException](IndexBuild.plan(snap, "l", BuiltIndexType.Bitmap, None))
    assert(e2.getMessage.contains("column 'l'") && e2.getMessage.contains("BITMAP"))
    val e3 = intercept[IllegalArgumentException](IndexBuild.plan(snap, "id", BuiltIndexType.BTree, None))
    assert(e3.getMessage.contains("'id_idx' already exists"))
    val e4 = intercept[IllegalArgumentException](BuiltIndexType.parse("hnsw"))
    assert(e4.getMessage.contains("'hnsw'"))
    assert(BuiltIndexType.parse(" btree ") == BuiltIndexType.BTree)
    val dirs = Files.list(d.resolve("_indices")).count()
    assert(dirs == 1, "only pylance's index directory")
  }

  test("input out of order is refused and the files are removed") {
    val d = table("2.2")
    val plan = IndexBuild.plan(open(d), "id", BuiltIndexType.BTree, None)
    val alloc = new org.apache.arrow.memory.RootAllocator()
    try {
      val w = IndexBuild.writer(plan, alloc)
      w.add(java.lang.Long.valueOf(5L), 0L)
      intercept[IllegalArgumentException](w.add(java.lang.Long.valueOf(4L), 1L))
      w.abort()
    } finally alloc.close()
    assert(!Files.exists(d.resolve(s"_indices/${plan.uuid}")))
    assert(IndexCatalog.load(open(d)).isEmpty)
  }

  test("conflicts as the reference: a concurrent append or delete is fine, a compaction of covered fragments is not") {
    val d = table("2.2")
    val plan = IndexBuild.plan(open(d), "id", BuiltIndexType.BTree, None)
    py(
      """import sys, lance, pyarrow as pa
        |path = sys.argv[1]
        |lance.write_dataset(pa.table({"id": pa.array([9000], pa.int64()), "k": pa.array([1], pa.int32()),
        |    "s": pa.array(["x"]), "v": pa.array([1.0]), "b": pa.array([True])}), path, mode="append")
        |lance.dataset(path).delete("id = 1235")
        |""".stripMargin, d.toString)
    val committed = IndexBuild.buildInMemory(plan)
    val e = IndexCatalog.load(committed).head
    assert(e.covered.toArray.toSeq == Seq(0, 1, 2, 3, 4, 5), "the appended fragment is not covered")
    assert(pylanceCount(d, "id = 1235") == 0 && pylanceCount(d, "id = 1236") == 1)

    val plan2 = IndexBuild.plan(open(d), "v", BuiltIndexType.BTree, None)
    py("import sys, lance; lance.dataset(sys.argv[1]).optimize.compact_files(target_rows_per_fragment=100000)",
      d.toString)
    val err = intercept[io.lancespark.table.commit.CommitConflictException](IndexBuild.buildInMemory(plan2))
    assert(err.getMessage.contains("compacted"), err.getMessage)
    assert(!Files.exists(d.resolve(s"_indices/${plan2.uuid}")), "the failed build's files are removed")
    assert(!IndexCatalog.load(open(d)).exists(_.name == "v_idx"))
  }

  /** 30000 rows in 3 fragments: `id` ascending (zones prune), `r` shuffled,
    * strings with many distinct values, nulls, NaNs, rows deleted. */
  private def zonedTable(version: String): Path = {
    val d = Files.createTempDirectory("index-build-zoned").resolve("t")
    py(
      """import sys, lance, pyarrow as pa, numpy as np
        |path, version = sys.argv[1], sys.argv[2]
        |rng = np.random.default_rng(11)
        |n = 30000
        |ids = np.arange(n)
        |r = rng.permutation(n)
        |t = pa.table({"id": pa.array(ids, pa.int64()),
        |    "r": pa.array([None if i % 97 == 0 else int(i) for i in r], pa.int32()),
        |    "s": pa.array([None if i % 89 == 0 else "k%d" % (i % 5000) for i in r]),
        |    "f": pa.array([float("nan") if i % 101 == 0 else (None if i % 103 == 0 else i / 8.0) for i in r], pa.float32()),
        |    "d": pa.array([float(i % 700) for i in ids], pa.float64())})
        |lance.write_dataset(t, path, max_rows_per_file=10000, data_storage_version=version)
        |lance.dataset(path).delete("id % 13 = 5")
        |""".stripMargin, d.toString, version)
    d
  }

  private val zonedFilters: Seq[String] = Seq(
    "id = 1235", "id = 5", "id IN (3, 777, 14001, 29999)", "id >= 15000 AND id < 15030", "id > 29990",
    "id < 0", "id IS NULL",
    "r = 4242", "r IN (1, 2, 3, 29000, 12345)", "r = 97", "r IS NULL", "r = -5",
    "s = 'k17'", "s IN ('k2', 'k4999', 'nope')", "s = 'zz'", "s IS NULL",
    "f = 12.5", "f IN (0.125, 3000.0)", "f IS NULL",
    "d = 3.0", "d > 698.5")

  Seq("2.0", "2.1", "2.2").foreach { version =>
    test(s"pylance uses ZONEMAP and BLOOMFILTER indices built here on a $version table, with the same rows") {
      val d = zonedTable(version)
      build(d, "id", BuiltIndexType.ZoneMap)
      build(d, "d", BuiltIndexType.ZoneMap)
      build(d, "r", BuiltIndexType.BloomFilter)
      build(d, "s", BuiltIndexType.BloomFilter)
      build(d, "f", BuiltIndexType.BloomFilter)
      val out = py(
        """import sys, lance
          |ds = lance.dataset(sys.argv[1])
          |for ix in sorted(ds.list_indices(), key=lambda i: i["name"]):
          |    print("INDEX", ix["name"], ix["type"], ",".join(ix["fields"]), sorted(ix["fragment_ids"]))
          |for f in sys.argv[2:]:
          |    plan = ds.scanner(filter=f, columns=["id"]).explain_plan(True)
          |    a = sorted(ds.to_table(filter=f, columns=["id"])["id"].to_pylist())
          |    b = sorted(ds.to_table(filter=f, columns=["id"], use_scalar_index=False)["id"].to_pylist())
          |    print("FILTER", f, "|", "ScalarIndexQuery" in plan, "|", a == b, len(a))
          |""".stripMargin, (d.toString +: zonedFilters): _*)
      val lines = out.linesIterator.toSeq
      assert(lines.filter(_.startsWith("INDEX ")) == Seq(
        "INDEX d_idx ZoneMap d [0, 1, 2]",
        "INDEX f_idx BloomFilter f [0, 1, 2]",
        "INDEX id_idx ZoneMap id [0, 1, 2]",
        "INDEX r_idx BloomFilter r [0, 1, 2]",
        "INDEX s_idx BloomFilter s [0, 1, 2]"), out)
      val results = lines.filter(_.startsWith("FILTER "))
      assert(results.size == zonedFilters.size, out)
      results.foreach { l =>
        val Array(_, usesIndex, same) = l.split(" \\| ")
        assert(same.startsWith("True"), s"rows differ with our index: $l\n$out")
        if (!l.contains("IS NULL") && !l.contains("f IN")) assert(usesIndex == "True", s"pylance's plan does not use our index: $l\n$out")
      }
      assert(results.count(!_.endsWith(" 0")) >= 12, out)

      // the files as the reference lays them out
      val snap = open(d)
      val zm = IndexCatalog.load(snap).find(_.name == "id_idx").get
      val bf = IndexCatalog.load(snap).find(_.name == "s_idx").get
      assert(zm.kind == "ZoneMapIndexDetails" && bf.kind == "BloomFilterIndexDetails")
      assert(bf.proto.getIndexDetails.getTypeUrl == "/lance.index.pb.BloomFilterIndexDetails")
      val meta = py(
        """import sys, lance
          |for f in sys.argv[1:]:
          |    r = lance.file.LanceFileReader(f)
          |    t = r.read_all().to_table()
          |    md = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items()}
          |    print(t.schema.names, t.num_rows, sorted(md.items()), len(t.column(t.schema.names[-1])[0].as_py()) if "bloom_filter_data" in t.schema.names else "")
          |""".stripMargin, d.resolve(zm.dir).resolve("zonemap.lance").toString,
        d.resolve(bf.dir).resolve("bloomfilter.lance").toString)
      val ml = meta.linesIterator.toSeq
      assert(ml(0).startsWith("['min', 'max', 'null_count', 'nan_count', 'fragment_id', 'zone_start', 'zone_length'] 6 " +
        "[('rows_per_zone', '8192')"), meta)
      assert(ml(1).startsWith("['fragment_id', 'zone_start', 'zone_length', 'has_null', 'bloom_filter_data'] 6 " +
        "[('bloomfilter_item', '8192'), ('bloomfilter_probability', '0.00057')") && ml(1).endsWith(" 32768"), meta)

      // our planner uses them as well
      val p = ScanPlanner(snap, Some(Compare(Vector("id"), CompareOp.Eq, Lit.LongLit(1235))))
      assert(p.indicesUsed == Vector("id_idx"))
      assert(p.fragmentsDecidedByIndex == 3 && p.rowsSelectedByIndex == 8192, "one zone of 8192 rows")
      val q = ScanPlanner(snap, Some(Compare(Vector("r"), CompareOp.Eq, Lit.LongLit(4242))))
      assert(q.indicesUsed == Vector("r_idx"))
      assert(q.rowsSelectedByIndex <= 8192, "the zone holding the value (bloom filters: 1 in 1754 false positives)")
      val s = ScanPlanner(snap, Some(Compare(Vector("s"), CompareOp.Eq, Lit.string("nope"))))
      assert(s.indicesUsed == Vector("s_idx") && s.rowsSelectedByIndex == 0)
    }
  }

  test("ZONEMAP and BLOOMFILTER options (rows_per_zone, number_of_items, probability) and bad input") {
    val d = zonedTable("2.1")
    IndexBuild.buildInMemory(IndexBuild.plan(open(d), "id", BuiltIndexType.ZoneMap, None, Map("rows_per_zone" -> "1000")))
    IndexBuild.buildInMemory(IndexBuild.plan(open(d), "r", BuiltIndexType.BloomFilter, None,
      Map("number_of_items" -> "500", "probability" -> "0.01")))
    val out = py(
      """import sys, lance
        |ds = lance.dataset(sys.argv[1])
        |for f in ["id = 20500", "id > 29500", "r = 4242", "r IN (1, 2, 3, 29000, 12345)"]:
        |    plan = ds.scanner(filter=f, columns=["id"]).explain_plan(True)
        |    a = sorted(ds.to_table(filter=f, columns=["id"])["id"].to_pylist())
        |    b = sorted(ds.to_table(filter=f, columns=["id"], use_scalar_index=False)["id"].to_pylist())
        |    print("ScalarIndexQuery" in plan, a == b, len(a))
        |""".stripMargin, d.toString)
    assert(out.linesIterator.toSeq.forall(_.startsWith("True True ")), out)
    val snap = open(d)
    val p = ScanPlanner(snap, Some(Compare(Vector("id"), CompareOp.Eq, Lit.LongLit(20500))))
    assert(p.rowsSelectedByIndex == 1000, "zones of 1000 rows")
    val e1 = intercept[IllegalArgumentException](IndexBuild.plan(snap, "d", BuiltIndexType.ZoneMap, None,
      Map("rows_per_zone" -> "0")))
    assert(e1.getMessage.contains("rows_per_zone"))
    val e2 = intercept[IllegalArgumentException](IndexBuild.plan(snap, "d", BuiltIndexType.BloomFilter, None,
      Map("probability" -> "2")))
    assert(e2.getMessage.contains("probability"))
    val e3 = intercept[IllegalArgumentException](IndexBuild.plan(snap, "d", BuiltIndexType.ZoneMap, None,
      Map("number_of_items" -> "5")))
    assert(e3.getMessage.contains("number_of_items"))
    val b = Files.createTempDirectory("index-build-zoned-bad").resolve("t")
    py(
      """import sys, lance, pyarrow as pa
        |lance.write_dataset(pa.table({"b": pa.array([True, False]), "l": pa.array([[1], [2]], pa.list_(pa.int32())),
        |    "m": pa.array([1, 2], pa.decimal128(10, 2))}), sys.argv[1])
        |""".stripMargin, b.toString)
    val bs = open(b)
    val e4 = intercept[IllegalArgumentException](IndexBuild.plan(bs, "b", BuiltIndexType.BloomFilter, None))
    assert(e4.getMessage.contains("BLOOMFILTER") && e4.getMessage.contains("'b'"))
    val e5 = intercept[IllegalArgumentException](IndexBuild.plan(bs, "l", BuiltIndexType.ZoneMap, None))
    assert(e5.getMessage.contains("ZONEMAP") && e5.getMessage.contains("'l'"))
    val e6 = intercept[IllegalArgumentException](IndexBuild.plan(bs, "m", BuiltIndexType.BloomFilter, None))
    assert(e6.getMessage.contains("BLOOMFILTER"))
    assert(BuiltIndexType.parse("ZoneMap") == BuiltIndexType.ZoneMap && BuiltIndexType.parse("bloomfilter") == BuiltIndexType.BloomFilter)
  }

  test("on a table without deleted rows our ZONEMAP and BLOOMFILTER files hold what pylance's hold") {
    val d = Files.createTempDirectory("index-build-same").resolve("t")
    val c = d.resolveSibling("copy")
    py(
      """import sys, shutil, lance, pyarrow as pa, numpy as np
        |rng = np.random.default_rng(5)
        |n = 25000
        |t = pa.table({"i": pa.array(rng.integers(-10**9, 10**9, n), pa.int64()),
        |    "j": pa.array([None if k % 7 == 0 else int(k) for k in rng.integers(0, 3000, n)], pa.int32()),
        |    "s": pa.array([None if k % 11 == 0 else "v%d" % k for k in rng.integers(0, 100000, n)]),
        |    "f": pa.array(rng.normal(size=n), pa.float64())})
        |lance.write_dataset(t, sys.argv[1], max_rows_per_file=12000)
        |shutil.copytree(sys.argv[1], sys.argv[2])
        |ds = lance.dataset(sys.argv[2])
        |for col in ["i", "s"]: ds.create_scalar_index(col, "ZONEMAP", name=col + "_zm")
        |for col in ["i", "j", "s", "f"]: ds.create_scalar_index(col, "BLOOMFILTER", name=col + "_bf")
        |""".stripMargin, d.toString, c.toString)
    Seq("i", "s").foreach(col => build(d, col, BuiltIndexType.ZoneMap, Some(col + "_zm")))
    Seq("i", "j", "s", "f").foreach(col => build(d, col, BuiltIndexType.BloomFilter, Some(col + "_bf")))
    def files(p: Path): Seq[String] = IndexCatalog.load(open(p)).sortBy(_.name).map { e =>
      p.resolve(e.dir).resolve(if (e.kind == "ZoneMapIndexDetails") "zonemap.lance" else "bloomfilter.lance").toString
    }
    val ours = files(d)
    val theirs = files(c)
    assert(ours.size == 6 && theirs.size == 6)
    val out = py(
      """import sys, lance
        |n = len(sys.argv[1:]) // 2
        |for a, b in zip(sys.argv[1:1 + n], sys.argv[1 + n:]):
        |    ta = lance.file.LanceFileReader(a).read_all().to_table()
        |    tb = lance.file.LanceFileReader(b).read_all().to_table()
        |    print(a.split("/")[-1], ta.num_rows, ta.schema.remove_metadata() == tb.schema.remove_metadata(),
        |          ta.to_pylist() == tb.to_pylist(), dict(ta.schema.metadata) == {k: v for k, v in tb.schema.metadata.items() if k != b"null_bitmap"})
        |""".stripMargin, (ours ++ theirs): _*)
    val lines = out.linesIterator.toSeq
    assert(lines.size == 6, out)
    lines.foreach(l => assert(l.endsWith(" True True True") && !l.contains(" 0 "), out))
  }

  test("a rebuild (optimize_indices) covers appended fragments, replaces the index under its name, keeps its options") {
    val d = zonedTable("2.2")
    IndexBuild.buildInMemory(IndexBuild.plan(open(d), "id", BuiltIndexType.ZoneMap, None, Map("rows_per_zone" -> "2000")))
    build(d, "r", BuiltIndexType.BloomFilter)
    build(d, "s", BuiltIndexType.Bitmap)
    build(d, "d", BuiltIndexType.BTree)
    py(
      """import sys, lance, pyarrow as pa
        |t = pa.table({"id": pa.array([40000, 40001], pa.int64()), "r": pa.array([4242, 777777], pa.int32()),
        |    "s": pa.array(["k17", "new"]), "f": pa.array([1.0, None], pa.float32()), "d": pa.array([3.0, 9999.0])})
        |lance.write_dataset(t, sys.argv[1], mode="append")
        |""".stripMargin, d.toString)
    val before = open(d)
    val olds = IndexCatalog.load(before)
    assert(olds.forall(_.covered.getCardinality == 3))
    olds.foreach { e =>
      val plan = IndexBuild.rebuildPlan(open(d), e).get
      assert(plan.name == e.name && plan.indexType.detailsType == e.kind)
      IndexBuild.buildInMemory(plan)
    }
    val after = open(d)
    val news = IndexCatalog.load(after)
    assert(news.map(_.name).sorted == olds.map(_.name).sorted)
    news.foreach { e =>
      assert(e.covered.toArray.toSeq == Seq(0, 1, 2, 3), e.describe)
      assert(!olds.exists(_.uuid == e.uuid))
      assert(IndexBuild.rebuildPlan(after, e).isEmpty, "up to date")
    }
    val zm = news.find(_.name == "id_idx").get
    assert(Using.resource(IndexFile.open(after.storage, zm, "zonemap.lance"))(_.metadata("rows_per_zone")) == "2000")
    val out = py(
      """import sys, lance
        |ds = lance.dataset(sys.argv[1])
        |print(sorted((i["name"], i["type"], sorted(i["fragment_ids"])) for i in ds.list_indices()))
        |for f in ["id = 40001", "id = 1235", "r = 777777", "r = 4242", "s = 'new'", "s = 'k17'", "d = 9999.0", "d = 3.0"]:
        |    plan = ds.scanner(filter=f, columns=["id"]).explain_plan(True)
        |    a = sorted(ds.to_table(filter=f, columns=["id"])["id"].to_pylist())
        |    b = sorted(ds.to_table(filter=f, columns=["id"], use_scalar_index=False)["id"].to_pylist())
        |    print("ScalarIndexQuery" in plan, a == b, len(a), ds.stats.index_stats(plan.split("@")[1].split("(")[0] if "@" in plan else "id_idx")["num_unindexed_fragments"])
        |""".stripMargin, d.toString)
    val lines = out.linesIterator.toSeq
    assert(lines.head == "[('d_idx', 'BTree', [0, 1, 2, 3]), ('id_idx', 'ZoneMap', [0, 1, 2, 3]), " +
      "('r_idx', 'BloomFilter', [0, 1, 2, 3]), ('s_idx', 'Bitmap', [0, 1, 2, 3])]", out)
    lines.tail.foreach(l => assert(l.startsWith("True True ") && l.endsWith(" 0") && !l.startsWith("True True 0 "), out))
  }

  test("pylance uses LABEL_LIST indices built here (lists of strings and ints, nulls, deleted rows), with the same rows") {
    val d = Files.createTempDirectory("index-build-labels").resolve("t")
    val c = d.resolveSibling("copy")
    py(
      """import sys, shutil, lance, pyarrow as pa, numpy as np
        |rng = np.random.default_rng(9)
        |n = 6000
        |def tags(i):
        |    if i % 31 == 0: return None
        |    if i % 37 == 0: return []
        |    return ["t%d" % x for x in rng.integers(0, 40, 1 + i % 4)] + ([None] if i % 43 == 0 else [])
        |t = pa.table({"id": pa.array(np.arange(n), pa.int64()),
        |    "tags": pa.array([tags(i) for i in range(n)], pa.list_(pa.string())),
        |    "nums": pa.array([None if i % 29 == 0 else [int(x) for x in rng.integers(0, 300, 2)] for i in range(n)],
        |                     pa.list_(pa.int64()))})
        |lance.write_dataset(t, sys.argv[1], max_rows_per_file=2000)
        |shutil.copytree(sys.argv[1], sys.argv[2])
        |ds = lance.dataset(sys.argv[2])
        |ds.create_scalar_index("tags", "LABEL_LIST")
        |ds.create_scalar_index("nums", "LABEL_LIST")
        |""".stripMargin, d.toString, c.toString)
    build(d, "tags", BuiltIndexType.LabelList)
    build(d, "nums", BuiltIndexType.LabelList)
    py("import sys, lance; lance.dataset(sys.argv[1]).delete('id % 11 = 3')", d.toString)
    val filters = Seq("array_has_any(tags, ['t3'])", "array_has_any(tags, ['t1', 't39', 'zz'])",
      "array_has_all(tags, ['t2', 't5'])", "array_contains(tags, 't7')", "array_has_any(nums, [5, 17, 299])",
      "array_has_all(nums, [1, 2])", "array_contains(nums, 42)", "array_has_any(tags, ['nope'])")
    val out = py(
      """import sys, lance
        |ds = lance.dataset(sys.argv[1])
        |print(sorted((i["name"], i["type"], sorted(i["fragment_ids"])) for i in ds.list_indices()))
        |for f in sys.argv[2:]:
        |    plan = ds.scanner(filter=f, columns=["id"]).explain_plan(True)
        |    a = sorted(ds.to_table(filter=f, columns=["id"])["id"].to_pylist())
        |    b = sorted(ds.to_table(filter=f, columns=["id"], use_scalar_index=False)["id"].to_pylist())
        |    print("ScalarIndexQuery" in plan, a == b, len(a))
        |""".stripMargin, (d.toString +: filters): _*)
    val lines = out.linesIterator.toSeq.filterNot(_.contains(" WARN "))
    assert(lines.head == "[('nums_idx', 'LabelList', [0, 1, 2]), ('tags_idx', 'LabelList', [0, 1, 2])]", out)
    assert(lines.tail.size == filters.size, out)
    lines.tail.foreach(l => assert(l.startsWith("True True "), out))
    assert(lines.tail.count(!_.endsWith(" 0")) >= filters.size - 2, out)
    // before the deletes our files held what pylance's hold (keys, and each key's rows)
    def file(p: Path, n: String): String = {
      val e = IndexCatalog.load(open(p)).find(_.name == n).get
      assert(e.kind == "LabelListIndexDetails")
      assert(e.proto.getIndexDetails.getTypeUrl == "/lance.table.LabelListIndexDetails")
      p.resolve(e.dir).resolve("bitmap_page_lookup.lance").toString
    }
    val cmp = py(
      """import sys, lance
        |def rows(f):
        |    t = lance.file.LanceFileReader(f).read_all().to_table()
        |    return t.schema.remove_metadata(), t.to_pylist(), t.num_rows
        |for a, b in [(sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])]:
        |    print(rows(a) == rows(b), rows(a)[2])
        |""".stripMargin, file(d, "tags_idx"), file(c, "tags_idx"), file(d, "nums_idx"), file(c, "nums_idx"))
    assert(cmp.linesIterator.forall(l => l.startsWith("True ") && !l.endsWith(" 0")), cmp)
    val e = intercept[IllegalArgumentException](IndexBuild.plan(open(d), "id", BuiltIndexType.LabelList, Some("x")))
    assert(e.getMessage.contains("LABEL_LIST index is not built over column 'id'"))
    assert(BuiltIndexType.parse("label_list") == BuiltIndexType.LabelList)
  }
}
