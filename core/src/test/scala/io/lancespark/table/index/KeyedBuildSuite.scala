package io.lancespark.table.index

import java.nio.file.{Files, Path}

import scala.util.{Random, Using}

import org.apache.arrow.memory.RootAllocator
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.table.{LongTests, PylanceProcess}
import io.lancespark.table.commit.CommitSettings
import io.lancespark.table.storage.{Dataset, DatasetStorage, Snapshot}

/** The build of BTREE/BITMAP indices over keyed columns (integers, floats,
  * dates, timestamps, booleans) from primitive sort keys: the keys' order is
  * the index's order (Java's `Long.compare`/`Double.compare`, false before
  * true); the radix sort is a stable sort; runs spilled to files and merged
  * give the same index files as one run sorted in memory, and pylance uses
  * them with the same rows as without. */
class KeyedBuildSuite extends AnyFunSuite {

  private def py(script: String, args: String*): String = PylanceProcess.run(script, args: _*)

  test("key order is the order of the values (first principles: Long.compare, Double.compare, false < true)") {
    val rnd = new Random(5)
    val specials = Seq(Double.NegativeInfinity, -Double.MaxValue, -1.5, -Double.MinPositiveValue, -0.0, 0.0,
      Double.MinPositiveValue, 1e-300, 2.5, Double.MaxValue, Double.PositiveInfinity, Double.NaN,
      java.lang.Double.longBitsToDouble(0xfff8000000000001L)) // a negative NaN: still NaN, last
    val doubles = specials ++ Seq.fill(2000)(rnd.nextGaussian() * math.pow(10, rnd.nextInt(40) - 20))
    for (a <- doubles; b <- doubles.take(40)) {
      val (ka, kb) = (KeyCodec.Floating.ofDouble(a), KeyCodec.Floating.ofDouble(b))
      assert(math.signum(java.lang.Long.compare(ka, kb)) == math.signum(java.lang.Double.compare(a, b)), (a, b))
      assert(java.lang.Double.compare(KeyCodec.Floating.toDouble(ka), a) == 0, a)
    }
    val longs = Seq(Long.MinValue, Long.MinValue + 1, -1L, 0L, 1L, Long.MaxValue) ++ Seq.fill(200)(rnd.nextLong())
    for (a <- longs; b <- longs) {
      val (va, vb) = (java.lang.Long.valueOf(a), java.lang.Long.valueOf(b))
      assert(math.signum(java.lang.Long.compare(KeyCodec.Integral.keyOf(va), KeyCodec.Integral.keyOf(vb))) ==
        math.signum(IndexValues.ordering.compare(va, vb)))
    }
    assert(KeyCodec.Bool.keyOf(java.lang.Boolean.FALSE) < KeyCodec.Bool.keyOf(java.lang.Boolean.TRUE))
    assert(KeyCodec.Bool.value(1L) == java.lang.Boolean.TRUE)
  }

  test("the radix sort is a stable sort by key (random keys of every width, duplicates, negatives)") {
    val rnd = new Random(9)
    Seq(0, 1, 2, 63, 64, 65, 1000, 100000).foreach { n =>
      Seq[Random => Long](_.nextLong(), r => r.nextInt(5).toLong - 2, r => r.nextInt(1 << 20).toLong,
        r => if (r.nextBoolean()) Long.MinValue else Long.MaxValue, r => r.nextInt().toLong << 24).foreach { gen =>
        val keys = Array.fill(n)(gen(rnd))
        val addrs = Array.tabulate(n)(_.toLong)
        val expected = keys.zip(addrs).sortBy(_._1) // stable (a merge sort)
        KeySort.sort(keys, addrs, n)
        assert(keys.toSeq == expected.map(_._1).toSeq && addrs.toSeq == expected.map(_._2).toSeq, n)
      }
    }
  }

  test("runs written to files and merged give every pair in (key, address) order") {
    val d = Files.createTempDirectory("keyruns")
    val storage = DatasetStorage(d.toString, new Configuration())
    val rnd = new Random(3)
    // runs of increasing addresses (as a build makes them), nulls in some
    var next = 0L
    val runs = (0 until 7).map { r =>
      val n = Seq(0, 1, 70000, 5, 140000, 3, 1000)(r)
      val keys = Array.fill(n)(rnd.nextInt(500).toLong - 250)
      val addrs = Array.tabulate(n)(i => next + i)
      next += n
      val nulls = Array.tabulate(r % 3)(i => next + i)
      next += nulls.length
      KeySort.sort(keys, addrs, n)
      new KeyRun(nulls, nulls.length, keys, addrs, n)
    }
    runs.zipWithIndex.foreach { case (r, i) => KeyRuns.write(storage, KeyRuns.runPath("u", i), r) }
    val got = scala.collection.mutable.ArrayBuffer.empty[(Any, Long)]
    val sink = new SortedIndexWriter {
      def add(value: Any, addr: Long): Unit = got += (value -> addr)
      def finish(): Seq[(String, Long)] = Nil
      def rowsAdded: Long = got.size.toLong
      def abort(): Unit = ()
    }
    val sources = runs.indices.map(i => KeyRuns.open(storage, KeyRuns.runPath("u", i)))
    try KeyRuns.merge(sources, KeyCodec.Integral, sink) finally sources.foreach(_.close())
    val all = runs.flatMap(r => r.nullAddrs.take(r.nulls).map(a => (null: Any) -> a) ++
      r.keys.take(r.n).zip(r.addrs).map { case (k, a) => (java.lang.Long.valueOf(k): Any) -> a })
    val ordering: Ordering[(Any, Long)] = Ordering.Tuple2(IndexValues.ordering, Ordering.Long)
    assert(got.size == all.size)
    assert(got.toVector == all.sorted(ordering).toVector)
  }

  /** 20,000 rows in 7 fragments: int64 ids (shuffled, nulls), doubles with
    * NaN, infinities, -0.0 and nulls, int32 with duplicates, booleans, dates,
    * timestamps; rows deleted. */
  private def table(version: String): Path = {
    val d = Files.createTempDirectory("keyed-build").resolve("t")
    py(
      """import sys, lance, pyarrow as pa, numpy as np, datetime
        |path, version = sys.argv[1], sys.argv[2]
        |rng = np.random.default_rng(17)
        |n = 20000
        |ids = rng.permutation(n)
        |sp = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0]
        |v = [None if i % 13 == 0 else (sp[i % 5] if i % 17 == 0 else float(rng.normal() * 1000)) for i in ids]
        |t = pa.table({"id": pa.array([None if i % 29 == 0 else int(i) for i in ids], pa.int64()),
        |    "v": pa.array(v, pa.float64()),
        |    "k": pa.array([int(i % 37) - 18 for i in ids], pa.int32()),
        |    "b": pa.array([None if i % 5 == 0 else bool(i % 3) for i in ids], pa.bool_()),
        |    "d": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=int(i % 400)) for i in ids]),
        |    "ts": pa.array([int(i) * 1000003 for i in ids], pa.timestamp("us"))})
        |lance.write_dataset(t, path, max_rows_per_file=3000, data_storage_version=version)
        |lance.dataset(path).delete("k = 4 OR id % 11 = 7")
        |""".stripMargin, d.toString, version)
    d
  }

  private def open(d: Path): Snapshot = Dataset.open(DatasetStorage(d.toString, new Configuration()), None)

  private val filters: Seq[String] = Seq(
    "id = 1235", "id IN (3, 777, 4001, 19999)", "id >= 1500 AND id < 1530", "id IS NULL", "id > 19990",
    "v IS NULL", "v > 900.0", "v < -1e300", "v = 0.0", "v IS NOT NULL AND v > 1e300",
    "k = 3", "k IN (-18, 0, 18)", "k < -10", "b = true", "b IS NULL",
    "d = date '2020-02-01'", "d > date '2021-01-01'", "ts < timestamp '1970-01-01 00:00:01'")

  private def copy(src: Path): Path = {
    val dst = Files.createTempDirectory("keyed-copy").resolve("t")
    Using.resource(Files.walk(src)) { s =>
      s.forEach(p => Files.copy(p, dst.resolve(src.relativize(p).toString)))
    }
    dst
  }

  private val columns = Seq("id" -> BuiltIndexType.BTree, "v" -> BuiltIndexType.BTree, "k" -> BuiltIndexType.Bitmap,
    "b" -> BuiltIndexType.BTree, "d" -> BuiltIndexType.BTree, "ts" -> BuiltIndexType.BTree)

  /** runRows: None = in memory, one thread; Some(0) = in memory, a thread per core; else in spilled runs. */
  private def buildAll(d: Path, runRows: Option[Long]): Unit = columns.foreach { case (c, t) =>
    val plan = IndexBuild.plan(open(d), c, t, None)
    Using.resource(new RootAllocator()) { a =>
      runRows match {
        case None => IndexBuild.writeInMemory(plan, a, rowsPerThread = Long.MaxValue)
        case Some(0L) => IndexBuild.writeInMemory(plan, a, rowsPerThread = 1L)
        case Some(r) => IndexBuild.writeInRuns(plan, IndexBuild.keyCodec(plan).get, r, a)
      }
    }
    IndexBuild.commit(plan, CommitSettings())
    // no run files are left
    assert(Files.list(d.resolve(s"_indices/${plan.uuid}")).toArray.map(_.toString).forall(_.endsWith(".lance")))
  }

  LongTests.sliced(Seq("2.0", "2.2"), Seq("2.2")).foreach { version =>   // make test: 2.2
    test(s"indices built in spilled runs or in threads equal those sorted in memory, and pylance uses them ($version)") {
      val base = table(version)
      val mem = copy(base)
      buildAll(mem, None)
      val runTables = Seq(0L, 1000L, 4500L, 7000L).map { r => val t = copy(base); buildAll(t, Some(r)); t }
      val out = py(
        """import sys, os, lance, hashlib
          |from lance.file import LanceFileReader
          |def files(p):
          |    ds = lance.dataset(p)
          |    out = {}
          |    for ix in ds.list_indices():
          |        d = os.path.join(p, "_indices", ix["uuid"])
          |        for f in sorted(os.listdir(d)):
          |            t = LanceFileReader(os.path.join(d, f)).read_all().to_table()
          |            out[ix["name"] + "/" + f] = repr((t.num_rows, t.schema.remove_metadata(), sorted((t.schema.metadata or {}).items()), t.to_pydict()))  # repr: NaN equals NaN
          |    return out
          |mem = files(sys.argv[1])
          |for p in sys.argv[2:6]:
          |    other = files(p)
          |    print("SAME", sorted(mem) == sorted(other), [k for k in mem if mem[k] != other.get(k)], len(mem))
          |rows = {}
          |for p in [sys.argv[1], sys.argv[2]]:
          |    ds = lance.dataset(p)
          |    for f in sys.argv[6:]:
          |        plan = ds.scanner(filter=f, columns=["id", "k"]).explain_plan(True)
          |        a = sorted(map(str, ds.to_table(filter=f, columns=["id", "k"]).to_pylist()))
          |        b = sorted(map(str, ds.to_table(filter=f, columns=["id", "k"], use_scalar_index=False).to_pylist()))
          |        print("FILTER", f, "|", "ScalarIndexQuery" in plan, "|", a == b, len(a))
          |""".stripMargin, (Seq(mem.toString) ++ runTables.map(_.toString) ++ filters): _*)
      val lines = out.linesIterator.toSeq
      assert(lines.filter(_.startsWith("SAME")) == Seq.fill(4)("SAME True [] 11"), out)
      val results = lines.filter(_.startsWith("FILTER "))
      assert(results.size == 2 * filters.size, out)
      results.foreach { l =>
        val Array(_, usesIndex, same) = l.split(" \\| ")
        assert(usesIndex == "True", s"pylance's plan does not use our index: $l\n$out")
        assert(same.startsWith("True"), s"rows differ with our index: $l\n$out")
      }
      assert(results.count(!_.endsWith(" 0")) >= results.size - 4, out)
    }
  }
}
