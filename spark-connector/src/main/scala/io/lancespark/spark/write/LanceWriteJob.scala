package io.lancespark.spark.write

import scala.collection.mutable

import org.apache.spark.TaskContext
import org.apache.spark.sql.{Column, DataFrame, SaveMode}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Cast
import org.apache.spark.sql.functions.{col, expr, lit, struct, transform, when}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{ArrayType, BinaryType, DataType, MapType, StructType}

import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.spark.{SerializableHadoopConf, TypeMapping}
import io.lancespark.spark.shim.TimeTypes
import io.lancespark.spark.options.{OptionSource, WriteConf, WriteOptions}
import io.lancespark.table.commit.{AppendFragments, AppendWithSchema, CommitSettings, Commits, OverwriteDataset}
import io.lancespark.table.evolution.{ColumnAddition, SchemaMerge}
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.{Dataset, DatasetStorage}
import io.lancespark.table.model.WrittenFragment
import io.lancespark.table.scan.BlobColumns
import io.lancespark.table.storage.Snapshot

/** A DataFrame write: executors write data files, the driver commits one
  * version with a transaction file (see Committer). A failed or cancelled job
  * commits nothing and deletes the files its tasks wrote. */
object LanceWriteJob {
  private val log = org.slf4j.LoggerFactory.getLogger(getClass)

  /** `parameters`: the DataFrameWriter's options (with the path). */
  def run(data: DataFrame, parameters: Map[String, String], mode: SaveMode): Option[Snapshot] = {
    val spark = data.sparkSession
    val conf = spark.sessionState.newHadoopConf()
    val path = WriteOptions.path(parameters)
    val storage = DatasetStorage(path, conf)
    storage.requireSafeCommit()  // before any data is written
    val existing: Option[Snapshot] =
      if (Dataset.isDataset(path, conf)) Some(Dataset.open(storage, None)) else None
    val opts = WriteOptions.conf(parameters, OptionSource.activeSession, existing.map(_.config).getOrElse(Map.empty))

    (mode, existing) match {
      case (SaveMode.ErrorIfExists, Some(s)) =>
        throw new IllegalArgumentException(
          s"${storage.uri}: a Lance dataset already exists here (version ${s.version}); " +
            "use mode(\"append\") or mode(\"overwrite\")")
      case (SaveMode.Ignore, Some(_)) => None
      case (SaveMode.Append, Some(s)) =>
        val version = opts.versionFor(existing, overwrite = false)
        val (input, schema, added) = alignForAppend(data, s, opts, version)
        val files = writeFiles(input, schema, version, storage, opts, new SerializableHadoopConf(conf))
        val op = if (added.isEmpty) AppendFragments(files) else AppendWithSchema(files, schema)
        Some(Commits.commitOrDiscard(storage, Some(s.version), op, settings(opts)))
      case (_, base) =>
        val version = opts.versionFor(base, overwrite = true)
        val schema = LanceSchema.fromArrow(SparkToArrow.schema(data.schema, opts.vectorColumns, version, opts.blobColumns))
        base.filter(s => DataFileVersion.ofDataset(s.fileVersion).isEmpty && opts.fileVersion.isEmpty).foreach { s =>
          log.warn(s"${storage.uri}: overwriting a dataset of file version ${s.fileVersion} (not written by this " +
            s"connector) at $version")
        }
        val files = writeFiles(data, schema, version, storage, opts, new SerializableHadoopConf(conf))
        val op = OverwriteDataset(files, schema, version)
        Some(Commits.commitOrDiscard(storage, base.map(_.version), op, settings(opts)))
    }
  }

  /** Reorders the DataFrame's columns to the dataset's, checking they match.
    * With mergeSchema, the DataFrame's columns the dataset does not have are
    * added after its own, and a struct's new sub-fields after the struct's own
    * (also in a list's struct items), with ids above every existing one: the
    * schema the files are written with and the paths added. */
  private def alignForAppend(data: DataFrame, s: Snapshot, opts: WriteConf,
      version: DataFileVersion): (DataFrame, LanceSchema, Seq[String]) = {
    val mapping = TypeMapping.forActiveSession()
    val have = data.schema.fieldNames.toSet
    val want = s.schema.fields.map(_.name).toSet
    val extra = data.schema.fieldNames.toVector.filterNot(want.contains)
    val (merged, added) = evolve(s, data.schema, opts, version)
    if (want.exists(n => !have.contains(n)) || (added.nonEmpty && !opts.mergeSchema)) {
      val nested = added.filter(_.exists(c => c == '.' || c == '['))
      val hint = if (added.nonEmpty && !opts.mergeSchema)
        s"; to add the new ${if (nested.nonEmpty) "field" else "column"}${if (added.size == 1) "" else "s"} " +
          s"${added.mkString(", ")} to the table's schema, " +
          "set option(\"mergeSchema\", \"true\") (or the session conf spark.lance.write.mergeSchema=true)"
      else ""
      throw new LanceFormatException(
        s"${s.storage.uri}: cannot append: the DataFrame's columns differ from the dataset's (version ${s.version}); " +
          s"missing ${(want -- have).toSeq.sorted.mkString("[", ", ", "]")}, " +
          s"unexpected ${(extra ++ nested).sorted.mkString("[", ", ", "]")}" + hint)
    }
    checkAppendBlobColumns(s, data.schema, opts.blobColumns.filterNot(extra.contains), version)
    val target: StructType = mapping.toSpark(merged)
    val policy = data.sparkSession.sessionState.conf.storeAssignmentPolicy
    val columns: Seq[Column] = target.fields.toIndexedSeq.map { f =>
      val incoming = data.schema(f.name).dataType
      if (sameShape(incoming, f.dataType)) col(f.name)
      // BINARY into a 2.2 blob column: the values' bytes (the task's writer makes them blob values)
      else if (incoming == BinaryType && merged.field(f.name).exists(BlobColumns.isBlobV2)) col(f.name)
      else if (want.contains(f.name) && (changedShape(s, merged, f.name) || !sameFieldOrder(incoming, f.dataType)))
        reshape(s, f.name, col(f.name), incoming, f.dataType, policy).as(f.name)
      else storeAssign(s, f.name, incoming, f.dataType, policy)
    }
    (data.select(columns: _*), merged, added)
  }

  /** The dataset's schema evolved by `incoming` (columns matched by name):
    * its columns the dataset lacks added after the dataset's own, and new
    * sub-fields of its structs (also a list's struct items) after the struct's
    * own, with ids above every existing one; and the dotted paths added. Types
    * of columns both have are not compared here. */
  private[spark] def evolve(s: Snapshot, incoming: StructType, opts: WriteConf,
      version: DataFileVersion): (LanceSchema, Seq[String]) = {
    val want = s.schema.fields.map(_.name).toSet
    val extra = incoming.fieldNames.toVector.filterNot(want.contains)
    // the fields that may evolve: new columns, and structs (or lists of them) the table has
    val evolving = StructType(incoming.fields.filter(f => !want.contains(f.name) || hasStruct(f.dataType))
      .map(f => f.copy(nullable = true)))
    val merged = if (evolving.isEmpty) s.schema else SchemaMerge.merge(s.schema,
      SparkToArrow.schema(evolving, opts.vectorColumns.filter(v => extra.contains(v._1)), version,
        opts.blobColumns.filter(extra.contains)),
      ColumnAddition.maxFieldId(s) + 1)
    (merged, SchemaMerge.addedPaths(s.schema, merged))
  }

  private def hasStruct(t: DataType): Boolean = t match {
    case _: StructType => true
    case ArrayType(e, _) => hasStruct(e)
    case _ => false
  }

  /** Whether structs (also in arrays) name the same sub-fields in the same
    * order: else they are rebuilt by name (a cast of a struct goes by position). */
  private def sameFieldOrder(a: DataType, b: DataType): Boolean = (a, b) match {
    case (x: StructType, y: StructType) =>
      x.fieldNames.sameElements(y.fieldNames) && x.fields.zip(y.fields).forall(p => sameFieldOrder(p._1.dataType, p._2.dataType))
    case (ArrayType(x, _), ArrayType(y, _)) => sameFieldOrder(x, y)
    case _ => true
  }

  private def changedShape(s: Snapshot, merged: LanceSchema, name: String): Boolean =
    s.schema.field(name) != merged.field(name)

  /** A struct column (or list of structs) given sub-fields the table's lacks:
    * rebuilt by name in the merged type's order (Spark casts structs by
    * position); leaves of another type are converted as storeAssign does. */
  private def reshape(s: Snapshot, path: String, c: Column, from: DataType, to: DataType,
      policy: SQLConf.StoreAssignmentPolicy.Value): Column = (from, to) match {
    case (fs: StructType, ts: StructType) =>
      val missing = ts.fieldNames.filterNot(fs.fieldNames.contains)
      if (missing.nonEmpty)
        throw new LanceFormatException(s"${s.storage.uri}: cannot append: struct column '$path' lacks the " +
          s"dataset's field${if (missing.length == 1) "" else "s"} ${missing.mkString(", ")}")
      val kids = ts.fields.toSeq.map(f => reshape(s, s"$path.${f.name}", c.getField(f.name), fs(f.name).dataType,
        f.dataType, policy).as(f.name))
      when(c.isNull, lit(null).cast(ts)).otherwise(struct(kids: _*))
    case (ArrayType(fe, _), ArrayType(te, _)) =>
      transform(c, (x: Column) => reshape(s, s"$path[]", x, fe, te, policy))
    case _ if sameShape(from, to) => c
    case _ =>
      val ok = policy match {
        case SQLConf.StoreAssignmentPolicy.STRICT | SQLConf.StoreAssignmentPolicy.ANSI => Cast.canUpCast(from, to)
        case _ => Cast.canCast(from, to)
      }
      if (!ok)
        throw new LanceFormatException(s"${s.storage.uri}: cannot append: field '$path' is ${from.simpleString} " +
          s"but the dataset stores ${to.simpleString}")
      c.cast(to)
  }

  /** `blobColumns` on an append names columns the dataset already stores as
    * blobs (the layout is the dataset's); naming another column is refused. */
  private def checkAppendBlobColumns(s: Snapshot, incoming: StructType, blobs: Set[String],
      version: DataFileVersion): Unit = {
    SparkToArrow.checkBlobColumns(incoming, blobs, version)
    blobs.toSeq.sorted.foreach { name =>
      val stored = s.schema.fields.find(_.name == name)
      if (!stored.exists(f => BlobColumns.isBlob(f)))
        throw new IllegalArgumentException(
          s"${s.storage.uri}: option blobColumns names column '$name', which the dataset (version ${s.version}) " +
            "stores as plain binary; a column's layout is fixed when it is created (overwrite the dataset to change it)")
    }
  }

  /** A DataFrame column of another type than the dataset's, converted as SQL
    * `INSERT` converts it (`spark.sql.storeAssignmentPolicy`): ANSI (the
    * default) allows the numeric, string and datetime conversions Spark's
    * ANSI store assignment allows, failing the write on a value that does not
    * fit; STRICT only safe widenings (up-casts); LEGACY any cast. A refused
    * conversion names the column, both types and the policy. */
  private def storeAssign(s: Snapshot, name: String, from: DataType, to: DataType,
      policy: SQLConf.StoreAssignmentPolicy.Value): Column = {
    import SQLConf.StoreAssignmentPolicy._
    val allowed = policy match {
      case ANSI => Cast.canANSIStoreAssign(from, to)
      case STRICT => Cast.canUpCast(from, to)
      case _ => Cast.canCast(from, to)
    }
    if (!allowed)
      throw new LanceFormatException(
        s"${s.storage.uri}: cannot append: column '$name' is ${from.simpleString} but the dataset stores " +
          s"${to.simpleString}, and spark.sql.storeAssignmentPolicy=$policy does not convert ${from.simpleString} " +
          s"to ${to.simpleString}" + (if (policy == STRICT) " (only safe widenings; ANSI casts numbers)" else ""))
    val quotedName = "`" + name.replace("`", "``") + "`"
    if (policy == ANSI) {
      // an ANSI cast whatever spark.sql.ansi.enabled says: a value that does not fit fails the write
      val msg = s"${s.storage.uri}: cannot append: a value of column '$name' (${from.simpleString}) does not fit " +
        s"the dataset's ${to.simpleString} (spark.sql.storeAssignmentPolicy=ANSI)"
      val backslash = "\\"
      val literal = "'" + msg.replace(backslash, backslash + backslash).replace("'", backslash + "'") + "'"
      val t = to.sql
      expr(s"CASE WHEN $quotedName IS NULL THEN CAST(NULL AS $t) ELSE coalesce(try_cast($quotedName AS $t), " +
        s"CAST(raise_error($literal) AS $t)) END").as(name)
    } else col(name).cast(to).as(name)
  }

  /** Whether `incoming` data can be stored in a column of type `stored`: the
    * same type but for nullability, or a TIME of no more fractional digits than
    * the column's (stored to the nanosecond, TIME reads back as TIME(6)). */
  private[spark] def sameShape(incoming: DataType, stored: DataType): Boolean =
    (TimeTypes.precision(incoming), TimeTypes.precision(stored)) match {
      case (Some(p), Some(q)) => p <= q
      case _ => withoutNullability(incoming) == withoutNullability(stored)
    }

  private def withoutNullability(t: DataType): DataType = t match {
    case ArrayType(e, _) => ArrayType(withoutNullability(e), containsNull = true)
    case MapType(k, v, _) => MapType(withoutNullability(k), withoutNullability(v), valueContainsNull = true)
    case StructType(fs) => StructType(fs.map(f => f.copy(dataType = withoutNullability(f.dataType), nullable = true,
      metadata = org.apache.spark.sql.types.Metadata.empty)))
    case other => other
  }

  private def writeFiles(data: DataFrame, schema: LanceSchema, version: DataFileVersion, storage: DatasetStorage,
      opts: WriteConf, conf: SerializableHadoopConf): Seq[WrittenFragment] = {
    val task = WriteTask(storage.uri, conf, schema, data.schema, opts.maxRowsPerFile, opts.maxRowsPerPage, version,
      opts.disabledCodecs)
    val rdd = data.queryExecution.toRdd
    val results = mutable.Map.empty[Int, Seq[WrittenFragment]]
    val sc = data.sparkSession.sparkContext
    try {
      sc.runJob(rdd, (ctx: TaskContext, rows: Iterator[InternalRow]) => writePartition(task, rows),
        0 until rdd.getNumPartitions, (partition: Int, files: Seq[WrittenFragment]) => results(partition) = files)
    } catch {
      case e: Throwable =>
        Commits.discardFiles(storage, results.values.flatten.toSeq)
        Commits.sweep(storage, task.filePrefix)
        Thread.sleep(1000)  // tasks being killed may still be closing files: sweep once more
        Commits.sweep(storage, task.filePrefix)
        throw e
    }
    (0 until rdd.getNumPartitions).flatMap(p => results.getOrElse(p, Nil))
  }

  private def writePartition(task: WriteTask, rows: Iterator[InternalRow]): Seq[WrittenFragment] = {
    val writer = new LanceDataWriter(task)
    try {
      rows.foreach(writer.write)
      writer.commit()
    } catch {
      case e: Throwable =>
        writer.abort()
        throw e
    } finally writer.close()
  }

  private def settings(opts: WriteConf): CommitSettings =
    CommitSettings(stableRowIds = opts.enableStableRowIds, v2ManifestNaming = opts.v2ManifestPaths)
}
