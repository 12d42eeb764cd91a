package io.lancespark.table

import java.nio.file.Files
import java.util.concurrent.{ConcurrentHashMap, Executors, TimeUnit}

import scala.concurrent.{Await, ExecutionContext, Future}
import scala.concurrent.duration._
import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.proto.file.{Field => PbField}
import io.lancespark.schema.LanceFormatException
import io.lancespark.table.commit.{AppendFragments, CommitSettings, Committer, OverwriteDataset}
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.{Dataset, DatasetStorage, ExternalManifestCommit, ExternalManifestStore, ManifestFile, ManifestNaming, ManifestRecord}
import io.lancespark.table.model.WrittenFragment

/** A store of records in this JVM: a real implementation of the pluggable
  * interface (its conditional insert is a map's putIfAbsent), shared by every
  * instance, as a database table is shared by its clients. */
final class InMemoryManifestStore(conf: Configuration) extends ExternalManifestStore {
  override val description: String = "in-memory store"
  private def table: ConcurrentHashMap[(String, Long), ManifestRecord] = InMemoryManifestStore.records
  override def latest(baseUri: String): Option[ManifestRecord] =
    table.asScala.collect { case ((b, _), r) if b == baseUri => r }.toSeq.sortBy(_.version).lastOption
  override def get(baseUri: String, version: Long): Option[ManifestRecord] = Option(table.get((baseUri, version)))
  override def putIfAbsent(baseUri: String, record: ManifestRecord): Boolean =
    table.putIfAbsent((baseUri, record.version), record) == null
  override def replace(baseUri: String, record: ManifestRecord): Boolean =
    table.replace((baseUri, record.version), record) != null
}

object InMemoryManifestStore {
  val records: ConcurrentHashMap[(String, Long), ManifestRecord] = new ConcurrentHashMap()
}

class ExternalManifestCommitSuite extends AnyFunSuite {

  private val schema: io.lancespark.schema.LanceSchema = io.lancespark.schema.LanceSchema(
    Vector(io.lancespark.schema.LanceField(0, "id", "int64", nullable = true, Vector.empty, Map.empty)), Map.empty)

  private def frag(name: String) = WrittenFragment(name, Vector(0), Vector(0), 10L, 100L, DataFileVersion.V2_0)

  private def conf(): Configuration = {
    val c = new Configuration()
    c.set(ExternalManifestStore.KindKey, classOf[InMemoryManifestStore].getName)
    c
  }

  private def fresh(): DatasetStorage =
    DatasetStorage(Files.createTempDirectory("lance-ext").resolve("t.lance").toString, conf())

  private def base(s: DatasetStorage): String = ExternalManifestCommit.baseUri(s)

  private def create(s: DatasetStorage): Unit =
    Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance")), schema, DataFileVersion.V2_0), CommitSettings())

  /** The names under _versions/ but the version hint. */
  private def versionsDir(s: DatasetStorage): Seq[String] =
    s.list(ManifestNaming.Dir).map(_.getPath.getName).filterNot(_ == "latest_version_hint.json").sorted

  test("a class name selects a store of your own; a bad one is an error naming the key") {
    assert(fresh().manifestStore.exists(_.isInstanceOf[InMemoryManifestStore]))
    val c = new Configuration()
    c.set(ExternalManifestStore.KindKey, "com.example.NoSuchStore")
    val e = intercept[IllegalArgumentException](ExternalManifestStore.fromConf(c))
    assert(e.getMessage.contains("lance.commit.external-store") && e.getMessage.contains("com.example.NoSuchStore"))
    c.set(ExternalManifestStore.KindKey, "java.lang.String")
    assert(intercept[IllegalArgumentException](ExternalManifestStore.fromConf(c)).getMessage.contains("does not implement"))
  }

  test("commits record each version with its final manifest and leave no staged file") {
    val s = fresh()
    create(s)
    Committer.commit(s, Some(1), AppendFragments(Seq(frag("b.lance"))), CommitSettings())
    val recorded = (1L to 2L).map(v => s.manifestStore.get.get(base(s), v).get)
    assert(recorded.map(_.path) == (1L to 2L).map(v => s"${base(s)}/_versions/${ManifestNaming.V2.fileName(v)}"))
    assert(recorded.forall(r => r.size.contains(s.fs.getFileStatus(Dataset.manifestPath(s, ManifestNaming.V2, r.version)).getLen)))
    assert(versionsDir(s).forall(_.endsWith(".manifest")))
  }

  test("8 threads x 5 appends through the store: every commit lands once") {
    val s = fresh()
    create(s)
    val pool = Executors.newFixedThreadPool(8)
    implicit val ec: ExecutionContext = ExecutionContext.fromExecutor(pool)
    try {
      val all = Future.sequence((0 until 8).map { t =>
        Future((0 until 5).foreach { r =>
          val mine = DatasetStorage(s.uri, conf())  // a writer of its own, as another process would be
          Committer.commit(mine, Some(1), AppendFragments(Seq(frag(s"t$t-r$r.lance"))), CommitSettings(maxAttempts = 100))
        })
      })
      Await.result(all, 5.minutes)
    } finally { pool.shutdown(); pool.awaitTermination(1, TimeUnit.MINUTES) }
    val latest = Dataset.open(s, None)
    assert(latest.version == 41)
    assert(latest.fragments.map(_.files.head.path).sorted ==
      ("a.lance" +: (for (t <- 0 until 8; r <- 0 until 5) yield s"t$t-r$r.lance")).sorted)
    assert(versionsDir(s).size == 41 && versionsDir(s).forall(_.endsWith(".manifest")))
  }

  test("a version whose writer died after its record is finished by the next reader") {
    val s = fresh()
    create(s)
    // what a writer killed after its insert leaves: a staged manifest of version 2 and the record naming it
    val v1 = Dataset.open(s, None).manifest
    val v2 = v1.toBuilder.setVersion(2).build()
    val finalName = ManifestNaming.V2.fileName(2)
    val staged = new Path(new Path(s.root, ManifestNaming.Dir), s"$finalName-0b5e0000-0000-4000-8000-000000000000")
    val bytes = ManifestFile.serialize(v2, None)
    val out = s.fs.create(staged, false)
    try out.write(bytes) finally out.close()
    assert(s.manifestStore.get.putIfAbsent(base(s), ManifestRecord(2, s"${base(s)}/_versions/${staged.getName}", Some(bytes.length.toLong))))
    val reader = DatasetStorage(s.uri, conf())
    assert(Dataset.open(reader, None).version == 2)
    assert(versionsDir(s) == Seq(ManifestNaming.V2.fileName(1), finalName).sorted)
    assert(s.manifestStore.get.get(base(s), 2).get.path == s"${base(s)}/_versions/$finalName")
    // the next writer commits version 3 after it
    assert(Committer.commit(reader, Some(2), AppendFragments(Seq(frag("c.lance"))), CommitSettings()).version == 3)
  }

  test("a record naming a staged manifest another finisher already moved is taken as finished") {
    val s = fresh()
    create(s)
    val finalName = ManifestNaming.V2.fileName(1)
    s.manifestStore.get.replace(base(s), ManifestRecord(1, s"${base(s)}/_versions/$finalName-gone", None))
    assert(Dataset.open(DatasetStorage(s.uri, conf()), None).version == 1)
    // neither the staged nor the final manifest there: a clear error, not a silent empty table
    val s2 = fresh()
    create(s2)
    s2.fs.delete(Dataset.manifestPath(s2, ManifestNaming.V2, 1), false)
    s2.manifestStore.get.replace(base(s2), ManifestRecord(1, s"${base(s2)}/_versions/$finalName-gone", None))
    val e = intercept[LanceFormatException](Dataset.versions(DatasetStorage(s2.uri, conf())))
    assert(e.getMessage.contains("records version 1") && e.getMessage.contains("missing"))
  }

  test("a version created by a writer without the store is an error, not a lost commit") {
    val s = fresh()
    create(s)
    val plain = DatasetStorage(s.uri, new Configuration())   // no external store: the hard link
    Committer.commit(plain, Some(1), AppendFragments(Seq(frag("b.lance"))), CommitSettings())
    // a store writer that read version 1 now tries version 2, which exists without a record
    val e = intercept[IllegalStateException] {
      ExternalManifestCommit.publish(s, s.manifestStore.get, 2, Dataset.manifestPath(s, ManifestNaming.V2, 2), Array[Byte](1))
    }
    assert(e.getMessage.contains("does not use the in-memory store") && e.getMessage.contains("lance.commit.external-store"))
    assert(Dataset.open(plain, None).fragments.size == 2)
  }
}
