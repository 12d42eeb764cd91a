package io.lancespark.table.index.vector

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}

import scala.util.Using

import org.apache.arrow.memory.RootAllocator
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.table.filter.{CompareOp, Filter, Lit}
import io.lancespark.table.storage.{Dataset, DatasetStorage}

/** Exact nearest-neighbour search of the table layer against pylance's
  * `use_index=False` search (seeded clustered vectors, float32 and float64
  * columns, NULL vectors, deleted rows, several fragments, a pylance IVF_PQ
  * index and rows appended after it), for each metric, with a prefilter and
  * a post-filter. Expected ids and distances come from pylance. */
class VectorSearchSuite extends AnyFunSuite {

  private val python = io.lancespark.table.PylanceProcess.python
  private val dir: Path = Files.createTempDirectory("vector-search")
  private val path = dir.resolve("t.lance").toString

  /** One line per (query, metric, column, filter mode): "q metric column mode | id:distance ...". */
  private lazy val oracle: Map[String, Vector[(Long, Float)]] = {
    val script =
      """import sys, lance, numpy as np, pyarrow as pa
        |path = sys.argv[1]
        |rng = np.random.default_rng(5)
        |dim = 12
        |def vecs(n):
        |    c = rng.standard_normal((6, dim)) * 3
        |    return (c[rng.integers(0, 6, n)] + rng.standard_normal((n, dim))).astype(np.float32)
        |def table(ids, v):
        |    f32 = pa.FixedSizeListArray.from_arrays(pa.array(v.ravel(), pa.float32()), dim)
        |    mask = pa.array(ids % 50 == 17)
        |    f32 = pa.FixedSizeListArray.from_arrays(f32.values, dim, mask=mask)
        |    f64 = pa.FixedSizeListArray.from_arrays(pa.array(v.astype(np.float64).ravel()[::-1].copy(), pa.float64()), dim)
        |    return pa.table({"id": pa.array(ids, pa.int64()), "emb": f32, "emb64": f64})
        |lance.write_dataset(table(np.arange(2000), vecs(2000)), path, max_rows_per_file=600)
        |ds = lance.dataset(path)
        |ds.delete("id % 9 = 4")
        |ds.create_index("emb", index_type="IVF_PQ", num_partitions=4, num_sub_vectors=3)
        |lance.write_dataset(table(np.arange(2000, 2300), vecs(300)), path, mode="append")
        |ds = lance.dataset(path)
        |qs = vecs(3)
        |np.savetxt(path + ".queries", qs)
        |for qi, q in enumerate(qs):
        |    for metric in ["l2", "cosine", "dot"]:
        |        for col in ["emb", "emb64"]:
        |            for mode, flt, pre in [("none", None, False), ("pre", "id < 1500", True), ("post", "id < 1500", False)]:
        |                t = ds.to_table(nearest={"column": col, "q": q, "k": 8, "metric": metric, "use_index": False},
        |                                filter=flt, prefilter=pre)
        |                pairs = " ".join(f"{i}:{d!r}" for i, d in zip(t["id"].to_pylist(), t["_distance"].to_pylist()))
        |                print(f"{qi} {metric} {col} {mode} | {pairs}")
        |""".stripMargin
    val proc = new ProcessBuilder(python, "-c", script, path).redirectErrorStream(false).start()
    val out = new String(proc.getInputStream.readAllBytes(), UTF_8)
    val err = new String(proc.getErrorStream.readAllBytes(), UTF_8)
    assert(proc.waitFor() == 0, s"pylance could not build the table: $err")
    out.linesIterator.filter(_.contains("|")).map { line =>
      val (head, tail) = line.splitAt(line.indexOf('|'))
      head.trim -> tail.drop(1).trim.split(' ').filter(_.nonEmpty).map { w =>
        val Array(id, d) = w.split(':'); id.toLong -> d.toFloat
      }.toVector
    }.toMap
  }

  private lazy val queries: Vector[Array[Float]] = {
    val _ = oracle
    Files.readAllLines(Path.of(path + ".queries")).toArray.toVector.map(_.toString.trim.split("\\s+").map(_.toFloat))
  }

  /** The table (built by pylance on first use). */
  private def open() = {
    val _ = oracle
    Dataset.open(DatasetStorage(path, new Configuration()), None)
  }

  private def ids(snapshotIds: Map[(Long, Int), Long], found: Vector[Neighbour]): Vector[Long] =
    found.map(n => snapshotIds((n.fragmentId, n.offset)))

  test("exact search equals pylance's use_index=False search: every metric, float and double, pre- and post-filter") {
    val snapshot = open()
    Using.resource(new RootAllocator()) { alloc =>
      // the id of each (fragment, offset), read through the search itself: id = its own column
      val idOf: Map[(Long, Int), Long] = snapshot.fragments.flatMap { f =>
        val reader = new io.lancespark.table.scan.FragmentScanner(snapshot.storage, snapshot.version, f,
          Seq(snapshot.schema.field("id").get), alloc,
          ref => io.lancespark.table.storage.DataFiles.open(snapshot.storage, snapshot.schema, ref))
        try {
          val b = reader.read(0, f.physicalRows)
          try {
            val v = b.vectors.head.asInstanceOf[org.apache.arrow.vector.BigIntVector]
            (0 until b.rowCount).map(i => (f.id, b.offsets(i)) -> v.get(i))
          } finally b.close()
        } finally reader.close()
      }.toMap
      val filter = Filter.Compare(Vector("id"), CompareOp.Lt, Lit.LongLit(1500))
      var compared = 0
      for {
        (q, qi) <- queries.zipWithIndex
        metric <- DistanceMetric.All
        col <- Seq("emb", "emb64")
        (mode, f, pre) <- Seq(("none", None, true), ("pre", Some(filter), true), ("post", Some(filter), false))
      } {
        val key = s"$qi ${metric.name} $col $mode"
        val expected = oracle(key)
        val found = VectorSearch.search(snapshot, VectorQuery(col, q, 8, metric, useIndex = false, filter = f, prefilter = pre), alloc)
        assert(found.map(_.distance) == found.map(_.distance).sorted, key)
        assert(found.size == expected.size, s"$key: ${found.size} rows, pylance ${expected.size}")
        found.zip(expected).foreach { case (n, (_, d)) =>
          assert(math.abs(n.distance - d) <= 1e-3 * math.max(1.0, math.abs(d)), s"$key: distance ${n.distance} vs $d")
        }
        val diff = ids(idOf, found).toSet.diff(expected.map(_._1).toSet)
        assert(diff.isEmpty || found.last.distance - expected.last._2 <= 1e-3f, s"$key: ids differ by $diff")
        compared += 1
      }
      assert(compared == 3 * 3 * 2 * 3)
    }
  }

  test("bad input names the argument") {
    val snapshot = open()
    Using.resource(new RootAllocator()) { alloc =>
      val e1 = intercept[IllegalArgumentException](VectorSearch.search(snapshot, VectorQuery("emb", Array(1f, 2f), 3), alloc))
      assert(e1.getMessage.contains("2 values") && e1.getMessage.contains("12"))
      val e2 = intercept[IllegalArgumentException](VectorSearch.search(snapshot, VectorQuery("id", Array(1f), 3), alloc))
      assert(e2.getMessage.contains("not a vector column"))
      val e3 = intercept[IllegalArgumentException](VectorSearch.search(snapshot, VectorQuery("nope", Array(1f), 3), alloc))
      assert(e3.getMessage.contains("'nope'"))
      val e4 = intercept[IllegalArgumentException](VectorQuery("emb", Array(1f), 0))
      assert(e4.getMessage.contains("k must be positive"))
      assert(DistanceMetric.parse("hamming").isEmpty && DistanceMetric.parse("L2").contains(DistanceMetric.L2))
    }
  }
}
