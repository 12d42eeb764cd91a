package io.lancespark.spark.streaming

import java.time.Instant

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.spark.options.{StreamConf, StreamOptions, StreamStart}

/** The streaming read's options, parsed strictly; offsets round-trip through their JSON. */
class StreamOptionsSuite extends AnyFunSuite {

  test("defaults: the latest snapshot, no limits, change commits fail") {
    assert(StreamOptions.conf(Map("path" -> "/x")) == StreamConf())
  }

  test("startingVersion: a number or latest; anything else names the option") {
    assert(StreamOptions.conf(Map("startingVersion" -> "7")).start == StreamStart.AtVersion(7L))
    assert(StreamOptions.conf(Map("STARTINGVERSION" -> "Latest")).start == StreamStart.Latest)
    val e = intercept[IllegalArgumentException](StreamOptions.conf(Map("startingVersion" -> "-1")))
    assert(e.getMessage.contains("'startingVersion'") && e.getMessage.contains("'-1'"))
  }

  test("startingTimestamp: dates, local times (UTC) and ISO instants; not with startingVersion") {
    val at = (s: String) => StreamOptions.conf(Map("startingTimestamp" -> s)).start
    assert(at("2024-05-01") == StreamStart.AtTime(Instant.parse("2024-05-01T00:00:00Z")))
    assert(at("2024-05-01 12:30:00") == StreamStart.AtTime(Instant.parse("2024-05-01T12:30:00Z")))
    assert(at("2024-05-01T12:30:00.250") == StreamStart.AtTime(Instant.parse("2024-05-01T12:30:00.250Z")))
    assert(at("2024-05-01T12:30:00+02:00") == StreamStart.AtTime(Instant.parse("2024-05-01T10:30:00Z")))
    intercept[IllegalArgumentException](at("yesterday"))
    val both = intercept[IllegalArgumentException](
      StreamOptions.conf(Map("startingTimestamp" -> "2024-05-01", "startingVersion" -> "3")))
    assert(both.getMessage.contains("not both"))
  }

  test("trigger limits and skipChangeCommits") {
    val c = StreamOptions.conf(Map("maxRowsPerTrigger" -> "1000", "maxFilesPerTrigger" -> "3",
      "skipChangeCommits" -> "true"))
    assert(c == StreamConf(StreamStart.Snapshot, Some(1000L), Some(3), skipChangeCommits = true))
    intercept[IllegalArgumentException](StreamOptions.conf(Map("maxFilesPerTrigger" -> "0")))
  }

  test("offsets round-trip through their JSON") {
    Seq(LanceStreamOffset(0L, 0, snapshot = true), LanceStreamOffset(123456789012L, 17, snapshot = false)).foreach { o =>
      assert(LanceStreamOffset.parse(o.json()) == o)
    }
    intercept[IllegalArgumentException](LanceStreamOffset.parse("""{"version":1}"""))
  }
}
