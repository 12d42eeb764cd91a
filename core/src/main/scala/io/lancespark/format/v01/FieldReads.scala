package io.lancespark.format.v01

import io.lancespark.schema.LanceField

/** What to read for one (possibly nested) field, and how many values result:
  * built before any vector is allocated, so vectors get their exact sizes. */
private[v01] sealed trait FieldRead { def field: LanceField; def rows: Int }

private[v01] final case class NullRead(field: LanceField, rows: Int) extends FieldRead

/** Plain values, `perRow` per row (a fixed-size list's items), `width` bytes each (0 = bits). */
private[v01] final case class PlainRead(field: LanceField, rows: Int, segments: Vector[Segment],
                                        perRow: Int, width: Int) extends FieldRead

/** Var-binary rows with their file positions (`length + 1` per segment). */
private[v01] final case class VarBinaryRead(field: LanceField, rows: Int, segments: Vector[Segment],
                                            positions: Vector[Array[Long]], bytes: Long) extends FieldRead

private[v01] final case class DictRead(field: LanceField, rows: Int, values: LegacyDictionary,
                                       keys: Array[Int]) extends FieldRead

private[v01] final case class StructRead(field: LanceField, rows: Int, children: Vector[FieldRead]) extends FieldRead

/** List rows with their positions into the child page (`length + 1` per segment). */
private[v01] final case class ListRead(field: LanceField, rows: Int, positions: Vector[Array[Long]],
                                       child: FieldRead) extends FieldRead
