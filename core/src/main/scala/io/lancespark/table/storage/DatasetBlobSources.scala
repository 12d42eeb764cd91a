package io.lancespark.table.storage

import java.net.URI

import scala.collection.mutable

import org.apache.hadoop.fs.Path

import io.lancespark.format.input.RandomAccessSource
import io.lancespark.format.v21.BlobSources
import io.lancespark.schema.LanceFormatException

/** The blob files of one data file (`<data file's directory>/<its stem>/`,
  * named as [[BlobSources.fileName]] says) and the external files its blob
  * values name, opened on first use and kept open until the data file's
  * reader closes. External URIs are opened through Hadoop's file systems
  * (`file:`, `s3a:`, ...; `s3:` is read as `s3a:`), with the dataset's
  * configuration. */
final class DatasetBlobSources(storage: DatasetStorage, dataFile: Path) extends BlobSources {

  private val open = mutable.LinkedHashMap.empty[String, RandomAccessSource]
  private var closedBytes = 0L
  private var closedRequests = 0L

  private def dir: Path = new Path(dataFile.getParent, dataFile.getName.stripSuffix(".lance"))

  def blobFile(blobId: Int): RandomAccessSource = synchronized {
    val p = new Path(dir, BlobSources.fileName(blobId))
    open.getOrElseUpdate(p.toString, storage.open(p))
  }

  def external(uri: String): RandomAccessSource = synchronized {
    open.getOrElseUpdate(uri, {
      val u = try new URI(uri) catch {
        case e: java.net.URISyntaxException =>
          throw LanceFormatException(dataFile.toString, s"external blob uri '$uri' is not a URI", e)
      }
      if (u.getScheme == null)
        throw LanceFormatException(dataFile.toString, s"external blob uri '$uri' has no scheme " +
          "(values relative to registered external bases are not supported)")
      val p = new Path(if (u.getScheme == "s3") new URI("s3a", u.getSchemeSpecificPart, u.getFragment) else u)
      storage.openExternal(p)
    })
  }

  def bytesRead: Long = synchronized(closedBytes + open.values.map(_.bytesRead).sum)

  def readRequests: Long = synchronized(closedRequests + open.values.map(_.readRequests).sum)

  def close(): Unit = synchronized {
    closedBytes = bytesRead
    closedRequests = readRequests
    val all = open.values.toList
    open.clear()
    all.foreach(s => try s.close() catch { case _: Exception => () })
  }
}
