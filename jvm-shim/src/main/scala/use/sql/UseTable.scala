package use.sql

import java.util

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.catalyst.catalog.{CatalogTable, CatalogTableType}
import org.apache.spark.sql.catalyst.expressions.{AttributeReference, Expression}
import org.apache.spark.sql.connector.catalog.{Column, Identifier, StagedTable, SupportsRead, SupportsWrite, Table, TableCapability, TableCatalog, TruncatableTable}
import org.apache.spark.sql.connector.read.{Scan, ScanBuilder}
import org.apache.spark.sql.util.CaseInsensitiveStringMap
import org.apache.spark.sql.connector.expressions.{Expressions, Transform}
import org.apache.spark.sql.connector.write.{LogicalWriteInfo, WriteBuilder}
import org.apache.spark.sql.types.{DataType, StructType}

/** What the Delta log says about a table at one version (the Python side's `describe`), as Spark
  * reads it, and the reference it was described by (`ref`: what every later request about the
  * table names). The log is the truth for schema, partitioning and properties; the metastore only
  * registers the name. */
case class TableMeta(
    ref: TableRef,
    root: String,
    uri: String,
    provider: String,
    version: Long,
    schema: StructType,
    partitionColumns: Seq[String],
    configuration: Map[String, String],
    description: Option[String],
    isQbeast: Boolean,
    numFiles: Long,
    sizeInBytes: Long,
    storedSchema: Option[StructType] = None,
    columnMapping: String = "none") {

  def partitionSchema: StructType = StructType(partitionColumns.map(c => schema(c)))

  def dataSchema: StructType = StructType(schema.filterNot(f => partitionColumns.contains(f.name)))

  /** The data columns as the files hold them: under Delta column mapping their physical names (and
    * field ids in mode `id`), position by position with `dataSchema`; else `dataSchema` itself. */
  def storedDataSchema: StructType = storedSchema match {
    case Some(stored) => StructType(schema.fields.zip(stored.fields).collect {
      case (logical, physical) if !partitionColumns.contains(logical.name) => physical
    }.toSeq)
    case None => dataSchema
  }

  /** A filter over the scan's columns in the table's names (the planner's), from the files' names
    * the scan reads under Delta column mapping. */
  def withLogicalNames(filter: Expression): Expression = storedSchema match {
    case None => filter
    case Some(stored) =>
      val logical = stored.fieldNames.zip(schema.fieldNames).toMap
      filter.transform { case a: AttributeReference if logical.contains(a.name) => a.withName(logical(a.name)) }
  }

  /** A logical column's name in the files (itself without column mapping). */
  def storedName(column: String): String = storedSchema.flatMap { stored =>
    schema.fieldNames.indexWhere(_.equalsIgnoreCase(column)) match {
      case -1 => None
      case i => Some(stored.fields(i).name)
    }
  }.getOrElse(column)
}

object TableMeta {
  /** A schema as DSv2 columns (Spark's own converter is internal to Spark). */
  def columns(schema: StructType): Array[Column] = schema.fields.map { f =>
    Column.create(f.name, f.dataType, f.nullable, f.getComment().orNull, if (f.metadata.json == "{}") null else f.metadata.json)
  }

  private def struct(json: String): StructType = DataType.fromJson(json).asInstanceOf[StructType]

  /** The table `ref` names, as the Python side described it. */
  def of(ref: TableRef, d: TableDescription): TableMeta = TableMeta(ref, d.root, d.uri, d.provider, d.version, struct(d.schema),
    d.partitionColumns, d.configuration, d.description, d.isQbeast, d.numFiles, d.sizeInBytes, d.storedSchema.map(struct),
    d.columnMapping)

  /** The table `ref` names: the latest version, a version, or the version current at a time (ms). A
    * table named by its path (`ref.byPath`) that is missing is reported as nothing there rather
    * than as a registration whose data went away. */
  def describe(ref: TableRef, version: Option[Long] = None, timestampMs: Option[Long] = None): TableMeta =
    of(ref, Bridge.call(DescribeRequest(ref, version, timestampMs)))
}

/** The capabilities of every USE table: reads are planned by `UseAnalysis` (a LogicalRelation over
  * Spark's parquet reader), writes go through a V1 write that hands the DataFrame to Python
  * (BATCH_WRITE too, which DataFrameWriter.save asks for; Spark's planner takes the V1 write). */
private[sql] object UseCapabilities {
  val all: util.Set[TableCapability] = Set(
    TableCapability.BATCH_READ,
    TableCapability.BATCH_WRITE,
    TableCapability.V1_BATCH_WRITE,
    TableCapability.TRUNCATE,
    TableCapability.OVERWRITE_BY_FILTER,
    TableCapability.OVERWRITE_DYNAMIC).asJava

  /** A table `format("delta")` serves by path: read only, so that DataFrameWriter.save takes the
    * provider's V1 write (`DeltaPathProvider.createRelation`) in every save mode. */
  val readOnly: util.Set[TableCapability] = Set(TableCapability.BATCH_READ).asJava
}

/** A Delta or Qbeast table as Spark's catalog serves it. `pinned` is true for a time-travel read
  * (VERSION/TIMESTAMP AS OF): its scans read `meta.version`; otherwise every query plans against
  * the latest snapshot at the time it runs. */
class UseTable(
    val meta: TableMeta,
    val catalogTable: Option[CatalogTable],
    tableName: String,
    val pinned: Boolean,
    capabilitySet: util.Set[TableCapability] = UseCapabilities.all,
    val shownByShowCreate: Boolean = false)
  extends Table with SupportsRead with SupportsWrite with TruncatableTable with org.apache.spark.sql.use.UseV1Fallback {

  override def name(): String = tableName

  /** The catalog entry (`toTable` streams into its location); a table named by its path gets one
    * made of its log's description. */
  override def v1Table: CatalogTable = catalogTable.getOrElse(CatalogTable(
    identifier = org.apache.spark.sql.catalyst.TableIdentifier(meta.root, Some(meta.provider)),
    tableType = CatalogTableType.EXTERNAL,
    storage = org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat.empty.copy(locationUri = Some(new java.net.URI(meta.uri))),
    schema = meta.schema,
    provider = Some(meta.provider),
    partitionColumnNames = meta.partitionColumns))

  // Rows are never read through this: `UseAnalysis` turns every relation of a UseTable into a file
  // scan. It exists so that Spark's DataFrameReader takes the table (format("delta")) and DESCRIBE
  // can ask for a scan's schema; executing it fails with Spark's own "batch scan not supported".
  override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder = new ScanBuilder {
    override def build(): Scan = new Scan {
      override def readSchema(): StructType = meta.schema
      override def description(): String = s"USE ${meta.provider} table $tableName"
    }
  }

  override def schema(): StructType = meta.schema

  override def columns(): Array[Column] = TableMeta.columns(meta.schema)

  override def partitioning(): Array[Transform] = meta.partitionColumns.map(c => Expressions.identity(c): Transform).toArray

  override def properties(): util.Map[String, String] = {
    val props = new util.HashMap[String, String]()
    meta.configuration.foreach { case (k, v) => props.put(k, v) }
    props.put(TableCatalog.PROP_PROVIDER, meta.provider)
    props.put(TableCatalog.PROP_LOCATION, meta.uri)
    meta.description.foreach(d => props.put(TableCatalog.PROP_COMMENT, d))
    catalogTable.foreach { ct =>
      if (ct.owner.nonEmpty) props.put(TableCatalog.PROP_OWNER, ct.owner)
      if (ct.tableType == CatalogTableType.EXTERNAL) props.put(TableCatalog.PROP_EXTERNAL, "true")
    }
    // SHOW CREATE TABLE of a managed table names no location: a replay creates it in the warehouse
    // again, as Spark's and Delta's SHOW CREATE TABLE do
    if (shownByShowCreate && catalogTable.exists(_.tableType == CatalogTableType.MANAGED)) {
      props.put(TableCatalog.PROP_IS_MANAGED_LOCATION, "true")
    }
    props
  }

  /** The properties the Qbeast writer keeps (its revisions and their bookkeeping; an empty
    * columnStats): a CREATE TABLE cannot set them, so SHOW CREATE TABLE leaves them out. */
  private def writerMetadata(key: String, value: String): Boolean =
    key.startsWith("qbeast.revision.") || key == "qbeast.lastRevisionID" || (key == "columnStats" && value.isEmpty)

  /** This table as SHOW CREATE TABLE prints it: a statement that creates the same table elsewhere. */
  def asShownByShowCreate: UseTable = new UseTable(
    meta.copy(configuration = meta.configuration.filterNot { case (k, v) => writerMetadata(k, v) }),
    catalogTable, tableName, pinned, capabilitySet, shownByShowCreate = true)

  override def capabilities(): util.Set[TableCapability] = capabilitySet

  private def checkWritable(): Unit = if (pinned) {
    throw new UseException(
      s"$tableName is read at version ${meta.version} (time travel); write to the table without VERSION/TIMESTAMP AS OF",
      UseException.Kinds.InvalidArgument)
  }

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder = {
    checkWritable()
    new UseWriteBuilder(meta.ref, meta.partitionColumns, None, info)
  }

  /** TRUNCATE TABLE: one commit removing every file (the history stays). */
  override def truncateTable(): Boolean = {
    checkWritable()
    Bridge.call(TruncateRequest(meta.ref))
    true
  }

  override def toString: String = s"UseTable($tableName, ${meta.provider}, version ${meta.version})"
}

/** A table being created or replaced by CTAS/RTAS/REPLACE TABLE: nothing is committed until the
  * write (one commit holding the new metadata and the data) or, with no write, until
  * `commitStagedChanges`; then the metastore registration follows. `spec` is the creation request
  * the Python side validated when the table was staged. */
class StagedUseTable(
    catalog: UseCatalog,
    ident: Identifier,
    spec: CreateSpec,
    tableSchema: StructType,
    partitionColumns: Seq[String],
    props: util.Map[String, String])
  extends StagedTable with SupportsWrite {

  @volatile private var written: Option[TableMeta] = None

  override def name(): String = ident.toString

  override def schema(): StructType = tableSchema

  override def columns(): Array[Column] = TableMeta.columns(tableSchema)

  override def partitioning(): Array[Transform] = partitionColumns.map(c => Expressions.identity(c): Transform).toArray

  override def properties(): util.Map[String, String] = props

  override def capabilities(): util.Set[TableCapability] = UseCapabilities.all

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder =
    new UseWriteBuilder(spec.table, partitionColumns, Some(this), info)

  private[sql] def stagedSpec: CreateSpec = spec

  private[sql] def wrote(result: TableReply): Unit = { written = Some(TableMeta.of(spec.table, result.table)) }

  override def commitStagedChanges(): Unit = {
    val meta = written.getOrElse(TableMeta.of(spec.table,
      Bridge.call(CommitStagedRequest(spec), org.apache.spark.sql.SparkSession.active).table))
    catalog.registerStaged(ident, spec, meta)
  }

  // The Python side deletes the files of a write that does not commit; nothing else was changed.
  override def abortStagedChanges(): Unit = ()
}
