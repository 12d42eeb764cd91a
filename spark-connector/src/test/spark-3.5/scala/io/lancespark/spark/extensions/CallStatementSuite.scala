package io.lancespark.spark.extensions

import org.scalatest.funsuite.AnyFunSuite

/** The CALL text the Spark 3.5 extension takes apart (before Spark's own
  * parsers see the name and the argument values). */
class CallStatementSuite extends AnyFunSuite {

  test("not a CALL: None (Spark's parser gets it)") {
    assert(CallStatement.parse("SELECT 1").isEmpty)
    assert(CallStatement.parse("CALLX lance.system.compact()").isEmpty)
    assert(CallStatement.parse("select 'CALL lance.system.compact()'").isEmpty)
  }

  test("named arguments, any case, comments and a trailing semicolon") {
    val c = CallStatement.parse(
      "-- compact it\n/* now */ call lance.system.compact(TABLE => 'db.t', target_rows_per_fragment=>1000) ;").get
    assert(c.name == "lance.system.compact")
    assert(c.positional.isEmpty)
    assert(c.named == Vector("table" -> "'db.t'", "target_rows_per_fragment" -> "1000"))
  }

  test("commas and parentheses inside quotes and in values do not split arguments") {
    val c = CallStatement.parse(
      "CALL `lance`.system.create_tag('`/tmp/a,b (1).lance`', \"t,(\", version => (1 + 2))").get
    assert(c.name == "`lance`.system.create_tag")
    assert(c.positional == Vector("'`/tmp/a,b (1).lance`'", "\"t,(\""))
    assert(c.named == Vector("version" -> "(1 + 2)"))
  }

  test("a quote escaped with a backslash stays inside its string") {
    val c = CallStatement.parse("""CALL lance.system.create_tag('db.t', 'it\'s, here')""").get
    assert(c.positional == Vector("'db.t'", """'it\'s, here'"""))
  }

  test("no arguments") {
    val c = CallStatement.parse("CALL lance.system.vacuum()").get
    assert(c.positional.isEmpty && c.named.isEmpty)
  }

  test("malformed CALLs are errors saying what is wrong") {
    assert(intercept[IllegalArgumentException](CallStatement.parse("CALL lance.system.compact"))
      .getMessage.contains("without '('"))
    assert(intercept[IllegalArgumentException](CallStatement.parse("CALL lance.system.compact('t'"))
      .getMessage.contains("without ')'"))
    assert(intercept[IllegalArgumentException](CallStatement.parse("CALL lance.system.compact('t') extra"))
      .getMessage.contains("extra"))
    assert(intercept[IllegalArgumentException](CallStatement.parse("CALL lance.system.create_tag(table => 't', 'x')"))
      .getMessage.contains("positional arguments must come before named ones"))
  }

  test("a map of expressions (commas, parentheses and lambdas inside) is one argument") {
    val c = CallStatement.parse("CALL lance.system.add_columns(table => 'db.t', expressions => " +
      "map('c2', 'a * 2', 'norm', 'sqrt(aggregate(emb, 0D, (s, x) -> s + x * x))'))").get
    assert(c.named == Vector("table" -> "'db.t'",
      "expressions" -> "map('c2', 'a * 2', 'norm', 'sqrt(aggregate(emb, 0D, (s, x) -> s + x * x))')"))
  }
}
