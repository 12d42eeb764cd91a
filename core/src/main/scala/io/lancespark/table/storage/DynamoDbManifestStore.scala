package io.lancespark.table.storage

import java.net.URI
import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import software.amazon.awssdk.auth.credentials.{AwsBasicCredentials, AwsCredentialsProvider, DefaultCredentialsProvider, StaticCredentialsProvider}
import software.amazon.awssdk.regions.Region
import software.amazon.awssdk.services.dynamodb.DynamoDbClient
import software.amazon.awssdk.services.dynamodb.model.{AttributeValue, ConditionalCheckFailedException, DescribeTableRequest, GetItemRequest, KeyType, PutItemRequest, QueryRequest, ResourceNotFoundException}

/** The external manifest store in a DynamoDB table, laid out as the reference
  * lays it out: hash key `base_uri` (S), range key `version` (N), attributes
  * `path` (S), `size` (N) and `committer` (S). Reads are strongly consistent.
  * Needs the AWS SDK's `dynamodb` module on the driver's classpath. */
final class DynamoDbManifestStore(client: DynamoDbClient, table: String) extends ExternalManifestStore {
  import DynamoDbManifestStore._

  override val description: String = s"DynamoDB table $table"

  override def latest(baseUri: String): Option[ManifestRecord] = {
    val request = QueryRequest.builder().tableName(table).consistentRead(true)
      .keyConditionExpression(s"$BaseUri = :b")
      .expressionAttributeValues(Map(":b" -> s(baseUri)).asJava)
      .scanIndexForward(false).limit(1).build()
    client.query(request).items().asScala.headOption.map(record(baseUri, _))
  }

  override def get(baseUri: String, version: Long): Option[ManifestRecord] = {
    val request = GetItemRequest.builder().tableName(table).consistentRead(true).key(key(baseUri, version)).build()
    val response = client.getItem(request)
    if (response.hasItem && !response.item().isEmpty) Some(record(baseUri, response.item())) else None
  }

  override def putIfAbsent(baseUri: String, record: ManifestRecord): Boolean =
    put(baseUri, record, s"attribute_not_exists($BaseUri) AND attribute_not_exists($Version)")

  override def replace(baseUri: String, record: ManifestRecord): Boolean =
    put(baseUri, record, s"attribute_exists($BaseUri) AND attribute_exists($Version)")

  private def put(baseUri: String, record: ManifestRecord, condition: String): Boolean = {
    val item = key(baseUri, record.version).asScala ++ Map(PathAttr -> s(record.path), Committer -> s(CommitterName)) ++
      record.size.map(n => SizeAttr -> AttributeValue.builder().n(n.toString).build())
    try {
      client.putItem(PutItemRequest.builder().tableName(table).item(item.asJava).conditionExpression(condition).build())
      true
    } catch { case _: ConditionalCheckFailedException => false }
  }

  private def key(baseUri: String, version: Long): java.util.Map[String, AttributeValue] =
    Map(BaseUri -> s(baseUri), Version -> AttributeValue.builder().n(version.toString).build()).asJava

  private def record(baseUri: String, item: java.util.Map[String, AttributeValue]): ManifestRecord = {
    def attr(name: String): AttributeValue = Option(item.get(name)).getOrElse(
      throw new IllegalStateException(s"$description: the record of $baseUri has no '$name' attribute"))
    ManifestRecord(attr(Version).n().toLong, attr(PathAttr).s(), Option(item.get(SizeAttr)).flatMap(a => Option(a.n())).map(_.toLong))
  }
}

object DynamoDbManifestStore {
  private val BaseUri = "base_uri"
  private val Version = "version"
  private val PathAttr = "path"
  private val SizeAttr = "size"
  private val Committer = "committer"
  private val CommitterName = "lance-spark"

  /** `spark.hadoop.lance.commit.dynamodb.table`: the table (required). */
  val TableKey: String = "lance.commit.dynamodb.table"
  /** `...dynamodb.endpoint`: endpoint URL override (e.g. a local DynamoDB). */
  val EndpointKey: String = "lance.commit.dynamodb.endpoint"
  /** `...dynamodb.region`; default S3A's `fs.s3a.endpoint.region`, else the SDK's chain. */
  val RegionKey: String = "lance.commit.dynamodb.region"
  /** `...dynamodb.access.key` / `.secret.key`; default S3A's keys, else the SDK's chain. */
  val AccessKeyKey: String = "lance.commit.dynamodb.access.key"
  val SecretKeyKey: String = "lance.commit.dynamodb.secret.key"

  private final case class ClientKey(endpoint: Option[String], region: Option[String], access: Option[String], secret: Option[String])
  private val clients = new ConcurrentHashMap[ClientKey, DynamoDbClient]()
  private val checkedTables = ConcurrentHashMap.newKeySet[(ClientKey, String)]()

  def fromConf(conf: Configuration): DynamoDbManifestStore = {
    def opt(k: String): Option[String] = Option(conf.getTrimmed(k)).filter(_.nonEmpty)
    val table = opt(TableKey).getOrElse(throw new IllegalArgumentException(
      s"spark.hadoop.${ExternalManifestStore.KindKey}=dynamodb needs spark.hadoop.$TableKey (a table with hash key " +
        s"$BaseUri (string) and range key $Version (number))"))
    val access = opt(AccessKeyKey).orElse(opt("fs.s3a.access.key"))
    val secret = opt(SecretKeyKey).orElse(opt("fs.s3a.secret.key"))
    val key = ClientKey(opt(EndpointKey), opt(RegionKey).orElse(opt("fs.s3a.endpoint.region")), access, secret)
    val client = try clients.computeIfAbsent(key, k => build(k))
      catch {
        case e: NoClassDefFoundError => throw new IllegalStateException(
          "the DynamoDB external manifest store needs the AWS SDK's DynamoDB client on the driver's classpath " +
            "(e.g. --packages software.amazon.awssdk:dynamodb:<the SDK version of your hadoop-aws>)", e)
      }
    if (!checkedTables.contains((key, table))) {
      checkTable(client, table)
      checkedTables.add((key, table))
    }
    new DynamoDbManifestStore(client, table)
  }

  private def build(k: ClientKey): DynamoDbClient = {
    val credentials: AwsCredentialsProvider = (k.access, k.secret) match {
      case (Some(a), Some(s)) => StaticCredentialsProvider.create(AwsBasicCredentials.create(a, s))
      case _ => DefaultCredentialsProvider.builder().build()
    }
    val b = DynamoDbClient.builder().credentialsProvider(credentials)
    k.endpoint.foreach(e => b.endpointOverride(URI.create(e)))
    k.region.foreach(r => b.region(Region.of(r)))
    b.build()
  }

  /** The table must exist with the reference's key schema; anything else is a clear error. */
  private def checkTable(client: DynamoDbClient, table: String): Unit = {
    val described = try client.describeTable(DescribeTableRequest.builder().tableName(table).build())
      catch {
        case e: ResourceNotFoundException => throw new IllegalArgumentException(
          s"spark.hadoop.$TableKey: DynamoDB table '$table' does not exist; create it with hash key $BaseUri (S) " +
            s"and range key $Version (N)", e)
      }
    val keys = described.table().keySchema().asScala.map(k => k.attributeName() -> k.keyType()).toMap
    if (keys.get(BaseUri) != Some(KeyType.HASH) || keys.get(Version) != Some(KeyType.RANGE))
      throw new IllegalArgumentException(
        s"spark.hadoop.$TableKey: DynamoDB table '$table' must have hash key $BaseUri and range key $Version " +
          s"(it has ${keys.map { case (n, t) => s"$n $t" }.mkString(", ")})")
  }

  private def s(v: String): AttributeValue = AttributeValue.builder().s(v).build()
}
