/** `readStream` of a Delta or Qbeast table (`UseStreamSource`): offsets are table versions, and each
  * micro-batch reads the files that later commits add. */
package use.sql

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{DataFrame, Row, SparkSession}
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder
import org.apache.spark.sql.connector.read.streaming.{ReadAllAvailable, ReadLimit, ReadMaxFiles, SupportsAdmissionControl, SupportsTriggerAvailableNow}
import org.apache.spark.sql.execution.streaming.{Offset, Source}
import org.apache.spark.sql.types.StructType

/** A stream's position in a table: a version and how many of its files the stream has taken;
  * `snapshot` while it takes the table as of that version. Its JSON is the protocol's
  * `StreamPosition`, which the stream's checkpoint keeps. */
case class UseStreamOffset(position: StreamPosition) extends Offset {
  override def json(): String = Codec.write(position).toString
}

object UseStreamOffset {
  /** An offset as the stream's checkpoint holds it (Spark hands a restarted stream its JSON). */
  def of(o: org.apache.spark.sql.connector.read.streaming.Offset): StreamPosition = o match {
    case u: UseStreamOffset => u.position
    case other =>
      val n = Bridge.json.readTree(other.json())
      StreamPosition(n.get("version").asLong(), Option(n.get("index")).map(_.asLong()).getOrElse(0L),
        Option(n.get("snapshot")).exists(_.asBoolean()))
  }
}

/** `spark.readStream.format("delta"|"qbeast").load(path)` (and `readStream.table`): a micro-batch
  * source whose offsets are positions in the table's versions. Which files a batch takes is the
  * Python side's (`use.sql.stream`: the table as of the stream's start, or the commits from
  * `startingVersion` / `startingTimestamp`; then the files later commits add as new data, never an
  * optimization's rewrite), within `maxFilesPerTrigger` (default 1000) and `maxBytesPerTrigger`
  * (Spark's admission control; `Trigger.AvailableNow`: in such batches, up to the version of its
  * start); they are read as a planned scan of
  * the table (`UseAnalysis.fileScan`, column mapping included), so a batch reads exactly the rows
  * those files hold. The schema is the table's when the stream starts; a later schema change stops
  * the stream. */
class UseStreamSource(spark: SparkSession, meta: TableMeta, options: Map[String, String])
  extends Source with SupportsAdmissionControl with SupportsTriggerAvailableNow {

  /** `Trigger.AvailableNow`: the table's latest version when the trigger started; the batches read
    * up to it only, each within the read limits. */
  private var availableNow: Option[Long] = None

  override def prepareForTriggerAvailableNow(): Unit = {
    availableNow = Some(Bridge.call(StreamVersionRequest(source)).version)
  }

  /** `startingTimestamp`, read as `timestampAsOf` is (the session's time zone), in ms. */
  private val startingTimestamp: Option[Long] = DeltaPathProvider.timestampOption(options.asJava, "startingTimestamp")

  private def limitOption(key: String): Option[Long] =
    options.collectFirst { case (k, v) if k.equalsIgnoreCase(key) => v }.map { text =>
      scala.util.Try(text.trim.toLong).toOption.filter(_ > 0).getOrElse(throw new UseException(
        s"the read option $key takes a positive number, got '$text'", UseException.Kinds.InvalidArgument))
    }

  private val maxFiles: Long = limitOption("maxFilesPerTrigger").getOrElse(UseStreamSource.DefaultMaxFiles)
  private val maxBytes: Option[Long] = limitOption("maxBytesPerTrigger")

  override def schema: StructType = meta.schema

  private def source: StreamSource = StreamSource(meta.ref, options, meta.version, startingTimestamp)

  override def getDefaultReadLimit: ReadLimit = ReadLimit.maxFiles(maxFiles.toInt)

  override def latestOffset(startOffset: org.apache.spark.sql.connector.read.streaming.Offset, limit: ReadLimit)
      : org.apache.spark.sql.connector.read.streaming.Offset = {
    val (files, bytes) = limit match {
      case _: ReadAllAvailable => (None, None) // everything there is
      case m: ReadMaxFiles => (Some(m.maxFiles().toLong), maxBytes)
      case _ => (Some(maxFiles), maxBytes)
    }
    val start = Option(startOffset).map(UseStreamOffset.of)
    UseStreamOffset(Bridge.call(StreamLatestRequest(source, start, availableNow, files, bytes)).end)
  }

  override def getOffset: Option[Offset] = throw new UnsupportedOperationException(
    "internal: a USE stream source answers latestOffset (admission control), not getOffset")

  override def getBatch(start: Option[Offset], end: Offset): DataFrame = {
    val plan = PlannedScan.of(Bridge.call(StreamBatchRequest(source, start.map(UseStreamOffset.of), UseStreamOffset.of(end))))
    val index = new UseFileIndex(meta, Some(plan.version), None, Some(plan))
    val batch = UseAnalysis.fileScan(spark, index, None, UseAnalysis.toAttributes(meta.schema), isStreaming = true)
    new org.apache.spark.sql.classic.Dataset[Row](spark.asInstanceOf[org.apache.spark.sql.classic.SparkSession], batch,
      ExpressionEncoder(meta.schema))
  }

  override def stop(): Unit = ()

  override def toString: String = s"USE ${meta.provider} source at ${meta.root}"
}

object UseStreamSource {
  /** Delta's default `maxFilesPerTrigger`. */
  val DefaultMaxFiles = 1000L
}
