package io.lancespark.table.plan

import io.lancespark.format.file.{ColumnMetadataReader, Footer}
import io.lancespark.schema.{LanceField, LanceSchema}
import io.lancespark.table.model.{DataFileRef, FragmentInfo}
import io.lancespark.table.storage.DatasetStorage

/** The bytes each top-level field takes in a dataset's data files, from their
  * column metadata (never the data): the share of a fragment's bytes a scan
  * of some columns returns, as the files store them. A projection of a
  * Parquet relation is sized by Spark's per-type defaults instead, which
  * misjudge Lance's files: pylance's are not compressed and store a decimal in
  * 16 bytes, so a few integer columns of a decimal-heavy table would weigh
  * twice what they take.
  *
  * A data file never changes once published, so each file's sizes are read
  * once per process (keyed by dataset root, path and size; at most
  * `MaxFiles` kept, the least recently used dropped first). Only a sample of
  * a scan's fragments is read: their shares stand for the rest. */
object ColumnSizes {

  /** Files whose column sizes are kept at most. */
  val MaxFiles: Int = 20000

  /** Fragments a share is taken from. */
  val SampleFragments: Int = 3

  private final case class Key(root: String, path: String, size: Long)

  private val kept = new java.util.LinkedHashMap[Key, Map[Int, Long]](256, 0.75f, true) {
    override def removeEldestEntry(e: java.util.Map.Entry[Key, Map[Int, Long]]): Boolean = size() > MaxFiles
  }

  /** Of the bytes the sampled fragments' data files store for the fields of
    * `schema`, the share `columns` (top-level names) take; None where some
    * sampled file has no column sizes (0.1 files) or they cannot be read: the
    * caller then estimates as it would without them. */
  def share(storage: DatasetStorage, schema: LanceSchema, fragments: Seq[FragmentInfo],
            columns: Set[String]): Option[Double] = {
    val sample = fragments.take(SampleFragments)
    if (sample.isEmpty) return None
    val refs = sample.flatMap(_.files).distinct
    val perFile = io.lancespark.table.filter.StatisticsCache.inParallel(refs.map(r => () => fieldBytes(storage, r)))
    if (perFile.exists(_.isEmpty)) return None
    val byField = perFile.flatten.flatten.groupMapReduce(_._1)(_._2)(_ + _)
    def bytesOf(f: LanceField): Long = byField.getOrElse(f.id, 0L) + f.children.map(bytesOf).sum
    val all = schema.fields.map(bytesOf).sum
    if (all <= 0) None
    else Some(schema.fields.filter(f => columns.contains(f.name)).map(bytesOf).sum.toDouble / all)
  }

  /** Field id -> bytes of a 2.x data file's columns; None for other files or
    * where the file's metadata cannot be read (an estimate never fails a query). */
  private def fieldBytes(storage: DatasetStorage, ref: DataFileRef): Option[Map[Int, Long]] =
    if (ref.isLegacy || ref.majorVersion == 0 && ref.minorVersion != 3) None
    else {
      val key = Key(storage.uri, ref.relativePath, ref.sizeBytes)
      Option(kept.synchronized(kept.get(key))).orElse {
        val read =
          try {
            val source = storage.openForMetadata(ref.relativePath, "data file", ref.sizeBytes)
            try Some(ColumnMetadataReader.columnBytes(source, Footer.read(source)))
            finally source.close()
          } catch { case scala.util.control.NonFatal(_) => None }
        read.map { bytes =>
          val columns = if (ref.columnIndices.nonEmpty) ref.fieldIds.zip(ref.columnIndices) else ref.fieldIds.zipWithIndex
          val sizes = columns.collect { case (f, c) if f >= 0 && c >= 0 && c < bytes.size => f -> bytes(c) }
            .groupMapReduce(_._1)(_._2)(_ + _)
          kept.synchronized(kept.put(key, sizes))
          sizes
        }
      }
    }
}
