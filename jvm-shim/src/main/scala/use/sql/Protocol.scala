/** The typed protocol between the shim and USE's Python side: one case class per message of
  * `use.sql.protocol.messages`, field for field and in the same order (camelCase names, as on the
  * wire), and their JSON codec. `tests/protocol/<Message>.json` holds one full example of each,
  * which `Protocol.roundTrip` must read and write back unchanged (tests/spark/test_sql_protocol.py):
  * a field added or renamed on one side alone fails that test. */
package use.sql

import java.util.Base64

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.JsonNodeFactory

// --- values -------------------------------------------------------------------------------------

final case class TableRef(name: String, location: Option[String], provider: Option[String], byPath: Boolean,
                          database: Option[String], table: Option[String], partitionSchema: Option[String])

final case class TableDescription(root: String, uri: String, provider: String, version: Long, schema: String,
                                  partitionColumns: Seq[String], configuration: Map[String, String], description: Option[String],
                                  isQbeast: Boolean, numFiles: Long, sizeInBytes: Long, storedSchema: Option[String],
                                  columnMapping: String)

final case class Done()

final case class ErrorReply(kind: String, message: String, sqlState: String, retryable: Boolean)

final case class TableReply(table: TableDescription)

/** A request: the bridge method it calls, and how its reply is read. */
sealed abstract class Request[R](val method: String)(implicit val reply: Codec[R]) extends Product

// --- DDL ------------------------------------------------------------------------------------------

final case class DescribeRequest(table: TableRef, version: Option[Long], timestampMs: Option[Long])
  extends Request[TableDescription]("describe")

final case class CreateSpec(mode: String, name: String, provider: String, location: String, managed: Boolean,
                            locationGiven: Boolean, byPath: Boolean, schema: Option[String], partitionColumns: Seq[String],
                            properties: Map[String, String], options: Map[String, String], comment: Option[String],
                            owner: Option[String], table: TableRef, root: Option[String])

final case class CreateReply(table: TableDescription, created: Boolean)

final case class CreateRequest(spec: CreateSpec) extends Request[CreateReply]("create")

final case class AbandonRequest(table: TableRef) extends Request[Done]("abandon")

final case class StageReply(spec: CreateSpec)

final case class StageRequest(spec: CreateSpec) extends Request[StageReply]("stage")

final case class CommitStagedRequest(spec: CreateSpec) extends Request[TableReply]("commitStaged")

final case class AlterPropertiesRequest(table: TableRef, set: Map[String, String], unset: Seq[String])
  extends Request[TableReply]("alterProperties")

final case class AlterSchemaRequest(table: TableRef, schema: String, readVersion: Long, added: Seq[String])
  extends Request[TableReply]("alterSchema")

final case class TruncateRequest(table: TableRef) extends Request[Done]("truncate")

// --- reads ----------------------------------------------------------------------------------------

final case class ScanRequest(table: TableRef, version: Option[Long], sample: Option[Double])

final case class SampleFilter(columns: Seq[String], upper: Int)

/** `files`: an Arrow IPC stream, one row per file (uri, size, modification_time, partition_values). */
final case class ScanPlan(version: Long, files: Array[Byte], totalFiles: Long, totalBytes: Long, sample: Option[SampleFilter])

final case class PlanScansReply(scans: Seq[ScanPlan])

final case class PlanScansRequest(scans: Seq[ScanRequest]) extends Request[PlanScansReply]("planScans")

final case class StreamPosition(version: Long, index: Long, snapshot: Boolean)

final case class StreamSource(table: TableRef, options: Map[String, String], schemaVersion: Long, startingTimestampMs: Option[Long])

final case class StreamVersionReply(version: Long)

final case class StreamVersionRequest(source: StreamSource) extends Request[StreamVersionReply]("streamVersion")

final case class StreamLatestReply(end: StreamPosition)

final case class StreamLatestRequest(source: StreamSource, start: Option[StreamPosition], lastVersion: Option[Long],
                                     maxFiles: Option[Long], maxBytes: Option[Long]) extends Request[StreamLatestReply]("streamLatest")

final case class StreamBatchRequest(source: StreamSource, start: Option[StreamPosition], end: StreamPosition)
  extends Request[ScanPlan]("streamBatch")

// --- writes ---------------------------------------------------------------------------------------

/** `value` and `values`: JSON scalars (null, a boolean, a number or a string). */
final case class PartitionFilter(op: String, column: Option[String], value: Any, values: Seq[Any], left: Option[PartitionFilter],
                                 right: Option[PartitionFilter])

final case class WriteRequest(table: TableRef, mode: String, partitionFilters: Seq[PartitionFilter], condition: Option[String],
                              options: Map[String, String], staged: Option[CreateSpec]) extends Request[TableReply]("write")

final case class SaveReply(created: Boolean, root: String, write: Option[String])

final case class SaveRequest(path: String, format: String, mode: String, partitionColumns: Option[Seq[String]],
                             options: Map[String, String], stream: Boolean) extends Request[SaveReply]("savePath")

final case class MergeMetrics(numTargetRowsUpdated: Long, numTargetRowsDeleted: Long, numTargetRowsInserted: Long,
                              numTargetRowsCopied: Long, numTargetFilesRemoved: Long)

final case class RewriteRowsReply(affectedRows: Long)

final case class RewriteRowsRequest(operation: String, table: TableRef, version: Long, predicate: String, remove: Seq[String],
                                    matchedRows: Option[Long], wholeFiles: Boolean, mergeMetrics: Option[MergeMetrics])
  extends Request[RewriteRowsReply]("rewriteRows")

final case class RowLevelBeginRequest(table: TableRef) extends Request[Done]("rowLevelBegin")

final case class RowLevelEndRequest(table: TableRef) extends Request[Done]("rowLevelEnd")

// --- use_catalog ----------------------------------------------------------------------------------

final case class Providers(tables: Seq[String], paths: Seq[String])

final case class ProvidersRequest() extends Request[Providers]("providers")

final case class InsightNamesReply(table: Seq[String], lake: Seq[String])

final case class InsightNamesRequest() extends Request[InsightNamesReply]("insightNames")

final case class MetastoreTable(catalog: String, database: String, tableName: String, tableType: Option[String],
                                provider: Option[String], location: Option[String], tableProperties: Map[String, String])

final case class InsightReadReply(schema: String, options: Map[String, String])

final case class InsightReadRequest(kind: String, insight: String, table: Option[TableRef], tables: Seq[MetastoreTable])
  extends Request[InsightReadReply]("insightRead")

final case class ProcedureParameter(name: String, `type`: String, default: Option[String], doc: String, table: Boolean)

final case class ProcedureSpec(name: String, description: String, parameters: Seq[ProcedureParameter])

final case class ProceduresReply(procedures: Seq[ProcedureSpec])

final case class ProceduresRequest() extends Request[ProceduresReply]("procedures")

final case class Registration(database: String, table: String, provider: String)

/** `rows`: an Arrow IPC stream in the procedure's output schema. */
final case class CallProcedureReply(rows: Array[Byte], register: Option[Registration])

/** `arguments`: an Arrow IPC stream of one row, a column per parameter, as Spark gives the values. */
final case class CallProcedureRequest(procedure: String, arguments: Array[Byte], tables: Map[String, TableRef])
  extends Request[CallProcedureReply]("callProcedure")

final case class ManualTriggerReply(ran: Boolean, queued: Boolean, reason: String, versions: Seq[Long])

final case class ManualTriggerRequest(table: TableRef, settings: Map[String, String])
  extends Request[ManualTriggerReply]("manualTrigger")

// --- the codec -----------------------------------------------------------------------------------

/** How a value is read from JSON (`node` null: the field is absent). Writing needs no instance:
  * `Codec.write` writes any message by its fields' runtime values. */
trait Codec[T] {
  def read(node: JsonNode, where: String): T
}

object Codec {
  private val nodes = JsonNodeFactory.instance

  private def present(node: JsonNode): Boolean = node != null && !node.isNull

  private def expect(ok: Boolean, where: String, what: String, node: JsonNode): Unit =
    if (!ok) throw new UseException(s"internal: $where must be $what, got ${if (node == null) "nothing" else node.toString}; " +
      "the shim and the Python package differ", UseException.Kinds.Internal)

  private def scalar[T](what: String)(ok: JsonNode => Boolean)(get: JsonNode => T): Codec[T] = (n, where) => {
    expect(present(n) && ok(n), where, what, n)
    get(n)
  }

  implicit val stringCodec: Codec[String] = scalar("a string")(_.isTextual)(_.asText())
  implicit val longCodec: Codec[Long] = scalar("an integer")(_.isIntegralNumber)(_.asLong())
  implicit val intCodec: Codec[Int] = scalar("an integer")(n => n.isIntegralNumber && n.canConvertToInt)(_.asInt())
  implicit val doubleCodec: Codec[Double] = scalar("a number")(_.isNumber)(_.asDouble())
  implicit val booleanCodec: Codec[Boolean] = scalar("a boolean")(_.isBoolean)(_.asBoolean())
  implicit val bytesCodec: Codec[Array[Byte]] = scalar("base64 text")(_.isTextual)(n => Base64.getDecoder.decode(n.asText()))

  /** A JSON scalar as it is: null, a Boolean, a Long, a Double or a String. */
  val anyCodec: Codec[Any] = (n, where) =>
    if (!present(n)) null
    else if (n.isBoolean) n.asBoolean()
    else if (n.isIntegralNumber) n.asLong()
    else if (n.isNumber) n.asDouble()
    else { expect(n.isTextual, where, "a JSON scalar", n); n.asText() }

  implicit def optionCodec[T](implicit c: Codec[T]): Codec[Option[T]] = (n, where) => if (present(n)) Some(c.read(n, where)) else None

  implicit def seqCodec[T](implicit c: Codec[T]): Codec[Seq[T]] = (n, where) => {
    expect(present(n) && n.isArray, where, "a JSON array", n)
    n.elements().asScala.toSeq.map(c.read(_, s"$where[]"))
  }

  implicit def mapCodec[T](implicit c: Codec[T]): Codec[Map[String, T]] = (n, where) => {
    expect(present(n) && n.isObject, where, "a JSON object", n)
    n.fields().asScala.map(e => e.getKey -> c.read(e.getValue, s"$where.${e.getKey}")).toMap
  }

  /** The codec of the message `name`, made by `make` from its fields. */
  final class Message[T <: Product](val name: String, make: Fields => T) extends Codec[T] {
    override def read(n: JsonNode, where: String): T = {
      expect(present(n) && n.isObject, where, s"a $name object", n)
      make(new Fields(n, name))
    }
  }

  private def message[T <: Product](name: String)(make: Fields => T): Message[T] = new Message(name, make)

  implicit lazy val tableRef: Message[TableRef] = message("TableRef")(f => TableRef(f.str("name"), f.optStr("location"), f.optStr("provider"),
    f.bool("byPath"), f.optStr("database"), f.optStr("table"), f.optStr("partitionSchema")))
  implicit lazy val tableDescription: Message[TableDescription] = message("TableDescription")(f => TableDescription(f.str("root"),
    f.str("uri"), f.str("provider"), f.long("version"), f.str("schema"), f.strs("partitionColumns"), f.strMap("configuration"), f.optStr("description"),
    f.bool("isQbeast"), f.long("numFiles"), f.long("sizeInBytes"), f.optStr("storedSchema"), f.str("columnMapping")))
  implicit lazy val done: Message[Done] = message("Done")(_ => Done())
  implicit lazy val errorReply: Message[ErrorReply] = message("ErrorReply")(f => ErrorReply(f.str("kind"), f.str("message"), f.str("sqlState"),
    f.bool("retryable")))
  implicit lazy val tableReply: Message[TableReply] = message("TableReply")(f => TableReply(f.msg[TableDescription]("table")))
  implicit lazy val describeRequest: Message[DescribeRequest] = message("DescribeRequest")(f => DescribeRequest(f.msg[TableRef]("table"),
    f.optLong("version"), f.optLong("timestampMs")))
  implicit lazy val createSpec: Message[CreateSpec] = message("CreateSpec")(f => CreateSpec(f.str("mode"), f.str("name"), f.str("provider"),
    f.str("location"), f.bool("managed"), f.bool("locationGiven"), f.bool("byPath"), f.optStr("schema"), f.strs("partitionColumns"), f.strMap("properties"),
    f.strMap("options"), f.optStr("comment"), f.optStr("owner"), f.msg[TableRef]("table"), f.optStr("root")))
  implicit lazy val createReply: Message[CreateReply] = message("CreateReply")(f => CreateReply(f.msg[TableDescription]("table"), f.bool("created")))
  implicit lazy val createRequest: Message[CreateRequest] = message("CreateRequest")(f => CreateRequest(f.msg[CreateSpec]("spec")))
  implicit lazy val abandonRequest: Message[AbandonRequest] = message("AbandonRequest")(f => AbandonRequest(f.msg[TableRef]("table")))
  implicit lazy val stageReply: Message[StageReply] = message("StageReply")(f => StageReply(f.msg[CreateSpec]("spec")))
  implicit lazy val stageRequest: Message[StageRequest] = message("StageRequest")(f => StageRequest(f.msg[CreateSpec]("spec")))
  implicit lazy val commitStagedRequest: Message[CommitStagedRequest] =
    message("CommitStagedRequest")(f => CommitStagedRequest(f.msg[CreateSpec]("spec")))
  implicit lazy val alterPropertiesRequest: Message[AlterPropertiesRequest] =
    message("AlterPropertiesRequest")(f => AlterPropertiesRequest(f.msg[TableRef]("table"), f.strMap("set"), f.strs("unset")))
  implicit lazy val alterSchemaRequest: Message[AlterSchemaRequest] =
    message("AlterSchemaRequest")(f => AlterSchemaRequest(f.msg[TableRef]("table"), f.str("schema"), f.long("readVersion"), f.strs("added")))
  implicit lazy val truncateRequest: Message[TruncateRequest] = message("TruncateRequest")(f => TruncateRequest(f.msg[TableRef]("table")))
  implicit lazy val scanRequest: Message[ScanRequest] = message("ScanRequest")(f => ScanRequest(f.msg[TableRef]("table"), f.optLong("version"), f.optDouble("sample")))
  implicit lazy val sampleFilter: Message[SampleFilter] = message("SampleFilter")(f => SampleFilter(f.strs("columns"), f.int("upper")))
  implicit lazy val scanPlan: Message[ScanPlan] = message("ScanPlan")(f => ScanPlan(f.long("version"), f.bytes("files"), f.long("totalFiles"),
    f.long("totalBytes"), f.opt[SampleFilter]("sample")))
  implicit lazy val planScansReply: Message[PlanScansReply] = message("PlanScansReply")(f => PlanScansReply(f.seq[ScanPlan]("scans")))
  implicit lazy val planScansRequest: Message[PlanScansRequest] = message("PlanScansRequest")(f => PlanScansRequest(f.seq[ScanRequest]("scans")))
  implicit lazy val streamPosition: Message[StreamPosition] =
    message("StreamPosition")(f => StreamPosition(f.long("version"), f.long("index"), f.bool("snapshot")))
  implicit lazy val streamSource: Message[StreamSource] = message("StreamSource")(f => StreamSource(f.msg[TableRef]("table"), f.strMap("options"),
    f.long("schemaVersion"), f.optLong("startingTimestampMs")))
  implicit lazy val streamVersionReply: Message[StreamVersionReply] =
    message("StreamVersionReply")(f => StreamVersionReply(f.long("version")))
  implicit lazy val streamVersionRequest: Message[StreamVersionRequest] =
    message("StreamVersionRequest")(f => StreamVersionRequest(f.msg[StreamSource]("source")))
  implicit lazy val streamLatestReply: Message[StreamLatestReply] = message("StreamLatestReply")(f => StreamLatestReply(f.msg[StreamPosition]("end")))
  implicit lazy val streamLatestRequest: Message[StreamLatestRequest] = message("StreamLatestRequest")(f =>
    StreamLatestRequest(f.msg[StreamSource]("source"), f.opt[StreamPosition]("start"), f.optLong("lastVersion"), f.optLong("maxFiles"), f.optLong("maxBytes")))
  implicit lazy val streamBatchRequest: Message[StreamBatchRequest] =
    message("StreamBatchRequest")(f => StreamBatchRequest(f.msg[StreamSource]("source"), f.opt[StreamPosition]("start"), f.msg[StreamPosition]("end")))
  implicit lazy val partitionFilter: Message[PartitionFilter] = message("PartitionFilter")(f => PartitionFilter(f.str("op"),
    f.optStr("column"), f.scalar("value"), f.scalars("values"), f.opt[PartitionFilter]("left"), f.opt[PartitionFilter]("right")))
  implicit lazy val writeRequest: Message[WriteRequest] = message("WriteRequest")(f => WriteRequest(f.msg[TableRef]("table"), f.str("mode"),
    f.seq[PartitionFilter]("partitionFilters"), f.optStr("condition"), f.strMap("options"), f.opt[CreateSpec]("staged")))
  implicit lazy val saveReply: Message[SaveReply] = message("SaveReply")(f => SaveReply(f.bool("created"), f.str("root"), f.optStr("write")))
  implicit lazy val saveRequest: Message[SaveRequest] = message("SaveRequest")(f => SaveRequest(f.str("path"), f.str("format"), f.str("mode"),
    f.optStrs("partitionColumns"), f.strMap("options"), f.bool("stream")))
  implicit lazy val mergeMetrics: Message[MergeMetrics] = message("MergeMetrics")(f => MergeMetrics(f.long("numTargetRowsUpdated"),
    f.long("numTargetRowsDeleted"), f.long("numTargetRowsInserted"), f.long("numTargetRowsCopied"), f.long("numTargetFilesRemoved")))
  implicit lazy val rewriteRowsReply: Message[RewriteRowsReply] = message("RewriteRowsReply")(f => RewriteRowsReply(f.long("affectedRows")))
  implicit lazy val rewriteRowsRequest: Message[RewriteRowsRequest] = message("RewriteRowsRequest")(f =>
    RewriteRowsRequest(f.str("operation"), f.msg[TableRef]("table"), f.long("version"), f.str("predicate"), f.strs("remove"), f.optLong("matchedRows"), f.bool("wholeFiles"),
      f.opt[MergeMetrics]("mergeMetrics")))
  implicit lazy val rowLevelBeginRequest: Message[RowLevelBeginRequest] =
    message("RowLevelBeginRequest")(f => RowLevelBeginRequest(f.msg[TableRef]("table")))
  implicit lazy val rowLevelEndRequest: Message[RowLevelEndRequest] = message("RowLevelEndRequest")(f => RowLevelEndRequest(f.msg[TableRef]("table")))
  implicit lazy val providers: Message[Providers] = message("Providers")(f => Providers(f.strs("tables"), f.strs("paths")))
  implicit lazy val providersRequest: Message[ProvidersRequest] = message("ProvidersRequest")(_ => ProvidersRequest())
  implicit lazy val insightNamesReply: Message[InsightNamesReply] =
    message("InsightNamesReply")(f => InsightNamesReply(f.strs("table"), f.strs("lake")))
  implicit lazy val insightNamesRequest: Message[InsightNamesRequest] = message("InsightNamesRequest")(_ => InsightNamesRequest())
  implicit lazy val metastoreTable: Message[MetastoreTable] = message("MetastoreTable")(f => MetastoreTable(f.str("catalog"),
    f.str("database"), f.str("tableName"), f.optStr("tableType"), f.optStr("provider"), f.optStr("location"), f.strMap("tableProperties")))
  implicit lazy val insightReadReply: Message[InsightReadReply] =
    message("InsightReadReply")(f => InsightReadReply(f.str("schema"), f.strMap("options")))
  implicit lazy val insightReadRequest: Message[InsightReadRequest] = message("InsightReadRequest")(f =>
    InsightReadRequest(f.str("kind"), f.str("insight"), f.opt[TableRef]("table"), f.seq[MetastoreTable]("tables")))
  implicit lazy val procedureParameter: Message[ProcedureParameter] = message("ProcedureParameter")(f =>
    ProcedureParameter(f.str("name"), f.str("type"), f.optStr("default"), f.str("doc"), f.bool("table")))
  implicit lazy val procedureSpec: Message[ProcedureSpec] =
    message("ProcedureSpec")(f => ProcedureSpec(f.str("name"), f.str("description"), f.seq[ProcedureParameter]("parameters")))
  implicit lazy val proceduresReply: Message[ProceduresReply] = message("ProceduresReply")(f => ProceduresReply(f.seq[ProcedureSpec]("procedures")))
  implicit lazy val proceduresRequest: Message[ProceduresRequest] = message("ProceduresRequest")(_ => ProceduresRequest())
  implicit lazy val registration: Message[Registration] =
    message("Registration")(f => Registration(f.str("database"), f.str("table"), f.str("provider")))
  implicit lazy val callProcedureReply: Message[CallProcedureReply] =
    message("CallProcedureReply")(f => CallProcedureReply(f.bytes("rows"), f.opt[Registration]("register")))
  implicit lazy val callProcedureRequest: Message[CallProcedureRequest] =
    message("CallProcedureRequest")(f => CallProcedureRequest(f.str("procedure"), f.bytes("arguments"), f.mapOf[TableRef]("tables")))
  implicit lazy val manualTriggerReply: Message[ManualTriggerReply] = message("ManualTriggerReply")(f =>
    ManualTriggerReply(f.bool("ran"), f.bool("queued"), f.str("reason"), f.longs("versions")))
  implicit lazy val manualTriggerRequest: Message[ManualTriggerRequest] =
    message("ManualTriggerRequest")(f => ManualTriggerRequest(f.msg[TableRef]("table"), f.strMap("settings")))

  /** Every message's codec, by the message's name. */
  lazy val messages: Map[String, Message[_ <: Product]] = Seq[Message[_ <: Product]](tableRef, tableDescription, done, errorReply,
    tableReply, describeRequest, createSpec, createReply, createRequest, abandonRequest, stageReply, stageRequest,
    commitStagedRequest, alterPropertiesRequest, alterSchemaRequest, truncateRequest, scanRequest, sampleFilter, scanPlan,
    planScansReply, planScansRequest, streamPosition, streamSource, streamVersionReply, streamVersionRequest, streamLatestReply,
    streamLatestRequest, streamBatchRequest, partitionFilter, writeRequest, saveReply, saveRequest, mergeMetrics,
    rewriteRowsReply, rewriteRowsRequest, rowLevelBeginRequest, rowLevelEndRequest, providers, providersRequest,
    insightNamesReply, insightNamesRequest, metastoreTable, insightReadReply, insightReadRequest, procedureParameter,
    procedureSpec, proceduresReply, proceduresRequest, registration, callProcedureReply, callProcedureRequest,
    manualTriggerReply, manualTriggerRequest).map(m => m.name -> m).toMap

  /** Any message (or value of one) as JSON, every field written (None as null): by the fields'
    * runtime values, so no case class needs a writer of its own. */
  def write(value: Any): JsonNode = value match {
    case null | None => nodes.nullNode()
    case Some(v) => write(v)
    case s: String => nodes.textNode(s)
    case b: Boolean => nodes.booleanNode(b)
    case i: Int => nodes.numberNode(i)
    case l: Long => nodes.numberNode(l)
    case d: Double => nodes.numberNode(d)
    case b: Array[Byte] => nodes.textNode(Base64.getEncoder.encodeToString(b))
    case m: Map[_, _] =>
      val o = nodes.objectNode()
      m.foreach { case (k, v) => o.set[JsonNode](k.toString, write(v)) }
      o
    case s: Iterable[_] =>
      val a = nodes.arrayNode()
      s.foreach(v => a.add(write(v)))
      a
    case p: Product =>
      val o = nodes.objectNode()
      p.productElementNames.zip(p.productIterator).foreach { case (k, v) => o.set[JsonNode](k, write(v)) }
      o
    case other => throw new UseException(s"internal: ${other.getClass.getName} is not a protocol value", UseException.Kinds.Internal)
  }
}

/** The fields of one message being read, by their types. */
final class Fields(node: JsonNode, where: String) {
  def msg[T](field: String)(implicit c: Codec[T]): T = c.read(node.get(field), s"$where.$field")
  def opt[T](field: String)(implicit c: Codec[T]): Option[T] = msg[Option[T]](field)
  def seq[T](field: String)(implicit c: Codec[T]): Seq[T] = msg[Seq[T]](field)
  def mapOf[T](field: String)(implicit c: Codec[T]): Map[String, T] = msg[Map[String, T]](field)
  def str(field: String): String = msg[String](field)
  def optStr(field: String): Option[String] = opt[String](field)
  def strs(field: String): Seq[String] = seq[String](field)
  def optStrs(field: String): Option[Seq[String]] = msg[Option[Seq[String]]](field)
  def strMap(field: String): Map[String, String] = mapOf[String](field)
  def long(field: String): Long = msg[Long](field)
  def optLong(field: String): Option[Long] = opt[Long](field)
  def longs(field: String): Seq[Long] = seq[Long](field)
  def int(field: String): Int = msg[Int](field)
  def double(field: String): Double = msg[Double](field)
  def optDouble(field: String): Option[Double] = opt[Double](field)
  def bool(field: String): Boolean = msg[Boolean](field)
  def bytes(field: String): Array[Byte] = msg[Array[Byte]](field)
  def scalar(field: String): Any = msg(field)(Codec.anyCodec)
  def scalars(field: String): Seq[Any] = msg(field)(Codec.seqCodec(Codec.anyCodec))
}

/** The typed protocol between the shim and USE's Python side (`use.sql.protocol`): one case class
  * per message and their JSON `Codec`; this object gives the round-trip test
  * (tests/spark/test_sql_protocol.py, through py4j) each message by its name. */
object Protocol {
  private def message(typeName: String): Codec.Message[_ <: Product] = Codec.messages.getOrElse(typeName,
    throw new UseException(s"internal: no message $typeName in Protocol.scala", UseException.Kinds.Internal))

  private def read(typeName: String, json: String): Product = message(typeName).read(Bridge.json.readTree(json), typeName)

  /** The names of every message. */
  def messageNames(): Array[String] = Codec.messages.keys.toArray.sorted

  /** `json` read as the message `typeName` and written back. */
  def roundTrip(typeName: String, json: String): String = Codec.write(read(typeName, json)).toString

  /** The case class's field names, in order (of the message `json` holds). */
  def fieldNames(typeName: String, json: String): Array[String] = read(typeName, json).productElementNames.toArray

  /** A request's method name and the name of its reply's message; null for a message that is no request. */
  def method(typeName: String, json: String): Array[String] = read(typeName, json) match {
    case r: Request[_] => Array(r.method, r.reply.asInstanceOf[Codec.Message[_]].name)
    case _ => null
  }
}
