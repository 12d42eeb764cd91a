package io.lancespark.table

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.BigIntVector
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceFormatException
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.{DataFiles, Dataset, DatasetStorage}

/** Datasets as old Lance releases left them (tests/fixtures/old_releases.py,
  * written by `make fixtures`): the table layer counts and reads the rows
  * pylance 14 counts and reads, fragment by fragment, and refuses what the
  * reference refuses with an error naming the dataset. */
class OldReleasesSuite extends AnyFunSuite {

  private val repoRoot: Path = {
    var p = Path.of("").toAbsolutePath
    while (p != null && !Files.exists(p.resolve("build.sbt"))) p = p.getParent
    if (p == null) Path.of("").toAbsolutePath else p
  }
  private val root: Path = Path.of(sys.env.getOrElse("LANCE_FIXTURES",
    repoRoot.resolve("spark-connector/target/fixtures").toString)).resolve("old_releases")

  /** pylance's reading of each kind it reads and that is consistent:
    * "kind id:rows id:rows ... | sum of ids"; "kind ERROR" where pylance refuses
    * it or the fixtures call it inconsistent (pylance returns too few rows). */
  private lazy val oracle: Map[String, (Map[Long, Long], Long)] = {
    val python = sys.env.getOrElse("LANCE_PYTHON", repoRoot.resolve(".venv/bin/python").toString)
    val script =
      """import lance, os, sys
        |root = sys.argv[1]
        |sys.path.insert(0, sys.argv[2])
        |from old_releases import INCONSISTENT
        |for kind in sorted(os.listdir(root)):
        |    try:
        |        assert kind not in INCONSISTENT
        |        ds = lance.dataset(os.path.join(root, kind))
        |        frags = " ".join(f"{f.fragment_id}:{f.count_rows()}" for f in ds.get_fragments())
        |        ids = sum(ds.to_table(columns=["id"])["id"].to_pylist())
        |        print(kind, frags, "|", ids)
        |    except Exception:
        |        print(kind, "ERROR")
        |""".stripMargin
    val proc = new ProcessBuilder(python, "-c", script, root.toString,
      repoRoot.resolve("tests/fixtures").toString).redirectErrorStream(false).start()
    val out = new String(proc.getInputStream.readAllBytes(), UTF_8)
    assert(proc.waitFor() == 0, s"pylance could not be asked about $root")
    out.linesIterator.filterNot(_.endsWith("ERROR")).map { line =>
      val (head, ids) = line.splitAt(line.lastIndexOf('|'))
      val words = head.trim.split(' ')
      words.head -> (words.tail.map { w =>
        val Array(id, rows) = w.split(':'); id.toLong -> rows.toLong
      }.toMap, ids.drop(1).trim.toLong)
    }.toMap
  }

  private def kinds: Seq[String] =
    if (Files.isDirectory(root)) Using.resource(Files.list(root))(_.iterator().asScala.map(_.getFileName.toString).toSeq.sorted)
    else Nil

  test("the old-release fixtures are there") {
    assert(kinds.contains("no_physical_rows_legacy") && kinds.contains("v03_files"),
      s"run `make fixtures` first: $root has ${kinds.mkString(", ")}")
    assert(oracle.size >= 8, s"pylance read only ${oracle.keys.mkString(", ")}")
  }

  test("every old release pylance reads: the same rows per fragment, the same ids") {
    for ((kind, (fragments, idSum)) <- oracle.toSeq.sortBy(_._1)) withClue(kind) {
      val snap = Dataset.open(DatasetStorage(root.resolve(kind).toString, new Configuration()), None)
      val counted = snap.fragments.map(f => f.id -> f.numRows).toMap
      assert(counted.filter(_._2 > 0) == fragments.filter(_._2 > 0))
      assert(snap.countRows == fragments.values.sum)
      Using.resource(new RootAllocator()) { allocator =>
        val id = snap.schema.fields.filter(_.name == "id")
        var sum = 0L
        var rows = 0L
        for (f <- snap.fragments)
          Using.resource(new FragmentScanner(snap.storage, snap.version, f, id, allocator,
            ref => DataFiles.open(snap.storage, snap.schema, ref))) { sc =>
            Using.resource(sc.read(0, f.physicalRows)) { b =>
              val v = b.vectors.head.asInstanceOf[BigIntVector]
              (0 until b.rowCount).foreach(i => sum += v.get(i))
              rows += b.rowCount
            }
          }
        assert(rows == fragments.values.sum)
        assert(sum == idSum)
      }
    }
  }

  test("what pylance refuses is refused with an error naming the dataset") {
    val refused = kinds.filterNot(oracle.contains)
    assert(refused.contains("unreadable_no_row_count") && refused.contains("wrong_physical_rows_with_writer"), refused)
    for (kind <- refused) withClue(kind) {
      val uri = root.resolve(kind).toString
      val e = intercept[Exception] {
        val snap = Dataset.open(DatasetStorage(uri, new Configuration()), None)
        Using.resource(new RootAllocator()) { allocator =>
          for (f <- snap.fragments)
            Using.resource(new FragmentScanner(snap.storage, snap.version, f, snap.schema.fields, allocator,
              ref => DataFiles.open(snap.storage, snap.schema, ref)))(sc => sc.read(0, f.physicalRows).close())
        }
      }
      assert(e.isInstanceOf[LanceFormatException], e)
      assert(e.getMessage.contains(kind), e.getMessage)
    }
  }
}
