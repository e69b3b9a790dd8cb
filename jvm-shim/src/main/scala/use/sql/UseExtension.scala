package use.sql

import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.TableIdentifier
import org.apache.spark.sql.catalyst.catalog.CatalogTable
import org.apache.spark.sql.catalyst.analysis.{EliminateSubqueryAliases, RelationTimeTravel, ResolvedTable, UnresolvedAttribute, UnresolvedRelation, UnresolvedTableOrView}
import org.apache.spark.sql.catalyst.expressions.{Alias, AttributeReference, Cast, Descending, Literal, NamedExpression, SortOrder}
import org.apache.spark.sql.catalyst.plans.logical.{AppendData, DeleteFromTable, DescribeColumn, LogicalPlan, MergeIntoTable, OneRowRelation, OverwritePartitionsDynamic, Project, ReplaceTableAsSelect, ShowCreateTable, Sort, UpdateTable, View}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.command.CreateTableLikeCommand
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}
import org.apache.spark.sql.connector.catalog.{Identifier, TableCatalog}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation
import org.apache.spark.sql.types.StructType

/** USE's Spark SQL extension (`spark.sql.extensions=use.sql.UseSparkSessionExtension`), used with
  * `spark.sql.catalog.spark_catalog=use.sql.UseCatalog`: the analysis rule that reads USE tables
  * with Spark's parquet reader and refuses what is not supported yet, and the optimizer rule that
  * plans each query's files, and the parser that reads Delta's `DESCRIBE HISTORY ... LIMIT n`
  * (`UseParser`). */
class UseSparkSessionExtension extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    extensions.injectParser((_, delegate) => UseParser.wrap(delegate))
    extensions.injectHintResolutionRule(spark => new UsePathTimeTravel(spark))
    extensions.injectResolutionRule(spark => new UseAnalysis(spark))
    extensions.injectPreCBORule(spark => new UsePrepareScans(spark))
    extensions.injectCheckRule(spark => new UseAccessCheck(spark))
  }
}

/** Analysis of plans over USE tables:
  *  - a read of a USE table (its DSv2 relation) becomes a LogicalRelation over a HadoopFsRelation
  *    with Spark's parquet format and a `UseFileIndex`, so scans, column pruning, filter pushdown
  *    into parquet and partition pruning are Spark's own; the index lists only the log's files;
  *  - `saveAsTable` in overwrite mode on an existing table becomes the save of its location
  *    (`DeltaPathProvider.saveAsTableOverwrite`: Delta's overwrite of the rows, not a new table);
  *  - CREATE TABLE ... LIKE a USE table (or USING delta/qbeast) becomes `UseCreateTableLike`;
  *  - a dynamic partition overwrite becomes an append whose write replaces the partitions it
  *    writes (Spark's V1 write fallback has no dynamic overwrite of its own);
  *  - DELETE and UPDATE become `UseRowLevelCommand`s, MERGE a `UseMergeCommand` (copy-on-write, one
  *    commit each);
  *  - Delta's `DESCRIBE HISTORY <table>` and `DESCRIBE DETAIL <table>` (which Spark's parser,
  *    without Delta's, reads as the column `<table>` of a table named HISTORY or DETAIL) read the
  *    table's `history` insight table, newest commit first as Delta's does, and its `detail`.
  */
class UseAnalysis(spark: SparkSession) extends Rule[LogicalPlan] {

  private def isUseTarget(p: LogicalPlan): Boolean = EliminateSubqueryAliases(p) match {
    case r: DataSourceV2Relation => r.table.isInstanceOf[UseTable]
    case other => UseFileIndex.of(other).isDefined
  }

  /** A DELETE or UPDATE target once its relation is the file scan `toRelation` makes. */
  private def isUseScan(p: LogicalPlan): Boolean = UseFileIndex.of(EliminateSubqueryAliases(p)).isDefined

  /** A view over a USE table as the target of a DELETE, UPDATE or MERGE: Spark's own error names
    * the table ("does not support DELETE"), which does; this one names the view. */
  private def refuseView(target: LogicalPlan, what: String): Unit = EliminateSubqueryAliases(target) match {
    case v: View if v.child.exists(c => UseFileIndex.of(c).isDefined) =>
      throw new UseException(s"$what on the view ${v.desc.identifier.unquotedString} is not supported: run it on the " +
        "table the view reads", UseException.Kinds.NotSupported)
    case _ =>
  }

  /** A table with Delta column mapping as the target of a DELETE, UPDATE or MERGE: USE reads such
    * tables (`toRelation`) but does not write them yet. */
  private def refuseMapped(target: LogicalPlan, what: String): Unit = EliminateSubqueryAliases(target) match {
    case Project(_, child) => UseFileIndex.of(child).map(_._3.meta).filter(_.storedSchema.isDefined).foreach { meta =>
      throw new UseException(s"$what on the table at ${meta.root} is not supported: it uses Delta column mapping " +
        s"(delta.columnMapping.mode=${meta.columnMapping}), which USE reads but does not write yet; run the statement with " +
        "Delta itself", UseException.Kinds.NotSupported)
    }
    case _ =>
  }

  private def notSupported(what: String): Nothing = throw new UseException(
    s"$what on Delta/Qbeast tables is not supported yet: add the new columns first (ALTER TABLE ... ADD COLUMNS), then " +
      "MERGE", UseException.Kinds.NotSupported)

  private def toRelation(r: DataSourceV2Relation): LogicalPlan = {
    val table = r.table.asInstanceOf[UseTable]
    val index = new UseFileIndex(table.meta, if (table.pinned) Some(table.meta.version) else None, None, None)
    UseAnalysis.fileScan(spark, index, table.catalogTable, r.output.map(_.asInstanceOf[AttributeReference]), isStreaming = false)
  }

  /** The insight and table name of Delta's `DESCRIBE HISTORY <name>` / `DESCRIBE DETAIL <name>` as
    * Spark parses them (the column `<name>` of a table HISTORY or DETAIL), by field rather than by
    * extractor: the node's arity differs across Spark versions. */
  private def describeInsightOf(d: DescribeColumn): Option[(String, Seq[String])] = (d.relation, d.column) match {
    case (u: UnresolvedTableOrView, a: UnresolvedAttribute) if u.multipartIdentifier.length == 1 =>
      val insight = u.multipartIdentifier.head.toLowerCase(java.util.Locale.ROOT)
      if (UseAnalysis.DescribeInsights.contains(insight) && !isATable(insight)) Some((insight, a.nameParts)) else None
    case _ => None
  }

  /** A table or view really named `history` (or `detail`) keeps `DESCRIBE history col` its Spark meaning. */
  private def isATable(name: String): Boolean = {
    val cm = spark.sessionState.catalogManager
    cm.currentCatalog.name == "spark_catalog" && spark.sessionState.catalog.tableExists(TableIdentifier(name))
  }

  /** `use_catalog.<catalog>.<namespace>.<table>.<insight>` for the name as DESCRIBE wrote it:
    * `t` and `db.t` in the current catalog, `cat.db.t` as is, ``delta.`/path` `` (or qbeast) by location. */
  private def insightTable(insight: String, parts: Seq[String]): Seq[String] = {
    val cm = spark.sessionState.catalogManager
    val full = parts match {
      case Seq(fmt, path) if path.contains("/") && Bridge.isUseProvider(Some(fmt)) =>
        Seq("path", path)
      case Seq(t) => Seq(cm.currentCatalog.name) ++ cm.currentNamespace.toSeq :+ t
      case _ if parts.length >= 3 && cm.isCatalogRegistered(parts.head) => parts
      case _ => cm.currentCatalog.name +: parts
    }
    ("use_catalog" +: full) :+ insight
  }

  /** DESCRIBE HISTORY: the `history` insight newest commit first, DESCRIBE DETAIL: the `detail`
    * insight, each in the columns (names, order, types) of Delta's statement, so that scripts and
    * tools written for Delta read them (`operationMetrics`, `numFiles`, ...); the insight tables
    * keep USE's names. DETAIL's `name` is the table's qualified name, as Delta's (the log's name
    * for a table named by its path). */
  private def describeInsight(insight: String, parts: Seq[String]): LogicalPlan = {
    val full = insightTable(insight, parts)
    // loaded here, not left to the analyzer, so that a missing table is named as the user wrote it
    val ident = Identifier.of(full.slice(1, full.length - 1).toArray, insight)
    val lake = spark.sessionState.catalogManager.catalog(full.head).asInstanceOf[TableCatalog]
    val relation = DataSourceV2Relation.create(LakeTables.loadForStatement(ident, parts.mkString(".")), Some(lake), Some(ident))
    val parser = spark.sessionState.sqlParser
    val columns = (if (insight == "history") UseAnalysis.DeltaHistoryColumns else UseAnalysis.DeltaDetailColumns).map {
      case ("name", _) if full(1) != "path" => Alias(Literal(full.drop(1).dropRight(1).mkString(".")), "name")()
      case (name, sql) => Alias(parser.parseExpression(sql), name)()
    }
    val projected = Project(columns, relation)
    if (insight == "history") Sort(Seq(SortOrder(UnresolvedAttribute(Seq("version")), Descending)), global = true, projected)
    else projected
  }

  override def apply(plan: LogicalPlan): LogicalPlan = {
    plan.foreach {
      case UseParser.Refused(error) => throw error
      case d: DeleteFromTable if d.resolved => refuseView(d.table, "DELETE"); refuseMapped(d.table, "DELETE")
      case u: UpdateTable if u.resolved => refuseView(u.table, "UPDATE"); refuseMapped(u.table, "UPDATE")
      case m: MergeIntoTable if m.resolved => refuseView(m.targetTable, "MERGE"); refuseMapped(m.targetTable, "MERGE")
      case c if UseAnalysis.ConstraintStatements.contains(c.getClass.getSimpleName) =>
        // the table is the statement's child (DROP) or under it (ADD CHECK plans a filter over it)
        c.collectFirst {
          case ResolvedTable(_, ident, _: UseTable, _) => ident.toString
          case r: DataSourceV2Relation if r.table.isInstanceOf[UseTable] => r.table.name()
          case other if UseFileIndex.of(other).isDefined => UseFileIndex.of(other).get._3.meta.root
        }.foreach { name =>
          val verb = if (c.getClass.getSimpleName.startsWith("Drop")) "DROP" else "ADD"
          throw UseParser.constraintsNotSupported(s"ALTER TABLE $name $verb CONSTRAINT")
        }
      case _ =>
    }
    plan.resolveOperatorsUp {
      case d: DescribeColumn if describeInsightOf(d).isDefined =>
        val (insight, parts) = describeInsightOf(d).get
        describeInsight(insight, parts)
      case r: ReplaceTableAsSelect if r.query.resolved => DeltaPathProvider.saveAsTableOverwrite(r).getOrElse(r)
      case c: CreateTableLikeCommand => UseCreateTableLike.of(spark, c).getOrElse(c)
      case o: OverwritePartitionsDynamic if o.resolved && isUseTarget(o.table) =>
        AppendData.byName(o.table, o.query, o.writeOptions + (UseAnalysis.DynamicOverwrite -> "true"))
      case r: DataSourceV2Relation if r.table.isInstanceOf[UseTable] => toRelation(r)
      case s @ ShowCreateTable(r @ ResolvedTable(_, _, t: UseTable, _), _, _) if !t.shownByShowCreate =>
        s.copy(child = r.copy(table = t.asShownByShowCreate))
      case d: DeleteFromTable if d.resolved && isUseScan(d.table) =>
        UseRowLevelCommand(d.table, new RowLevelSpec(d.condition, Deletion))
      case m: MergeIntoTable if m.resolved && isUseScan(m.targetTable) =>
        if (m.withSchemaEvolution) notSupported("MERGE WITH SCHEMA EVOLUTION")
        val out = m.targetTable.output
        UseMergeCommand(m.targetTable, new MergeSpec(m.sourceTable, m.mergeCondition, MergeClause.of(out, m.matchedActions),
          MergeClause.of(out, m.notMatchedActions), MergeClause.of(out, m.notMatchedBySourceActions)))
      case u: UpdateTable if u.resolved && isUseScan(u.table) =>
        val values = RowLevel.columnValues(u.table.output, u.assignments)
        UseRowLevelCommand(u.table, new RowLevelSpec(u.condition.getOrElse(Literal.TrueLiteral), Modification(values)))
    }
  }
}

object UseAnalysis {
  /** A USE table's files (`index`) as Spark's parquet scan, with the attributes `output` (the
    * table's columns, partition columns included). Under Delta column mapping the files hold
    * physical names (mode id: parquet field ids, which Spark matches only with the session's
    * field-id read on, as the Python API's reads turn it on): the scan reads them so, and a
    * projection gives each column its logical name and the attribute the query refers to; a
    * struct is renamed by a cast (Spark casts structs by position). `isStreaming`: a stream's
    * micro-batch (`UseStreamSource`). */
  def fileScan(spark: SparkSession, index: UseFileIndex, catalogTable: Option[CatalogTable], output: Seq[AttributeReference],
               isStreaming: Boolean): LogicalPlan = {
    val meta = index.meta
    // a planned index (a stream's batch) drops its files' deleted rows; an unplanned one is planned later
    val format = new UseParquetFormat("", index.planned.map(p => DeletedRows.of(p.files)).getOrElse(DeletedRows.empty))
    val fs = HadoopFsRelation(index, meta.partitionSchema, meta.storedDataSchema, None, format, Map.empty[String, String])(spark)
    val relation = catalogTable match {
      case Some(ct) => LogicalRelation(fs, ct).copy(isStreaming = isStreaming)
      case None => LogicalRelation(fs, isStreaming)
    }
    if (meta.storedSchema.isEmpty) return relation.copy(output = output)
    if (meta.columnMapping == "id") spark.conf.set("spark.sql.parquet.fieldId.read.enabled", "true")
    val partitions = output.filter(a => meta.partitionColumns.exists(_.equalsIgnoreCase(a.name)))
    val stored = toAttributes(meta.storedDataSchema)
    val logicalData = output.filterNot(partitions.contains)
    val columns = logicalData.zip(stored).map { case (logical, physical) =>
      val value = if (physical.dataType == logical.dataType) physical else Cast(physical, logical.dataType)
      Alias(value, logical.name)(exprId = logical.exprId, qualifier = logical.qualifier)
    }
    val byName = (columns.map(c => c.name.toLowerCase(java.util.Locale.ROOT) -> (c: NamedExpression)) ++
      partitions.map(p => p.name.toLowerCase(java.util.Locale.ROOT) -> (p: NamedExpression))).toMap
    Project(output.map(a => byName(a.name.toLowerCase(java.util.Locale.ROOT))), relation.copy(output = stored ++ partitions))
  }

  def toAttributes(schema: StructType): Seq[AttributeReference] =
    schema.fields.toSeq.map(f => AttributeReference(f.name, f.dataType, f.nullable, f.metadata)())

  /** Spark's plans of `ALTER TABLE ... ADD|DROP CONSTRAINT` (by name: they differ across Spark versions). */
  val ConstraintStatements: Set[String] = Set("AddCheckConstraint", "AddConstraint", "DropConstraint")

  /** Delta's DESCRIBE statements read as USE's insight tables of the same name. */
  val DescribeInsights: Set[String] = Set("history", "detail")

  /** DESCRIBE HISTORY's columns, as Delta's (`DeltaHistory`), each from the `history` insight's columns. */
  val DeltaHistoryColumns: Seq[(String, String)] = Seq(
    "version" -> "version",
    "timestamp" -> "timestamp",
    "userId" -> "user_id",
    "userName" -> "user_name",
    "operation" -> "operation",
    "operationParameters" -> "parameters",
    "job" -> ("CASE WHEN job IS NULL THEN NULL ELSE named_struct(" +
      Seq("jobId", "jobName", "jobRunId", "runId", "jobOwnerId", "triggerType").map(k => s"'$k', try_element_at(job, '$k')").mkString(", ") +
      ") END"),
    "notebook" -> "CASE WHEN notebook_id IS NULL THEN NULL ELSE named_struct('notebookId', notebook_id) END",
    "clusterId" -> "cluster_id",
    "readVersion" -> "read_version",
    "isolationLevel" -> "isolation_level",
    "isBlindAppend" -> "is_blind_append",
    "operationMetrics" -> "metrics",
    "userMetadata" -> "user_metadata",
    "engineInfo" -> "engine_info")

  /** DESCRIBE DETAIL's columns, as Delta's (`TableDetail`), each from the `detail` insight's columns. */
  val DeltaDetailColumns: Seq[(String, String)] = Seq(
    "format" -> "format",
    "id" -> "id",
    "name" -> "name",
    "description" -> "description",
    "location" -> "location",
    "createdAt" -> "created_at",
    "lastModified" -> "last_modified",
    "partitionColumns" -> "partition_columns",
    "clusteringColumns" -> "clustering_columns",
    "numFiles" -> "num_files",
    "sizeInBytes" -> "size_in_bytes",
    "properties" -> "properties",
    "minReaderVersion" -> "CAST(min_reader_version AS INT)",
    "minWriterVersion" -> "CAST(min_writer_version AS INT)",
    "tableFeatures" -> "table_features")

  /** Write option marking an append that is a dynamic partition overwrite (see `UseAnalysis`). */
  val DynamicOverwrite = "__use_dynamic_partition_overwrite"
}

/** `delta.`/path` TIMESTAMP AS OF <expression>` (`current_timestamp()`, `now() - INTERVAL 1 HOUR`):
  * Spark's `ResolveRelations` reads a time travel only once its timestamp is resolved, while
  * `ResolveSQLOnFile`, later in the same pass, takes `delta.`/path`` with a resolved timestamp for a
  * direct query on files and fails (UNSUPPORTED_DATASOURCE_FOR_DIRECT_QUERY): a function call is
  * resolved only within that pass, a literal before it. This rule runs in the hint batch, before
  * that pass, and resolves the timestamp of a time travel on a USE path table, so the catalog
  * (`UseCatalog.loadTable(ident, timestamp)`) reads it as it reads a table named in the metastore.
  * A timestamp it cannot resolve is left as it is, for Spark's own error. */
class UsePathTimeTravel(spark: SparkSession) extends Rule[LogicalPlan] {

  private def isUsePath(parts: Seq[String]): Boolean = parts match {
    case Seq(provider, path) =>
      (path.startsWith("/") || path.startsWith("file:")) && Bridge.isUseProvider(Some(provider)) &&
        !spark.sessionState.catalog.databaseExists(provider)
    case _ => false
  }

  override def apply(plan: LogicalPlan): LogicalPlan = plan.resolveOperators {
    case t @ RelationTimeTravel(u: UnresolvedRelation, Some(ts), _) if !ts.resolved && isUsePath(u.multipartIdentifier) =>
      val resolved = scala.util.Try(spark.sessionState.analyzer.execute(Project(Seq(Alias(ts, "timestamp")()), OneRowRelation()))).toOption
      resolved match {
        case Some(Project(Seq(a: Alias), _)) if a.child.resolved => t.copy(timestamp = Some(a.child))
        case _ => t
      }
  }
}
