package io.lancespark.table

import java.nio.file.Files

import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.proto.file.{Field => PbField}
import io.lancespark.table.commit.{AppendFragments, CommitConflictException, CommitSettings, Commits, OverwriteDataset, RowLevelPart, RowLevelRead, RowLevelWrites, TaskDeletions, WrittenFragment}
import io.lancespark.table.model.{DataFileVersion, Snapshot}
import io.lancespark.table.storage.{DatasetStorage, DeletionVector}

/** Commits.commitOrDiscard / RowLevelWrites: a commit keeps the files its
  * change wrote, a failed one removes them (and nothing else). */
class CommitsSuite extends AnyFunSuite {

  private val schema = Seq(PbField.newBuilder().setName("id").setId(0).setParentId(-1)
    .setLogicalType("int64").setType(PbField.Type.LEAF).setNullable(true).build())

  private def fresh(): DatasetStorage =
    DatasetStorage(Files.createTempDirectory("lance-commits").resolve("t.lance").toString, new Configuration())

  /** A (dummy) data file on disk: the commit only names it. */
  private def written(s: DatasetStorage, name: String, rows: Long): WrittenFragment = {
    val out = s.fs.create(s.dataFile(name), false)
    try out.write(Array[Byte](1, 2, 3)) finally out.close()
    WrittenFragment(name, Vector(0), Vector(0), rows, 3L, DataFileVersion.V2_0)
  }

  private def exists(s: DatasetStorage, name: String): Boolean = s.fs.exists(s.dataFile(name))

  private def overwrite(s: DatasetStorage, files: Seq[WrittenFragment]) =
    OverwriteDataset(files, schema, Map.empty, DataFileVersion.V2_0)

  private def create(s: DatasetStorage): Snapshot =
    Commits.commitOrDiscard(s, None, overwrite(s, Seq(written(s, "a.lance", 10))), CommitSettings())

  test("a commit keeps the data files it names") {
    val s = fresh()
    assert(create(s).version == 1)
    val v2 = Commits.commitOrDiscard(s, Some(1), AppendFragments(Seq(written(s, "b.lance", 5))), CommitSettings())
    assert(v2.version == 2 && v2.countRows == 15)
    assert(exists(s, "a.lance") && exists(s, "b.lance"))
  }

  test("a refused commit removes the data files it names, and only those") {
    val s = fresh()
    create(s)
    Commits.commitOrDiscard(s, Some(1), AppendFragments(Seq(written(s, "b.lance", 5))), CommitSettings())
    val x = written(s, "x.lance", 1)
    intercept[CommitConflictException] {  // an overwrite read at 1 racing the append of 2
      Commits.commitOrDiscard(s, Some(1), overwrite(s, Seq(x)), CommitSettings())
    }
    assert(!exists(s, "x.lance"))
    assert(exists(s, "a.lance") && exists(s, "b.lance"))
  }

  private def deletionFile(s: DatasetStorage, p: RowLevelPart) =
    s.resolve(DeletionVector.relativePath(p.deletions.head.fragmentId, p.deletions.head.result.get), "deletion file")

  private def rowLevelPart(s: DatasetStorage, read: Snapshot, name: String): RowLevelPart = {
    val task = new TaskDeletions(RowLevelRead(read), () => s)
    task.delete(3L)  // fragment 0, offset 3
    task.prepare(Seq(written(s, name, 1)))
  }

  test("a row-level change: committed, its deletion and data files stay") {
    val s = fresh()
    val v1 = create(s)
    val part = rowLevelPart(s, v1, "u.lance")
    assert(s.fs.exists(deletionFile(s, part)))
    val v2 = RowLevelWrites.commitOrDiscard(s, 1, Seq(part), "UPDATE", CommitSettings())
    assert(v2.map(_.version).contains(2L) && v2.get.countRows == 10)
    assert(s.fs.exists(deletionFile(s, part)) && exists(s, "u.lance"))
    assert(RowLevelWrites.commitOrDiscard(s, 2, Seq(RowLevelPart(Nil, Nil)), "DELETE", CommitSettings()).isEmpty)
  }

  test("a row-level change that conflicts removes its deletion and data files") {
    val s = fresh()
    val v1 = create(s)
    val part = rowLevelPart(s, v1, "u.lance")
    Commits.commitOrDiscard(s, Some(1), overwrite(s, Seq(written(s, "o.lance", 4))), CommitSettings())
    intercept[CommitConflictException] {
      RowLevelWrites.commitOrDiscard(s, 1, Seq(part), "UPDATE", CommitSettings())
    }
    assert(!s.fs.exists(deletionFile(s, part)) && !exists(s, "u.lance"))
    assert(exists(s, "o.lance"))
  }

  test("discard (an abort) removes what the parts name") {
    val s = fresh()
    val v1 = create(s)
    val part = rowLevelPart(s, v1, "u.lance")
    RowLevelWrites.discard(s, Seq(part))
    assert(!s.fs.exists(deletionFile(s, part)) && !exists(s, "u.lance") && exists(s, "a.lance"))
  }
}
