package io.lancespark.table.filter

import io.lancespark.schema.{LanceField, LanceFormatException, LanceSchema}
import io.lancespark.format.v01.LegacyStatistics
import io.lancespark.format.file.FileContainer
import io.lancespark.format.stats.{PageStatistics, StatsStore}
import io.lancespark.table.filter.Filter.Column
import io.lancespark.table.model.{DataFileRef, FragmentInfo}
import io.lancespark.table.storage.DatasetStorage

/** Gathers the [[ColumnStats]] of a fragment's columns for [[StatsPruner]]. */
object FragmentStats {

  /** The field of a column path (struct children by name), if the schema has it. */
  def field(schema: LanceSchema, column: Column): Option[LanceField] =
    column.tail.foldLeft(schema.field(column.head)) { (f, n) => f.filter(_.isStruct).flatMap(_.children.find(_.name == n)) }

  /** The data file of `fragment` that the scan reads `field` from: the last one listing it (as FragmentScanner reads). */
  private def fileStoring(fragment: FragmentInfo, field: LanceField): Option[DataFileRef] =
    fragment.files.reverse.find(_.stores(field))

  /** For each column: Absent when no data file of the fragment stores it,
    * Pages when the file storing it (the last one listing its id, as
    * FragmentScanner reads) has statistics for it; left out (unknown)
    * otherwise. `statsOf` gives a data file's statistics (see [[read]]). */
  def columnStats(columns: Set[Column], schema: LanceSchema, fragment: FragmentInfo,
                  statsOf: DataFileRef => Option[PageStatistics]): Map[Column, ColumnStats] = {
    val cache = scala.collection.mutable.Map.empty[DataFileRef, Option[PageStatistics]]
    columns.iterator.flatMap { c =>
      field(schema, c).flatMap { f =>
        fileStoring(fragment, f) match {
          case None => Some(c -> ColumnStats.Absent)
          case Some(ref) =>
            cache.getOrElseUpdate(ref, statsOf(ref)).filter(_.forField(f.id).nonEmpty)
              .map(st => c -> ColumnStats.Pages(f.arrowType, st.forField(f.id), st.sketchOf(f.id)))
        }
      }
    }.toMap
  }

  /** The page statistics of a data file ([[StatisticsCache]]: read once per process). */
  def read(storage: DatasetStorage, ref: DataFileRef): Option[PageStatistics] =
    StatisticsCache.shared.getOrLoad(storage.uri, ref.relativePath, ref.sizeBytes)(readFile(storage, ref))

  /** Reads, several files at once, the statistics `columnStats` will ask of
    * `fragments` for `columns`, so that planning over many files waits on
    * storage once rather than once per file. */
  def prefetch(storage: DatasetStorage, columns: Set[Column], schema: LanceSchema,
               fragments: Seq[FragmentInfo]): Unit = {
    val fields = columns.toSeq.flatMap(field(schema, _))
    val refs = fragments.flatMap(frag => fields.flatMap(fileStoring(frag, _))).distinct
    StatisticsCache.inParallel(refs.map(ref => () => read(storage, ref)))
  }

  /** Reads the page statistics of a data file: lance_spark's for 2.0 files
    * (see docs/page-statistics.md) in 2.x files, pylance's in 0.1 files. */
  private def readFile(storage: DatasetStorage, ref: DataFileRef): Option[PageStatistics] = {
    val source = storage.openForMetadata(ref.relativePath, "data file", ref.sizeBytes)
    try {
      // a file the manifest calls legacy that is not (Lance 0.15-0.16's 2.0 files): no statistics
      if (ref.isLegacy) try LegacyStatistics.read(source) catch { case _: LanceFormatException => None }
      else if (ref.majorVersion == 2) StatsStore.read(FileContainer.open(source, _ => true, "a 2.x file"))
      else None
    } finally source.close()
  }
}
