package io.lancespark.table.index.vector

import java.nio.file.{Files, Path}

import scala.util.Using

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.BigIntVector
import org.apache.arrow.vector.complex.FixedSizeListVector
import org.apache.arrow.vector.Float4Vector
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.table.{LongTests, PylanceProcess}
import io.lancespark.table.index.IndexCatalog
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.{DataFiles, Dataset, DatasetStorage, Snapshot}

/** IVF_FLAT indices built here (k-means on the driver, [[IvfIndexWriter]]):
  * k-means finds well-separated clusters; the files are read by our
  * [[IvfIndex]] (every live non-null row once, in its nearest centroid's
  * partition, its vector as stored by pylance: unit vectors for cosine) and
  * used by pylance (`list_indices`, an ANN plan, with all partitions probed
  * the exact top 10 of numpy); bad input fails before any work. */
class IvfBuildSuite extends AnyFunSuite {

  private val dir: Path = Files.createTempDirectory("ivf-build")

  test("k-means separates well-separated clusters (seeded)") {
    val rng = new scala.util.Random(5)
    val dim = 8
    val k = 6
    val centers = Array.fill(k, dim)((rng.nextGaussian() * 20).toFloat)
    val n = 1200
    val truth = Array.fill(n)(rng.nextInt(k))
    val data = new Array[Float](n * dim)
    for (i <- 0 until n; d <- 0 until dim) data(i * dim + d) = centers(truth(i))(d) + rng.nextGaussian().toFloat * 0.5f
    val m = KMeans.train(data, dim, k, DistanceMetric.L2, seed = 3)
    val assigned = (0 until n).map(i => m.nearest(data, i * dim, DistanceMetric.L2))
    val byTruth = (0 until n).groupBy(i => truth(i)).map { case (t, rows) => t -> rows.map(assigned).toSet }
    // a random init may merge two clusters; then the empty-cluster split or a
    // second seed recovers it: every true cluster in one partition for most seeds
    val pure = byTruth.values.count(_.size == 1)
    assert(pure >= k - 1, byTruth)
    assert(m.loss > 0 && m.centroids.length == k * dim)
    assert(KMeans.train(data, dim, k, DistanceMetric.L2, seed = 3).centroids.sameElements(m.centroids), "seeded")
  }

  private val makeTable: String =
    """import sys, lance, numpy as np, pyarrow as pa
path, seed = sys.argv[1], int(sys.argv[2])
dim = int(sys.argv[3]) if len(sys.argv) > 3 else 16
double = len(sys.argv) > 4 and sys.argv[4] == "float64"
rng = np.random.default_rng(seed)
n, ncl = 3000, 10
cent = rng.standard_normal((ncl, dim)) * 4
v = (cent[rng.integers(0, ncl, n)] + rng.standard_normal((n, dim))).astype(np.float32)
mask = np.zeros(n, dtype=bool); mask[::97] = True
values = pa.array(v.astype(np.float64).ravel(), pa.float64()) if double else pa.array(v.ravel(), pa.float32())
emb = pa.FixedSizeListArray.from_arrays(values, dim, mask=pa.array(mask))
lance.write_dataset(pa.table({"id": pa.array(np.arange(n), pa.int64()), "emb": emb}), path, max_rows_per_file=1100)
lance.dataset(path).delete("id % 17 = 3")
np.save(path + ".npy", v)
"""

  /** Runs a pylance script printing one line per query, `Q <query floats> | <id>:<distance> ...`, and
    * parses its `count` lines into (query, pylance's neighbours). */
  private def pylanceSearches(script: String, count: Int, args: String*): Vector[(Array[Float], Vector[(Long, Float)])] = {
    val out = PylanceProcess.run(script, args: _*)
    val lines = out.linesIterator.filter(_.startsWith("Q ")).toVector
    assert(lines.size == count, out)
    lines.map { line =>
      val Array(qs, pairs) = line.drop(2).split('|').map(_.trim)
      qs.split(' ').map(_.toFloat) ->
        pairs.split(' ').map { w => val Array(i, d) = w.split(':'); i.toLong -> d.toFloat }.toVector
    }
  }

  private def ids(snapshot: Snapshot): Map[Long, Long] = Using.resource(new RootAllocator()) { alloc =>
    snapshot.fragments.flatMap { f =>
      Using.resource(new FragmentScanner(snapshot.storage, snapshot.version, f, Seq(snapshot.schema.field("id").get),
          alloc, ref => DataFiles.open(snapshot.storage, snapshot.schema, ref))) { r =>
        Using.resource(r.read(0, f.physicalRows)) { b =>
          val v = b.vectors.head.asInstanceOf[BigIntVector]
          (0 until b.rowCount).map(i => ((f.id << 32) | b.offsets(i).toLong) -> v.get(i))
        }
      }
    }.toMap
  }

  for (metric <- Seq("l2", "cosine", "dot")) test(s"IVF_FLAT ($metric) built here: read by our reader, used by pylance") {
    val path = dir.resolve(s"t_$metric.lance").toString
    PylanceProcess.run(makeTable, path, "11")
    val storage = DatasetStorage(path, new Configuration())
    val before = Dataset.open(storage, None)
    val plan = IvfBuild.plan(before, "emb", "ivf_flat", Some("emb_ivf"),
      Map("num_partitions" -> "8", "metric" -> metric))
    val (after, model) = IvfBuild.buildInMemory(plan)
    assert(after.version == before.version + 1)
    val entry = IndexCatalog.load(after).find(_.name == "emb_ivf").get
    val ix = IvfIndex.open(storage, entry).fold(e => fail(e), identity)
    assert(ix.indexType == "IVF_FLAT" && ix.numPartitions == 8 && ix.dim == 16 && ix.metric.name == metric)
    val idOf = ids(after)
    val original = Using.resource(new RootAllocator()) { alloc =>
      // live non-null rows: id -> vector
      after.fragments.flatMap { f =>
        Using.resource(new FragmentScanner(after.storage, after.version, f, Seq(after.schema.field("emb").get),
            alloc, ref => DataFiles.open(after.storage, after.schema, ref))) { r =>
          Using.resource(r.read(0, f.physicalRows)) { b =>
            val l = b.vectors.head.asInstanceOf[FixedSizeListVector]
            val d = l.getDataVector.asInstanceOf[Float4Vector]
            (0 until b.rowCount).filterNot(l.isNull).map { i =>
              idOf((f.id << 32) | b.offsets(i).toLong) -> Array.tabulate(16)(j => d.get(i * 16 + j))
            }
          }
        }
      }.toMap
    }
    assert(original.size == 3000 - (0 until 3000).count(i => i % 17 == 3 || i % 97 == 0))
    Using.resource(new RootAllocator()) { alloc =>
      val parts = ix.partitions(0 until 8, alloc)
      val seen = parts.values.flatMap(_.rowIds.toSeq).map(idOf).toVector
      assert(seen.size == original.size && seen.toSet == original.keySet)
      for ((p, part) <- parts; i <- 0 until part.size) {
        val want = original(idOf(part.rowIds(i))).clone()
        if (metric == "cosine") KMeans.normalize(want, 0, 16)
        val got = java.util.Arrays.copyOfRange(part.vectors, i * 16, i * 16 + 16)
        assert(got.zip(want).forall { case (a, b) => math.abs(a - b) <= 1e-6f }, s"row ${part.rowIds(i)}")
        assert(model.nearest(got, 0, plan.trainMetric) == p)
      }
    }
    // pylance uses the index; with every partition probed: numpy's exact top 10
    val out = PylanceProcess.run(
      """import sys, lance, numpy as np
path, metric = sys.argv[1], sys.argv[2]
ds = lance.dataset(path)
v = np.load(path + ".npy")
info = [i for i in ds.list_indices() if i["name"] == "emb_ivf"][0]
assert info["type"] == "IVF_FLAT" and info["fields"] == ["emb"], info
ids = ds.to_table(columns=["id", "emb"])
live = np.array([i for i, e in zip(ids["id"].to_pylist(), ids["emb"].to_pylist()) if e is not None])
rng = np.random.default_rng(4)
for qi in range(5):
    q = v[rng.integers(0, len(v))] + rng.standard_normal(16).astype(np.float32) * 0.1
    nearest = {"column": "emb", "q": q, "k": 10, "nprobes": 8, "metric": metric}
    plan = ds.scanner(nearest=nearest).explain_plan(True)
    assert "ANNSubIndex" in plan or "ANNIvf" in plan, plan
    got = ds.to_table(nearest=nearest)["id"].to_pylist()
    x = v[live]
    if metric == "l2": d = ((x - q) ** 2).sum(1)
    elif metric == "cosine": d = 1 - x @ q / (np.linalg.norm(x, axis=1) * np.linalg.norm(q))
    else: d = 1 - x @ q
    want = live[np.argsort(d, kind="stable")[:10]].tolist()
    assert sorted(got) == sorted(want), (qi, got, want)
print("ok")
""", path, metric)
    assert(out.trim.endsWith("ok"), out)
    // our search on our index with every partition probed: the exact top 10
    Using.resource(new RootAllocator()) { alloc =>
      val m = DistanceMetric.parse(metric).get
      val rng = new scala.util.Random(9)
      for (_ <- 0 until 5) {
        val q = original.values.toVector(rng.nextInt(original.size))
        val viaIndex = VectorSearch.run(after, VectorQuery("emb", q, 10, m, Some(8)), alloc)
        val exact = VectorSearch.run(after, VectorQuery("emb", q, 10, m, useIndex = false), alloc)
        assert(viaIndex.index.isDefined)
        assert(viaIndex.neighbours.map(_.rowAddress).toSet == exact.neighbours.map(_.rowAddress).toSet)
      }
    }
  }

  // make test: l2 (the 768-d builds below use cosine and dot); make test-long: every metric
  for (metric <- LongTests.sliced(Seq("l2", "cosine", "dot"), Seq("l2"))) test(s"IVF_PQ ($metric) built here: pylance's search on it equals ours, recall near pylance's") {
    val path = dir.resolve(s"pq_$metric.lance").toString
    val copy = dir.resolve(s"pq_${metric}_py.lance").toString
    PylanceProcess.run(makeTable, path, "13")
    PylanceProcess.run(makeTable, copy, "13")
    // Two more of our builds with other seeds, on copies: training is random on both sides,
    // so recall is compared as a mean over several builds of each.
    val seeded = Seq(43L, 44L).map { seed =>
      val p = dir.resolve(s"pq_${metric}_s$seed.lance").toString
      PylanceProcess.run(makeTable, p, "13")
      IvfBuild.buildInMemoryWithPq(IvfBuild.plan(Dataset.open(DatasetStorage(p, new Configuration()), None), "emb",
        "ivf_pq", Some("emb_pq"), Map("num_partitions" -> "8", "metric" -> metric, "num_sub_vectors" -> "4",
          "seed" -> seed.toString)))
      p
    }
    val storage = DatasetStorage(path, new Configuration())
    val before = Dataset.open(storage, None)
    val plan = IvfBuild.plan(before, "emb", "ivf_pq", Some("emb_pq"),
      Map("num_partitions" -> "8", "metric" -> metric, "num_sub_vectors" -> "4"))
    val (after, _, pq) = IvfBuild.buildInMemoryWithPq(plan)
    assert(pq.exists(q => q.m == 4 && q.subDim == 4))
    val entry = IndexCatalog.load(after).find(_.name == "emb_pq").get
    val ix = IvfIndex.open(storage, entry).fold(e => fail(e), identity)
    assert(ix.indexType == "IVF_PQ" && ix.numPartitions == 8 && ix.metric.name == metric)
    val idOf = ids(after)
    // pylance: its search on our index (ids, distances), and recall@10 of our builds vs its own IVF_PQ on a copy
    val out = PylanceProcess.run(
      """import sys, lance, numpy as np
path, copy, metric = sys.argv[1], sys.argv[2], sys.argv[3]
others = sys.argv[4:]
ds = lance.dataset(path)
v = np.load(path + ".npy")
info = [i for i in ds.list_indices() if i["name"] == "emb_pq"][0]
assert info["type"] == "IVF_PQ", info
t = ds.to_table(columns=["id", "emb"])
live = np.array([i for i, e in zip(t["id"].to_pylist(), t["emb"].to_pylist()) if e is not None])
rng = np.random.default_rng(6)
qs = [v[rng.integers(0, len(v))] + rng.standard_normal(16).astype(np.float32) * 0.3 for _ in range(100)]
def want(q):
    x = v[live]
    if metric == "l2": d = ((x - q) ** 2).sum(1)
    elif metric == "cosine": d = 1 - x @ q / (np.linalg.norm(x, axis=1) * np.linalg.norm(q))
    else: d = 1 - x @ q
    return set(live[np.argsort(d, kind="stable")[:10]].tolist())
def nearest(q):
    return {"column": "emb", "q": q, "k": 10, "nprobes": 3, "metric": metric}
truth = [want(q) for q in qs]
def recall(d):
    return float(np.mean([len(w & set(d.to_table(nearest=nearest(q))["id"].to_pylist())) / 10 for q, w in zip(qs, truth)]))
for qi, q in enumerate(qs[:6]):
    got = ds.to_table(nearest=nearest(q))
    print("Q", " ".join(repr(float(x)) for x in q), "|", " ".join(f"{i}:{d!r}" for i, d in zip(got["id"].to_pylist(), got["_distance"].to_pylist())))
ro = [recall(lance.dataset(p)) for p in [path] + others]
# pylance's recall: the mean of five of its builds (each trained at random)
rp = []
for b in range(5):
    lance.dataset(copy).create_index("emb", index_type="IVF_PQ", num_partitions=8, num_sub_vectors=4, metric=metric,
                                     replace=True)
    rp.append(recall(lance.dataset(copy)))
print("RECALL", np.mean(ro), np.mean(rp))
print("BUILDS ours", ro, "pylance", rp)
""", (Seq(path, copy, metric) ++ seeded): _*)
    val recall = out.linesIterator.find(_.startsWith("RECALL")).get.split(' ').drop(1).map(_.toDouble)
    println(s"IVF_PQ $metric recall@10 nprobes=3, mean of 3 builds: ours ${recall(0)}, of 5: pylance's ${recall(1)}")
    // One build's recall spreads by about 0.02 (sd, measured on either side) on these 100 queries, so the
    // means of 3 and 5 builds differ by about 0.015 (sd) even when the expected recalls are equal. The bound
    // 0.045 is 3 of those sds: equal builders fail by chance about once in 1,000 runs per metric. The issue's
    // 0.02 on expected recall is measured at scale in bench/vectors.py (docs/benchmarks-vectors.md).
    assert(recall(0) >= recall(1) - 0.045, out)
    Using.resource(new RootAllocator()) { alloc =>
      out.linesIterator.filter(_.startsWith("Q ")).foreach { line =>
        val Array(qs, pairs) = line.drop(2).split('|').map(_.trim)
        val q = qs.split(' ').map(_.toFloat)
        val expected = pairs.split(' ').map { w => val Array(i, d) = w.split(':'); i.toLong -> d.toFloat }.toVector
        val found = VectorSearch.run(after, VectorQuery("emb", q, 10, DistanceMetric.parse(metric).get, Some(3)), alloc)
          .neighbours.map(n => idOf(n.rowAddress) -> n.distance)
        assert(found.map(_._1).toSet == expected.map(_._1).toSet, s"ours $found\npylance $expected")
        found.zip(expected).foreach { case ((_, a), (_, b)) => assert(math.abs(a - b) <= 1e-3f * math.max(1f, math.abs(b))) }
      }
    }
  }

  for ((indexType, metric) <- Seq("ivf_flat" -> "l2", "ivf_pq" -> "cosine", "ivf_pq" -> "dot"))
    test(s"${indexType.toUpperCase} ($metric) built here over 768-d float64 vectors: pylance's search on it equals ours") {
      val path = dir.resolve(s"wide_${indexType}_$metric.lance").toString
      PylanceProcess.run(makeTable, path, "17", "768", "float64")
      val before = Dataset.open(DatasetStorage(path, new Configuration()), None)
      val opts = Map("num_partitions" -> "6", "metric" -> metric) ++
        (if (indexType == "ivf_pq") Map("num_sub_vectors" -> "48") else Map.empty)
      val (after, _, _) = IvfBuild.buildInMemoryWithPq(IvfBuild.plan(before, "emb", indexType, Some("wide"), opts))
      val idOf = ids(after)
      val searches = pylanceSearches(
        """import sys, lance, numpy as np
path, metric, itype = sys.argv[1], sys.argv[2], sys.argv[3]
ds = lance.dataset(path)
v = np.load(path + ".npy")
assert [i["type"] for i in ds.list_indices() if i["name"] == "wide"] == [itype], ds.list_indices()
rng = np.random.default_rng(8)
for qi in range(6):
    q = (v[rng.integers(0, len(v))] + rng.standard_normal(v.shape[1]).astype(np.float32) * 0.3).astype(np.float32)
    nearest = {"column": "emb", "q": q.astype(np.float64), "k": 10, "nprobes": 2, "metric": metric}
    plan = ds.scanner(nearest=nearest).explain_plan(True)
    assert "ANNSubIndex" in plan or "ANNIvf" in plan, plan
    got = ds.to_table(nearest=nearest)
    print("Q", " ".join(repr(float(x)) for x in q), "|", " ".join(f"{i}:{d!r}" for i, d in zip(got["id"].to_pylist(), got["_distance"].to_pylist())))
""", 6, path, metric, indexType.toUpperCase)
      Using.resource(new RootAllocator()) { alloc =>
        searches.foreach { case (q, expected) =>
          val res = VectorSearch.run(after, VectorQuery("emb", q, 10, DistanceMetric.parse(metric).get, Some(2)), alloc)
          assert(res.index.isDefined, "our index was not used")
          val found = res.neighbours.map(n => idOf(n.rowAddress) -> n.distance)
          assert(found.map(_._1) == expected.map(_._1), s"ours $found\npylance $expected")
          found.zip(expected).foreach { case ((_, a), (_, b)) => assert(math.abs(a - b) <= 1e-4f * math.max(1f, math.abs(b))) }
        }
      }
    }

  for ((builder, indexType) <- Seq("pylance" -> "IVF_FLAT", "pylance" -> "IVF_PQ", "ours" -> "IVF_PQ"))
    test(s"refresh: an $indexType index built by $builder, after appends, deletes and a compaction, keeps its model and covers every fragment") {
      val path = dir.resolve(s"refresh_${builder}_$indexType.lance").toString
      PylanceProcess.run(makeTable, path, "23")
      val kw = if (indexType == "IVF_PQ") Map("num_sub_vectors" -> "4") else Map.empty[String, String]
      if (builder == "pylance")
        PylanceProcess.run(
          """import sys, lance
            |lance.dataset(sys.argv[1]).create_index("emb", index_type=sys.argv[2], num_partitions=6, name="emb_ix",
            |                                        **({"num_sub_vectors": 4} if sys.argv[2] == "IVF_PQ" else {}))
            |""".stripMargin, path, indexType)
      else IvfBuild.buildInMemoryWithPq(IvfBuild.plan(Dataset.open(DatasetStorage(path, new Configuration()), None),
        "emb", indexType, Some("emb_ix"), Map("num_partitions" -> "6") ++ kw))
      // pylance appends rows, deletes some and compacts (the index no longer covers the new fragments)
      PylanceProcess.run(
        """import sys, lance, numpy as np, pyarrow as pa
          |path = sys.argv[1]
          |v = np.load(path + ".npy")
          |rng = np.random.default_rng(5)
          |extra = (v[rng.integers(0, len(v), 700)] + rng.standard_normal((700, v.shape[1])).astype(np.float32) * 0.2).astype(np.float32)
          |emb = pa.FixedSizeListArray.from_arrays(pa.array(extra.ravel(), pa.float32()), v.shape[1])
          |lance.write_dataset(pa.table({"id": pa.array(np.arange(3000, 3700), pa.int64()), "emb": emb}), path, mode="append")
          |np.save(path + ".npy", np.concatenate([v, extra]))
          |ds = lance.dataset(path)
          |ds.delete("id % 23 = 5")
          |ds.optimize.compact_files(target_rows_per_fragment=2000, materialize_deletions_threshold=0.01, defer_index_remap=False)
          |""".stripMargin, path)
      val storage = DatasetStorage(path, new Configuration())
      val before = Dataset.open(storage, None)
      val old = IndexCatalog.load(before).filter(_.name == "emb_ix")
      val all = new org.roaringbitmap.RoaringBitmap()
      before.fragments.foreach(f => all.add(f.id.toInt))
      assume(!old.exists(_.covered.equals(all)), "pylance's compaction left the index covering every fragment")
      val oldIx = IvfIndex.open(storage, old.minBy(_.datasetVersion)).fold(e => fail(e), identity)
      val (plan, model, pq) = IvfBuild.refreshPlan(before, old.head).getOrElse(fail("nothing to refresh"))
      assert(model.centroids.sameElements(oldIx.model.centroids) && plan.numPartitions == 6)
      val after = IvfBuild.refreshInMemory(plan, model, pq)
      val entries = IndexCatalog.load(after).filter(_.name == "emb_ix")
      assert(entries.size == 1 && entries.head.covered.equals(all) && entries.head.uuid == plan.uuid)
      assert(IvfBuild.refreshPlan(after, entries.head).isEmpty, "a second refresh has nothing to do")
      val ix = IvfIndex.open(storage, entries.head).fold(e => fail(e), identity)
      assert(ix.indexType == indexType && ix.model.centroids.sameElements(oldIx.model.centroids))
      val idOf = ids(after)
      Using.resource(new RootAllocator()) { alloc =>
        val indexed = ix.partitions(0 until 6, alloc).values.flatMap(_.rowIds.toSeq).map(idOf).toVector
        val live = idOf.values.toSet.filterNot(i => i < 3000 && i % 97 == 0)   // (the table's NULL vectors)
        assert(indexed.size == live.size && indexed.toSet == live)
      }
      // pylance uses the refreshed index; its search on it equals ours
      val searches = pylanceSearches(
        """import sys, lance, numpy as np
path = sys.argv[1]
ds = lance.dataset(sys.argv[1])
v = np.load(path + ".npy")
rng = np.random.default_rng(2)
for qi in range(5):
    q = v[rng.integers(0, len(v))] + rng.standard_normal(v.shape[1]).astype(np.float32) * 0.1
    nearest = {"column": "emb", "q": q, "k": 10, "nprobes": 2}
    plan = ds.scanner(nearest=nearest).explain_plan(True)
    assert "ANN" in plan and "KNNVectorDistance" not in plan.split("ANN")[0], plan
    got = ds.to_table(nearest=nearest)
    print("Q", " ".join(repr(float(x)) for x in q), "|", " ".join(f"{i}:{d!r}" for i, d in zip(got["id"].to_pylist(), got["_distance"].to_pylist())))
""", 5, path)
      Using.resource(new RootAllocator()) { alloc =>
        searches.foreach { case (q, expected) =>
          val res = VectorSearch.run(after, VectorQuery("emb", q, 10, DistanceMetric.L2, Some(2)), alloc)
          assert(res.index.isDefined)
          val found = res.neighbours.map(n => idOf(n.rowAddress) -> n.distance)
          assert(found.map(_._1).toSet == expected.map(_._1).toSet, s"ours $found\npylance $expected")
        }
      }
    }

  test("bad input fails before any work: non-vector column, unknown metric, num_partitions > rows, unknown option") {
    val path = dir.resolve("bad.lance").toString
    PylanceProcess.run(makeTable, path, "12")
    val s = Dataset.open(DatasetStorage(path, new Configuration()), None)
    def err(f: => Any): String = intercept[IllegalArgumentException](f).getMessage
    assert(err(IvfBuild.plan(s, "id", "ivf_flat", None, Map("num_partitions" -> "4"))).contains("column 'id'"))
    assert(err(IvfBuild.plan(s, "nope", "ivf_flat", None, Map.empty)).contains("no column 'nope'"))
    assert(err(IvfBuild.plan(s, "emb", "ivf_flat", None, Map("metric" -> "hamming2"))).contains("metric is 'hamming2'"))
    assert(err(IvfBuild.plan(s, "emb", "ivf_flat", None, Map("num_partitions" -> "100000"))).contains("num_partitions is 100000"))
    assert(err(IvfBuild.plan(s, "emb", "ivf_flat", None, Map("nprobes" -> "3"))).contains("unknown vector index option 'nprobes'"))
    assert(err(IvfBuild.plan(s, "emb", "ivf_hnsw", None, Map.empty)).contains("not built by this connector"))
    assert(!Files.exists(Path.of(path, "_indices")))
  }
}
