package io.lancespark.table.index.vector

import java.nio.file.{Files, Path}

import scala.util.Using

import org.apache.arrow.memory.RootAllocator
import org.apache.hadoop.conf.Configuration

import io.lancespark.table.storage.{Dataset, DatasetStorage}

/** Times one top-10 query on a dataset (`core/Test/runMain ...VectorSearchBench <path>`; the query
  * vector in `<path>.q`), exact and through the index: best of 5 after 2 warm-ups. */
object VectorSearchBench {
  def main(args: Array[String]): Unit = {
    val path = args(0)
    val q = Files.readAllLines(Path.of(path + ".q")).get(0).trim.split("\\s+").map(_.toFloat)
    val snapshot = Dataset.open(DatasetStorage(path, new Configuration()), None)
    Using.resource(new RootAllocator()) { alloc =>
      def time(name: String, query: VectorQuery): Unit = {
        val ts = (0 until 7).map { _ =>
          val t0 = System.nanoTime()
          val r = VectorSearch.run(snapshot, query, alloc)
          require(r.neighbours.size == query.k)
          (System.nanoTime() - t0) / 1e9
        }.drop(2)
        println(f"$name: best ${ts.min}%.4f s, median ${ts.sorted.apply(ts.size / 2)}%.4f s")
      }
      time("exact", VectorQuery("emb", q, 10, useIndex = false))
      time("IVF_PQ nprobes=20 refine=5", VectorQuery("emb", q, 10, nprobes = Some(20), refineFactor = Some(5)))
    }
  }
}
