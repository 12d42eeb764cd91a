package io.lancespark.format.v01

import io.lancespark.schema.LanceField

/** What to read for one (possibly nested) field, and how many values result:
  * built before any vector is allocated, so vectors get their exact sizes. */
private[v01] sealed trait Plan { def field: LanceField; def rows: Int }

private[v01] final case class NullPlan(field: LanceField, rows: Int) extends Plan

/** Plain values, `perRow` per row (a fixed-size list's items), `width` bytes each (0 = bits). */
private[v01] final case class PlainPlan(field: LanceField, rows: Int, segments: Vector[Segment],
                                        perRow: Int, width: Int) extends Plan

/** Var-binary rows with their file positions (`length + 1` per segment). */
private[v01] final case class VarBinaryPlan(field: LanceField, rows: Int, segments: Vector[Segment],
                                            positions: Vector[Array[Long]], bytes: Long) extends Plan

private[v01] final case class DictPlan(field: LanceField, rows: Int, values: DictionaryValues,
                                       keys: Array[Int]) extends Plan

private[v01] final case class StructPlan(field: LanceField, rows: Int, children: Vector[Plan]) extends Plan

/** List rows with their positions into the child page (`length + 1` per segment). */
private[v01] final case class ListPlan(field: LanceField, rows: Int, positions: Vector[Array[Long]],
                                       child: Plan) extends Plan
