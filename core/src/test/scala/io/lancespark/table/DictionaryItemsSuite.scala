package io.lancespark.table

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Path

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.VarCharVector
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.table.filter.{CompareOp, Filter, Lit}
import io.lancespark.table.scan.{FragmentBatch, FragmentScanner}
import io.lancespark.table.storage.{DataFiles, Dataset, DatasetStorage, Snapshot}

/** A scan that reads string columns only as dictionary items
  * (`FragmentScanner(itemsOnly = true)`, what Spark's column vectors do) is
  * not given the items copied into its vectors: those vectors are hollow
  * (validity only). Read through the dictionary they are pylance's rows, with
  * nulls, deleted rows and a filter on another column (whose rows stay in
  * place, selected); a string column the filter reads is decoded whole (the
  * filter reads its vector); and without `itemsOnly` every vector is whole. */
class DictionaryItemsSuite extends AnyFunSuite {

  private val Rows = 20000

  /** One fragment written by pylance: `id`, a 6-value `label` (NULL every 13th
    * row), a 6-value `kind`; rows with id % 17 = 5 deleted. Pylance's rows by
    * offset ("id|label|kind", "-" for deleted). */
  private def table(version: String): (Path, Vector[String]) =
    PylanceProcess.tableWithRows("items", version,
      """n = 20000
        |ids = np.random.default_rng(5).permutation(n).astype(np.int64)
        |words = ["alpha", "beta", "gamma", "delta-delta-delta", "", "epsilon"]
        |label = pa.array([None if k % 13 == 0 else words[k % 6] for k in ids.tolist()])
        |kind = pa.array(["k%d" % (k % 6) for k in ids.tolist()])
        |lance.write_dataset(pa.table({"id": pa.array(ids), "label": label, "kind": kind}), path,
        |                    data_storage_version=version)
        |lance.dataset(path).delete("id % 17 = 5")
        |t = lance.dataset(path).to_table(with_row_address=True)
        |rows = ["-"] * n
        |for a, i, l, k in zip(t["_rowaddr"].to_pylist(), t["id"].to_pylist(), t["label"].to_pylist(),
        |                      t["kind"].to_pylist()):
        |    rows[a & 0xffffffff] = "%s|%s|%s" % (i, "null" if l is None else l, k)
        |open(out, "w").write("\n".join(rows))
        |""".stripMargin)

  /** Row `p` (a position in the vectors) of vector `k`, through its dictionary where the batch has one. */
  private def value(b: FragmentBatch, k: Int, p: Int): String = {
    val v = b.vectors(k)
    if (v.isNull(p)) "null"
    else b.dictionary(k) match {
      case Some(d) => d.withItem(d.itemOf(p))((bytes, at, len) => new String(bytes, at, len, UTF_8))
      case None    => v.getObject(p).toString
    }
  }

  private def hollow(b: FragmentBatch, k: Int): Boolean = b.vectors(k) match {
    case v: VarCharVector => v.getValueCount > 0 && v.getOffsetBuffer.getInt(4L * v.getValueCount) == 0
    case _ => false
  }

  /** Reads the fragment in batches of 4096 rows: (offset, row) pairs, and per
    * string column how many batches had a dictionary and how many were hollow. */
  private def scan(snap: Snapshot, itemsOnly: Boolean, filter: Option[Filter])
      : (Vector[(Int, String)], Map[String, (Int, Int)]) = {
    val allocator = new RootAllocator()
    try {
      val fields = Seq("id", "label", "kind").map(n => snap.schema.field(n).get)
      val filterFields = filter.toSeq.flatMap(_.columns).map(c => snap.schema.field(c.head).get).distinct
      val sc = new FragmentScanner(snap.storage, snap.version, snap.fragments.head, fields, allocator,
        ref => DataFiles.open(snap.storage, snap.schema, ref), filter, filterFields, itemsOnly)
      val seen = scala.collection.mutable.Map("label" -> (0, 0), "kind" -> (0, 0))
      try {
        val rows = (0L until Rows.toLong by 4096L).flatMap { from =>
          val b = sc.readView(from, math.min(Rows.toLong, from + 4096L), None)
          try {
            Seq("label" -> 1, "kind" -> 2).foreach { case (n, k) =>
              val (dicts, hollows) = seen(n)
              seen(n) = (dicts + b.dictionary(k).size, hollows + (if (hollow(b, k)) 1 else 0))
            }
            (0 until b.rowCount).map { i =>
              val p = b.selection.fold(i)(_(i))
              b.offsets(i) -> s"${value(b, 0, p)}|${value(b, 1, p)}|${value(b, 2, p)}"
            }
          } finally b.close()
        }.toVector
        (rows, seen.toMap)
      } finally sc.close()
    } finally allocator.close()
  }

  for (version <- Seq("2.1", "2.2")) {
    test(s"string columns read as dictionary items only are pylance's rows ($version)") {
      val (dir, want) = table(version)
      val snap = Dataset.open(DatasetStorage(dir.toString, new Configuration()), None)
      val all = want.indices.filter(o => want(o) != "-").map(o => o -> want(o)).toVector

      val (whole, wholeSeen) = scan(snap, itemsOnly = false, None)
      assert(whole == all)
      assert(wholeSeen.values.forall(_._2 == 0), s"no hollow vector without itemsOnly: $wholeSeen")

      val (items, seen) = scan(snap, itemsOnly = true, None)
      assert(items == all)
      // every batch of both low-cardinality columns read as items, its vector left hollow
      assert(seen == Map("label" -> (5, 5), "kind" -> (5, 5)), s"dictionaries / hollow vectors: $seen")

      // a filter on id: its rows selected in place; label and kind still items only
      val onId = Filter.Compare(Vector("id"), CompareOp.Lt, Lit.LongLit(7000))
      val (selected, seenId) = scan(snap, itemsOnly = true, Some(onId))
      assert(selected == all.filter(_._2.split('|')(0).toLong < 7000))
      assert(seenId == Map("label" -> (5, 5), "kind" -> (5, 5)), s"with a filter on id: $seenId")

      // a filter on label reads label's vector: label whole, kind items only
      val onLabel = Filter.Or(Filter.IsNull(Vector("label")), Filter.Compare(Vector("label"), CompareOp.Eq,
        Lit.string("beta")))
      val (byLabel, seenLabel) = scan(snap, itemsOnly = true, Some(onLabel))
      assert(byLabel == all.filter { case (_, r) => val l = r.split('|')(1); l == "null" || l == "beta" })
      assert(seenLabel("label")._2 == 0 && seenLabel("kind") == (5, 5), s"with a filter on label: $seenLabel")
    }
  }

  /** The start of a pylance script: `n` rows of shuffled `ids` (seeded), 40
    * `DECIMAL(7,2)` prices (`price`, NULL every 11th), 50 quantities (`qty`,
    * INT, NULL at k % 17 = 3) and 30 days (`day`). */
  private def fewValues(seed: Int): String =
    s"""import datetime, decimal
       |n = 20000
       |rng = np.random.default_rng($seed)
       |ids = rng.permutation(n).astype(np.int64)
       |prices = [decimal.Decimal(int(c)).scaleb(-2) for c in rng.integers(-2000, 9000, 40)]
       |price = pa.array([None if k % 11 == 0 else prices[k % 40] for k in ids.tolist()], pa.decimal128(7, 2))
       |qty = pa.array([None if k % 17 == 3 else int(k % 50) + 1 for k in ids.tolist()], pa.int32())
       |day = pa.array([datetime.date(1998, 1, 1) + datetime.timedelta(days=int(k % 30)) for k in ids.tolist()])
       |""".stripMargin

  /** A filter on integer, date and decimal columns of few values that the
    * output does not carry: the scan reads them as dictionary items (vectors
    * hollow) where their pages are dictionary-encoded, and selects pylance's rows. */
  for (version <- Seq("2.1", "2.2")) {
    test(s"a filter on columns of few numbers, dates and decimals not in the output selects pylance's rows ($version)") {
      val (dir, want) = PylanceProcess.tableWithRows("fixeditems", version,
        fewValues(11) +
        """lance.write_dataset(pa.table({"id": pa.array(ids), "price": price, "qty": qty, "day": day}), path,
          |                    data_storage_version=version)
          |ds = lance.dataset(path)
          |ds.delete("id % 19 = 4")
          |t = lance.dataset(path).to_table(with_row_address=True)
          |lo, hi, last = decimal.Decimal("10.50"), decimal.Decimal("40.00"), datetime.date(1998, 1, 20)
          |keep = ["%d|%d" % (a & 0xffffffff, i) for a, i, p, q, d in zip(
          |    t["_rowaddr"].to_pylist(), t["id"].to_pylist(), t["price"].to_pylist(), t["qty"].to_pylist(),
          |    t["day"].to_pylist()) if (p is None or lo <= p < hi) and q is not None and q != 7 and d <= last]
          |open(out, "w").write("\n".join(keep))
          |""".stripMargin)
      val snap = Dataset.open(DatasetStorage(dir.toString, new Configuration()), None)
      val layouts = {
        val ref = snap.fragments.head.files.head
        val r = DataFiles.open(snap.storage, snap.schema, ref)
        try r match {
          case v: io.lancespark.format.v21.V21FileReader => v.pageLayouts(snap.schema.field("price").get).flatMap(_._2)
          case other => fail(s"not a 2.x reader: ${other.getClass}")
        } finally r.close()
      }
      assert(layouts.exists(_.contains("dictionary")), s"pylance's decimal pages: $layouts")
      import io.lancespark.table.filter.Filter._
      val price = Vector("price"); val qty = Vector("qty"); val day = Vector("day")
      def dec(s: String) = Lit.DecimalLit(new java.math.BigDecimal(s))
      val filter: Filter = And(And(
        Or(And(Compare(price, CompareOp.GtEq, dec("10.50")), Compare(price, CompareOp.Lt, dec("40.00"))), IsNull(price)),
        Compare(qty, CompareOp.NotEq, Lit.LongLit(7))),
        Compare(day, CompareOp.LtEq, Lit.LongLit(java.time.LocalDate.of(1998, 1, 20).toEpochDay)))
      val allocator = new RootAllocator()
      val got = try {
        val sc = new FragmentScanner(snap.storage, snap.version, snap.fragments.head, Seq(snap.schema.field("id").get),
          allocator, ref => DataFiles.open(snap.storage, snap.schema, ref), Some(filter),
          Seq("price", "qty", "day").map(n => snap.schema.field(n).get))
        try {
          (0L until Rows.toLong by 4096L).flatMap { from =>
            val b = sc.read(from, math.min(Rows.toLong, from + 4096L))
            try { (0 until b.rowCount).map(i => s"${b.offsets(i)}|${b.vectors.head.getObject(i)}") }
            finally b.close()
          }.toVector
        } finally sc.close()
      } finally allocator.close()
      assert(want.filter(_.nonEmpty).nonEmpty)
      assert(got == want.filter(_.nonEmpty))
    }
  }

  /** Output columns of numbers, dates and decimals of few values, read with
    * `itemsOnly` (Spark's column vectors read them through the items): where a
    * batch's rows come from one page dictionary the scan hands out the items
    * (`fixedDictionary`; the vector's values are then not written), and read
    * through them, or from the vector where there are none, they are pylance's
    * rows, with nulls, deleted rows and a filter on one of them. */
  for (version <- Seq("2.1", "2.2")) {
    test(s"output columns of few numbers, dates and decimals read through their dictionary items are pylance's rows ($version)") {
      val (dir, want) = PylanceProcess.tableWithRows("fixedout", version,
        fewValues(12) +
        """tiny = pa.array([None if k % 23 == 1 else int(k % 7) - 3 for k in ids.tolist()], pa.int8())
          |big = pa.array([(int(k % 9) - 4) * 10**15 for k in ids.tolist()], pa.int64())
          |lance.write_dataset(pa.table({"id": pa.array(ids), "price": price, "qty": qty, "day": day,
          |                              "tiny": tiny, "big": big}), path, data_storage_version=version)
          |lance.dataset(path).delete("id % 19 = 4")
          |t = lance.dataset(path).to_table(with_row_address=True)
          |def s(v):
          |    return "null" if v is None else str((v - datetime.date(1970, 1, 1)).days) if isinstance(v, datetime.date) else str(v)
          |keep = ["%d|%s" % (a & 0xffffffff, "|".join(s(v) for v in r)) for a, *r in zip(
          |    t["_rowaddr"].to_pylist(), t["id"].to_pylist(), t["price"].to_pylist(), t["qty"].to_pylist(),
          |    t["day"].to_pylist(), t["tiny"].to_pylist(), t["big"].to_pylist())]
          |open(out, "w").write("\n".join(keep))
          |""".stripMargin)
      val snap = Dataset.open(DatasetStorage(dir.toString, new Configuration()), None)
      val names = Seq("id", "price", "qty", "day", "tiny", "big")
      val fields = names.map(n => snap.schema.field(n).get)
      /** Row `p` of column `k` as pylance prints it: through the items where the batch has them. */
      def value(b: FragmentBatch, k: Int, p: Int): String = {
        val v = b.vectors(k)
        if (v.isNull(p)) "null"
        else (b.fixedDictionary(k), v) match {
          case (Some(d), _: org.apache.arrow.vector.DecimalVector) =>
            java.math.BigDecimal.valueOf(d.itemKeys(d.itemOf(p)), 2).toPlainString
          case (Some(d), _) => d.itemKeys(d.itemOf(p)).toString
          case (None, dv: org.apache.arrow.vector.DecimalVector) => dv.getObject(p).toPlainString
          case (None, other) => other.getObject(p).toString
        }
      }
      def scan(filter: Option[Filter], step: Long = 4096L): (Vector[String], Map[String, Int]) = {
        val allocator = new RootAllocator()
        try {
          val filterFields = filter.toSeq.flatMap(_.columns).map(c => snap.schema.field(c.head).get).distinct
          val sc = new FragmentScanner(snap.storage, snap.version, snap.fragments.head, fields, allocator,
            ref => DataFiles.open(snap.storage, snap.schema, ref), filter, filterFields, itemsOnly = true)
          val items = scala.collection.mutable.Map.empty[String, Int].withDefaultValue(0)
          try {
            val rows = (0L until Rows.toLong by step).flatMap { from =>
              val b = sc.readView(from, math.min(Rows.toLong, from + step), None)
              try {
                names.indices.foreach(k => if (b.fixedDictionary(k).isDefined) items(names(k)) += 1)
                (0 until b.rowCount).map { i =>
                  val p = b.selection.fold(i)(_(i))
                  s"${b.offsets(i)}|" + names.indices.map(k => value(b, k, p)).mkString("|")
                }
              } finally b.close()
            }.toVector
            (rows, items.toMap)
          } finally sc.close()
        } finally allocator.close()
      }
      val all = want.filter(_.nonEmpty)
      val (got, items) = scan(None)
      assert(got == all)
      // pylance dictionary-encodes the decimals: every batch of them read as items
      assert(items.getOrElse("price", 0) == 5, s"batches read as items: $items")
      val onQty = Filter.And(Filter.Compare(Vector("qty"), CompareOp.Lt, Lit.LongLit(20)),
        Filter.Compare(Vector("price"), CompareOp.GtEq, Lit.DecimalLit(new java.math.BigDecimal("0.00"))))
      val (filtered, _) = scan(Some(onQty))
      val expected = all.filter { r =>
        val c = r.split('|')
        c(3) != "null" && c(3).toInt < 20 && c(2) != "null" && new java.math.BigDecimal(c(2)).signum >= 0
      }
      assert(expected.nonEmpty && expected.size < all.size)
      assert(filtered == expected)
      // batches of 25 rows, fewer than the 40 prices and 50 quantities: the rows still read
      // through the items, the filter testing their keys row by row
      val (small, smallItems) = scan(None, step = 25L)
      assert(small == all)
      assert(smallItems.getOrElse("price", 0) == 800, s"batches read as items: $smallItems")
      assert(scan(Some(onQty), step = 25L)._1 == expected)
    }
  }
}
