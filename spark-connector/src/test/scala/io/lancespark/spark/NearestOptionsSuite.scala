package io.lancespark.spark

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.spark.options.{NearestConf, NearestOptions}
import io.lancespark.table.index.vector.DistanceMetric

/** The `nearest.*` read options: parsed strictly, errors name the option. */
class NearestOptionsSuite extends AnyFunSuite {

  private def err(opts: (String, String)*): String =
    intercept[IllegalArgumentException](NearestOptions.parse(opts.toMap)).getMessage

  test("no nearest.column: no search") {
    assert(NearestOptions.parse(Map("path" -> "/x", "batchSize" -> "5")).isEmpty)
  }

  test("defaults, case-insensitive names, each value parsed") {
    assert(NearestOptions.parse(Map("Nearest.Column" -> "emb", "nearest.vector" -> "[1, -2.5, 3e-1, .5]"))
      .contains(NearestConf("emb", Vector(1f, -2.5f, 0.3f, 0.5f), 10, None, None, DistanceMetric.L2, useIndex = true)))
    val c = NearestOptions.parse(Map("nearest.column" -> "emb", "nearest.vector" -> "1,2", "nearest.k" -> "3",
      "nearest.nprobes" -> "7", "nearest.refine_factor" -> "2", "nearest.metric" -> "COSINE",
      "nearest.use_index" -> "false", "nearest.prefilter" -> "false")).get
    assert(c == NearestConf("emb", Vector(1f, 2f), 3, Some(7), Some(2), DistanceMetric.Cosine, useIndex = false,
      prefilter = false))
  }

  test("bad values name the option") {
    val base = Seq("nearest.column" -> "emb", "nearest.vector" -> "[1]")
    assert(err(base :+ ("nearest.k" -> "0"): _*).contains("'nearest.k'"))
    assert(err(base :+ ("nearest.nprobes" -> "x"): _*).contains("'nearest.nprobes'"))
    assert(err(base :+ ("nearest.metric" -> "hamming"): _*).contains("'nearest.metric'"))
    assert(err(base :+ ("nearest.use_index" -> "yes"): _*).contains("'nearest.use_index'"))
    Seq("[]", "[1,,2]", "[1, NaN]", "[1, Infinity]", "[0x1p3]", "[1f]", "[1e40]").foreach { v =>
      assert(err("nearest.column" -> "emb", "nearest.vector" -> v).contains("'nearest.vector'"), v)
    }
    assert(err("nearest.column" -> "emb").contains("'nearest.vector' is required"))
    assert(err("nearest.k" -> "3").contains("'nearest.column'"))
    assert(err("nearest.column" -> "emb", "nearest.vector" -> "[1]", "nearest.kk" -> "3").contains("nearest.kk"))
  }
}
