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
  /** Recent broadcasts, by Spark context and configuration entries, newest last. */
  private var recent = Vector.empty[((SparkContext, Map[String, String]), Broadcast[SerializableHadoopConf])]

  /** The session's Hadoop configuration as a broadcast, made once per
    * distinct configuration: each scan's reader factory ships it, Spark asks
    * for the factories while it plans (several per query), and serializing a
    * configuration takes milliseconds. A changed configuration (a session
    * option set) is a new entry. */
  def broadcast(session: SparkSession): Broadcast[SerializableHadoopConf] = {
    val conf = session.sessionState.newHadoopConf()
    val key = (session.sparkContext, conf.iterator().asScala.map(e => e.getKey -> e.getValue).toMap)
    synchronized {
      recent = recent.filterNot(_._1._1.isStopped)
      recent.find(_._1 == key).map(_._2).getOrElse {
        val b = session.sparkContext.broadcast(new SerializableHadoopConf(conf))
        recent = (recent :+ (key -> b)).takeRight(Kept)
        b
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
}

