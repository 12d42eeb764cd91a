package io.lancespark.spark.extensions

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference}
import org.apache.spark.sql.catalyst.plans.logical.{AppendData, DeleteFromTable, LogicalPlan, MergeIntoTable, OverwriteByExpression, OverwritePartitionsDynamic, UpdateTable, V2WriteCommand}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.trees.TreePattern.COMMAND
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation
import org.apache.spark.sql.types.{StructField, StructType}

import io.lancespark.spark.LanceTable

/** mergeSchema for catalog writes (`df.writeTo(t).option("mergeSchema",
  * "true").append()`, `saveAsTable` in append mode, `INSERT INTO` with the
  * session conf or table property) on every Spark line.
  *
  * Spark checks a catalog write's columns against the table before the
  * connector sees the write. A catalog table in a session with this rule
  * reports ACCEPT_ANY_SCHEMA (LanceTable.acceptsAnySchema), so that Spark
  * skips that check and leaves the plan to this rule, which runs in the same
  * analysis pass and gives the command a target Spark checks against
  * again (LanceTable.writeTarget):
  *  - a write (append, overwrite) with mergeSchema whose columns add columns
  *    or struct fields: a target with the evolved schema, so Spark's own
  *    output resolution (by name or by position, store-assignment casts,
  *    missing columns) runs against it; the write commits the new schema with
  *    its rows in one version;
  *  - any other write, UPDATE, MERGE or DELETE: the same table without
  *    ACCEPT_ANY_SCHEMA, so Spark resolves it exactly as it would have.
  *
  * By position (`INSERT INTO t SELECT ...`), only columns after the table's
  * own are new (named as the query names them); by name, any column the
  * table lacks, and new sub-fields of its struct columns. */
final case class CatalogWriteSchema(session: SparkSession) extends Rule[LogicalPlan] {

  override def apply(plan: LogicalPlan): LogicalPlan =
    if (!plan.containsPattern(COMMAND)) plan
    else plan.resolveOperatorsDown {
      case a: AppendData if accepting(a.table) => resolve(a, a.writeOptions, overwrite = false)
      case o: OverwriteByExpression if accepting(o.table) => resolve(o, o.writeOptions, overwrite = true)
      case o: OverwritePartitionsDynamic if accepting(o.table) => resolve(o, o.writeOptions, overwrite = true)
      case u: UpdateTable if hasAccepting(u.table) => u.copy(table = plain(u.table))
      case m: MergeIntoTable if hasAccepting(m.targetTable) => m.copy(targetTable = plain(m.targetTable))
      case d: DeleteFromTable if hasAccepting(d.table) => d.copy(table = plain(d.table))
    }

  private def lanceTable(p: LogicalPlan): Option[LanceTable] = p match {
    case r: DataSourceV2Relation => r.table match {
      case t: LanceTable if t.acceptsAnySchema => Some(t)
      case _ => None
    }
    case _ => None
  }

  private def accepting(p: LogicalPlan): Boolean = lanceTable(p).isDefined

  private def hasAccepting(p: LogicalPlan): Boolean = p.exists(accepting)

  private def plain(p: LogicalPlan): LogicalPlan = p.transformUp {
    case r: DataSourceV2Relation if accepting(r) => r.copy(table = r.table.asInstanceOf[LanceTable].writeTarget(None))
  }

  private def resolve(w: V2WriteCommand, options: Map[String, String], overwrite: Boolean): LogicalPlan = {
    val r = w.table.asInstanceOf[DataSourceV2Relation]
    val t = r.table.asInstanceOf[LanceTable]
    if (!w.query.resolved) w  // again once it is
    else t.evolvedBy(incoming(r.output, w.query.output, w.isByName), options, overwrite) match {
      case None => w.withNewTable(r.copy(table = t.writeTarget(None)))
      case Some(evolved) =>
        val target = t.writeTarget(Some(evolved))
        val kept = r.output.map(a => a.name -> a).toMap
        val output: Seq[AttributeReference] = target.schema.fields.toSeq.map { f =>
          kept.get(f.name).filter(_.dataType == f.dataType)
            .getOrElse(AttributeReference(f.name, f.dataType, f.nullable, f.metadata)())
        }
        w.withNewTable(r.copy(table = target, output = output))
    }
  }

  /** The write's columns as the table would receive them: by name, a query
    * column that names a table column (Spark's resolver: case-insensitive by
    * default) under the table's spelling, others as they are; by position,
    * the table's columns with their own types and the query's later columns. */
  private def incoming(table: Seq[Attribute], query: Seq[Attribute], byName: Boolean): StructType = {
    val resolver = session.sessionState.conf.resolver
    StructType(
      if (byName) query.map { a =>
        StructField(table.find(c => resolver(c.name, a.name)).fold(a.name)(_.name), a.dataType, a.nullable)
      }
      else table.map(c => StructField(c.name, c.dataType, c.nullable)) ++
        query.drop(table.size).map(a => StructField(a.name, a.dataType, a.nullable)))
  }
}

object CatalogWriteSchema {
  /** Whether the session installs the rule (LanceTableFunctionsExtension,
    * `spark.sql.extensions`): only then do catalog tables accept any schema. */
  def installed(session: SparkSession): Boolean =
    session.conf.getOption("spark.sql.extensions").exists(_.split(',').map(_.trim)
      .contains(classOf[LanceTableFunctionsExtension].getName))
}
