package io.lancespark.spark

import java.util

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.catalog.{Table, TableProvider}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.sources.DataSourceRegister
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

import io.lancespark.table.{Dataset, Snapshot}

/** `spark.read.format("lance")`: the entry point Spark finds through
  * META-INF/services and the short name "lance". */
final class LanceDataSource extends TableProvider with DataSourceRegister {

  override def shortName(): String = "lance"

  override def inferSchema(options: CaseInsensitiveStringMap): StructType =
    TypeMapping.forActiveSession().toSpark(LanceDataSource.snapshot(LanceOptions(options)).schema)

  override def getTable(
      schema: StructType,
      partitioning: Array[Transform],
      properties: util.Map[String, String]): Table = {
    val opts = LanceOptions(new CaseInsensitiveStringMap(properties))
    new LanceTable(LanceDataSource.snapshot(opts), opts)
  }
}

object LanceDataSource {
  def snapshot(opts: LanceOptions): Snapshot = {
    val conf = SparkSession.active.sessionState.newHadoopConf()
    Dataset.open(opts.path, opts.version, conf)
  }
}
