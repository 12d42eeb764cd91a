package io.lancespark.table.plan

import java.nio.file.Files

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.BigIntVector
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}
import org.apache.hadoop.conf.Configuration
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceSchema
import io.lancespark.table.commit.{AppendFragments, CommitSettings, Committer, OverwriteDataset}
import io.lancespark.table.filter.{CompareOp, Filter, Lit}
import io.lancespark.table.model.{DataFileVersion, WrittenFragment}
import io.lancespark.table.storage.{Dataset, DatasetStorage, FragmentWriter, Snapshot}

/** [[ScanPlanner.keyShare]] on tables written with pages of 500 rows: `key`
  * in order, `status` its parity (no relation to its range), `batch` its
  * thousand. Expected shares from the page bounds worked out by hand. */
class KeyShareSuite extends AnyFunSuite with BeforeAndAfterAll {
  private val allocator: BufferAllocator = new RootAllocator(Long.MaxValue)
  override def afterAll(): Unit = allocator.close()

  private val columns = Seq("key", "status", "batch")
  private val schema: LanceSchema = LanceSchema.fromArrow(new Schema(columns.map(n =>
    new Field(n, FieldType.nullable(new ArrowType.Int(64, true)), null)).asJava))

  private def write(s: DatasetStorage, keys: Seq[Long]): WrittenFragment = {
    val w = new FragmentWriter(s, schema, DataFileVersion.V2_1, Some(500), "test")
    val values: Seq[Long => Long] = Seq(k => k, k => k % 2, k => k / 1000)
    val vectors = columns.zip(values).map { case (n, f) =>
      val v = new BigIntVector(n, allocator)
      v.allocateNew(keys.size)
      keys.zipWithIndex.foreach { case (k, i) => v.set(i, f(k)) }
      v.setValueCount(keys.size)
      v
    }
    try w.write(vectors) finally vectors.foreach(_.close())
    w.finish()
  }

  /** Keys 0 until 10,000 in one fragment; with `more`, 10,000 until 20,000 appended as a second. */
  private def table(more: Boolean): Snapshot = {
    val s = DatasetStorage(Files.createTempDirectory("lance-keyshare").resolve("t.lance").toString, new Configuration())
    Committer.commit(s, None, OverwriteDataset(Seq(write(s, 0L until 10000L)), schema, DataFileVersion.V2_1),
      CommitSettings())
    if (more) Committer.commit(s, Some(1L), AppendFragments(Seq(write(s, 10000L until 20000L))), CommitSettings())
    Dataset.open(s, None)
  }

  private def cmp(c: String, op: CompareOp, v: Long): Filter = Filter.Compare(Vector(c), op, Lit.LongLit(v))
  private def share(snap: Snapshot, f: Option[Filter]): Option[Double] = ScanPlanner(snap, f).keyShare("key")

  test("keys of rows kept by a column unrelated to them lie anywhere: the whole range") {
    val snap = table(more = false)
    assert(share(snap, Some(cmp("status", CompareOp.Eq, 1))) == Some(1.0))
    assert(share(snap, None).isEmpty)  // no filter: nothing to tell
  }

  test("keys of rows kept by a column in their order: the kept pages' bounds, merged") {
    val snap = table(more = false)
    // pages [0, 499], [500, 999], ... : batch < 3 keeps six of them, keys 0-2,999 of 0-9,999
    assert(share(snap, Some(cmp("batch", CompareOp.Lt, 3))) == Some(0.3))
    // two separate runs of pages: 3,000-3,999 and 7,000-7,999
    val twoBatches = Filter.Or(cmp("batch", CompareOp.Eq, 3), cmp("batch", CompareOp.Eq, 7))
    assert(share(snap, Some(twoBatches)) == Some(0.2))
    // the filter on the key itself
    assert(share(snap, Some(cmp("key", CompareOp.GtEq, 9000))) == Some(0.1))
    assert(share(snap, Some(cmp("batch", CompareOp.Eq, 99))) == Some(0.0))
  }

  test("over fragments: a fragment the filter prunes still counts in the range") {
    val snap = table(more = true)
    assert(snap.fragments.size == 2)
    assert(share(snap, Some(cmp("batch", CompareOp.GtEq, 15))) == Some(0.25))  // 15,000-19,999 of 0-19,999
    assert(share(snap, Some(cmp("status", CompareOp.Eq, 0))) == Some(1.0))
  }

  test("no answer where the statistics cannot tell") {
    val snap = table(more = false)
    // a column the table does not have: no statistics for the filter
    assert(share(snap, Some(cmp("other", CompareOp.Eq, 1))).isEmpty)
    assert(ScanPlanner(snap, Some(cmp("batch", CompareOp.Lt, 3))).keyShare("other").isEmpty)
  }
}
