package io.lancespark.table
import io.lancespark.format.{DataFileReader, LanceSchema}
object DataFiles { def open(storage: DatasetStorage, schema: LanceSchema, ref: DataFileRef): DataFileReader = ??? }
