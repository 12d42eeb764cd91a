package io.lancespark.format.v01

import java.io.File
import java.nio.file.{Files, Path, Paths}

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{FieldVector, ValueVector}
import org.apache.arrow.vector.ipc.ArrowFileReader
import org.apache.arrow.vector.util.Text

import io.lancespark.schema.LanceSchema
import io.lancespark.format.input.LocalFileSource
import io.lancespark.proto.table.Manifest

/** Fixtures written by tests/fixtures/codec_fixtures.py and legacy_fixtures.py. */
object LegacyFixtures {

  private val howTo =
    "create them from the repository root with: " +
      "<repo>/.venv/bin/python (make venv) tests/fixtures/codec_fixtures.py target/fixtures && " +
      "<repo>/.venv/bin/python (make venv) tests/fixtures/legacy_fixtures.py target/fixtures " +
      "(or point LANCE_FIXTURES at such a directory)"

  /** `LANCE_FIXTURES`, else target/fixtures of the sbt build root. */
  lazy val root: Path = {
    val dir = sys.env.get("LANCE_FIXTURES").map(Paths.get(_)).getOrElse {
      val here = Paths.get(sys.props("user.dir")).toAbsolutePath
      val candidates = Seq(here, here.getParent).filter(_ != null).map(_.resolve("target/fixtures"))
      candidates.find(p => Files.isDirectory(p.resolve("datasets"))).getOrElse(candidates.last)
    }
    if (!Files.isDirectory(dir.resolve("datasets")))
      throw new IllegalStateException(s"Lance fixtures are missing at $dir: $howTo")
    dir
  }

  def dataset(name: String): Path = {
    val d = root.resolve("datasets").resolve(name)
    if (!Files.isDirectory(d)) throw new IllegalStateException(s"fixture dataset $d is missing: $howTo")
    d
  }

  /** The newest manifest of a dataset (u32-length-prefixed protobuf at the
    * position in the last 16 bytes). */
  def manifest(ds: Path): Manifest = {
    val files = Option(ds.resolve("_versions").toFile.listFiles()).getOrElse(Array.empty[File])
      .filter(_.getName.endsWith(".manifest"))
    require(files.nonEmpty, s"no manifests in $ds")
    files.map { f =>
      val bytes = Files.readAllBytes(f.toPath)
      val bb = java.nio.ByteBuffer.wrap(bytes).order(java.nio.ByteOrder.LITTLE_ENDIAN)
      val pos = bb.getLong(bytes.length - 16).toInt
      val len = bb.getInt(pos)
      Manifest.parseFrom(java.util.Arrays.copyOfRange(bytes, pos + 4, pos + 4 + len))
    }.maxBy(_.getVersion)
  }

  def schema(m: Manifest): LanceSchema =
    LanceSchema.fromProto(m.getFieldsList.asScala.toSeq,
      m.getSchemaMetadataMap.asScala.map { case (k, v) => k -> v.toByteArray }.toMap, "manifest")

  final case class DataFileRef(fragmentId: Long, path: Path, fieldIds: Seq[Int], rows: Long)

  def dataFiles(ds: Path, m: Manifest): Seq[DataFileRef] =
    m.getFragmentsList.asScala.toSeq.flatMap { frag =>
      frag.getFilesList.asScala.map { df =>
        DataFileRef(frag.getId, ds.resolve("data").resolve(df.getPath),
          df.getFieldsList.asScala.map(_.intValue).toSeq, frag.getPhysicalRows)
      }
    }

  def open(ref: DataFileRef, schema: LanceSchema): LegacyFileReader =
    LegacyFileReader.open(new LocalFileSource(ref.path), schema, ref.fieldIds)

  /** Each column of `frag-<id>.arrow`, normalized row by row. */
  def expected(ds: Path, fragmentId: Long, allocator: BufferAllocator): Map[String, IndexedSeq[Any]] = {
    val file = ds.resolveSibling(ds.getFileName.toString + ".expected").resolve(s"frag-$fragmentId.arrow")
    val ch = Files.newByteChannel(file)
    val reader = new ArrowFileReader(ch, allocator)
    try {
      val root = reader.getVectorSchemaRoot
      val names = root.getSchema.getFields.asScala.map(_.getName).toVector
      val cols = names.map(_ => IndexedSeq.newBuilder[Any])
      while (reader.loadNextBatch()) {
        names.indices.foreach(i => cols(i) ++= values(root.getVector(i)))
      }
      names.zip(cols.map(_.result())).toMap
    } finally { reader.close(); ch.close() }
  }

  case object Null

  def values(v: ValueVector): IndexedSeq[Any] =
    (0 until v.getValueCount).map(i => normalize(v.getObject(i)))

  def normalize(x: Any): Any = x match {
    case null => Null
    case t: Text => t.toString
    case b: Array[Byte] => b.toVector
    case d: java.lang.Double if d.isNaN => "NaN"
    case f: java.lang.Float if f.isNaN => "NaNf"
    case l: java.util.List[_] => l.asScala.map(normalize).toVector
    case m: java.util.Map[_, _] => m.asScala.map { case (k, v) => normalize(k) -> normalize(v) }.toMap
    case other => other
  }

  /** The first difference between `actual` rows and `expected` rows, if any. */
  def firstMismatch(column: String, actual: FieldVector, expected: IndexedSeq[Any], expectedFrom: Int = 0): Option[String] = {
    val got = values(actual)
    val want = expected.slice(expectedFrom, expectedFrom + got.length)
    if (got.length != want.length) Some(s"column $column: ${got.length} rows read, ${want.length} expected")
    else got.indices.collectFirst {
      case i if got(i) != want(i) => s"column $column, row ${expectedFrom + i}: got ${got(i)}, expected ${want(i)}"
    }
  }
}
