package io.lancespark.format.v20

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.{BigIntVector, FieldVector, VarCharVector}
import org.apache.arrow.vector.complex.ListVector
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceSchema
import io.lancespark.format.file.ColumnMetadataReader
import io.lancespark.format.input.CoalescedReads

/** How a 2.0 file's pages are read: the reads of a batch are merged where the
  * pages lie next to each other, and the reads of the next batch run on the
  * read pool while the current batch decodes. Values are checked against
  * first principles (row i holds i and "row-i", every 7th string null). */
class ReadAheadSuite extends AnyFunSuite with BeforeAndAfterAll {

  private val allocator = new RootAllocator()
  private val tmp: Path = Files.createTempDirectory("readahead")
  private val rows = 20000

  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0, s"leaked ${allocator.getAllocatedMemory} bytes")
    finally {
      allocator.close()
      Files.walk(tmp).sorted(java.util.Comparator.reverseOrder[Path]()).forEach(p => Files.deleteIfExists(p))
    }
  }

  private val schema = LanceSchema.fromArrow(new Schema(Seq(
    new Field("id", FieldType.nullable(new ArrowType.Int(64, true)), null),
    new Field("s", FieldType.nullable(ArrowType.Utf8.INSTANCE), null)).asJava))

  private def str(i: Int): String = if (i % 7 == 0) null else s"row-$i"

  /** `rows` rows in pages of `pageRows` rows: both columns flush together, so
    * their pages alternate in the file. */
  private def write(name: String, pageRows: Int): Path = {
    val p = tmp.resolve(s"$name.lance")
    val w = new V20FileWriter(Files.newOutputStream(p), p.toString, schema, pageRows, V20FileWriter.DefaultMaxPageBytes,
      statistics = true, allocator)
    try {
      (0 until rows by 5000).foreach { a =>
        val ids = schema.fields(0).toArrow.createVector(allocator).asInstanceOf[BigIntVector]
        val ss = schema.fields(1).toArrow.createVector(allocator).asInstanceOf[VarCharVector]
        try {
          ids.allocateNew(5000); ss.allocateNew()
          (0 until 5000).foreach { k =>
            ids.set(k, (a + k).toLong)
            Option(str(a + k)).fold(ss.setNull(k))(v => ss.setSafe(k, v.getBytes(UTF_8)))
          }
          ids.setValueCount(5000); ss.setValueCount(5000)
          w.write(Seq(ids, ss))
        } finally { ids.close(); ss.close() }
      }
      w.finish()
    } finally w.close()
    p
  }

  private def checkRows(vs: Seq[FieldVector], from: Int, until: Int): Unit = {
    val ids = vs(0).asInstanceOf[BigIntVector]
    val ss = vs(1).asInstanceOf[VarCharVector]
    assert(ids.getValueCount == until - from && ss.getValueCount == until - from)
    (from until until).foreach { i =>
      assert(ids.get(i - from) == i.toLong, s"id of row $i")
      val got = if (ss.isNull(i - from)) null else new String(ss.get(i - from), UTF_8)
      assert(got == str(i), s"s of row $i")
    }
  }

  private def open(p: Path): (CountingSource, V20FileReader) = {
    val src = new CountingSource(p)
    (src, V20FileReader.openStandalone(src))
  }

  test("a batch over many adjacent pages is read in one request per run of adjacent pages") {
    val p = write("small-pages", pageRows = 100)
    val (src, r) = open(p)
    try {
      val fields = r.fileSchema.fields
      r.read(fields, 0, 1, allocator).foreach(_.close()) // metadata is read once, here
      val before = src.reads.size
      val vs = r.read(fields, 5000, 7000, allocator) // 20 pages of each column, 80 page buffers
      try checkRows(vs, 5000, 7000) finally vs.foreach(_.close())
      val batchReads = src.reads.drop(before)
      info(s"${batchReads.size} reads: $batchReads")
      // no next batch announced: the calling thread reads
      assert(src.readsWithThreads.drop(before).forall(_._3 == Thread.currentThread.getName))
      // The writer stores each column's pages of one 5,000-row write together: the batch's 20
      // id pages are one read, the 20 string pages (validity, offsets, bytes) another, and the
      // last string page's bytes, which come after the next pages' offsets, a third.
      assert(batchReads.size <= 3, batchReads)
      val pageBytes = r.fileSchema.fields.map { f =>
        val other = new io.lancespark.format.input.LocalFileSource(p)
        try new ColumnMetadataReader(other, r.footer).column(r.fieldColumns(f.id))
          .pagesOverlapping(5000, 7000).flatMap(_.buffers).map(_.size).sum
        finally other.close()
      }.sum
      assert(batchReads.map(_._2.toLong).sum <= pageBytes + batchReads.size * CoalescedReads.MaxGap,
        s"$pageBytes bytes in the pages")
    } finally r.close()
  }

  test("distant pages are read apart: the gap between two ranges read at once is bounded") {
    val p = write("large-pages", pageRows = 20000)
    val (src, r) = open(p)
    try {
      val id = r.fileSchema.fields.take(1)
      r.read(id, 0, 1, allocator).foreach(_.close())
      val before = src.reads.size
      val vs = r.read(id, 100, 200, allocator)
      try assert((0 until 100).forall(k => vs.head.asInstanceOf[BigIntVector].get(k) == 100L + k))
      finally vs.foreach(_.close())
      val batchReads = src.reads.drop(before)
      assert(batchReads == Seq((batchReads.head._1, 800)), s"only the 100 values: $batchReads")
      assert(CoalescedReads.MaxGap < Files.size(p))
    } finally r.close()
  }

  /** Reads the whole file in 1,500-row batches, each announcing the next, checking each batch
    * with `check`; returns how many reads after the first batch the reading thread made. */
  private def readAnnounced(src: CountingSource, r: V20FileReader)(check: (Seq[FieldVector], Int, Int) => Unit): Int = {
    val fields = r.fileSchema.fields
    val batch = 1500
    val starts = (0 until rows by batch).toVector
    var onTaskThread = 0
    starts.zipWithIndex.foreach { case (a, k) =>
      val until = math.min(rows, a + batch)
      val next = starts.lift(k + 1).map(b => (b.toLong, math.min(rows, b + batch).toLong))
      val before = src.readsWithThreads.size
      val vs = r.read(fields, a, until, allocator, next)
      try check(vs, a, until) finally vs.foreach(_.close())
      if (k > 0) onTaskThread += src.readsWithThreads.drop(before).count(_._3 == Thread.currentThread.getName)
      // the consumer's work on the batch (Spark's, in a scan): time for a pool thread to
      // start the next batch's reads; a reader that needs bytes no pool thread has started
      // reading reads them itself
      Thread.sleep(20)
    }
    onTaskThread
  }

  test("the next batch is read on the read pool while the current one decodes; values are exact") {
    val p = write("ahead", pageRows = 1000)
    val (src, r) = open(p)
    try {
      val started = System.nanoTime()
      val onTaskThread = readAnnounced(src, r)(checkRows)
      val elapsed = System.nanoTime() - started
      val all = src.readsWithThreads
      info(s"${all.size} reads, ${all.count(_._3.startsWith("lance-read-"))} on the read pool")
      // after the first batch every page byte (offsets, validity, values and string bytes)
      // was read ahead, by the pool
      assert(onTaskThread == 0, all)
      info(s"read ${src.bytesRead} bytes of ${Files.size(p)}")
      // bytes are read again only where a gap of at most MaxGap between two ranges was bridged
      assert(src.bytesRead <= Files.size(p) + all.size * CoalescedReads.MaxGap, src.reads)
      // the time the task waited for the pool is part of the time it spent reading, never more
      // (nor negative: a wait counted from a stale start, or twice, shows up here)
      assert(r.storageWaitNanos >= 0 && r.storageWaitNanos <= elapsed, (r.storageWaitNanos, elapsed))
    } finally r.close()
  }

  test("a list column's items are planned from its offsets and read ahead on the read pool too") {
    val listSchema = LanceSchema.fromArrow(new Schema(Seq(
      new Field("tags", FieldType.nullable(ArrowType.List.INSTANCE),
        java.util.Arrays.asList(new Field("item", FieldType.nullable(new ArrowType.Int(64, true)), null)))).asJava))
    def tags(i: Int): Seq[Long] = (0 until i % 5).map(j => i * 10L + j) // row i: i % 5 items
    val p = tmp.resolve("lists.lance")
    val w = new V20FileWriter(Files.newOutputStream(p), p.toString, listSchema, 1000, V20FileWriter.DefaultMaxPageBytes,
      statistics = true, allocator)
    try {
      val lv = listSchema.fields.head.toArrow.createVector(allocator).asInstanceOf[ListVector]
      try {
        val lw = lv.getWriter
        lw.allocate()
        (0 until rows).foreach { i =>
          lw.setPosition(i); lw.startList(); tags(i).foreach(v => lw.bigInt().writeBigInt(v)); lw.endList()
        }
        lw.setValueCount(rows)
        w.write(Seq(lv))
      } finally lv.close()
      w.finish()
    } finally w.close()

    val (src, r) = open(p)
    try {
      val onTaskThread = readAnnounced(src, r) { (vs, a, until) =>
        val lv = vs.head.asInstanceOf[ListVector]
        (a until until).foreach { i =>
          val got = lv.getObject(i - a).asScala.map(_.asInstanceOf[Long]).toSeq
          assert(got == tags(i), s"row $i")
        }
      }
      // the offsets of each batch, then the item pages they point into: all read by the pool
      assert(onTaskThread == 0, src.readsWithThreads)
    } finally r.close()
  }

  test("reading out of the announced order, or a different projection, still gives the right rows") {
    val p = write("jumps", pageRows = 700)
    val (_, r) = open(p)
    try {
      val fields = r.fileSchema.fields
      val steps = Seq((0, 1000, Some((1000L, 2000L))), (5000, 5100, Some((5100L, 6000L))), (5100, 6000, None),
        (19990, 20000, Some((0L, 10L))), (0, 10, Some((10L, 20L))))
      steps.foreach { case (a, b, next) =>
        val vs = r.read(fields, a, b, allocator, next)
        try checkRows(vs, a, b) finally vs.foreach(_.close())
      }
      // announced for both columns, asked for one
      val both = r.read(fields, 100, 200, allocator, Some((200L, 300L)))
      both.foreach(_.close())
      val one = r.read(fields.take(1), 200, 300, allocator, Some((300L, 400L)))
      try assert((0 until 100).forall(k => one.head.asInstanceOf[BigIntVector].get(k) == 200L + k))
      finally one.foreach(_.close())
    } finally r.close() // with a read still announced: close waits for it, then closes the file
  }
}
