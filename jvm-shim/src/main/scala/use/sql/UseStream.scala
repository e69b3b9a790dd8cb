package use.sql

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.node.ObjectNode
import org.apache.spark.sql.{DataFrame, Row, SparkSession}
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder
import org.apache.spark.sql.execution.streaming.{Offset, Source}
import org.apache.spark.sql.types.StructType

/** A stream's position in a table: the table version it has read up to. */
case class UseStreamOffset(version: Long) extends Offset {
  override def json(): String = s"""{"version":$version}"""
}

object UseStreamOffset {
  /** An offset as the stream's checkpoint holds it (Spark hands a restarted stream its JSON). */
  def of(o: org.apache.spark.sql.connector.read.streaming.Offset): UseStreamOffset = o match {
    case u: UseStreamOffset => u
    case other => UseStreamOffset(Bridge.json.readTree(other.json()).get("version").asLong())
  }
}

/** `spark.readStream.format("delta"|"qbeast").load(path)`: a micro-batch source whose offsets are
  * table versions. Which files a batch takes is the Python side's (`use.sql.stream`: the first
  * batch the table as of its version, or the commits from `startingVersion`; then the files later
  * commits add as new data, never an optimization's rewrite); they are read as a planned scan of
  * the table (`UseAnalysis.fileScan`, column mapping included), so a batch reads exactly the rows
  * those files hold. The schema is the table's when the stream starts; a later schema change stops
  * the stream. */
class UseStreamSource(spark: SparkSession, meta: TableMeta, options: Map[String, String]) extends Source {

  /** `startingTimestamp`, read as `timestampAsOf` is (the session's time zone), in ms. */
  private val startingTimestamp: Option[Long] = DeltaPathProvider.timestampOption(options.asJava, "startingTimestamp")

  override def schema: StructType = meta.schema

  private def request: ObjectNode = {
    val req = meta.ref
    req.set[ObjectNode]("options", Bridge.map(options))
    req.put("schemaVersion", meta.version)
    startingTimestamp.foreach(ms => req.put("startingTimestampMs", ms))
    req
  }

  override def getOffset: Option[Offset] =
    Some(UseStreamOffset(Bridge.call("streamOffset", request).get("version").asLong()))

  override def getBatch(start: Option[Offset], end: Offset): DataFrame = {
    val req = request
    start.map(UseStreamOffset.of) match {
      case Some(s) => req.put("start", s.version)
      case None => req.putNull("start")
    }
    val last = UseStreamOffset.of(end).version
    req.put("end", last)
    val plan = ScanPlan.fromJson(Bridge.call("streamBatch", req))
    val index = new UseFileIndex(meta, Some(last), None, Some(plan))
    val output = UseAnalysis.toAttributes(meta.schema)
    val batch = UseAnalysis.fileScan(spark, index, None, output, isStreaming = true)
    new org.apache.spark.sql.classic.Dataset[Row](spark.asInstanceOf[org.apache.spark.sql.classic.SparkSession], batch,
      ExpressionEncoder(meta.schema))
  }

  override def stop(): Unit = ()

  override def toString: String = s"USE ${meta.provider} source at ${meta.root}"
}
