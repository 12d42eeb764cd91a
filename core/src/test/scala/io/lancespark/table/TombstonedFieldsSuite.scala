package io.lancespark.table

import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.BigIntVector
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.table.commit.FragmentColumns
import io.lancespark.table.evolution.ColumnAddition
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.{TransactionFile, DataFiles, Dataset, DatasetStorage, FragmentWriter, Snapshot}

/** Fields moved out of a data file: pylance's `LanceFragment.update_columns`
  * writes the updated column to a new file of the fragment and sets its field
  * id to -2 (the tombstone) in the file that held it before. Every live row we
  * read must equal pylance's `to_table`, at the new version and (old values)
  * at the version before the update. */
class TombstonedFieldsSuite extends AnyFunSuite {

  private val allocator = new RootAllocator()

  /** pylance writes id/a/s in fragments of 12 rows, deletes ids = 3 mod 7,
    * then sets a = -id for the even ids (by _rowid, per fragment) and commits
    * an Update. Prints the fragments' field lists, the version before the
    * update, and "id a s" of every live row at both versions. */
  private val writer: String =
    """
import sys, pyarrow as pa, lance
path, version = sys.argv[1], sys.argv[2]
n = 30
t = pa.table({"id": pa.array(range(n), pa.int64()), "a": pa.array([i * 10 for i in range(n)], pa.int64()),
              "s": pa.array([f"s{i}" for i in range(n)])})
ds = lance.write_dataset(t, path, data_storage_version=version, max_rows_per_file=12)
ds.delete("id % 7 = 3")
ds = lance.dataset(path)
prev = ds.version
frags, mod = [], set()
for f in ds.get_fragments():
    rows = f.to_table(columns=["id"], with_row_id=True)
    pick = [(r, i) for r, i in zip(rows.column("_rowid").to_pylist(), rows.column("id").to_pylist()) if i % 2 == 0]
    src = pa.table({"_rowid": pa.array([r for r, _ in pick], pa.uint64()),
                    "a": pa.array([-i for _, i in pick], pa.int64())})
    md, fields = f.update_columns(src)
    frags.append(md); mod.update(fields)
ds = lance.LanceDataset.commit(path, lance.LanceOperation.Update(updated_fragments=frags,
    fields_modified=sorted(mod)), read_version=prev)
ds.validate()
for f in ds.get_fragments():
    print("FIELDS", f.fragment_id, ";".join(",".join(str(x) for x in df.fields) for df in f.metadata.files))
print("PREV", prev)
for tag, d in (("NEW", ds), ("OLD", lance.dataset(path, version=prev))):
    for r in d.to_table().to_pylist():
        print(tag, r["id"], r["a"], r["s"])
"""

  /** "id a s" of every live row of a snapshot, read with all its fields. */
  private def read(snap: Snapshot): Set[String] = {
    val fields = Seq("id", "a", "s").map(n => snap.schema.fields.find(_.name == n).get)
    snap.fragments.flatMap { f =>
      Using.resource(new FragmentScanner(snap.storage, snap.version, f, fields, allocator,
          ref => DataFiles.open(snap.storage, snap.schema, ref))) { sc =>
        Using.resource(sc.read(0, f.physicalRows)) { b =>
          (0 until b.rowCount).map(i => b.vectors.map(v => String.valueOf(v.getObject(i))).mkString(" "))
        }
      }
    }.toSet
  }

  for (version <- Seq("2.0", "2.1")) {
    test(s"file version $version: a column moved to a new file (old file's field id -2) reads as pylance") {
      assume(Files.exists(Path.of(PylanceProcess.python)), "no pylance")
      val dir = Files.createTempDirectory("tombstone")
      val path = dir.resolve("ds").toString
      val out = PylanceProcess.run(writer, path, version)
      val lines = out.linesIterator.map(_.trim).toVector
      def rows(tag: String): Set[String] = lines.filter(_.startsWith(tag + " ")).map(_.drop(tag.length + 1)).toSet
      // pylance did tombstone the field: each fragment's first file lists -2
      val fieldLists = lines.filter(_.startsWith("FIELDS "))
      assert(fieldLists.nonEmpty && fieldLists.forall(_.contains("-2")), out)
      val prev = lines.find(_.startsWith("PREV ")).get.drop(5).toLong
      val (newRows, oldRows) = (rows("NEW"), rows("OLD"))
      assert(newRows.size == 30 - 4 && newRows.contains("2 -2 s2") && newRows.contains("1 10 s1"), out)
      assert(oldRows.contains("2 20 s2"), out)

      val s = DatasetStorage(path, new Configuration())
      val snap = Dataset.open(s, None)
      assert(snap.fragments.forall(_.files.exists(_.fieldIds.contains(-2))))
      assert(read(snap) == newRows)
      assert(read(Dataset.open(s, Some(prev))) == oldRows)
      // a tombstone is no field id: the next free id is still above the schema's (id, a, s: 0..2)
      assert(snap.schema.maxFieldId == 2 && ColumnAddition.maxFieldId(snap) == 2)
    }
  }

  /** pylance writes id/a/s (a = 10 id) in fragments of 12 rows and deletes
    * ids = 3 mod 7; then (second script) validates, prints "id a s" of every
    * live row and the fragments' field lists. */
  private val plain: String =
    """
import sys, pyarrow as pa, lance
path, version = sys.argv[1], sys.argv[2]
n = 30
t = pa.table({"id": pa.array(range(n), pa.int64()), "a": pa.array([i * 10 for i in range(n)], pa.int64()),
              "s": pa.array([f"s{i}" for i in range(n)])})
ds = lance.write_dataset(t, path, data_storage_version=version, max_rows_per_file=12)
ds.delete("id % 7 = 3")
"""
  private val check: String =
    """
import sys, lance
ds = lance.dataset(sys.argv[1])
ds.validate()
for f in ds.get_fragments():
    print("FIELDS", f.fragment_id, ";".join(f"{df.path}:" + ",".join(str(x) for x in df.fields) for df in f.metadata.files))
for r in ds.to_table().to_pylist():
    print("ROW", r["id"], r["a"], r["s"])
"""

  /** Replaces column a of every fragment by a file we write (row o of fragment
    * k is id 12k+o: a = -id for even ids, 10 id as before for odd ones). */
  private def replaceA(s: DatasetStorage, snap: Snapshot, value: Long => Long): Snapshot = {
    val plan = ColumnAddition.planUpdate(snap, Seq("a"))
    assert(plan.columns.fields.map(f => f.name -> f.id) == Vector("a" -> 1) && plan.replaces == Set(1))
    assert(plan.schema == snap.schema && plan.isUpdate)
    val files = snap.fragments.map { f =>
      val w = new FragmentWriter(s, plan.columns, plan.fileVersion, None, "upd")
      Using.resource(new BigIntVector("a", allocator)) { v =>
        v.allocateNew(f.physicalRows.toInt)
        (0 until f.physicalRows.toInt).foreach(o => v.set(o, value(12 * f.id + o)))
        v.setValueCount(f.physicalRows.toInt)
        w.write(Seq(v))
      }
      FragmentColumns(f.id, w.finish())
    }
    ColumnAddition.commit(s, plan, files)
  }

  test("planUpdate refuses unknown, metadata, repeated and no columns, naming them") {
    assume(Files.exists(Path.of(PylanceProcess.python)), "no pylance")
    val path = Files.createTempDirectory("tombstone-e").resolve("ds").toString
    PylanceProcess.run(plain, path, "2.1")
    val snap = Dataset.open(DatasetStorage(path, new Configuration()), None)
    def err(names: String*): String = intercept[IllegalArgumentException](ColumnAddition.planUpdate(snap, names)).getMessage
    val unknown = err("a", "nope")
    assert(unknown.contains("'nope'") && unknown.contains("id, a, s"), unknown)
    assert(err("_rowaddr").contains("'_rowaddr' is a metadata column"))
    assert(err("a", "a").contains("'a' is given twice"))
    assert(err().contains("no columns to update"))
  }

  for (version <- Seq("2.0", "2.1")) {
    test(s"file version $version: our update of a column (new file, old ids -2) reads in pylance; validate() passes") {
      assume(Files.exists(Path.of(PylanceProcess.python)), "no pylance")
      val dir = Files.createTempDirectory("tombstone-w")
      val path = dir.resolve("ds").toString
      PylanceProcess.run(plain, path, version)
      val s = DatasetStorage(path, new Configuration())
      val v1 = Dataset.open(s, None)
      val dataDir = Path.of(path, "data")
      def listing(): Map[String, (Long, java.nio.file.attribute.FileTime)] = {
        val it = Files.list(dataDir)
        try it.iterator().asScala.map(p => p.getFileName.toString -> (Files.size(p), Files.getLastModifiedTime(p))).toMap
        finally it.close()
      }
      val before = listing()
      val live = (0L until 30L).filter(_ % 7 != 3)
      val v2 = replaceA(s, v1, id => if (id % 2 == 0) -id else 10 * id)
      val expected2 = live.map(id => s"$id ${if (id % 2 == 0) -id else 10 * id} s$id").toSet
      // the old files are untouched: same names, sizes and times
      val after = listing()
      assert(before.forall { case (n, st) => after.get(n).contains(st) })
      assert(after.size == before.size + v1.fragments.size)
      def pylance(): (Vector[String], Set[String]) = {
        val out = PylanceProcess.run(check, path).linesIterator.map(_.trim).toVector
        (out.filter(_.startsWith("FIELDS ")), out.filter(_.startsWith("ROW ")).map(_.drop(4)).toSet)
      }
      val (fields2, rows2) = pylance()
      assert(rows2 == expected2)
      assert(fields2.forall(l => l.contains(":0,-2,2;") && l.endsWith(":1")), fields2)
      assert(read(v2) == expected2)
      assert(read(Dataset.open(s, Some(v1.version))) == live.map(id => s"$id ${10 * id} s$id").toSet)
      // a second update of the same column: its file holds exactly that column, so the new
      // file takes its place (a DataReplacement); the old files keep their tombstones
      val v3 = replaceA(s, v2, id => id + 1000)
      val expected3 = live.map(id => s"$id ${id + 1000} s$id").toSet
      val (fields3, rows3) = pylance()
      assert(rows3 == expected3)
      assert(fields3.forall(l => l.contains(":0,-2,2;") && !l.contains(":-2;") && l.endsWith(":1")), fields3)
      assert(TransactionFile.read(s, v3.manifest.getTransactionFile).exists(_.hasDataReplacement))
      assert(read(v3) == expected3)
      assert(read(Dataset.open(s, Some(v2.version))) == expected2)
    }
  }
}
