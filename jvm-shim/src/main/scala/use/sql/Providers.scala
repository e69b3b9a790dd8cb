/** The data source providers `delta` and `qbeast`: `USING delta|qbeast` and `format("delta"|"qbeast")`
  * on a path resolve here to USE's tables, saves, stream sinks and stream sources. */
package use.sql {

  import java.util

  import scala.jdk.CollectionConverters._

  import org.apache.spark.sql.{DataFrame, SQLContext, SaveMode, functions}
  import org.apache.spark.sql.catalyst.util.CaseInsensitiveMap
  import org.apache.spark.sql.catalyst.analysis.ResolvedIdentifier
  import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, ReplaceTableAsSelect}
  import org.apache.spark.sql.connector.catalog.{SupportsRead, SupportsV1OverwriteWithSaveAsTable, Table, TableCapability, TableCatalog, TableProvider}
  import org.apache.spark.sql.execution.datasources.SaveIntoDataSourceCommand
  import org.apache.spark.sql.connector.expressions.{Expressions, Transform}
  import org.apache.spark.sql.connector.read.ScanBuilder
  import org.apache.spark.sql.Row
  import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder
  import org.apache.spark.sql.execution.streaming.{Sink, Source}
  import org.apache.spark.sql.sources.{BaseRelation, CreatableRelationProvider, StreamSinkProvider, StreamSourceProvider}
  import org.apache.spark.sql.streaming.OutputMode
  import org.apache.spark.sql.types.StructType
  import org.apache.spark.sql.util.CaseInsensitiveStringMap

  /** `format("delta")` on a path: the Delta table there. Reads get the table as a catalog table
    * reads it. Writes (`df.write.format("delta").save(path)`) take Delta's semantics in every save
    * mode: the table is created when the path holds none (any mode), `errorifexists` fails and
    * `ignore` writes nothing when it exists, `append` and `overwrite` write into it as
    * `INSERT INTO` / `INSERT OVERWRITE delta.`path`` do (rows aligned to the table's columns by
    * name, Qbeast tables indexed). Spark hands a DSv2 provider's table only the append and
    * overwrite modes, so the tables served here are read only and every save comes to the V1 write
    * (`createRelation`), which asks the Python side (`use.sql.save.save_path`) what the mode means
    * for the path. `saveAsTable` in overwrite mode is such a save too (`DeltaPathProvider.saveAsTableOverwrite`). */
  class DeltaPathProvider extends TableProvider with CreatableRelationProvider with StreamSinkProvider
    with StreamSourceProvider with SupportsV1OverwriteWithSaveAsTable {
    /** The format name users give (`format("delta")`), which `QbeastPathProvider` changes. */
    protected def format: String = "delta"

    private var described: Option[((String, Option[Long], Option[Long]), TableMeta)] = None

    private def path(options: util.Map[String, String]): String = {
      val p = new CaseInsensitiveStringMap(options).get("path")
      if (p == null) throw new UseException(s"""format("$format") needs a table path: .load(path) / .save(path)""", UseException.Kinds.InvalidArgument)
      p
    }

    private def meta(options: util.Map[String, String]): TableMeta = {
      val key = (path(options), DeltaPathProvider.versionAsOf(options), DeltaPathProvider.timestampAsOf(options))
      if (key._2.isDefined && key._3.isDefined) throw new UseException(
        "give the read option versionAsOf or timestampAsOf, not both: they name one version each", UseException.Kinds.InvalidArgument)
      described.filter(_._1 == key).map(_._2).getOrElse {
        val m = TableMeta.describe(TableRefs.path(key._1, Some(format)), key._2, key._3)
        described = Some(key -> m)
        m
      }
    }

    override def inferSchema(options: CaseInsensitiveStringMap): StructType = meta(options).schema

    override def inferPartitioning(options: CaseInsensitiveStringMap): Array[Transform] =
      meta(options).partitionColumns.map(c => Expressions.identity(c): Transform).toArray

    // DataFrameWriter then passes its DataFrame's schema instead of inferring one: the table may
    // not exist yet. A read without a user schema still infers (and fails on a missing table).
    override def supportsExternalMetadata(): Boolean = true

    override def getTable(schema: StructType, partitioning: Array[Transform], properties: util.Map[String, String]): Table = {
      val p = path(properties)
      DeltaPathProvider.refuseChangeFeed(properties)
      val pinned = DeltaPathProvider.versionAsOf(properties).isDefined || DeltaPathProvider.timestampAsOf(properties).isDefined
      val existing = try Some(meta(properties)) catch {
        case e: UseException if e.kind == UseException.Kinds.TableNotFound && !pinned => None
      }
      existing match {
        case Some(m) => new UseTable(m, None, s"$format.`$p`", pinned, UseCapabilities.readOnly)
        case None => new DeltaPathProvider.NoTableYet(p, schema, format)
      }
    }

    override def createRelation(ctx: SQLContext, mode: SaveMode, parameters: Map[String, String], data: DataFrame): BaseRelation = {
      val options = CaseInsensitiveMap(parameters)
      val p = options.getOrElse("path", throw new UseException(
        s"""format("$format") needs a table path: .save(path)""", UseException.Kinds.InvalidArgument))
      val partitionColumns = options.get(DeltaPathProvider.PartitionColumnsKey).map { encoded =>
        Bridge.json.readTree(encoded).elements().asScala.map(_.asText()).toSeq
      }
      val writeOptions = DeltaPathProvider.asGiven(parameters).filterNot { case (k, _) =>
        k.equalsIgnoreCase("path") || k.equalsIgnoreCase(DeltaPathProvider.PartitionColumnsKey)
      }
      val answer = Bridge.call(SaveRequest(p, format, mode.name(), partitionColumns, writeOptions, stream = false), data)
      answer.write.foreach { how =>
        // into an existing table: the catalog's write of `delta.`root``, as INSERT INTO/OVERWRITE
        val root = answer.root
        val writer = data.writeTo(s"delta.`${root.replace("`", "``")}`").options(writeOptions.asJava)
        how match {
          case "overwrite" => writer.overwrite(functions.lit(true))
          case "dynamic" => writer.overwritePartitions() // Delta's partitionOverwriteMode=dynamic
          case _ => writer.append()
        }
      }
      val written = data.schema
      new BaseRelation {
        override def sqlContext: SQLContext = ctx
        override def schema: StructType = written
      }
    }

    /** `spark.readStream.format("delta").load(path)`: the table's schema. A user-given one must be
      * it (nullability aside), as Delta checks: the catalog's V1 fallback of `readStream.table(t)`
      * passes the table's own. */
    override def sourceSchema(ctx: SQLContext, schema: Option[StructType], providerName: String,
                              parameters: Map[String, String]): (String, StructType) = {
      DeltaPathProvider.refuseChangeFeed(parameters.asJava)
      val table = meta(parameters.asJava).schema
      schema.filterNot(s => DeltaPathProvider.sameColumns(s, table)).foreach { given =>
        throw new UseException(s"readStream.format(\"$format\") reads the table's schema (${table.simpleString}), not " +
          s"${given.simpleString}: drop .schema(...)", UseException.Kinds.InvalidArgument)
      }
      (format, table)
    }

    /** The stream's source (`UseStreamSource`); Spark takes this V1 source because the provider's
      * DSv2 tables have no micro-batch read. */
    override def createSource(ctx: SQLContext, metadataPath: String, schema: Option[StructType], providerName: String,
                              parameters: Map[String, String]): Source = {
      val p = path(parameters.asJava)
      val options = DeltaPathProvider.asGiven(parameters).filterNot { case (k, _) => k.equalsIgnoreCase("path") }
      new UseStreamSource(ctx.sparkSession, TableMeta.describe(TableRefs.path(p, Some(format))), options)
    }

    /** `df.writeStream.format("delta").start(path)`: a micro-batch sink (`DeltaPathProvider.StreamSink`).
      * Spark takes this V1 sink because `use.sql.install` lists the provider in
      * `spark.sql.streaming.disabledV2Writers` (its DSv2 tables have no streaming write). */
    override def createSink(ctx: SQLContext, parameters: Map[String, String], partitionColumns: Seq[String],
                            outputMode: OutputMode): Sink = {
      val p = CaseInsensitiveMap(parameters).getOrElse("path", throw new UseException(
        s"""writeStream.format("$format") needs a table path: .start(path) or .option("path", ...)""", UseException.Kinds.InvalidArgument))
      val mode = outputMode.toString
      if (mode != "Append" && mode != "Complete") {
        throw new UseException(s"a Delta table takes a stream's rows in append or complete output mode, not ${mode.toLowerCase}: " +
          "use .outputMode(\"append\") (new rows) or .outputMode(\"complete\") (the whole result each batch)",
          UseException.Kinds.InvalidArgument)
      }
      new DeltaPathProvider.StreamSink(p, format, if (mode == "Complete") "Overwrite" else "Append", partitionColumns,
        DeltaPathProvider.asGiven(parameters).filterNot { case (k, _) => k.equalsIgnoreCase("path") || k.equalsIgnoreCase("checkpointLocation") })
    }
  }

  object DeltaPathProvider {
    /** Delta's change data feed (`readChangeFeed`, or its old name `readChangeData`): USE neither
      * writes nor reads change data, and the option must not be ignored (the table's rows are not
      * its changes). */
    def refuseChangeFeed(options: util.Map[String, String]): Unit = {
      val opts = new CaseInsensitiveStringMap(options)
      Seq("readChangeFeed", "readChangeData").find(k => Option(opts.get(k)).exists(_.trim.equalsIgnoreCase("true"))).foreach { k =>
        throw new UseException(s"the read option $k (Delta's change data feed) is not supported: USE does not record " +
          "change data; compare versions instead (e.g. .option(\"versionAsOf\", n) against the latest)", UseException.Kinds.NotSupported)
      }
    }

    /** The read option `versionAsOf` (Delta's time travel): a table version. */
    def versionAsOf(options: util.Map[String, String]): Option[Long] =
      Option(new CaseInsensitiveStringMap(options).get("versionAsOf")).map { text =>
        scala.util.Try(text.trim.toLong).toOption.filter(_ >= 0).getOrElse(throw new UseException(
          s"the read option versionAsOf takes a table version (an integer of 0 or more), got '$text'; e.g. .option(\"versionAsOf\", 3)",
          UseException.Kinds.InvalidArgument))
      }

    /** The read option `timestampAsOf` (Delta's time travel): a time as SQL casts it to a timestamp
      * in the session's time zone ('2025-01-01', '2025-01-01 12:00:00'), in ms; the version read is
      * the last one committed at or before it. */
    def timestampAsOf(options: util.Map[String, String]): Option[Long] = timestampOption(options, "timestampAsOf")

    /** A read option naming a time (`timestampAsOf`, a stream's `startingTimestamp`), in ms. */
    def timestampOption(options: util.Map[String, String], key: String): Option[Long] =
      Option(new CaseInsensitiveStringMap(options).get(key)).map { text =>
        val zone = Some(org.apache.spark.sql.internal.SQLConf.get.sessionLocalTimeZone)
        val micros = scala.util.Try(Option(org.apache.spark.sql.catalyst.expressions.Cast(
          org.apache.spark.sql.catalyst.expressions.Literal(text.trim), org.apache.spark.sql.types.TimestampType, zone, evalMode =
          org.apache.spark.sql.catalyst.expressions.EvalMode.TRY).eval())).toOption.flatten
        micros.map(m => Math.floorDiv(m.asInstanceOf[Long], 1000L)).getOrElse(throw new UseException(
          s"the read option $key takes a time, e.g. '2025-01-01 00:00:00' (session time zone), got '$text'",
          UseException.Kinds.InvalidArgument))
      }

    /** The writer's options as the user spelled them: Spark passes V1 writes and sinks a
      * case-insensitive map that lists lower-cased keys, and a `delta.*` option's key becomes a
      * table property's name. */
    def asGiven(parameters: Map[String, String]): Map[String, String] = parameters match {
      case c: CaseInsensitiveMap[String @unchecked] => c.originalMap
      case m => m
    }

    /** Writes each micro-batch as `df.write.format("delta").save(path)` does (`use.sql.save.save_path`),
      * idempotently: the batch carries the query's id and the batch id as Delta's `txnAppId` /
      * `txnVersion`, so a batch the table has already committed (a restart after the commit, before
      * the checkpoint) writes nothing: exactly once. Complete output mode overwrites the table. */
    class StreamSink(p: String, format: String, saveMode: String, partitionColumns: Seq[String], options: Map[String, String]) extends Sink {
      override def addBatch(batchId: Long, data: DataFrame): Unit = {
        val session = data.sparkSession
        // the micro-batch's plan is the stream's; its rows as a batch DataFrame the writers can plan again
        val rows = data.asInstanceOf[org.apache.spark.sql.classic.Dataset[Row]].queryExecution.toRdd
        val encoder = ExpressionEncoder(data.schema).resolveAndBind()
        val batch = session.createDataFrame(rows.mapPartitions { it =>
          val toRow = encoder.createDeserializer()
          it.map(r => toRow(r))
        }, data.schema)
        val queryId = session.sparkContext.getLocalProperty("sql.streaming.queryId")
        val opts = options ++ Option(queryId).map(id => Map("txnAppId" -> id, "txnVersion" -> batchId.toString)).getOrElse(Map.empty)
        val req = SaveRequest(p, format, saveMode, Some(partitionColumns).filter(_.nonEmpty), opts, stream = true)
        Bridge.call(req, batch).write.foreach { how =>
          throw new UseException(s"internal: the stream batch into $p was not written ($how)", UseException.Kinds.Internal)
        }
      }

      override def toString: String = s"USE $format sink at $p"
    }

    /** `df.write.format("delta"|"qbeast").mode("overwrite").saveAsTable(t)` on an existing Delta/Qbeast
      * table, with Delta's meaning: the table's rows are overwritten as `.save(<its location>)` would
      * (`createRelation`: rows matched by name, the table's schema, partitioning, properties and
      * Qbeast index kept; `overwriteSchema`, `partitionOverwriteMode`, `mergeSchema`, `txnAppId`,
      * `userMetadata` as for a path). Spark plans it as the REPLACE TABLE AS SELECT of
      * `writeTo(t).createOrReplace()`, which would make a new table of the DataFrame (a Qbeast
      * table losing its index and every table lost its properties); it marks the V1 call with the
      * write option of `SupportsV1OverwriteWithSaveAsTable`, which this provider implements, and
      * the analysis (`UseAnalysis`) turns the marked plan into this save. None: not such a call, or
      * no table there yet (the plan creates it). */
    def saveAsTableOverwrite(r: ReplaceTableAsSelect): Option[LogicalPlan] = {
      val marker = SupportsV1OverwriteWithSaveAsTable.OPTION_NAME
      if (!r.writeOptions.exists { case (k, v) => k.equalsIgnoreCase(marker) && v.equalsIgnoreCase("true") }) return None
      val (catalog, ident) = r.name match {
        case ResolvedIdentifier(c: TableCatalog, i) => (c, i)
        case _ => return None
      }
      val format = r.tableSpec.provider.map(_.toLowerCase(java.util.Locale.ROOT)).filter(f => Bridge.isUseProvider(Some(f)))
      if (format.isEmpty || !catalog.tableExists(ident)) return None
      val table = catalog.loadTable(ident) match {
        case t: UseTable => t
        case _ => return None
      }
      val root = table.meta.root
      r.tableSpec.location.filterNot(l => new java.io.File(l.stripPrefix("file:")).getAbsolutePath == root).foreach { l =>
        throw new UseException(s"saveAsTable(${ident.name()}) in overwrite mode with the option path='$l': the table is at $root; " +
          "leave the path option out to overwrite the table's rows, or save to the other path with .save(path)",
          UseException.Kinds.InvalidArgument)
      }
      val columns = r.partitioning.map { t =>
        if (t.name() != "identity") throw new UseException(s"saveAsTable(${ident.name()}) in overwrite mode with the " +
          s"partitioning ${t.describe()}: Delta tables are partitioned by columns only; use partitionBy(...)",
          UseException.Kinds.InvalidArgument)
        t.references().head.fieldNames().mkString(".")
      }
      val options = r.writeOptions.filterNot { case (k, _) => k.equalsIgnoreCase(marker) || k.equalsIgnoreCase("path") } +
        ("path" -> root) ++
        (if (columns.nonEmpty) Map(PartitionColumnsKey -> Codec.write(columns).toString) else Map.empty[String, String])
      val provider = if (format.contains("qbeast")) new QbeastPathProvider else new DeltaPathProvider
      Some(SaveIntoDataSourceCommand(r.query, provider, options, SaveMode.Overwrite))
    }

    /** The same columns and types, whatever each says of NULLs. */
    def sameColumns(a: StructType, b: StructType): Boolean = {
      def loose(s: StructType): String = s.json.replaceAll("\"(nullable|containsNull|valueContainsNull)\":false", "\"$1\":true")
      loose(a) == loose(b)
    }

    /** Where DataFrameWriter puts `partitionBy(...)` for a V1 write (Spark's DataSourceUtils: a
      * JSON array of the column names). */
    val PartitionColumnsKey = "__partition_columns"

    /** What `format("delta")` serves for a path that holds no table yet: the target of a save that
      * creates it. A read of it (only possible with a user-given schema) fails as a read of a
      * missing table does. */
    class NoTableYet(p: String, tableSchema: StructType, format: String) extends Table with SupportsRead {
      override def name(): String = s"$format.`$p`"
      override def schema(): StructType = tableSchema
      override def capabilities(): util.Set[TableCapability] = UseCapabilities.readOnly
      override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder =
        throw new UseException(s"no Delta table at $p: write one there first (df.write.format(\"$format\").save(path)), " +
          "or check the path", UseException.Kinds.TableNotFound)
    }
  }

  /** `format("qbeast")` on a path: the table there, read as `format("delta")` reads it (the
    * table's files planned by the Python side, so a Qbeast table's `df.sample(f)` is its exact
    * weight-pruned sample and filters prune cubes), and written by `use.sql.save.save_path` with
    * qbeast-spark's options: a new table indexed on `columnsToIndex` (with `cubeSize`,
    * `columnStats`), appends and overwrites through the OTree write (`QbeastTable.write`).
    * Also what `USING qbeast` names, so CREATE TABLE / CTAS / saveAsTable reach the session catalog
    * in every session (JDBC ones included). */
  class QbeastPathProvider extends DeltaPathProvider {
    override protected def format: String = "qbeast"
  }

}

// Spark resolves a provider name `p` to the class `p.DefaultSource` when no data source registers
// that short name; these two make `USING delta` and `USING qbeast` resolve without a service file.
package delta {
  class DefaultSource extends use.sql.DeltaPathProvider
}

package qbeast {
  class DefaultSource extends use.sql.QbeastPathProvider
}
