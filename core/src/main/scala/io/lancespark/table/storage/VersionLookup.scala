package io.lancespark.table.storage

import java.time.Instant

import scala.collection.mutable

import org.apache.hadoop.fs.Path

import io.lancespark.schema.LanceFormatException

/** Finding a dataset's versions without listing all of `_versions/`: on an
  * object store a listing returns 1,000 names a request, so anything that lists
  * grows with the number of versions. The latest version, a version by number
  * and a version by time cost a bounded number of requests (a logarithmic one
  * for a time) however long the history is:
  *
  *  - '''latest''': an external manifest store, when configured, is the
  *    authority: its newest record is the start. Else the version
  *    `_versions/latest_version_hint.json` names (`{"version":N}`, written by
  *    every commit of pylance and of this connector, best effort). From a start
  *    N whose manifest exists, its successors are probed (N+1, N+2, N+4, ...
  *    then a bisection) until absent, so a stale hint costs O(log(how stale))
  *    existence checks (one HEAD each on S3A) and no listing. Without a usable
  *    start (no hint, its version gone), on a store that lists in key order
  *    (S3, GCS, HDFS) with V2 naming (`{u64::MAX - version:020}`, newest
  *    first), the first name of a lazy listing (S3A fetches its first page,
  *    and may prefetch the next: a bounded number of requests). Else (V1
  *    names, or the local file system, whose listing order is the directory's)
  *    the directory is listed, as before.
  *    The probes assume the versions after a start are all present: versions
  *    are committed one after the other and a cleanup never removes the latest.
  *    A stale start whose successor a cleanup removed while keeping the start
  *    (a tagged version, with a writer that wrote no hint committing after it)
  *    would end the probe early; this connector's cleanup rewrites the hint.
  *  - '''a version by number''': its manifest by name (V2 name, else V1).
  *  - '''a version by time''': [[versionAt]], a bisection by manifest time.
  */
object VersionLookup {

  /** The newest version and the naming scheme of its manifest. */
  final case class Latest(naming: ManifestNaming, version: Long)

  val HintName: String = "latest_version_hint.json"

  def hintPath(storage: DatasetStorage): Path = new Path(new Path(storage.root, ManifestNaming.Dir), HintName)

  /** The hint's bytes as pylance writes them (`{"version":N}`, no spaces or newline). */
  def hintBytes(version: Long): Array[Byte] = s"""{"version":$version}""".getBytes("UTF-8")

  /** The newest version, None if the directory holds no manifest. */
  def latest(storage: DatasetStorage): Option[Latest] = {
    val recorded = storage.manifestStore.flatMap(ExternalManifestCommit.finishLatest(storage, _))
    recorded.flatMap(fromStart(storage, _))
      .orElse(readHint(storage).flatMap(fromStart(storage, _)))
      .orElse(if (storage.sortedListing) firstListed(storage) else None)
      .orElse {
        val (naming, all) = Dataset.listAll(storage)
        all.lastOption.map(Latest(naming, _))
      }
  }

  /** Whether the directory holds a manifest: the hint's version, else a lazy
    * listing that stops at the first manifest. */
  def anyManifest(storage: DatasetStorage): Boolean =
    readHint(storage).exists(namingOf(storage, _).isDefined) ||
      storage.listNames(ManifestNaming.Dir).exists(n => ManifestNaming.parse(n).isDefined)

  /** The version the hint names; None if it is absent or unreadable. */
  def readHint(storage: DatasetStorage): Option[Long] =
    try storage.readIfPresent(hintPath(storage)).flatMap(parseHint)
    catch { case _: java.io.IOException | _: LanceFormatException => None }

  private val HintPattern = """\{\s*"version"\s*:\s*(\d{1,19})\s*\}\s*""".r

  def parseHint(bytes: Array[Byte]): Option[Long] = new String(bytes, "UTF-8") match {
    case HintPattern(v) => scala.util.Try(v.toLong).toOption
    case _ => None
  }

  /** Writes the hint; best effort (an error leaves a stale hint, which costs probes, not correctness). */
  def writeHint(storage: DatasetStorage, version: Long): Unit =
    try {
      val out = storage.fs.create(hintPath(storage), true)
      try out.write(hintBytes(version)) finally out.close()
    } catch { case _: java.io.IOException => () }

  /** Whether version `v`'s manifest exists under `naming`. */
  def exists(storage: DatasetStorage, naming: ManifestNaming, v: Long): Boolean =
    v >= 1 && storage.isFile(Dataset.manifestPath(storage, naming, v))

  /** The naming scheme of version `v`'s manifest; None if it does not exist. */
  def namingOf(storage: DatasetStorage, v: Long): Option[ManifestNaming] =
    Seq(ManifestNaming.V2, ManifestNaming.V1).find(exists(storage, _, v))

  /** The newest version at or after `seen` (a version just found present,
    * under its naming): one existence check when nothing was committed since.
    * With an external manifest store its record is asked again, as [[latest]]. */
  def latestSince(storage: DatasetStorage, seen: Latest): Latest =
    if (storage.manifestStore.isDefined) latest(storage).getOrElse(seen) else gallop(storage, seen.naming, seen.version)

  /** From a version believed present: its naming, then the last present of its
    * successors, by galloping (N+1, N+2, N+4, ...) and bisecting the last step. */
  private def fromStart(storage: DatasetStorage, start: Long): Option[Latest] =
    namingOf(storage, start).map(gallop(storage, _, start))

  private def gallop(storage: DatasetStorage, naming: ManifestNaming, start: Long): Latest = {
    def present(v: Long): Boolean = exists(storage, naming, v)
    var lo = start  // present
    var step = 1L
    var hi = -1L    // absent, once found
    while (hi < 0) {
      val probe = if (Long.MaxValue - lo < step) Long.MaxValue else lo + step
      if (present(probe)) { lo = probe; step = math.min(step * 2, 1L << 40) } else hi = probe
    }
    while (hi - lo > 1) {
      val mid = lo + (hi - lo) / 2
      if (present(mid)) lo = mid else hi = mid
    }
    Latest(naming, lo)
  }

  /** On a store listing in key order: the first manifest name; the newest
    * version if it is V2-named (V1 names have no useful order: None). */
  private def firstListed(storage: DatasetStorage): Option[Latest] =
    storage.listNames(ManifestNaming.Dir).flatMap(ManifestNaming.parse(_).iterator).find(_ => true) match {
      case Some((ManifestNaming.V2, v)) => Some(Latest(ManifestNaming.V2, v))
      case _ => None
    }

  /** TIMESTAMP AS OF: the newest version committed at or before `target`;
    * `atOrBefore(t)` tells whether commit time `t` is (it must be monotone:
    * true up to the target, false after; e.g. compared at microseconds). None:
    * no version was.
    *
    * A search by manifest timestamp over the version numbers: each step reads
    * one manifest and guesses where the target falls by interpolating between
    * the times of the versions that bracket it (commit times tend to grow
    * evenly: a few reads); a guess that does not halve the bracket is followed
    * by a bisection step, so at most about 2 log2(n) reads however the times
    * are spread. The earliest version the search starts from is version 1,
    * or, when a cleanup removed it, the lowest of the present versions found by
    * bisecting on existence (log2(n) existence checks). Versions missing in the
    * middle (a cleanup that kept a tagged version) are listed when the search
    * meets one, and the search continues over those listed; a time before the
    * earliest version so found lists the versions below it (tagged survivors of
    * a cleanup).
    *
    * The result equals the linear definition (the newest version whose time is
    * at or before the target) whenever timestamps are non-decreasing in the
    * version number. They can go backwards when writers' clocks disagree: if a
    * time the search reads is out of order with the ones bracketing it (or a
    * manifest records no time), it falls back to that linear scan, from the
    * newest version over the listed ones, as before. A disorder the search does
    * not read can give another version whose time is at or before the target
    * and whose successor's is after it. */
  def versionAt(storage: DatasetStorage, target: Instant, atOrBefore: Instant => Boolean): Option[Long] = {
    val Latest(naming, last) = latest(storage).getOrElse(
      throw new LanceFormatException(s"${storage.uri}: not a Lance dataset (no manifests under _versions/)"))
    new TimeSearch(storage, naming, target, atOrBefore).run(last)
  }

  private final class TimeSearch(storage: DatasetStorage, naming: ManifestNaming, target: Instant,
      atOrBefore: Instant => Boolean) {
    // None: the manifest is absent; Some(None): it records no time
    private val times = mutable.Map.empty[Long, Option[Option[Instant]]]

    private def time(v: Long): Option[Option[Instant]] = times.getOrElseUpdate(v, {
      val path = Dataset.manifestPath(storage, naming, v)
      storage.readIfPresent(path).map(ManifestFile.timestampOf(_, path.toString))
    })

    private lazy val listed: IndexedSeq[Long] = Dataset.listAll(storage)._2.toIndexedSeq

    /** The linear definition over `versions` (ascending): the newest whose time is at or before. */
    private def linear(versions: Seq[Long]): Option[Long] =
      versions.reverseIterator.find(v => time(v).flatten.exists(atOrBefore))

    def run(last: Long): Option[Long] = {
      val lastT = time(last).flatten.getOrElse(return linear(listed))
      if (atOrBefore(lastT)) return Some(last)
      val first = earliest(last)
      val firstT = time(first).flatten.getOrElse(return linear(listed))
      if (firstT.isAfter(lastT)) linear(listed)
      else if (!atOrBefore(firstT)) { if (first <= 1) None else linear(listed.filter(_ < first)) }
      else bisect(first to last, listedMode = false)
    }

    /** The lowest present version of the run ending at `last`, as a bisection
      * on existence finds it: 1 unless a cleanup removed it. */
    private def earliest(last: Long): Long =
      if (last <= 1 || time(1L).isDefined) 1L
      else {
        var lo = 1L      // absent
        var hi = last    // present
        while (hi - lo > 1) {
          val mid = lo + (hi - lo) / 2
          if (times.get(mid).map(_.isDefined).getOrElse(exists(storage, naming, mid))) hi = mid else lo = mid
        }
        hi
      }

    /** `vs` ascending; its first version's time is at or before, its last's after. */
    private def bisect(vs: IndexedSeq[Long], listedMode: Boolean): Option[Long] = {
      var lo = 0
      var hi = vs.length - 1
      var loT = time(vs(lo)).flatten.get
      var hiT = time(vs(hi)).flatten.get
      var bisectNext = false
      while (hi - lo > 1) {
        val before = hi - lo
        val mid = if (bisectNext) lo + (hi - lo) / 2 else interpolate(lo, hi, loT, hiT)
        time(vs(mid)) match {
          case None if !listedMode =>  // a gap: continue over the versions present between the brackets
            val (a, b) = (vs(lo), vs(hi))
            return bisect((a +: listed.filter(v => v > a && v < b)) :+ b, listedMode = true)
          case Some(Some(t)) if !t.isBefore(loT) && !t.isAfter(hiT) =>
            if (atOrBefore(t)) { lo = mid; loT = t } else { hi = mid; hiT = t }
          case _ => return linear(listed)  // out of order, no time, or removed meanwhile
        }
        bisectNext = !bisectNext && (hi - lo) * 2 > before  // a guess that did not halve the bracket
      }
      Some(vs(lo))
    }

    /** Where the target falls between positions lo and hi, by their times; strictly inside. */
    private def interpolate(lo: Int, hi: Int, loT: Instant, hiT: Instant): Int = {
      def seconds(t: Instant): Double = t.getEpochSecond.toDouble + t.getNano / 1e9
      val span = seconds(hiT) - seconds(loT)
      val frac = if (span > 0) (seconds(target) - seconds(loT)) / span else 0.5
      val guess = lo + math.floor(frac * (hi - lo)).toLong
      math.max(lo + 1L, math.min(hi - 1L, guess)).toInt
    }
  }
}
