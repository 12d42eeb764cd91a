package io.lancespark.spark

import java.io.{ObjectInputStream, ObjectOutputStream}

import org.apache.hadoop.conf.Configuration

/** Ships a Hadoop Configuration to executors (Configuration is not Serializable). */
final class SerializableHadoopConf(@transient var value: Configuration) extends Serializable {
  private def writeObject(out: ObjectOutputStream): Unit = {
    out.defaultWriteObject()
    value.write(out)
  }
  private def readObject(in: ObjectInputStream): Unit = {
    in.defaultReadObject()
    value = new Configuration(false)
    value.readFields(in)
  }
}

object SerializableHadoopConf {
  import scala.jdk.CollectionConverters._

  import org.apache.spark.SparkContext
  import org.apache.spark.broadcast.Broadcast
  import org.apache.spark.sql.SparkSession

  private val Kept = 8

  private final class Entry(val context: SparkContext, val entries: Map[String, String],
      val made: java.lang.ref.WeakReference[Configuration], val broadcast: Broadcast[SerializableHadoopConf])

  /** Recent broadcasts, newest last. */
  private var recent = Vector.empty[Entry]

  /** The session's Hadoop configuration as a broadcast, made once per
    * distinct configuration: each scan's reader factory ships it, Spark asks
    * for the factories while it plans (several per query), and serializing a
    * configuration takes milliseconds. A changed configuration (a session
    * option set) is a new entry. The configuration of one query's plan
    * ([[HadoopConfs]]) is found by identity, without comparing its entries again. */
  def broadcast(session: SparkSession): Broadcast[SerializableHadoopConf] = broadcast(session, HadoopConfs.of(session))

  /** `conf` (the session's, made earlier in the same query's planning) as a broadcast. */
  def broadcast(session: SparkSession, conf: Configuration): Broadcast[SerializableHadoopConf] = {
    val sc = session.sparkContext
    synchronized {
      recent = recent.filterNot(_.context.isStopped)
      recent.find(e => (e.context eq sc) && (e.made.get eq conf)).map(_.broadcast)
    }.getOrElse {
      val entries = conf.iterator().asScala.map(e => e.getKey -> e.getValue).toMap
      synchronized {
        recent.find(e => (e.context eq sc) && e.entries == entries) match {
          case Some(e) =>
            recent = recent.filterNot(_ eq e) :+ new Entry(sc, e.entries, new java.lang.ref.WeakReference(conf), e.broadcast)
            e.broadcast
          case None =>
            val b = sc.broadcast(new SerializableHadoopConf(conf))
            recent = (recent :+ new Entry(sc, entries, new java.lang.ref.WeakReference(conf), b)).takeRight(Kept)
            b
        }
      }
    }
  }
}

/** Where a reader gets its Hadoop configuration: the session's broadcast (a
  * Spark job's tasks), or the driver's own (a scan read on the driver while the
  * query is planned, which needs no broadcast: making one per scan costs
  * about a millisecond of a lookup's dozen). */
sealed trait ConfSource extends Serializable {
  def conf: Configuration
}

object ConfSource {
  final case class Broadcasted(b: org.apache.spark.broadcast.Broadcast[SerializableHadoopConf]) extends ConfSource {
    override def conf: Configuration = b.value.value
  }

  /** On the driver only (a configuration is not serializable). */
  final case class OnDriver(conf: Configuration) extends ConfSource

  /** The session's configuration as a broadcast. */
  def broadcast(session: org.apache.spark.sql.SparkSession): ConfSource =
    Broadcasted(SerializableHadoopConf.broadcast(session))

  /** `conf`, the session's configuration made earlier in the query's planning, as a broadcast. */
  def broadcast(session: org.apache.spark.sql.SparkSession, conf: Configuration): ConfSource =
    Broadcasted(SerializableHadoopConf.broadcast(session, conf))
}

