package io.lancespark.table

import java.nio.charset.StandardCharsets
import java.nio.file.Files
import java.time.{Duration, Instant}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.proto.file.{Field => PbField}
import io.lancespark.table.commit.{AppendFragments, CommitConflictException, CommitSettings, Committer, OverwriteDataset, RestoreVersion}
import io.lancespark.table.maintenance._
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.{Dataset, DatasetStorage, TransactionFile}
import io.lancespark.table.model.WrittenFragment

class MaintenanceSuite extends AnyFunSuite {

  private val schema: io.lancespark.schema.LanceSchema = io.lancespark.schema.LanceSchema(
    Vector(io.lancespark.schema.LanceField(0, "id", "int64", nullable = true, Vector.empty, Map.empty)), Map.empty)

  private def fresh(): DatasetStorage =
    DatasetStorage(Files.createTempDirectory("lance-maint").resolve("t.lance").toString, new Configuration())

  /** A fragment whose data file exists (with `rows` bytes, for cleanup's listing). */
  private def frag(s: DatasetStorage, name: String, rows: Long): WrittenFragment = {
    touch(s, s"data/$name", rows.toInt)
    WrittenFragment(name, Vector(0), Vector(0), rows, rows, DataFileVersion.V2_0)
  }

  private def touch(s: DatasetStorage, rel: String, size: Int): Path = {
    val p = new Path(s.root, rel)
    val out = s.fs.create(p, true)
    try out.write(new Array[Byte](size)) finally out.close()
    p
  }

  private def create(s: DatasetStorage): Unit =
    Committer.commit(s, None, OverwriteDataset(Seq(frag(s, "a.lance", 10)), schema, DataFileVersion.V2_0),
      CommitSettings())

  private def append(s: DatasetStorage, name: String, rows: Long): Long = {
    val latest = Dataset.versions(s)._2.last
    Committer.commit(s, Some(latest), AppendFragments(Seq(frag(s, name, rows))), CommitSettings()).version
  }

  private def files(s: DatasetStorage, dir: String): Set[String] = s.list(dir).map(_.getPath.getName).toSet

  test("tags: create, list, move, delete; stored as the reference's JSON") {
    val s = fresh()
    create(s); append(s, "b.lance", 5)
    val t = Tags.create(s, "golden", 1)
    assert(t.version == 1 && t.branch.isEmpty && t.manifestSize > 0)
    val json = new String(s.readFully(new Path(s.root, "_refs/tags/golden.json")), StandardCharsets.UTF_8)
    for (k <- Seq("\"branch\" : null", "\"version\" : 1", "\"manifestSize\" : ", "\"createdAt\"", "\"updatedAt\"", "\"metadata\""))
      assert(json.contains(k), json)
    assert(Tags.list(s).map(t => t.name -> t.version) == Seq("golden" -> 1L))
    val dup = intercept[TagException](Tags.create(s, "golden", 2))
    assert(dup.getMessage.contains("golden") && dup.getMessage.contains("already exists"))
    val missing = intercept[TagException](Tags.create(s, "later", 9))
    assert(missing.getMessage.contains("version 9") && missing.getMessage.contains("does not exist"))
    intercept[TagException](Tags.create(s, "bad/name", 1))
    intercept[TagException](Tags.create(s, ".hidden", 1))
    val moved = Tags.move(s, "golden", 2)
    assert(moved.version == 2 && moved.createdAt == t.createdAt && Tags.versionOf(s, "golden") == 2)
    Tags.create(s, "first", 1)
    assert(Tags.list(s).map(_.name) == Seq("first", "golden"))
    assert(Tags.delete(s, "golden").version == 2)
    assert(Tags.find(s, "golden").isEmpty)
    val gone = intercept[TagException](Tags.delete(s, "golden"))
    assert(gone.getMessage.contains("tag 'golden' does not exist"))
  }

  test("tags written by the reference (older format, without times) are read") {
    val s = fresh()
    create(s)
    val p = new Path(s.root, "_refs/tags/old.json")
    val out = s.fs.create(p)
    try out.write("""{"branch":null,"version":1,"manifestSize":300}""".getBytes(StandardCharsets.UTF_8)) finally out.close()
    val t = Tags.get(s, "old")
    assert(t.version == 1 && t.manifestSize == 300 && t.createdAt.isEmpty && t.metadata.isEmpty)
    val onBranch = new Path(s.root, "_refs/tags/dev.json")
    val o2 = s.fs.create(onBranch)
    try o2.write("""{"branch":"dev","version":1,"manifestSize":300}""".getBytes(StandardCharsets.UTF_8)) finally o2.close()
    assert(intercept[TagException](Tags.versionOf(s, "dev")).getMessage.contains("branch 'dev'"))
  }

  test("restore commits a new version equal to the old one with a Restore transaction; ids never go back") {
    val s = fresh()
    create(s); append(s, "b.lance", 5); append(s, "c.lance", 7)
    val r = Restore.toVersion(s, 1)
    assert(r == RestoreResult(1, 3, 4, 10, 1))
    val v4 = Dataset.open(s, None)
    val v1 = Dataset.open(s, Some(1))
    assert(v4.fragments.map(_.files.map(_.path)) == v1.fragments.map(_.files.map(_.path)))
    assert(v4.manifest.getFieldsList == v1.manifest.getFieldsList)
    val txn = TransactionFile.read(s, v4.manifest.getTransactionFile).get
    assert(txn.hasRestore && txn.getRestore.getVersion == 1 && txn.getReadVersion == 3)
    assert(v4.manifest.getMaxFragmentId == 2)
    append(s, "d.lance", 1)
    assert(Dataset.open(s, None).fragments.map(_.id) == Seq(0L, 3L))
    val e = intercept[Exception](Restore.toVersion(s, 42))
    assert(e.getMessage.contains("version 42") && e.getMessage.contains("does not exist"))
  }

  test("restore against concurrent commits: a restore wins; a write read before a restore conflicts") {
    val s = fresh()
    create(s); append(s, "b.lance", 5)
    // a restore read at version 1 while version 2 was committed: compatible, as in the reference
    val v3 = Committer.commit(s, Some(1), RestoreVersion(1), CommitSettings())
    assert(v3.version == 3 && v3.countRows == 10)
    // an append read at version 2 meets the restore (version 3): conflict naming it
    val e = intercept[CommitConflictException](
      Committer.commit(s, Some(2), AppendFragments(Seq(frag(s, "x.lance", 1))), CommitSettings()))
    assert(e.getMessage.contains("version 3") && e.getMessage.contains("restore"))
  }

  test("restore to a timestamp picks the newest version at or before it") {
    val s = fresh()
    create(s)
    Thread.sleep(20)
    val between = Instant.now()
    Thread.sleep(20)
    append(s, "b.lance", 5)
    assert(Restore.versionAt(s, between) == 1)
    assert(Restore.versionAt(s, Instant.now()) == 2)
    intercept[Exception](Restore.versionAt(s, Instant.EPOCH))
    assert(Restore.toTimestamp(s, between).newVersion == 3)
    assert(Dataset.open(s, None).countRows == 10)
  }

  test("a commit's time given back in microseconds (truncated or rounded up) finds that commit") {
    val s = fresh()
    create(s); append(s, "b.lance", 5); append(s, "c.lance", 5)
    val ts = History.list(s).find(_.version == 2).flatMap(_.timestamp).get
    val down = ts.truncatedTo(java.time.temporal.ChronoUnit.MICROS)
    val up = if (down == ts) ts else down.plusNanos(1000)
    for (given <- Seq(ts, down, up)) {
      assert(History.firstAtOrAfter(s, given).contains(2L), s"$given (commit at $ts)")
      assert(History.lastAtOrBefore(s, given).contains(2L), s"$given (commit at $ts)")
    }
    assert(History.firstAtOrAfter(s, up.plusNanos(1000)).contains(3L))
  }

  test("history: every version with operation, rows added and deleted, tags") {
    val s = fresh()
    create(s); append(s, "b.lance", 5); Restore.toVersion(s, 1)
    Tags.create(s, "start", 1)
    val h = History.list(s)
    assert(h.map(_.version) == Seq(1L, 2L, 3L))
    assert(h.map(_.operation) == Seq(Some("Overwrite"), Some("Append"), Some("Restore")))
    assert(h.map(_.rowsAdded) == Seq(Some(10L), Some(5L), Some(0L)))
    assert(h.map(_.rowsDeleted) == Seq(Some(0L), Some(0L), Some(5L)))
    assert(h.map(_.totalRows) == Seq(10L, 15L, 10L))
    assert(h(2).details == Map("restored_version" -> "1"))
    assert(h.head.tags == Seq("start") && h(1).tags.isEmpty)
    assert(h.forall(_.timestamp.isDefined) && h.forall(_.writer.startsWith("lance-spark")))
  }

  private def ageAll(s: DatasetStorage, rel: Seq[String], age: Duration): Unit =
    rel.foreach(r => s.fs.setTimes(new Path(s.root, r), Instant.now().minus(age).toEpochMilli, -1))

  test("cleanup removes old versions and what only they reference; never the latest or a tagged version") {
    val s = fresh()
    create(s)
    Committer.commit(s, Some(1), OverwriteDataset(Seq(frag(s, "b.lance", 5)), schema, DataFileVersion.V2_0),
      CommitSettings())
    Committer.commit(s, Some(2), OverwriteDataset(Seq(frag(s, "c.lance", 7)), schema, DataFileVersion.V2_0),
      CommitSettings())
    append(s, "d.lance", 3)
    Tags.create(s, "keep", 2)
    // default retention (14 days): nothing is old
    val none = Cleanup.run(s, CleanupPolicy.retaining())
    assert(none.removedVersions.isEmpty && none.files.isEmpty)
    // every version is old, version 2 is tagged: the default policy refuses
    val everything = CleanupPolicy(Instant.now().plusSeconds(1))
    val e = intercept[CleanupException](Cleanup.run(s, everything))
    assert(e.getMessage.contains("keep (version 2)"))
    val dry = Cleanup.run(s, everything.copy(errorIfTaggedOldVersions = false, dryRun = true))
    assert(dry.removedVersions == Seq(1L, 3L) && dry.keptTaggedVersions == Seq(2L))
    assert(dry.files.filter(_.kind == "data").map(_.path) == Seq("data/a.lance"))
    assert(dry.files.find(_.path == "data/a.lance").get.sizeBytes == 10)
    assert(dry.count("manifest") == 2 && dry.files.filter(_.kind == "transaction").map(_.path).toSet ==
      Set(1L, 3L).map(v => s"_transactions/${Dataset.open(s, Some(v)).manifest.getTransactionFile}"))
    assert(dry.bytesRemoved == dry.files.map(_.sizeBytes).sum)
    assert(Dataset.versions(s)._2 == Seq(1L, 2L, 3L, 4L) && files(s, "data").contains("a.lance"))  // dry run kept all
    val done = Cleanup.run(s, everything.copy(errorIfTaggedOldVersions = false))
    assert(done.files.toSet == dry.files.toSet)
    assert(Dataset.versions(s)._2 == Seq(2L, 4L))
    assert(files(s, "data") == Set("b.lance", "c.lance", "d.lance"))
    assert(Dataset.open(s, Some(2)).countRows == 5 && Dataset.open(s, None).countRows == 10)
    assert(files(s, "_transactions").size == 2)
    // again: nothing left to do
    assert(Cleanup.run(s, everything.copy(errorIfTaggedOldVersions = false)).files.isEmpty)
  }

  test("cleanup: files no manifest references go only when older than 7 days, or with deleteUnverified") {
    val s = fresh()
    create(s)
    // a killed job's leftovers, then a later commit
    val leftovers = Seq("data/killed-1.lance", "data/killed-2.lance", "_deletions/0-1-99.arrow", "_transactions/1-x.txn")
    leftovers.foreach(touch(s, _, 4))
    Thread.sleep(1100)  // local file times have 1 s resolution on some file systems
    append(s, "b.lance", 5)
    val policy = CleanupPolicy(Instant.now().plusSeconds(1))
    val recent = Cleanup.run(s, policy)
    assert(recent.removedVersions == Seq(1L))
    assert(recent.files.map(_.path).intersect(leftovers).isEmpty)
    assert(leftovers.forall(r => s.fs.exists(new Path(s.root, r))))
    ageAll(s, leftovers.take(2), Duration.ofDays(8))
    val aged = Cleanup.run(s, policy)
    assert(aged.files.map(_.path).toSet == leftovers.take(2).toSet)
    assert(aged.files.forall(_.kind == "data"))
    val forced = Cleanup.run(s, policy.copy(deleteUnverified = true, dryRun = true))
    assert(forced.files.map(_.path).toSet == leftovers.drop(2).toSet)
    // a commit in progress (files written after the latest version) is left alone
    touch(s, "data/in-progress.lance", 4)
    touch(s, "_transactions/2-in-progress.txn", 4)
    val live = Cleanup.run(s, policy)
    assert(!live.files.map(_.path).exists(_.contains("in-progress")))
    assert(s.fs.exists(new Path(s.root, "data/in-progress.lance")))
    assert(Dataset.open(s, None).countRows == 15)
  }
}
