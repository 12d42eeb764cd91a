package io.lancespark.spark.shim

import java.util

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.catalog.{Identifier, ProcedureCatalog}
import org.apache.spark.sql.connector.catalog.procedures.{BoundProcedure, ProcedureParameter, UnboundProcedure}
import org.apache.spark.sql.connector.read.Scan
import org.apache.spark.sql.types.StructType

import io.lancespark.spark.procedures.{LanceProcedure, ProcedureResult}

/** Spark 4's native CALL: the catalog's procedures as Spark procedures. */
trait ProcedureCatalogShim extends ProcedureCatalog {
  /** The procedure `ident` names (an error listing the procedures if none). */
  def procedure(ident: Identifier): LanceProcedure
  def procedureIds(namespace: Array[String]): Array[Identifier]

  override def loadProcedure(ident: Identifier): UnboundProcedure = new SparkProcedure(procedure(ident))

  // no `override`: 4.0's ProcedureCatalog has no listProcedures, 4.1+ has it abstract
  def listProcedures(namespace: Array[String]): Array[Identifier] = procedureIds(namespace)
}

/** A Lance procedure as Spark 4's UnboundProcedure and BoundProcedure. */
final class SparkProcedure(p: LanceProcedure) extends UnboundProcedure with BoundProcedure {
  override def name(): String = p.name()
  override def description(): String = p.description()
  override def bind(inputType: StructType): BoundProcedure = this
  override def isDeterministic: Boolean = false
  override def parameters(): Array[ProcedureParameter] = p.params.map { q =>
    val b = ProcedureParameter.in(q.name, q.dataType).comment(q.comment)
    q.default.fold(b)(d => b.defaultValue(d)).build()
  }.toArray

  override def call(input: InternalRow): util.Iterator[Scan] =
    util.Collections.singleton[Scan](ProcedureResult(p.outputType, Array(p.invoke(input)))).iterator()
}
