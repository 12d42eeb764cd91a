package io.lancespark.format.v21

import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._
import scala.util.Random

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.FieldVector
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceField
import io.lancespark.format.input.LocalFileSource
import io.lancespark.format.v20.ArrowCompare

/** Files pylance wrote at file versions 2.1 and 2.2 (tests/fixtures/v21_fixtures.py)
  * read by [[V21FileReader]] equal what pylance reads from them: whole, in
  * random row ranges (starting and ending inside pages and chunks), and pruned. */
class V21FileReaderSuite extends AnyFunSuite with BeforeAndAfterAll {
  import ArrowCompare._

  private val allocator = new RootAllocator()

  override def afterAll(): Unit = {
    try assert(allocator.getAllocatedMemory == 0, s"leaked ${allocator.getAllocatedMemory} bytes")
    finally allocator.close()
  }

  private val dir: Path = fixtures.resolve("v2_1")

  private val names: Seq[String] =
    if (!Files.isDirectory(dir)) Nil
    else Files.list(dir).iterator.asScala.map(_.getFileName.toString)
      .filter(_.endsWith(".lance")).map(_.stripSuffix(".lance")).toSeq.sorted

  private def withReader[T](name: String)(f: V21FileReader => T): T = {
    val r = V21FileReader.openStandalone(new LocalFileSource(dir.resolve(s"$name.lance")))
    try f(r) finally r.close()
  }

  private def withVectors[T](vs: Seq[FieldVector])(f: Seq[FieldVector] => T): T =
    try f(vs) finally vs.foreach(_.close())

  private def check(r: V21FileReader, fields: Seq[LanceField], from: Long, until: Long, expected: Expected): Unit =
    withVectors(r.read(fields, from, until, allocator)) { vs =>
      vs.zip(fields).foreach { case (v, f) =>
        assert(v.getValueCount == until - from, s"column ${f.name}")
        val exp = expected.column(f.name).slice(from.toInt, until.toInt)
        val expPruned = if (f.isStruct) exp.map(pruneTo(f, _)) else exp
        firstMismatch(f.name, values(v), expPruned).foreach(m => fail(s"${r.path} rows [$from, $until): $m"))
      }
    }

  private def pruneTo(f: LanceField, v: Any): Any = v match {
    case m: Map[_, _] if f.isStruct =>
      val mm = m.asInstanceOf[Map[Any, Any]]
      f.children.flatMap(c => mm.get(c.name).map(x => c.name -> pruneTo(c, x))).toMap
    case other => other
  }

  test("fixtures exist for both versions") {
    assert(names.contains("shapes-2.1") && names.contains("shapes-2.2"), s"$dir: $names")
  }

  names.foreach { name =>
    test(s"$name: full read equals pylance") {
      val expected = readExpected(dir.resolve(s"$name.arrow"), allocator)
      withReader(name) { r =>
        assert(r.footer.versionName == name.takeRight(3))
        assert(r.numRows == expected.numRows)
        check(r, r.fileSchema.fields, 0, r.numRows, expected)
      }
    }

    test(s"$name: row ranges and projections equal pylance") {
      val expected = readExpected(dir.resolve(s"$name.arrow"), allocator)
      val rnd = new Random(name.hashCode)
      withReader(name) { r =>
        val n = r.numRows
        if (n > 0) {
          val ranges = Seq((0L, math.min(n, 1L)), (n - 1, n)) ++ Seq.fill(6) {
            val a = rnd.self.nextLong(n)
            (a, math.min(n, a + 1 + rnd.self.nextLong(math.min(n - a, 3000))))
          }
          ranges.foreach { case (a, b) =>
            // one field at a time, and a struct pruned to its first child
            r.fileSchema.fields.foreach { f =>
              val g = if (f.isStruct && f.children.size > 1) f.withChildren(f.children.take(1)) else f
              check(r, Seq(g), a, b, expected)
            }
          }
        }
      }
    }
  }
}
