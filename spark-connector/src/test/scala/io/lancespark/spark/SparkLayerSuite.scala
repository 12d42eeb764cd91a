package io.lancespark.spark

import org.apache.spark.sql.connector.expressions.{Expression, Expressions, Literal}
import org.apache.spark.sql.connector.expressions.filter.Predicate
import org.apache.spark.sql.types.{DataType, DateType, IntegerType, LongType, StringType}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.spark.options.{OptionSource, ReadConf, ReadOptions, ReadTarget, WriteOptions}
import io.lancespark.spark.read.PredicateTranslation

/** The Spark layer's pure parts, without a Spark session: option parsing and
  * precedence, predicate translation (partition planning: [[io.lancespark.table.scan.PartitionPlannerSuite]]). */
class SparkLayerSuite extends AnyFunSuite {

  private def read(explicit: Map[String, String], session: Map[String, String] = Map.empty,
      table: Map[String, String] = Map.empty): ReadConf =
    ReadOptions.conf(explicit, session.get, table)

  test("read options: defaults, case-insensitive names, each value parsed") {
    assert(read(Map.empty) == ReadConf())
    assert(read(Map("BATCHSIZE" -> "100", "splitrows" -> "7", "pushDown" -> "FALSE", "readahead" -> "true")) ==
      ReadConf(batchSize = 100, splitRows = Some(7L), pushdown = false, readAhead = Some(true), batchSizeGiven = true))
    assert(read(Map("readAhead" -> "auto")).readAhead.isEmpty)
    assert(ReadOptions.target(Map("path" -> "/x", "Version" -> "3")) == ReadTarget("/x", Some(3L)))
  }

  test("a bad value names the option, its source and what is accepted") {
    def error(explicit: Map[String, String], session: Map[String, String] = Map.empty,
        table: Map[String, String] = Map.empty): String =
      intercept[IllegalArgumentException](read(explicit, session, table)).getMessage
    // regression: splitRows <= 0 made partition planning loop until the driver ran out of heap
    for (bad <- Seq("0", "-5", "1e3", "")) {
      val m = error(Map("splitRows" -> bad))
      assert(m.contains("'splitRows'") && m.contains("positive integer") && m.contains(s"'$bad'"), m)
    }
    // regression: pushdown took any value but "false" as true
    assert(error(Map("pushdown" -> "flase")).contains("one of true, false"))
    assert(error(Map("readAhead" -> "yes")).contains("one of auto, true, false"))
    assert(error(Map("batchSize" -> "99999999999")).contains("'batchSize'"))
    val fromSession = error(Map.empty, session = Map("spark.lance.batchSize" -> "0"))
    assert(fromSession.contains("session configuration spark.lance.batchSize"), fromSession)
    assert(error(Map.empty, table = Map("splitRows" -> "x")).contains("table property"))
    assert(intercept[IllegalArgumentException](ReadOptions.target(Map("path" -> "/x", "version" -> "-1")))
      .getMessage.contains("'version'"))
  }

  test("precedence: the read's own option, then the session, then the table property") {
    val table = Map("batchSize" -> "10", "splitRows" -> "1000")
    val session = Map("spark.lance.batchSize" -> "20")
    assert(read(Map.empty, session, table) == ReadConf(batchSize = 20, splitRows = Some(1000L), batchSizeGiven = true))
    assert(read(Map("batchSize" -> "30"), session, table).batchSize == 30)
    assert(read(Map.empty, Map.empty, table).batchSize == 10)
  }

  test("unknown options are reported; Spark's own keys are not") {
    val src = new OptionSource(Map("path" -> "/x", "batchsize" -> "1", "bachSize" -> "2", "mergeSchema" -> "true"),
      _ => None, Map.empty, ReadOptions.All, "read")
    assert(src.unknown == Seq("bachSize", "mergeSchema"))
  }

  test("an unknown option on a read or write is a warning in the log naming it") {
    import org.apache.logging.log4j.core.{LogEvent, Logger => CoreLogger}
    import org.apache.logging.log4j.core.appender.AbstractAppender
    val seen = new java.util.concurrent.CopyOnWriteArrayList[String]()
    val appender = new AbstractAppender("lance-test", null, null, true, Array.empty) {
      override def append(event: LogEvent): Unit =
        seen.add(s"${event.getLevel} ${event.getMessage.getFormattedMessage}")
    }
    appender.start()
    // the log4j configuration behind the slf4j logger OptionSource writes to: a logger
    // config of its own at WARN (the default configuration logs errors only), with our appender
    val slf4j = org.slf4j.LoggerFactory.getLogger(classOf[OptionSource])
    val inner = slf4j.getClass.getDeclaredField("logger")
    inner.setAccessible(true)
    val context = inner.get(slf4j).asInstanceOf[CoreLogger].getContext
    val name = classOf[OptionSource].getName
    val config = new org.apache.logging.log4j.core.config.LoggerConfig(name, org.apache.logging.log4j.Level.WARN, false)
    config.addAppender(appender, null, null)
    context.getConfiguration.addLogger(name, config)
    context.updateLoggers()
    try {
      ReadOptions.conf(Map("bachSize" -> "10", "path" -> "/x"), _ => None, Map.empty)
      WriteOptions.conf(Map("maxRowPerFile" -> "10"), _ => None, Map.empty)
      ReadOptions.conf(Map("batchSize" -> "10"), _ => None, Map.empty)  // nothing unknown: no warning
    } finally {
      context.getConfiguration.removeLogger(name)
      context.updateLoggers()
    }
    val warnings = seen.toArray.map(_.toString).toSeq
    assert(warnings.size == 2, warnings)
    assert(warnings.head.startsWith("WARN") && warnings.head.contains("read") && warnings.head.contains("bachSize") &&
      warnings.head.contains("batchSize"), warnings.head)
    assert(warnings(1).contains("write") && warnings(1).contains("maxRowPerFile"), warnings(1))
  }

  test("write options: strict values, vector columns, table properties checked") {
    val w = WriteOptions.conf(Map("maxRowsPerFile" -> "10", "vectorColumns" -> "emb:4, v2:128"), _ => None, Map.empty)
    assert(w.maxRowsPerFile == 10 && w.vectorColumns == Map("emb" -> 4, "v2" -> 128))
    for ((k, v) <- Seq("maxRowsPerFile" -> "0", "maxRowsPerPage" -> "-1", "vectorColumns" -> "emb",
        "vectorColumns" -> "emb:0", "enableStableRowIds" -> "1", "fileVersion" -> "2.3", "fileVersion" -> "0.1", "disabledCodecs" -> "fsst,lz4")) {
      val m = intercept[IllegalArgumentException](WriteOptions.conf(Map(k -> v), _ => None, Map.empty)).getMessage
      assert(m.contains(s"'$k'") && m.contains(s"'$v'"), m)
    }
    assert(WriteOptions.tableProperties(Map("maxRowsPerFile" -> "5", "provider" -> "lance")) ==
      Map("maxRowsPerFile" -> "5"))
    val m = intercept[IllegalArgumentException](WriteOptions.tableProperties(Map("maxRowPerFile" -> "5"))).getMessage
    assert(m.contains("maxRowPerFile") && m.contains("maxRowsPerFile"), m)
  }

  private def col(name: String): Expression = Expressions.column(name)
  private final case class LiteralValue[T](v: T, t: DataType) extends Literal[T] {
    override def value(): T = v
    override def dataType(): DataType = t
    override def children(): Array[Expression] = Array.empty
  }
  private def pred(name: String, kids: Expression*): Predicate = new Predicate(name, kids.toArray)

  test("predicate translation: what the connector evaluates exactly, and what stays with Spark") {
    val eq = pred("=", col("id"), LiteralValue(5L, LongType))
    assert(PredicateTranslation(eq).map(_.toString).contains("id = 5"))
    val in = pred("IN", col("s"), LiteralValue(UTF8String.fromString("a"), StringType),
      LiteralValue(UTF8String.fromString("b"), StringType))
    assert(PredicateTranslation(in).isDefined)
    val and = pred("AND", pred(">=", col("d"), LiteralValue(19000, DateType)), pred("IS_NOT_NULL", col("x")))
    assert(PredicateTranslation(and).isDefined)
    // an expression on the column, not the column itself: Spark evaluates it
    val udfLike = pred("=", pred("UPPER", col("s")), LiteralValue(UTF8String.fromString("A"), StringType))
    assert(PredicateTranslation(udfLike).isEmpty)
    // a metadata column only where asked for
    val frag = pred("=", col("_fragid"), LiteralValue(3, IntegerType))
    assert(PredicateTranslation(frag).isEmpty)
    assert(PredicateTranslation.translate(frag, Set("_fragid")).isDefined)
  }
}
