package io.lancespark.table

import java.nio.file.{Files, Path}
import java.security.MessageDigest

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.{BigIntVector, FieldVector, LargeVarBinaryVector, VarBinaryVector}
import org.apache.arrow.vector.complex.StructVector
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.table.scan.{BlobColumns, FragmentScanner}
import io.lancespark.table.storage.{DataFiles, Dataset, DatasetStorage, Snapshot}

/** Blob columns as pylance writes them: blob v1 (`lance-encoding:blob`) at
  * file versions 2.0 and 2.1, blob v2 (`lance.blob.v2`) at 2.2 with values
  * inline, in packed and dedicated blob files and in external files. Every
  * value read must be the bytes pylance's `take_blobs` returns (compared by
  * length and SHA-256, per id), deleted rows absent, nulls null. */
class BlobColumnsSuite extends AnyFunSuite {

  private val allocator = new RootAllocator()

  /** pylance writes a dataset (seeded sizes from 0 B to `maxSize`, every 7th
    * value null, some external at 2.2), deletes ids divisible by 11, and prints
    * "id len sha256" (len -1: null) of each live row from take_blobs. */
  private val writer: String =
    """
import sys, hashlib, numpy as np, pyarrow as pa, lance
from lance.blob import Blob
path, version, n, max_size, ext_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rng = np.random.default_rng(int(n) * 7 + len(version))
sizes = [int(s) for s in np.concatenate([[0, 1, 63, 64, 65, 4096, max_size], rng.integers(0, max_size + 1, n - 7)])]
vals = [None if i % 7 == 3 else rng.integers(0, 256, s, dtype=np.uint8).tobytes() for i, s in enumerate(sizes)]
if version == "2.2":
    import os
    ext = os.path.join(ext_dir, "external.bin")
    with open(ext, "wb") as f: f.write(rng.integers(0, 256, 100000, dtype=np.uint8).tobytes())
    items = [v if v is None else Blob.from_bytes(v) for v in vals]
    items[5] = Blob.from_uri("file://" + ext)
    items[9] = Blob.from_uri("file://" + ext, 17, 5000)
    col = lance.blob_array(items)
    kw = dict(allow_external_blob_outside_bases=True)
else:
    col = pa.array(vals, pa.large_binary())
    kw = {}
fields = [pa.field("id", pa.int64()),
          pa.field("img", col.type) if version == "2.2" else
          pa.field("img", pa.large_binary(), metadata={"lance-encoding:blob": "true"})]
t = pa.Table.from_arrays([pa.array(range(n), pa.int64()), col], schema=pa.schema(fields))
ds = lance.write_dataset(t, path, data_storage_version=version, max_rows_per_file=max(1, n // 2), **kw)
ds.delete("id % 11 = 10")
ds = lance.dataset(path)
ids = ds.to_table(columns=["id"]).column(0).to_pylist()
blobs = ds.take_blobs("img", ids=ds.to_table(columns=[], with_row_id=True).column("_rowid").to_pylist())
for i, b in zip(ids, blobs):
    v = None if b is None else b.read()
    print(i, -1 if v is None else len(v), "-" if v is None else hashlib.sha256(v).hexdigest())
"""

  private def sha(b: Array[Byte]): String =
    MessageDigest.getInstance("SHA-256").digest(b).map(x => f"${x & 0xff}%02x").mkString

  private def fixture(version: String, n: Int, maxSize: Int): (DatasetStorage, Map[Long, (Long, String)]) = {
    val dir = Files.createTempDirectory("blobs")
    val path = dir.resolve("ds").toString
    val out = PylanceProcess.run(writer, path, version, n.toString, maxSize.toString, dir.toString)
    val expected = out.linesIterator.map(_.trim.split(" ")).filter(a => a.length == 3 && a(0).forall(_.isDigit))
      .map(a => a(0).toLong -> (a(1).toLong, a(2))).toMap
    assert(expected.nonEmpty, out)
    (DatasetStorage(path, new Configuration()), expected)
  }

  /** (id -> (len, sha)) of every live row, read with the given blob field. */
  private def read(snap: Snapshot, blob: LanceField): (Map[Long, (Long, String)], Long) = {
    val fields = Seq(snap.schema.fields.find(_.name == "id").get, blob)
    var bytes = 0L
    val rows = snap.fragments.flatMap { f =>
      Using.resource(new FragmentScanner(snap.storage, snap.version, f, fields, allocator,
          ref => DataFiles.open(snap.storage, snap.schema, ref))) { sc =>
        val out = Using.resource(sc.read(0, f.physicalRows)) { b =>
          val ids = b.vectors.head.asInstanceOf[BigIntVector]
          val data: Option[FieldVector] = b.vectors(1) match {
            case s: StructVector => Option(s.getChild("data"))
            case v => Some(v)
          }
          (0 until b.rowCount).map { i =>
            val v: Array[Byte] = data.map {
              case l: LargeVarBinaryVector => l.getObject(i)
              case l: VarBinaryVector => l.getObject(i)
              case other => fail(s"blob column read as ${other.getClass.getSimpleName}")
            }.orNull
            ids.get(i) -> (if (v == null) (-1L, "-") else (v.length.toLong, sha(v)))
          }
        }
        bytes += sc.bytesRead
        out
      }
    }
    (rows.toMap, bytes)
  }

  for (version <- Seq("2.0", "2.1", "2.2")) {
    test(s"file version $version: blob values equal take_blobs (0 B .. 3 MiB, nulls, deleted rows)") {
      assume(Files.exists(Path.of(PylanceProcess.python)), "no pylance")
      val (s, expected) = fixture(version, 60, 3 << 20)
      val snap = Dataset.open(s, None)
      val (got, _) = read(snap, snap.schema.fields.find(_.name == "img").get)
      assert(got.keySet == expected.keySet)
      expected.foreach { case (id, e) => assert(got(id) == e, s"id $id") }
      assert(expected.values.exists(_._1 == -1L) && expected.values.exists(_._1 == 0L))
      if (version == "2.2") {
        // values in packed and dedicated blob files and in external files were among them
        val sidecars = Files.list(Path.of(s.root.toUri).resolve("data")).iterator().asScala
          .filter(Files.isDirectory(_)).flatMap(d => Files.list(d).iterator().asScala).toList
        assert(sidecars.exists(_.toString.endsWith(".blob")), "pylance wrote no blob files")
      }
    }
  }

  test("2.2: a scan of the blob column's uri only reads no blob bytes") {
    assume(Files.exists(Path.of(PylanceProcess.python)), "no pylance")
    val (s, expected) = fixture("2.2", 40, 2 << 20)
    val snap = Dataset.open(s, None)
    val img = snap.schema.fields.find(_.name == "img").get
    val (_, all) = read(snap, img)
    val (rows, uriOnly) = read(snap, img.withChildren(img.children.filter(_.name == "uri")))
    assert(rows.keySet == expected.keySet)
    val blobBytes = expected.values.map(_._1).filter(_ > 0).sum
    assert(all >= blobBytes, s"a full scan read $all bytes, the blobs are $blobBytes")
    assert(uriOnly < 64 * 1024, s"a scan of uri read $uriOnly bytes")
    // position and size (pylance's blob struct declares them): each value's size, no blob bytes read
    val meta = img.withChildren(img.children.filter(c => c.name == "position" || c.name == "size"))
    assert(meta.children.size == 2, img.children.map(_.name))
    var bytes = 0L
    val sizes = snap.fragments.flatMap { f =>
      Using.resource(new FragmentScanner(snap.storage, snap.version, f, Seq(snap.schema.fields.head, meta), allocator,
          ref => DataFiles.open(snap.storage, snap.schema, ref))) { sc =>
        val out = Using.resource(sc.read(0, f.physicalRows)) { b =>
          val ids = b.vectors.head.asInstanceOf[BigIntVector]
          val size = b.vectors(1).asInstanceOf[StructVector].getChild("size").asInstanceOf[org.apache.arrow.vector.UInt8Vector]
          (0 until b.rowCount).map(i => ids.get(i) -> (if (size.isNull(i)) -1L else size.get(i)))
        }
        bytes += sc.bytesRead
        out
      }
    }.toMap
    assert(sizes == expected.map { case (id, (len, _)) => id -> len })
    // the scan's batch cap applies when bytes are read, not for descriptions only
    assert(BlobColumns.readsBytes(Seq(img)) && !BlobColumns.readsBytes(Seq(meta, snap.schema.fields.head)))
    assert(bytes < 64 * 1024, s"a scan of position and size read $bytes bytes")
  }

  test("2.2: a missing blob file is an error naming the data file and column, never wrong bytes") {
    assume(Files.exists(Path.of(PylanceProcess.python)), "no pylance")
    val (s, _) = fixture("2.2", 20, 1 << 20)
    val data = Path.of(s.root.toUri).resolve("data")
    val blobFiles = Files.walk(data).iterator().asScala.filter(_.toString.endsWith(".blob")).toList
    assert(blobFiles.nonEmpty)
    blobFiles.foreach(Files.delete)
    val snap = Dataset.open(s, None)
    val e = intercept[LanceFormatException](read(snap, snap.schema.fields.find(_.name == "img").get))
    assert(e.getMessage.contains("blob field 'img'") && e.getMessage.contains(".lance") &&
      e.getMessage.contains(".blob"), e.getMessage)
  }
}
