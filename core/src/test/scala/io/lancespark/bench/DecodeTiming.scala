package io.lancespark.bench

import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.RootAllocator

import io.lancespark.format.DataFileReader
import io.lancespark.format.input.LocalFileSource
import io.lancespark.format.v20.V20FileReader
import io.lancespark.format.v21.V21FileReader

/** Decode time of each column of Lance data files, without Spark: the files
  * are read whole in batches of `batch` rows, `reps` times, and the best time
  * per column is reported with its throughput (decoded Arrow bytes per second).
  *
  * Usage (sbt): connector/Test/runMain io.lancespark.bench.DecodeTiming DIR_OR_FILE [batch] [reps] [col,...] */
object DecodeTiming {
  def main(args: Array[String]): Unit = {
    val target = Path.of(args(0))
    val batch = if (args.length > 1) args(1).toInt else 8192
    val reps = if (args.length > 2) args(2).toInt else 5
    val only = if (args.length > 3) args(3).split(',').toSet else Set.empty[String]
    val files =
      if (Files.isDirectory(target)) Files.walk(target).iterator.asScala.filter(_.toString.endsWith(".lance")).toSeq.sorted
      else Seq(target)
    // LANCE_CPU_TIME=1: this thread's CPU time instead of wall time (steadier
    // when other processes share the cores; decoding runs on this thread)
    val threads = java.lang.management.ManagementFactory.getThreadMXBean
    val clock: () => Long =
      if (sys.env.get("LANCE_CPU_TIME").contains("1")) () => threads.getCurrentThreadCpuTime else () => System.nanoTime()
    val allocator = new RootAllocator()
    def open(p: Path): DataFileReader = {
      val src = new LocalFileSource(p)
      val probe = io.lancespark.format.file.Footer.read(src)
      if (V21FileReader.accepts(probe)) V21FileReader.openStandalone(src) else V20FileReader.openStandalone(src)
    }
    val first = open(files.head)
    val fields = first match {
      case r: V21FileReader => r.fileSchema.fields
      case r: V20FileReader => r.fileSchema.fields
    }
    first.close()
    fields.filter(f => only.isEmpty || only.contains(f.name)).foreach { f =>
      var best = Long.MaxValue
      var bytes = 0L
      (0 until reps).foreach { _ =>
        val t0 = clock()
        var b = 0L
        files.foreach { p =>
          val r = open(p)
          try {
            var from = 0L
            while (from < r.numRows) {
              val until = math.min(r.numRows, from + batch)
              r.read(Seq(f), from, until, allocator).foreach { v => b += v.getBufferSize; v.close() }
              from = until
            }
          } finally r.close()
        }
        best = math.min(best, clock() - t0)
        bytes = b
      }
      println(f"${f.name}%-12s ${best / 1e6}%9.1f ms  ${bytes / 1e6}%9.1f MB  ${bytes / (best / 1e9) / 1e9}%6.2f GB/s")
    }
    allocator.close()
  }
}
