package io.lancespark.spark.read

import org.apache.spark.sql.connector.expressions.aggregate.{Aggregation, CountStar}
import org.apache.spark.sql.connector.read.{Scan, ScanBuilder, SupportsPushDownAggregates, SupportsPushDownRequiredColumns}
import org.apache.spark.sql.types.{ArrayType, DataType, StructType}

import io.lancespark.format.{LanceField, LanceFormatException}
import io.lancespark.spark.{LanceOptions, MetadataColumns}
import io.lancespark.table.Snapshot

/** Column pruning (nested too) and COUNT(*) answered from the manifest. */
final class LanceScanBuilder(snapshot: Snapshot, tableSchema: StructType, options: LanceOptions)
    extends ScanBuilder with SupportsPushDownRequiredColumns with SupportsPushDownAggregates {

  private var required: StructType = tableSchema
  private var countOnly: Option[Int] = None

  override def pruneColumns(requiredSchema: StructType): Unit = required = requiredSchema

  override def pushAggregation(aggregation: Aggregation): Boolean = {
    val onlyCounts = aggregation.groupByExpressions().isEmpty &&
      aggregation.aggregateExpressions().forall(_.isInstanceOf[CountStar])
    if (onlyCounts) countOnly = Some(aggregation.aggregateExpressions().length)
    onlyCounts
  }

  override def supportCompletePushDown(aggregation: Aggregation): Boolean = true

  override def build(): Scan = countOnly match {
    case Some(n) => new LanceCountScan(snapshot.countRows, n)
    case None =>
      val (meta, data) = required.fields.partition(f => MetadataColumns.names.contains(f.name))
      val fields = data.toSeq.map { f =>
        val lf = snapshot.schema.field(f.name).getOrElse(
          throw new LanceFormatException(s"${snapshot.storage.uri}: no column '${f.name}'"))
        LanceScanBuilder.prune(lf, f.dataType)
      }
      new LanceScan(snapshot, StructType(data), fields, meta.map(_.name).toSeq, required, options)
  }
}

object LanceScanBuilder {
  /** Keeps the struct children (at any depth, through lists) that `wanted` names. */
  def prune(f: LanceField, wanted: DataType): LanceField = (wanted, f) match {
    case (st: StructType, _) if f.isStruct =>
      f.withChildren(st.fields.toVector.flatMap { sf =>
        f.children.find(_.name == sf.name).map(prune(_, sf.dataType))
      })
    case (at: ArrayType, _) if f.isList && f.children.nonEmpty =>
      f.withChildren(Vector(prune(f.children.head, at.elementType)))
    case _ => f
  }
}
