package io.lancespark.table.index

import java.nio.charset.StandardCharsets.UTF_8
import java.util.Locale

import scala.collection.mutable.ArrayBuffer

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{BitVector, UInt4Vector, UInt8Vector, VarBinaryVector}
import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType}

import io.lancespark.table.storage.Snapshot

/** One zone of a ZONEMAP or BLOOMFILTER index: rows [start, start + length)
  * of fragment `fragmentId` (row offsets), the live rows' min and max (in
  * [[IndexValues.ordering]]; null when the zone has no non-null value), null
  * and NaN counts, and for a bloom filter its serialized split-block filter. */
final case class ZoneRow(fragmentId: Long, start: Long, length: Long, min: Any, max: Any, nullCount: Long,
                         nanCount: Long, bloom: Array[Byte])

/** The parameters of a zoned index (the reference's defaults: zones of 8192
  * rows; bloom filters sized for 8192 items at a false positive probability
  * of 0.00057, i.e. 16 KiB). A bloom filter's zone holds `bloomItems` rows. */
final case class ZoneParams(rowsPerZone: Long, bloomItems: Long, bloomProbability: Double) {
  def zoneRows(t: BuiltIndexType): Long = if (t == BuiltIndexType.BloomFilter) bloomItems else rowsPerZone
}

/** Builds ZONEMAP and BLOOMFILTER indices in the reference's layout:
  * `zonemap.lance` (`min`, `max`, `null_count` u32, `nan_count` u32,
  * `fragment_id` u64, `zone_start` u64, `zone_length` u64; schema metadata
  * `rows_per_zone`) and `bloomfilter.lance` (`fragment_id`, `zone_start`,
  * `zone_length` u64, `has_null` bool, `bloom_filter_data` binary; schema
  * metadata `bloomfilter_item`, `bloomfilter_probability`).
  *
  * The reference cuts a fragment's zones in the rows it reads (its live rows)
  * and records their starts as sums of those counts, which are row offsets only
  * when the fragment has no deleted rows. Here zones are cut in row offsets:
  * zone k of a fragment covers offsets [k * size, (k + 1) * size) whether or
  * not rows there are deleted, and summarizes its live rows; its start and
  * length are thus true offsets and the zones of a fragment add up to its
  * physical rows (what readers check before trusting them). */
object ZoneIndexWriter {
  val DefaultRowsPerZone: Long = 8192L
  val DefaultBloomItems: Long = 8192L
  val DefaultBloomProbability: Double = 0.00057
  val ZoneMapFile: String = ZoneMapIndex.File
  val BloomFilterFile: String = BloomFilterIndex.File

  def zoned(t: BuiltIndexType): Boolean = t == BuiltIndexType.ZoneMap || t == BuiltIndexType.BloomFilter

  /** The build options of a zoned index (names as the reference's params:
    * `rows_per_zone`; `number_of_items`, `probability`), checked. */
  def params(t: BuiltIndexType, options: Map[String, String], where: String): ZoneParams = {
    val o = options.map { case (k, v) => k.trim.toLowerCase(Locale.ROOT) -> v.trim }
    val known = t match {
      case BuiltIndexType.ZoneMap => Set("rows_per_zone")
      case BuiltIndexType.BloomFilter => Set("number_of_items", "probability")
      case _ => Set.empty[String]
    }
    o.keys.filterNot(k => known.contains(k) || k == "type" || k.startsWith("index_type")).foreach { k =>
      throw new IllegalArgumentException(s"$where: option '$k' is not an option of a ${t.name} index " +
        s"(options: ${known.toSeq.sorted.mkString(", ")})")
    }
    def long(k: String, d: Long): Long = o.get(k).map { v =>
      val n = try v.toLong catch { case _: NumberFormatException => -1L }
      if (n <= 0 || n > (1L << 31)) throw new IllegalArgumentException(
        s"$where: option $k must be a positive integer (at most 2^31), not '$v'")
      n
    }.getOrElse(d)
    val p = o.get("probability").map { v =>
      val x = try v.toDouble catch { case _: NumberFormatException => Double.NaN }
      if (!(x > 0.0 && x < 1.0)) throw new IllegalArgumentException(
        s"$where: option probability must be a number in (0, 1), not '$v'")
      x
    }.getOrElse(DefaultBloomProbability)
    ZoneParams(long("rows_per_zone", DefaultRowsPerZone), long("number_of_items", DefaultBloomItems), p)
  }

  /** Whether a BLOOMFILTER index is built here over a column of type `t`:
    * the types whose values the reference hashes by their little-endian
    * bytes (signed integers, floats, dates, timestamps) or raw bytes
    * (strings, binaries). */
  def bloomSupported(t: ArrowType): Boolean = t match {
    case i: ArrowType.Int => i.getIsSigned
    case f: ArrowType.FloatingPoint => f.getPrecision != FloatingPointPrecision.HALF
    case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 | _: ArrowType.Binary | _: ArrowType.LargeBinary => true
    case d: ArrowType.Date => d.getUnit == DateUnit.DAY
    case _: ArrowType.Timestamp => true
    case _ => false
  }

  /** The bytes the reference hashes for value `v` (as [[IndexValues]] holds
    * it) of a column of type `t`. */
  def bloomBytes(t: ArrowType, v: Any): Array[Byte] = (t, v) match {
    case (i: ArrowType.Int, l: java.lang.Long) => le(l, i.getBitWidth / 8)
    case (_: ArrowType.Date, l: java.lang.Long) => le(l, 4)
    case (_: ArrowType.Timestamp, l: java.lang.Long) => le(l, 8)
    case (f: ArrowType.FloatingPoint, d: java.lang.Double) =>
      if (f.getPrecision == FloatingPointPrecision.SINGLE) le(java.lang.Float.floatToRawIntBits(d.floatValue).toLong, 4)
      else le(java.lang.Double.doubleToRawLongBits(d), 8)
    case (_, s: String) => s.getBytes(UTF_8)
    case (_, b: Array[Byte]) => b
    case _ => throw new IllegalArgumentException(s"a bloom filter does not hash a ${v.getClass.getName} of type $t")
  }

  private def le(v: Long, bytes: Int): Array[Byte] = {
    val out = new Array[Byte](bytes)
    var i = 0
    while (i < bytes) { out(i) = (v >>> (8 * i)).toByte; i += 1 }
    out
  }

  /** The zones of fragment `fragmentId` of `snapshot` over field `fieldId`
    * (read with [[IndexBuild.scanFragment]]). */
  def fragmentZones(snapshot: Snapshot, fieldId: Int, fragmentId: Long, t: BuiltIndexType, params: ZoneParams,
                    allocator: BufferAllocator): Vector[ZoneRow] = {
    val f = snapshot.fragments.find(_.id == fragmentId).getOrElse(
      throw new IllegalStateException(s"${snapshot.storage.uri} (version ${snapshot.version}) has no fragment $fragmentId"))
    val arrowType = IndexCatalog.field(snapshot.schema.fields, fieldId).map(_.arrowType).getOrElse(
      throw new IllegalStateException(s"${snapshot.storage.uri} (version ${snapshot.version}) has no field id $fieldId"))
    val acc = new ZoneAccumulator(t, params, arrowType, fragmentId, f.physicalRows)
    IndexBuild.scanFragment(snapshot, fieldId, fragmentId, allocator)((v, addr) => acc.add(v, addr & 0xffffffffL))
    acc.finish()
  }

  /** Writes the index file of `plan` from its zones (fragment by fragment,
    * in row order); on a failure removes what it wrote. The files and sizes. */
  def write(plan: IndexBuildPlan, params: ZoneParams, zones: Iterator[ZoneRow],
            allocator: BufferAllocator): Seq[(String, Long)] =
    try {
      val rows = zones.toVector
      plan.indexType match {
        case BuiltIndexType.ZoneMap => Seq(ZoneMapFile -> writeZoneMap(plan, params, rows, allocator))
        case BuiltIndexType.BloomFilter => Seq(BloomFilterFile -> writeBloom(plan, params, rows, allocator))
        case other => throw new IllegalArgumentException(s"${other.name} is not a zoned index")
      }
    } catch { case e: Throwable => IndexFileWriter.removeDir(plan.snapshot.storage, plan.uuid); throw e }

  private val Batch = 4096

  private def u32(name: String): Field = new Field(name, FieldType.notNullable(new ArrowType.Int(32, false)), null)
  private def u64(name: String): Field = new Field(name, FieldType.notNullable(new ArrowType.Int(64, false)), null)

  private def fillU64(v: UInt8Vector, xs: IndexedSeq[Long]): UInt8Vector = {
    v.allocateNew(xs.size); xs.indices.foreach(i => v.set(i, xs(i))); v.setValueCount(xs.size); v
  }

  private def writeZoneMap(plan: IndexBuildPlan, params: ZoneParams, rows: Vector[ZoneRow],
                           allocator: BufferAllocator): Long = {
    val t = plan.field.arrowType
    val fields = Seq(new Field("min", FieldType.nullable(t), null), new Field("max", FieldType.nullable(t), null),
      u32("null_count"), u32("nan_count"), u64("fragment_id"), u64("zone_start"), u64("zone_length"))
    val file = new IndexFileWriter(plan.snapshot.storage, plan.uuid, ZoneMapFile, fields,
      Map("rows_per_zone" -> params.rowsPerZone.toString), plan.fileVersion)
    try {
      rows.grouped(Batch).foreach { b =>
        val mn = IndexValues.vector("min", t, b.map(_.min), allocator)
        val mx = IndexValues.vector("max", t, b.map(_.max), allocator)
        val nulls = new UInt4Vector(fields(2), allocator)
        val nans = new UInt4Vector(fields(3), allocator)
        val frag = new UInt8Vector(fields(4), allocator)
        val start = new UInt8Vector(fields(5), allocator)
        val len = new UInt8Vector(fields(6), allocator)
        try {
          nulls.allocateNew(b.size); nans.allocateNew(b.size)
          b.indices.foreach { i => nulls.set(i, b(i).nullCount.toInt); nans.set(i, b(i).nanCount.toInt) }
          nulls.setValueCount(b.size); nans.setValueCount(b.size)
          fillU64(frag, b.map(_.fragmentId)); fillU64(start, b.map(_.start)); fillU64(len, b.map(_.length))
          file.write(Seq(mn, mx, nulls, nans, frag, start, len))
        } finally Seq(mn, mx, nulls, nans, frag, start, len).foreach(_.close())
      }
      file.finish()
    } catch { case e: Throwable => file.close(); throw e }
  }

  private def writeBloom(plan: IndexBuildPlan, params: ZoneParams, rows: Vector[ZoneRow],
                         allocator: BufferAllocator): Long = {
    val fields = Seq(u64("fragment_id"), u64("zone_start"), u64("zone_length"),
      new Field("has_null", FieldType.notNullable(ArrowType.Bool.INSTANCE), null),
      new Field("bloom_filter_data", FieldType.notNullable(ArrowType.Binary.INSTANCE), null))
    val file = new IndexFileWriter(plan.snapshot.storage, plan.uuid, BloomFilterFile, fields,
      Map("bloomfilter_item" -> params.bloomItems.toString,
        "bloomfilter_probability" -> BloomFilterSizing.text(params.bloomProbability)), plan.fileVersion)
    try {
      rows.grouped(Batch).foreach { b =>
        val frag = new UInt8Vector(fields(0), allocator)
        val start = new UInt8Vector(fields(1), allocator)
        val len = new UInt8Vector(fields(2), allocator)
        val nulls = new BitVector(fields(3), allocator)
        val data = new VarBinaryVector(fields(4), allocator)
        try {
          fillU64(frag, b.map(_.fragmentId)); fillU64(start, b.map(_.start)); fillU64(len, b.map(_.length))
          nulls.allocateNew(b.size)
          b.indices.foreach(i => nulls.set(i, if (b(i).nullCount > 0) 1 else 0))
          nulls.setValueCount(b.size)
          data.allocateNew(b.map(_.bloom.length.toLong).sum, b.size)
          b.indices.foreach(i => data.setSafe(i, b(i).bloom))
          data.setValueCount(b.size)
          file.write(Seq(frag, start, len, nulls, data))
        } finally Seq(frag, start, len, nulls, data).foreach(_.close())
      }
      file.finish()
    } catch { case e: Throwable => file.close(); throw e }
  }
}

/** Accumulates the zones of one fragment from its live rows in row order. */
private final class ZoneAccumulator(t: BuiltIndexType, params: ZoneParams, arrowType: ArrowType, fragmentId: Long,
                                    physicalRows: Long) {
  private val size = params.zoneRows(t)
  private val bloomBytes = BloomFilterSizing.bytes(params.bloomItems, params.bloomProbability)
  private val out = ArrayBuffer.empty[ZoneRow]
  private var zone = 0L
  private var min: Any = null
  private var max: Any = null
  private var nulls = 0L
  private var nans = 0L
  private var words: Array[Int] = newWords()

  private def newWords(): Array[Int] = if (t == BuiltIndexType.BloomFilter) new Array[Int](bloomBytes / 4) else null

  private def flush(): Unit = {
    val start = zone * size
    val len = math.min(size, physicalRows - start)
    val bloom = if (words == null) null else BloomFilterSizing.serialize(words)
    out += ZoneRow(fragmentId, start, len, min, max, nulls, nans, bloom)
    zone += 1; min = null; max = null; nulls = 0; nans = 0; words = newWords()
  }

  def add(v: Any, offset: Long): Unit = {
    while (offset >= (zone + 1) * size) flush()
    if (v == null) nulls += 1
    else {
      v match { case d: java.lang.Double if d.isNaN => nans += 1; case _ => () }
      if (min == null || IndexValues.ordering.compare(v, min) < 0) min = v
      if (max == null || IndexValues.ordering.compare(v, max) > 0) max = v
      if (words != null) BloomFilterSizing.insert(words, XxHash64.hash(ZoneIndexWriter.bloomBytes(arrowType, v)))
    }
  }

  def finish(): Vector[ZoneRow] = {
    while (zone * size < physicalRows) flush()
    out.toVector
  }
}

/** The reference's split-block bloom filter (Parquet's): blocks of eight
  * 32-bit words; a hash's upper 32 bits pick the block, its lower 32 bits
  * times eight salts pick one bit per word. Its size: the smallest power of
  * two bytes (32 B to 128 MiB) whose false positive probability for the
  * expected distinct values is at most the one asked for (Putze et al.'s
  * equation 3, as the reference computes it). */
object BloomFilterSizing {
  private val Salt: Array[Int] = Array(0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d,
    0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31)

  def insert(words: Array[Int], hash: Long): Unit = {
    val blocks = words.length / 8
    val block = (((hash >>> 32) * blocks) >>> 32).toInt
    val x = hash.toInt
    var i = 0
    while (i < 8) {
      words(block * 8 + i) |= 1 << ((x * Salt(i)) >>> 27)
      i += 1
    }
  }

  def serialize(words: Array[Int]): Array[Byte] = {
    val b = java.nio.ByteBuffer.allocate(words.length * 4).order(java.nio.ByteOrder.LITTLE_ENDIAN)
    b.asIntBuffer().put(words)
    b.array()
  }

  /** The probability as the reference writes it in the file's metadata
    * (Rust's shortest round-trip form: 0.00057, not 5.7E-4). */
  def text(p: Double): String = new java.math.BigDecimal(java.lang.Double.toString(p)).stripTrailingZeros.toPlainString

  def bytes(ndv: Long, fpp: Double): Int = {
    var low = 0
    var high = 64
    while (high > low + 1) {
      val mid = (high + low) / 2
      if (falsePositive(ndv, mid) <= fpp) high = mid else low = mid
    }
    1 << math.max(5, math.min(27, high))
  }

  private def falsePositive(ndv: Long, logBytes: Int): Double = {
    val wordBits = 32.0
    val bucketWords = 8.0
    val bytes = math.pow(2.0, logBytes.toDouble)
    val n = ndv.toDouble
    if (n == 0.0) 0.0
    else if (n / (bytes * 8.0) > 2.0) 1.0
    else {
      val lam = bucketWords * wordBits / ((bytes * 8.0) / n)
      val loglam = math.log(lam)
      var result = 0.0
      var i = 749
      while (i >= 0) {
        val logp = i * loglam - lam - lgamma(i + 1.0)
        val logfinner = bucketWords * math.log(1.0 - math.pow(1.0 - 1.0 / wordBits, i.toDouble))
        result += math.exp(logp + logfinner)
        i -= 1
      }
      math.min(result, 1.0)
    }
  }

  private val Lanczos: Array[Double] = Array(0.99999999999980993, 676.5203681218851, -1259.1392167224028,
    771.32342877765313, -176.61502916214059, 12.507343278686905, -0.13857109526572012,
    9.9843695780195716e-6, 1.5056327351493116e-7)

  /** ln Γ(x) for x >= 1 (Lanczos, g = 7). */
  private def lgamma(x: Double): Double = {
    val z = x - 1.0
    var a = Lanczos(0)
    val t = z + 7.5
    var k = 1
    while (k < 9) { a += Lanczos(k) / (z + k); k += 1 }
    0.5 * math.log(2 * math.Pi) + (z + 0.5) * math.log(t) - t + math.log(a)
  }
}
