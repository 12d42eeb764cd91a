package io.lancespark.table.stream

import java.nio.file.Files

import scala.util.Using

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.BigIntVector
import org.apache.hadoop.conf.Configuration
import org.roaringbitmap.RoaringBitmap
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceFormatException
import io.lancespark.table.PylanceProcess
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.{DataFiles, Dataset, DatasetStorage}

/** The change feed's per-version plan on datasets pylance writes (with and
  * without stable row ids): which rows each version inserted, deleted or
  * updated, read back by id; expected values from the operations pylance ran. */
class ChangeFeedSuite extends AnyFunSuite with BeforeAndAfterAll {

  private val allocator: BufferAllocator = new RootAllocator(Long.MaxValue)
  override def afterAll(): Unit = allocator.close()

  /** versions: 1 write [1,2,3]; 2 append [4,5]; 3 update id=2; 4 merge_insert on id of [3, 9]
    * (3 updated, 9 inserted); 5 delete id=4; 6.. compaction; last: overwrite with [7]. */
  private val script =
    """
import sys, lance, pyarrow as pa
path, stable = sys.argv[1], sys.argv[2] == "1"
t = lambda ids: pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids])})
lance.write_dataset(t([1, 2, 3]), path, enable_stable_row_ids=stable)
lance.write_dataset(t([4, 5]), path, mode="append")
lance.dataset(path).update({"v": "'u'"}, where="id = 2")
lance.dataset(path).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(t([3, 9]))
lance.dataset(path).delete("id = 4")
lance.dataset(path).optimize.compact_files()
compacted = lance.dataset(path).version
lance.write_dataset(t([7]), path, mode="overwrite")
print(compacted)
"""

  private def make(stable: Boolean): (DatasetStorage, Long) = {
    val dir = Files.createTempDirectory("cdf").resolve("t.lance")
    val out = PylanceProcess.run(script, dir.toString, if (stable) "1" else "0")
    (DatasetStorage(dir.toString, new Configuration()), out.trim.linesIterator.toSeq.last.toLong)
  }

  /** Per version: (change type, id) of every changed row, read as the Spark layer reads them. */
  private def changes(feed: ChangeFeed, from: Long, to: Option[Long] = None): Map[Long, Vector[(String, Long)]] =
    feed.between(from, to).map { c =>
      c.version -> c.rows.flatMap { r =>
        val snap = Dataset.open(feed.storage, Some(r.readVersion))
        val id = snap.schema.field("id").get
        Using.resource(new FragmentScanner(feed.storage, r.readVersion, r.fragment, Seq(id), allocator,
            ref => DataFiles.open(feed.storage, snap.schema, ref))) { sc =>
          r.ranges.flatMap { case (a, b) =>
            Using.resource(sc.read(a, b)) { batch =>
              val v = batch.vectors.head.asInstanceOf[BigIntVector]
              (0 until batch.rowCount).map(i => r.changeType.name -> v.get(i))
            }
          }
        }
      }.sorted
    }.toMap

  private def check(stable: Boolean): Unit = {
    val (storage, compacted) = make(stable)
    val feed = new ChangeFeed(storage)
    val got = changes(feed, 1)
    val overwrite = compacted + 1
    assert(feed.latest == overwrite)
    assert(got(1) == Vector("insert" -> 1L, "insert" -> 2L, "insert" -> 3L))
    assert(got(2) == Vector("insert" -> 4L, "insert" -> 5L))
    assert(got(3) == Vector("update_postimage" -> 2L, "update_preimage" -> 2L))
    // merge_insert: with stable row ids (kept by pylance) 3 is an update and 9 an insert; without
    // them the rows cannot be told apart (1 removed, 2 added): a delete and inserts
    if (stable) assert(got(4) == Vector("insert" -> 9L, "update_postimage" -> 3L, "update_preimage" -> 3L))
    else assert(got(4) == Vector("delete" -> 3L, "insert" -> 3L, "insert" -> 9L))
    assert(got(5) == Vector("delete" -> 4L))
    (6L until overwrite).foreach(v => assert(got(v).isEmpty, s"compaction version $v"))
    assert(got(overwrite) == Vector("delete" -> 1L, "delete" -> 2L, "delete" -> 3L, "delete" -> 5L,
      "delete" -> 9L, "insert" -> 7L))
    // a range: both bounds included
    assert(changes(feed, 3, Some(3)).keySet == Set(3L))
    assert(changes(feed, 2, Some(5)).keySet == Set(2L, 3L, 4L, 5L))
  }

  test("pylance's append, update, merge_insert, delete, compaction and overwrite (stable row ids)") {
    check(stable = true)
  }

  test("the same without stable row ids") {
    check(stable = false)
  }

  test("ranges: checked against the latest version, errors name the options") {
    def err(start: Long, end: Option[Long]): String =
      intercept[IllegalArgumentException](ChangeFeed.checkRange("t", start, end, 5)).getMessage
    assert(ChangeFeed.checkRange("t", 0, None, 5) == (1L, 5L))
    assert(ChangeFeed.checkRange("t", 2, Some(4), 5) == (2L, 4L))
    assert(err(6, None).contains("startingVersion 6 is after the latest version 5"))
    assert(err(3, Some(2)).contains("startingVersion 3 is after its endingVersion 2"))
    assert(err(1, Some(6)).contains("endingVersion 6 is after the latest version 5"))
  }

  test("a version removed by a cleanup: an error naming it and the dataset") {
    val (storage, _) = make(stable = false)
    PylanceProcess.run(
      "import sys, lance, datetime; lance.dataset(sys.argv[1]).cleanup_old_versions(" +
        "older_than=datetime.timedelta(0), delete_unverified=True)", storage.uri.stripPrefix("file:"))
    val feed = new ChangeFeed(storage)
    val e = intercept[LanceFormatException](feed.between(3, None))
    assert(e.getMessage.contains("version 3") && e.getMessage.contains(storage.uri) && e.getMessage.contains("cleanup"),
      e.getMessage)
  }

  test("change records: encoded properties read back") {
    val bm = RoaringBitmap.bitmapOf(1, 2, 3, 100000)
    val rec = ChangeRecord("MERGE", Set("a.lance", "b.lance"), Map(3L -> bm, 7L -> RoaringBitmap.bitmapOf(0)))
    val back = ChangeRecord.of(rec.properties, "test").get
    assert(back.command == "MERGE" && back.insertFiles == rec.insertFiles)
    assert(back.deletedRows.keySet == Set(3L, 7L) && back.deletedRows(3L) == bm)
    assert(back.isDeleted(3, 100000) && !back.isDeleted(3, 4) && !back.isDeleted(5, 1))
    assert(ChangeRecord.of(Map.empty, "test").isEmpty)
    assert(ChangeFeed.ranges(RoaringBitmap.bitmapOf(0, 1, 2, 5, 7, 8)) == Vector(0L -> 3L, 5L -> 6L, 7L -> 9L))
    assert(ChangeFeed.ranges(new RoaringBitmap()).isEmpty)
  }
}
