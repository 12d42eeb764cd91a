package io.lancespark.table.index

import io.lancespark.table.filter.Filter.Column
import io.lancespark.table.filter.{Filter, Lit}

/** `column` (a list column) holds at least one of `values`: Spark's
  * `array_contains(column, v)` (one value) or `arrays_overlap(column,
  * array(values...))`. TRUE exactly for the rows whose list holds one of the
  * non-null values; never for a NULL list (a NULL value never matches). */
final case class LabelTerm(column: Column, values: Vector[Lit]) {
  override def toString: String = s"${Filter.name(column)} HAS ANY (${values.mkString(", ")})"
}

/** An OR of label terms. The label clauses of a scan are ANDed with its
  * filter: a row may match only if each clause may. They only narrow the rows
  * read through a LABEL_LIST index (whoever sets them still evaluates the
  * predicate they came from on the rows read). */
final case class LabelClause(terms: Vector[LabelTerm]) {
  require(terms.nonEmpty, "a label clause of no term")
  def columns: Set[Column] = terms.map(_.column).toSet
  override def toString: String = terms.mkString(" OR ")
}
