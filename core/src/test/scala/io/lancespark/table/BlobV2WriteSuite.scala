package io.lancespark.table

import java.nio.file.{Files, Path}
import java.security.MessageDigest

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.{BigIntVector, FieldVector, LargeVarBinaryVector, VarCharVector}
import org.apache.arrow.vector.complex.StructVector
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.{LanceFormatException, LanceSchema}
import io.lancespark.table.commit.{CommitSettings, Committer, OverwriteDataset}
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.{DataFiles, Dataset, DatasetStorage, FragmentWriter}

/** 2.2 blob columns (`lance.blob.v2`) written by our file writer: pylance 14
  * reads the values (`take_blobs`) and the descriptions (`to_table`) of our
  * files, and writing the same values itself gives the same descriptions
  * (kinds, positions, sizes, blob ids) and the same blob files (names,
  * sizes); our reader reads them back. Value bytes follow a formula both
  * sides compute: byte j of value i is (31 i + 7 j + (j >> 8)) mod 256. */
class BlobV2WriteSuite extends AnyFunSuite {

  private val allocator = new RootAllocator()
  private val KiB = 1024
  private val MiB = 1024 * 1024

  private def value(i: Int, size: Int): Array[Byte] = {
    val out = new Array[Byte](size)
    var j = 0
    while (j < size) { out(j) = (31 * i + 7 * j + (j >> 8)).toByte; j += 1 }
    out
  }

  private def sha(b: Array[Byte]): String =
    MessageDigest.getInstance("SHA-256").digest(b).map(x => f"${x & 0xff}%02x").mkString

  private val schema: LanceSchema = LanceSchema.fromArrow(new Schema(java.util.List.of(
    new Field("id", FieldType.nullable(new ArrowType.Int(64, true)), null),
    new Field("img", new FieldType(true, ArrowType.Struct.INSTANCE, null,
      java.util.Map.of("ARROW:extension:name", "lance.blob.v2")), java.util.List.of(
      new Field("data", FieldType.nullable(ArrowType.LargeBinary.INSTANCE), null),
      new Field("uri", FieldType.nullable(ArrowType.Utf8.INSTANCE), null))))))

  /** Writes rows (id, value: None for NULL) as one data file, in batches of `batch` rows. */
  private def writeFile(s: DatasetStorage, rows: Seq[(Long, Option[Int])], batch: Int, pageRows: Option[Int],
                        uri: Option[String] = None) = {  // uri: given to the row of id 1
    val w = new FragmentWriter(s, schema, DataFileVersion.V2_2, pageRows, "test")
    try {
      rows.grouped(batch).foreach { part =>
        Using.resources(new BigIntVector("id", allocator), schema.fields(1).toArrow.createVector(allocator)) { (ids, v) =>
          val sv = v.asInstanceOf[StructVector]
          val data = sv.getChild("data").asInstanceOf[LargeVarBinaryVector]
          val uris = sv.getChild("uri").asInstanceOf[VarCharVector]
          ids.allocateNew(part.size); sv.allocateNew()
          part.zipWithIndex.foreach { case ((id, size), i) =>
            ids.set(i, id)
            size match {
              case None => sv.setNull(i)
              case Some(n) =>
                sv.setIndexDefined(i)
                data.setSafe(i, value(id.toInt, n))
                uri.filter(_ => id == 1).fold(uris.setNull(i))(u => uris.setSafe(i, u.getBytes("UTF-8")))
            }
          }
          ids.setValueCount(part.size); data.setValueCount(part.size); uris.setValueCount(part.size)
          sv.setValueCount(part.size)
          w.write(Seq(ids, sv))
        }
      }
      w.finish()
    } catch { case e: Throwable => w.abort(); throw e }
  }

  private def dataset(rows: Seq[Seq[(Long, Option[Int])]], batch: Int, pageRows: Option[Int] = None): DatasetStorage = {
    val s = DatasetStorage(Files.createTempDirectory("blobv2-write").resolve("t.lance").toString, new Configuration())
    val files = rows.map(r => writeFile(s, r, batch, pageRows))
    Committer.commit(s, None, OverwriteDataset(files, schema, DataFileVersion.V2_2), CommitSettings())
    s
  }

  /** Run by pylance: on our dataset (argv 1) prints "V id len sha" from
    * take_blobs and "D id kind position size blob_id uri" from to_table; then
    * writes the same rows itself (argv 2) and prints its descriptions as "P
    * ..." and both datasets' blob files as "F ours|theirs name size". */
  private val script: String =
    """
import sys, os, glob, hashlib, numpy as np, pyarrow as pa, lance
ours, theirs, spec = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [(int(a), None if b == "-" else int(b)) for a, b in (x.split(":") for x in spec.split(","))]
def value(i, n):
    j = np.arange(n, dtype=np.int64)
    return ((31 * i + 7 * j + (j >> 8)) & 255).astype(np.uint8).tobytes()
ds = lance.dataset(ours)
assert ds.data_storage_version == "2.2", ds.data_storage_version
t = ds.to_table(columns=["id"], with_row_id=True)
for i, b in zip(t.column("id").to_pylist(), ds.take_blobs("img", ids=t.column("_rowid").to_pylist())):
    v = None if b is None else b.read()
    print("V", i, -1 if v is None else len(v), "-" if v is None else hashlib.sha256(v).hexdigest())
def descriptions(path, tag):
    t = lance.dataset(path).to_table(columns=["id", "img"])
    for i, d in zip(t.column("id").to_pylist(), t.column("img").to_pylist()):
        print(tag, i, "null" if d is None else " ".join(str(d[k]) for k in ("kind", "position", "size", "blob_id")),
              "" if d is None else repr(d["blob_uri"]))
descriptions(ours, "D")
if theirs != "-":
    f = pa.field("img", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    tbl = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                    "img": pa.array([None if n is None else value(i, n) for i, n in rows], pa.large_binary())},
                   schema=pa.schema([pa.field("id", pa.int64()), f]))
    lance.write_dataset(tbl, theirs, data_storage_version="2.2")
    descriptions(theirs, "P")
for tag, path in (("ours", ours), ("theirs", theirs)):
    for p in sorted(glob.glob(os.path.join(path, "data", "*", "*.blob"))):
        print("F", tag, os.path.basename(p), os.path.getsize(p))
"""

  private def spec(rows: Seq[(Long, Option[Int])]): String =
    rows.map { case (i, n) => s"$i:${n.fold("-")(_.toString)}" }.mkString(",")

  private def expected(rows: Seq[(Long, Option[Int])]): Map[Long, (Long, String)] =
    rows.map { case (i, n) => i -> n.fold((-1L, "-"))(x => (x.toLong, sha(value(i.toInt, x)))) }.toMap

  private def lines(out: String, tag: String): Vector[Vector[String]] =
    out.linesIterator.map(_.trim.split(" ").toVector).filter(_.headOption.contains(tag)).map(_.drop(1)).toVector

  /** (id -> (len, sha)) of every live row, read by our reader. */
  private def ourRead(s: DatasetStorage): Map[Long, (Long, String)] = {
    val snap = Dataset.open(s, None)
    snap.fragments.flatMap { f =>
      Using.resource(new FragmentScanner(snap.storage, snap.version, f, snap.schema.fields, allocator,
          ref => DataFiles.open(snap.storage, snap.schema, ref))) { sc =>
        Using.resource(sc.read(0, f.physicalRows)) { b =>
          val ids = b.vectors.head.asInstanceOf[BigIntVector]
          val sv = b.vectors(1).asInstanceOf[StructVector]
          val data = sv.getChild("data").asInstanceOf[LargeVarBinaryVector]
          (0 until b.rowCount).map { i =>
            ids.get(i) -> (if (sv.isNull(i)) (-1L, "-") else { val v = data.getObject(i); (v.length.toLong, sha(v)) })
          }
        }
      }
    }.toMap
  }

  private def pylance(): Unit = assume(Files.exists(Path.of(PylanceProcess.python)), "no pylance")

  test("one batch: pylance reads our values, and writes the same descriptions and blob files") {
    pylance()
    val sizes: Seq[Option[Int]] = Seq(Some(0), Some(5), Some(64 * KiB), Some(64 * KiB + 1), Some(100), Some(4 * MiB),
      Some(4 * MiB + 1), None, Some(7), Some(5 * MiB), Some(0), None, Some(70 * KiB), Some(3 * MiB), Some(9 * MiB),
      Some(1), Some(64 * KiB - 1))
    val rng = new scala.util.Random(39)
    val more = Seq.fill(20)(if (rng.nextInt(6) == 0) None else Some(rng.nextInt(4) match {
      case 0 => rng.nextInt(2000)
      case 1 => 60 * KiB + rng.nextInt(10 * KiB)
      case 2 => rng.nextInt(MiB)
      case _ => 4 * MiB - 8 + rng.nextInt(16)
    }))
    val rows = (sizes ++ more).zipWithIndex.map { case (n, i) => i.toLong -> n }
    val s = dataset(Seq(rows), batch = rows.size)
    val dir = Files.createTempDirectory("blobv2-theirs")
    val out = PylanceProcess.run(script, s.root.toUri.getPath, dir.resolve("p.lance").toString, spec(rows))
    val want = expected(rows)
    assert(lines(out, "V").map(a => a(0).toLong -> (a(1).toLong, a(2))).toMap == want, out)
    val ours = lines(out, "D")
    val theirs = lines(out, "P")
    assert(ours.size == rows.size && ours == theirs, out)
    assert(ours.exists(_(1) == "0") && ours.exists(_(1) == "1") && ours.exists(_(1) == "2") && ours.exists(_(1) == "null"))
    val files = lines(out, "F")
    assert(files.filter(_(0) == "ours").map(_.drop(1)) == files.filter(_(0) == "theirs").map(_.drop(1)), out)
    assert(files.count(_(0) == "ours") == 1 + rows.count(_._2.exists(_ > 4 * MiB)))
    assert(ourRead(s) == want)
  }

  test("several files, batches and pages; deletes by pylance; nulls and empties only pages") {
    pylance()
    val rng = new scala.util.Random(7)
    def rows(from: Int, n: Int): Seq[(Long, Option[Int])] = (from until from + n).map { i =>
      i.toLong -> (if (i % 9 == 4) None else Some(rng.nextInt(5) match {
        case 0 => 0
        case 1 => rng.nextInt(300)
        case 2 => 64 * KiB + rng.nextInt(200 * KiB)
        case 3 => 4 * MiB + 1 + rng.nextInt(MiB)
        case _ => rng.nextInt(70 * KiB)
      }))
    }
    val a = rows(0, 23)
    val b = (23 until 27).map(i => i.toLong -> Option.empty[Int]) ++ (27 until 31).map(i => i.toLong -> Some(0)) ++
      rows(31, 9)
    val s = dataset(Seq(a, b), batch = 5, pageRows = Some(4))
    PylanceProcess.run("import sys, lance; lance.dataset(sys.argv[1]).delete('id % 5 = 2')", s.root.toUri.getPath)
    val out = PylanceProcess.run(script, s.root.toUri.getPath, "-", spec(a ++ b))
    val want = expected((a ++ b).filter(_._1 % 5 != 2))
    assert(lines(out, "V").map(a => a(0).toLong -> (a(1).toLong, a(2))).toMap == want, out)
    assert(ourRead(s) == want)
    // blob files sit in each data file's own directory, ids from 1 in each
    val blobDirs = Files.list(Path.of(s.root.toUri).resolve("data")).iterator().asScala.filter(Files.isDirectory(_)).toList
    assert(blobDirs.size == 2)
  }

  test("a value with a uri is refused naming the column; the failed file and its blob files are removed") {
    val s = DatasetStorage(Files.createTempDirectory("blobv2-uri").resolve("t.lance").toString, new Configuration())
    val e = intercept[LanceFormatException](writeFile(s, Seq(0L -> Some(5 * MiB), 1L -> Some(3)), 2, None,
      uri = Some("file:///x.bin")))
    assert(e.getMessage.contains("'img'") && e.getMessage.contains("uri"), e.getMessage)
    val data = Path.of(s.root.toUri).resolve("data")
    assert(!Files.exists(data) || Files.list(data).count() == 0)
  }
}
