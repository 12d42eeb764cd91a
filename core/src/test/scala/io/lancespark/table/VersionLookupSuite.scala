package io.lancespark.table

import java.nio.file.{Files, Path => JPath, Paths}
import java.time.Instant

import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import com.google.protobuf.Timestamp

import io.lancespark.proto.file.{Field => PbField}
import io.lancespark.schema.LanceFormatException
import io.lancespark.table.commit.{AppendFragments, CommitSettings, CommittedTransactions, Committer, OverwriteDataset}
import io.lancespark.table.maintenance.Restore
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.{Dataset, DatasetStorage, ManifestFile, ManifestNaming, VersionLookup}
import io.lancespark.table.model.WrittenFragment

/** Long histories on real local files: the latest version from the hint and
  * its successors, and TIMESTAMP AS OF by bisection, against the linear
  * definitions. Histories are made quickly by writing manifests directly
  * (ManifestFile.serialize) after one real commit.
  *
  * "Without listing" is checked with a decoy: a V1-named manifest in a V2
  * dataset, which makes any lookup that lists `_versions/` fail (a dataset
  * may not mix naming schemes). */
class VersionLookupSuite extends AnyFunSuite {
  import ManifestNaming.{V1, V2}

  private val schema: io.lancespark.schema.LanceSchema = io.lancespark.schema.LanceSchema(
    Vector(io.lancespark.schema.LanceField(0, "id", "int64", nullable = true, Vector.empty, Map.empty)), Map.empty)
  private def frag(name: String, rows: Long) = WrittenFragment(name, Vector(0), Vector(0), rows, 100L, DataFileVersion.V2_0)
  private val Base = 1700000000L

  private def fresh(): DatasetStorage =
    DatasetStorage(Files.createTempDirectory("lance-history").resolve("t.lance").toString, new Configuration())

  private def dir(s: DatasetStorage): JPath = Paths.get(s.root.toUri).resolve(ManifestNaming.Dir)

  /** A dataset of versions 1..n whose version v was committed at `time(v)`:
    * one real commit, then manifests written directly. The hint is the real
    * commit's (version 1) unless `hint` says otherwise. */
  private def history(n: Int, naming: ManifestNaming = V2, time: Long => Instant = v => Instant.ofEpochSecond(Base + 10 * v),
      hint: Option[Long] = None): DatasetStorage = {
    val s = fresh()
    val first = Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance", 10)), schema, DataFileVersion.V2_0),
      CommitSettings(v2ManifestNaming = naming == V2))
    for (v <- 1L to n.toLong) {
      val t = time(v)
      val m = first.manifest.toBuilder.setVersion(v)
        .setTimestamp(Timestamp.newBuilder().setSeconds(t.getEpochSecond).setNanos(t.getNano)).build()
      Files.write(dir(s).resolve(naming.fileName(v)), ManifestFile.serialize(m, None))
    }
    hint.foreach(h => Files.write(dir(s).resolve(VersionLookup.HintName), VersionLookup.hintBytes(h)))
    s
  }

  private def decoy(s: DatasetStorage): Unit = Files.write(dir(s).resolve("999999999.manifest"), Array[Byte](1))
  private def remove(s: DatasetStorage, naming: ManifestNaming, vs: Iterable[Long]): Unit =
    vs.foreach(v => Files.delete(dir(s).resolve(naming.fileName(v))))

  test("the hint is written exactly as pylance writes it, and read back") {
    assert(new String(VersionLookup.hintBytes(2), "UTF-8") == """{"version":2}""")
    assert(VersionLookup.parseHint("""{"version":42}""".getBytes("UTF-8")).contains(42L))
    assert(VersionLookup.parseHint("""{ "version" : 7 }""".getBytes("UTF-8") ++ "\n".getBytes("UTF-8")).contains(7L))
    Seq("", "garbage", """{"version":-1}""", """{"version":"3"}""", """{"v":3}""").foreach { bad =>
      assert(VersionLookup.parseHint(bad.getBytes("UTF-8")).isEmpty, bad)
    }
    val s = history(3)
    Committer.commit(s, Some(3), AppendFragments(Seq(frag("b.lance", 1))), CommitSettings())
    assert(new String(Files.readAllBytes(dir(s).resolve(VersionLookup.HintName)), "UTF-8") == """{"version":4}""")
  }

  test("latest at 2,000 versions without listing: from a current hint, a stale one, and one stale by 1,999") {
    for (h <- Seq(2000L, 1990L, 1L)) {
      val s = history(2000, hint = Some(h))
      decoy(s)
      assert(intercept[LanceFormatException](Dataset.versions(s)).getMessage.contains("mixes"))  // the decoy works
      assert(Dataset.latest(s).contains(VersionLookup.Latest(V2, 2000)), s"hint $h")
      assert(Dataset.open(s, None).version == 2000)
      assert(Dataset.open(s, Some(17)).version == 17)
    }
  }

  test("latest when the hint is missing, garbage, or names a version that is gone: a listing, still right") {
    for (bad <- Seq(None, Some("garbage"), Some("""{"version":5000}"""), Some("""{"version":3}"""))) {
      val s = history(300)
      bad match {
        case None => Files.delete(dir(s).resolve(VersionLookup.HintName))
        case Some(text) => Files.write(dir(s).resolve(VersionLookup.HintName), text.getBytes("UTF-8"))
      }
      if (bad.contains("""{"version":3}""")) remove(s, V2, 1L to 10L)  // the hinted version was cleaned up
      assert(Dataset.latest(s).contains(VersionLookup.Latest(V2, 300)), bad.toString)
    }
  }

  test("V1-named datasets: latest from the hint (no listing) or by listing; versions by number") {
    val s = history(500, naming = V1, hint = Some(480))
    Files.write(dir(s).resolve(V2.fileName(999999999L)), Array[Byte](1))  // a V2 decoy: any listing fails
    assert(Dataset.latest(s).contains(VersionLookup.Latest(V1, 500)))
    assert(Dataset.open(s, Some(250)).version == 250)
    val t = history(500, naming = V1)
    Files.delete(dir(t).resolve(VersionLookup.HintName))
    assert(Dataset.latest(t).contains(VersionLookup.Latest(V1, 500)))
    assert(Dataset.open(t, None).version == 500)
    val e = intercept[LanceFormatException](Dataset.open(t, Some(501)))
    assert(e.getMessage.contains("version 501 does not exist (versions 1 to 500 are present)"))
  }

  test("a commit at 2,000 versions lists nothing, builds on the latest and moves the hint") {
    val s = history(2000, hint = Some(1995))
    decoy(s)
    val c = Committer.commit(s, Some(2000), AppendFragments(Seq(frag("b.lance", 5))), CommitSettings())
    assert(c.version == 2001 && c.countRows == 15)
    assert(VersionLookup.readHint(s).contains(2001L))
    assert(Dataset.open(s, None).version == 2001)
  }

  test("conflict checks read the versions after the read one by name; a removed one is skipped") {
    val s = fresh()
    Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance", 10)), schema, DataFileVersion.V2_0),
      CommitSettings())
    for (v <- 1 to 30) Committer.commit(s, Some(v.toLong), AppendFragments(Seq(frag(s"f$v.lance", 1))), CommitSettings())
    decoy(s)
    // read at 5: rebased onto the 26 appends since, each read by name
    val c = Committer.commit(s, Some(5), AppendFragments(Seq(frag("late.lance", 1))), CommitSettings())
    assert(c.version == 32 && c.countRows == 10 + 31)
    remove(s, V2, Seq(7L, 8L))
    val since = new CommittedTransactions(s).between(V2, 5, 32)
    assert(since.map(_._1) == (6L to 32L).filterNot(Set(7L, 8L)))
    assert(since.forall(_._2.exists(_.hasAppend)))
  }

  /** The linear definition: the newest present version whose time is at or before `at`. */
  private def linear(present: Seq[Long], time: Long => Instant, at: Instant): Option[Long] =
    present.reverseIterator.find(v => !time(v).isAfter(at))

  private def targets(present: Seq[Long], time: Long => Instant): Seq[Instant] =
    present.flatMap(v => Seq(time(v), time(v).minusNanos(1), time(v).plusMillis(4999))) ++
      Seq(Instant.ofEpochSecond(0), time(present.last).plusSeconds(3600))

  private def checkAll(s: DatasetStorage, present: Seq[Long], time: Long => Instant): Unit =
    targets(present, time).foreach { at =>
      assert(VersionLookup.versionAt(s, at, t => !t.isAfter(at)) == linear(present, time, at), s"at $at")
    }

  test("TIMESTAMP AS OF by bisection equals the linear definition: before the first, at and between versions, after the last") {
    val n = 300
    // non-decreasing with repeats: versions 3k, 3k+1, 3k+2 share a second
    val time: Long => Instant = v => Instant.ofEpochSecond(Base + 10 * (v / 3))
    val s = history(n, time = time, hint = Some(n.toLong))
    decoy(s)  // the bisection lists nothing
    checkAll(s, 1L to n.toLong, time)
    assert(Restore.versionAt(s, time(150)) == 152)
    assert(intercept[LanceFormatException](Restore.versionAt(s, Instant.ofEpochSecond(0))).getMessage
      .contains("no version was committed at or before"))
  }

  test("TIMESTAMP AS OF after a cleanup removed old versions: the earliest present one found by bisection") {
    val time: Long => Instant = v => Instant.ofEpochSecond(Base + 10 * v)
    val s = history(1000, time = time, hint = Some(1000))
    remove(s, V2, 1L to 637L)
    decoy(s)  // no listing: the earliest present version (638) is found by existence checks
    val present = 638L to 1000L
    Seq(time(638), time(638).plusSeconds(5), time(700).plusSeconds(5), time(999), time(1000)).foreach { at =>
      assert(VersionLookup.versionAt(s, at, t => !t.isAfter(at)) == linear(present, time, at), s"at $at")
    }
    // a time before it: versions below may have survived (tagged), so it lists them
    Files.delete(dir(s).resolve("999999999.manifest"))
    Seq(time(1), time(637), time(638).minusNanos(1)).foreach { at =>
      assert(VersionLookup.versionAt(s, at, t => !t.isAfter(at)).isEmpty, s"at $at")
    }
  }

  test("TIMESTAMP AS OF with versions kept below and missing in the middle (tagged survivors of a cleanup)") {
    val time: Long => Instant = v => Instant.ofEpochSecond(Base + 10 * v)
    val s = history(400, time = time, hint = Some(400))
    remove(s, V2, (1L to 120L).filterNot(Set(5L, 60L)) ++ (190L to 260L).filterNot(_ == 222L))
    val present = Seq(5L, 60L) ++ (121L to 189L) ++ Seq(222L) ++ (261L to 400L)
    checkAll(s, present, time)
  }

  test("a time out of order with its brackets: at or before the target, its successor after it") {
    // version 151 says it was committed after the last one
    val time: Long => Instant = v => Instant.ofEpochSecond(Base + 10 * (if (v == 151) 400 else v))
    val s = history(301, time = time, hint = Some(301))
    targets(1L to 301L, time).foreach { at =>
      VersionLookup.versionAt(s, at, t => !t.isAfter(at)) match {
        case Some(v) => assert(!time(v).isAfter(at) && (v == 301 || time(v + 1).isAfter(at)), s"at $at: $v")
        case None => assert(time(1).isAfter(at), s"at $at")
      }
    }
    val at = time(150).plusSeconds(5)
    assert(VersionLookup.versionAt(s, at, t => !t.isAfter(at)).contains(150L))
  }

  test("timestamps going backwards elsewhere: a version at or before the time whose successor is after it") {
    val time: Long => Instant = v => if (v == 77) Instant.ofEpochSecond(Base + 10 * 200) else Instant.ofEpochSecond(Base + 10 * v)
    val s = history(301, time = time, hint = Some(301))
    targets(1L to 301L, time).foreach { at =>
      val r = VersionLookup.versionAt(s, at, t => !t.isAfter(at))
      r match {
        case Some(v) => assert(!time(v).isAfter(at) && (v == 301 || time(v + 1).isAfter(at)), s"at $at: $v")
        case None => assert(time(1).isAfter(at), s"at $at")
      }
    }
  }
}
