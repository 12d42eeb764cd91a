package io.lancespark.format.v20

import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.ipc.ArrowFileReader

/** Test helpers: fixtures location, expected Arrow IPC tables, and a
  * value-by-value comparison of vectors. */
object ArrowCompare {

  /** The fixtures directory: -Dlance.fixtures, $LANCE_FIXTURES, or
    * target/fixtures under the sbt project base (found by walking up). */
  lazy val fixtures: Path = {
    val explicit = Option(System.getProperty("lance.fixtures")).orElse(sys.env.get("LANCE_FIXTURES"))
    val dir = explicit.map(Path.of(_)).getOrElse {
      var d = Path.of("").toAbsolutePath
      var found: Option[Path] = None
      while (d != null && found.isEmpty) {
        if (Files.exists(d.resolve("build.sbt")) && Files.isDirectory(d.resolve("protos")))
          found = Some(d.resolve("target/fixtures"))
        d = d.getParent
      }
      found.getOrElse(Path.of("target/fixtures").toAbsolutePath)
    }
    if (!Seq("v2_0", "v2_0_extra", "v2_other_versions", "datasets").forall(d => Files.isDirectory(dir.resolve(d))))
      throw new AssertionError(
        s"Lance fixtures missing at $dir. Make them from the project root with: " +
          "<repo>/.venv/bin/python (make venv) tests/fixtures/codec_fixtures.py target/fixtures && " +
          "<repo>/.venv/bin/python (make venv) tests/fixtures/v2_fixtures.py target/fixtures " +
          "(or any python with pylance 14.0.2), or point LANCE_FIXTURES / -Dlance.fixtures at them.")
    dir
  }

  /** Reads all batches of an Arrow IPC file; each column's values normalized. */
  def readExpected(path: Path, allocator: BufferAllocator): Expected = {
    val ch = Files.newByteChannel(path)
    val reader = new ArrowFileReader(ch, allocator)
    try {
      val root = reader.getVectorSchemaRoot
      val fields = root.getSchema.getFields.asScala.toVector
      val cols = Array.fill(fields.size)(Vector.newBuilder[Any])
      while (reader.loadNextBatch()) {
        fields.indices.foreach { c =>
          val v = root.getVector(c)
          (0 until root.getRowCount).foreach(r => cols(c) += normalize(v.getObject(r)))
        }
      }
      Expected(fields.map(_.getName), fields.map(_.getType.toString), cols.map(_.result()).toVector)
    } finally { reader.close(); ch.close() }
  }

  final case class Expected(names: Vector[String], types: Vector[String], columns: Vector[Vector[Any]]) {
    def numRows: Int = columns.headOption.fold(0)(_.size)
    def column(name: String): Vector[Any] = columns(names.indexOf(name))
  }

  /** Comparable form: byte[] -> Seq, lists -> Seq, maps -> Map, NaN -> marker. */
  def normalize(o: Any): Any = o match {
    case null => null
    case b: Array[Byte] => b.toSeq
    case d: java.lang.Double if d.isNaN => "NaN"
    case f: java.lang.Float if f.isNaN => "NaN"
    case l: java.util.List[_] => l.asScala.map(normalize).toVector
    case m: java.util.Map[_, _] => m.asScala.map { case (k, v) => k -> normalize(v) }.toMap
    case t: org.apache.arrow.vector.util.Text => t.toString
    case other => other
  }

  def values(v: FieldVector): Vector[Any] = (0 until v.getValueCount).map(i => normalize(v.getObject(i))).toVector

  /** None if equal, else a description of the first difference. */
  def firstMismatch(column: String, actual: Vector[Any], expected: Vector[Any]): Option[String] = {
    if (actual.size != expected.size) Some(s"column '$column': ${actual.size} rows, expected ${expected.size}")
    else actual.indices.find(i => actual(i) != expected(i)).map { i =>
      s"column '$column' row $i: got ${actual(i)}, expected ${expected(i)}"
    }
  }
}
