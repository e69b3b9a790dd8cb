package use.sql

import java.net.URI
import java.util
import java.util.Locale

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.hadoop.fs.Path
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.TableIdentifier
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException
import org.apache.spark.sql.catalyst.catalog.{CatalogStorageFormat, CatalogTable, CatalogTableType, SessionCatalog}
import org.apache.spark.sql.connector.catalog._
import org.apache.spark.sql.connector.catalog.TableChange.{RemoveProperty, SetProperty}
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.types.{MetadataBuilder, StructField, StructType}

/** The session catalog (`spark.sql.catalog.spark_catalog`): Spark's own catalog for every table,
  * except that tables whose provider is `delta` or `qbeast` are served as `UseTable`s whose schema,
  * partitioning and properties come from the Delta log (through the Python side).
  *
  * The metastore keeps the registration (name, provider, location, managed/external) and a mirror
  * of the log's properties (without Qbeast's revision metadata) and schema for tools that read it;
  * the log stays the truth. DDL on a USE table is one Delta commit (CREATE: the table's first
  * commit; CTAS/RTAS/REPLACE: one commit with the new metadata and the data; ALTER ... SET/UNSET
  * TBLPROPERTIES: a metaData commit), made before the metastore is touched, so a refused statement
  * changes nothing. Path identifiers (delta.`/path`, qbeast.`/path`) read tables that are not
  * registered.
  */
class UseCatalog extends DelegatingCatalogExtension with StagingTableCatalog {

  private def session: org.apache.spark.sql.classic.SparkSession =
    SparkSession.active.asInstanceOf[org.apache.spark.sql.classic.SparkSession]

  private def sessionCatalog: SessionCatalog = session.sessionState.catalog

  // --- names and properties ---------------------------------------------------------------------

  private def tableIdent(ident: Identifier): TableIdentifier = {
    if (ident.namespace().length != 1) {
      throw new UseException(s"${ident.toString} is not a table name of the session catalog (database.table)", UseException.Kinds.InvalidArgument)
    }
    TableIdentifier(ident.name(), Some(ident.namespace().head), Some(name()))
  }

  private def isUse(ct: CatalogTable): Boolean = Bridge.isUseProvider(ct.provider)

  private def isUseProvider(props: util.Map[String, String]): Boolean =
    Bridge.isUseProvider(Option(props.get(TableCatalog.PROP_PROVIDER)))

  private def isPathIdentifier(ident: Identifier): Boolean =
    ident.namespace().length == 1 && (ident.name().startsWith("/") || ident.name().startsWith("file:")) &&
      Bridge.isUseProvider(Some(ident.namespace().head)) && !sessionCatalog.databaseExists(ident.namespace().head)

  private def useTable(ct: CatalogTable, version: Option[Long], timestampMs: Option[Long]): UseTable = {
    val meta = TableMeta.describe(TableRefs.entry(ct), version, timestampMs)
    val pinned = version.isDefined || timestampMs.isDefined
    if (!pinned) catchUpMirror(ct, meta)
    new UseTable(meta, Some(ct), ct.identifier.unquotedString, pinned = pinned)
  }

  /** A table another process changed (delta-rs, a write by its path) leaves the metastore's mirror
    * of its schema and properties behind; the mirror catches up when the table is next loaded here,
    * so tools that read the metastore, not the log (JDBC GetColumns of BI tools), see its columns.
    * Compared once per table and log version (per JVM), so a load costs no metastore write when
    * nothing changed; a failure only leaves the mirror as it was (the log stays the truth). */
  private def catchUpMirror(ct: CatalogTable, meta: TableMeta): Unit = {
    val key = s"${ct.identifier.unquotedString}@${meta.root}"
    val previous = UseCatalog.mirrorChecked.put(key, java.lang.Long.valueOf(meta.version))
    if (previous != null && previous.longValue == meta.version) return
    val props = ct.properties.filterNot(_._1.startsWith("transient_"))
    if (ct.schema != meta.schema || props != mirrored(meta.configuration) || ct.comment != meta.description) {
      try updateRegistration(ct, meta) catch { case NonFatal(_) => UseCatalog.mirrorChecked.remove(key) }
    }
  }

  /** The provider a table named by its path names (`delta` of `delta.`/p``). */
  private def pathProvider(ident: Identifier): String = ident.namespace().head.toLowerCase(Locale.ROOT)

  /** How a table named by its path is shown: `delta.`/p``. */
  private def pathName(ident: Identifier): String = s"${pathProvider(ident)}.`${ident.name().replace("`", "``")}`"

  private def pathRef(ident: Identifier): TableRef = TableRefs.path(ident.name(), Some(pathProvider(ident)), Some(pathName(ident)))

  private def pathTable(ident: Identifier, version: Option[Long], timestampMs: Option[Long]): UseTable = {
    val meta = TableMeta.describe(pathRef(ident), version, timestampMs)
    new UseTable(meta, None, pathName(ident), pinned = version.isDefined || timestampMs.isDefined)
  }

  /** Metastore properties of a table: the log's properties without Qbeast's revision metadata (kept
    * in the log only: large JSON values that tools never need). */
  private[sql] def mirrored(configuration: Map[String, String]): Map[String, String] =
    configuration.filterNot { case (k, _) => k.startsWith("qbeast.revision.") }

  // --- loading ------------------------------------------------------------------------------------

  /** The metastore entry of `ident`, if it names a table of this catalog (None for anything else:
    * Spark's own catalog then answers, with its own errors). */
  private def catalogTableOf(ident: Identifier): Option[CatalogTable] =
    if (ident.namespace().length != 1) None
    else try Some(sessionCatalog.getTableMetadata(tableIdent(ident))) catch { case NonFatal(_) => None }

  private def load(ident: Identifier, version: Option[Long], timestampMs: Option[Long])(fallback: => Table): Table =
    catalogTableOf(ident) match {
      case Some(ct) if isUse(ct) => useTable(ct, version, timestampMs)
      case None if isPathIdentifier(ident) => pathTable(ident, version, timestampMs)
      case _ => fallback
    }

  override def loadTable(ident: Identifier): Table = load(ident, None, None)(super.loadTable(ident))

  // Spark asks this before CREATE (IF NOT EXISTS), CTAS and REPLACE; Spark's own catalog knows
  // nothing of tables named by their path (delta.`/p`)
  override def tableExists(ident: Identifier): Boolean =
    if (isPathIdentifier(ident) && catalogTableOf(ident).isEmpty) pathTableExists(ident) else super.tableExists(ident)

  // Write targets are loaded with their privileges; the default of this method calls the one above,
  // this override keeps it so should DelegatingCatalogExtension ever forward it to Spark's catalog.
  override def loadTable(ident: Identifier, writePrivileges: util.Set[TableWritePrivilege]): Table =
    load(ident, None, None)(super.loadTable(ident))

  override def loadTable(ident: Identifier, version: String): Table = {
    val v = try version.trim.toLong catch {
      case _: NumberFormatException =>
        throw new UseException(s"VERSION AS OF needs a table version number (0, 1, ...), got '$version'", UseException.Kinds.InvalidArgument)
    }
    load(ident, Some(v), None)(super.loadTable(ident, version))
  }

  override def loadTable(ident: Identifier, timestamp: Long): Table =
    load(ident, None, Some(Math.floorDiv(timestamp, 1000L)))(super.loadTable(ident, timestamp)) // Spark passes microseconds

  // --- CREATE -------------------------------------------------------------------------------------

  /** The creation request the Python side validates / executes. `mode` is "create" (CREATE TABLE:
    * create the table, or register the one at LOCATION), "ctas" (a new table written by the query)
    * or "replace" (REPLACE TABLE / CREATE OR REPLACE of an existing table). */
  private def createSpec(
      ident: Identifier,
      schema: StructType,
      partitions: Array[Transform],
      properties: util.Map[String, String],
      mode: String,
      existing: Option[CatalogTable]): CreateSpec = {
    val props = properties.asScala.toMap
    val options = props.collect { case (k, v) if k.startsWith(TableCatalog.OPTION_PREFIX) => k.stripPrefix(TableCatalog.OPTION_PREFIX) -> v }
    val reserved = Set(TableCatalog.PROP_PROVIDER, TableCatalog.PROP_LOCATION, TableCatalog.PROP_COMMENT, TableCatalog.PROP_OWNER,
      TableCatalog.PROP_EXTERNAL, TableCatalog.PROP_IS_MANAGED_LOCATION, TableCatalog.PROP_COLLATION, TableCatalog.PROP_TABLE_TYPE)
    // Spark lists OPTIONS both with and without the "option." prefix; only the prefixed ones count.
    val userProps = props.filterNot { case (k, _) =>
      reserved.contains(k) || k.startsWith(TableCatalog.OPTION_PREFIX) || options.get(k).contains(props(k))
    }
    val givenLocation = props.get(TableCatalog.PROP_LOCATION).orElse(options.find(_._1.equalsIgnoreCase("path")).map(_._2))
    val managedLocation = props.get(TableCatalog.PROP_IS_MANAGED_LOCATION).exists(_.equalsIgnoreCase("true"))
    val byPath = isPathIdentifier(ident)
    if (byPath && givenLocation.exists(l => new Path(l).toUri.getPath.stripSuffix("/") != new Path(ident.name()).toUri.getPath.stripSuffix("/"))) {
      throw new UseException(s"${pathName(ident)} names its table by its path, and LOCATION '${givenLocation.get}' is another one: " +
        "leave LOCATION out", UseException.Kinds.InvalidArgument)
    }
    val (location, managed) = existing match {
      case _ if byPath => (ident.name(), false)
      case Some(ct) =>
        if (givenLocation.exists(l => new Path(l).toUri.getPath.stripSuffix("/") != new Path(ct.location).toUri.getPath.stripSuffix("/"))) {
          throw new UseException(s"${ct.identifier.unquotedString} is at ${ct.location}; REPLACE keeps a table's location: " +
            "drop the table first to create it elsewhere", UseException.Kinds.InvalidArgument)
        }
        (ct.location.toString, ct.tableType == CatalogTableType.MANAGED)
      case None =>
        givenLocation match {
          case Some(l) => (l, managedLocation)
          case None => (sessionCatalog.defaultTablePath(tableIdent(ident)).toString, true)
        }
    }
    val name = if (byPath) pathName(ident) else tableIdent(ident).unquotedString
    val provider = props.getOrElse(TableCatalog.PROP_PROVIDER, "delta").toLowerCase(Locale.ROOT)
    CreateSpec(mode, name, provider, location, managed, locationGiven = givenLocation.isDefined || byPath, byPath,
      Option(schema).filter(_.nonEmpty).map(_.json), partitionColumns(partitions), userProps,
      options.filterNot(_._1.equalsIgnoreCase("path")), props.get(TableCatalog.PROP_COMMENT), props.get(TableCatalog.PROP_OWNER),
      TableRefs.created(name, location, provider, byPath), root = None)
  }

  private def partitionColumns(partitions: Array[Transform]): Seq[String] = partitions.toSeq.map { t =>
    val refs = t.references()
    if (t.name() != "identity" || refs.length != 1 || refs(0).fieldNames().length != 1) {
      throw new UseException(s"PARTITIONED BY ${t.describe()} is not supported for Delta/Qbeast tables: partition by plain columns",
        UseException.Kinds.NotSupported)
    }
    refs(0).fieldNames()(0)
  }

  private def schemaOf(columns: Array[Column]): StructType = StructType(columns.toSeq.map { c =>
    if (c.defaultValue() != null) {
      throw new UseException(s"column ${c.name()}: DEFAULT values are not supported for Delta/Qbeast tables yet", UseException.Kinds.NotSupported)
    }
    val md = new MetadataBuilder()
    if (c.comment() != null) md.putString("comment", c.comment())
    StructField(c.name(), c.dataType(), c.nullable(), md.build())
  })

  /** Registers a table whose log exists (created or validated by the Python side) in the metastore. */
  private def register(ident: Identifier, spec: CreateSpec, meta: TableMeta): CatalogTable = {
    val ct = CatalogTable(
      identifier = tableIdent(ident),
      tableType = if (spec.managed) CatalogTableType.MANAGED else CatalogTableType.EXTERNAL,
      storage = CatalogStorageFormat.empty.copy(locationUri = Some(new URI(meta.uri)), properties = spec.options),
      schema = meta.schema,
      provider = Some(spec.provider),
      owner = spec.owner.getOrElse(""),
      properties = mirrored(meta.configuration),
      comment = meta.description,
      tracksPartitionsInCatalog = false)
    sessionCatalog.createTable(ct, ignoreIfExists = false, validateLocation = false)
    ct
  }

  /** Keeps the metastore's copy of a USE table's properties and schema in step with its log. */
  private def updateRegistration(ct: CatalogTable, meta: TableMeta, owner: Option[String] = None,
                                 provider: Option[String] = None): Unit = {
    sessionCatalog.alterTable(ct.copy(
      properties = mirrored(meta.configuration),
      comment = meta.description,
      owner = owner.getOrElse(ct.owner),
      provider = provider.orElse(ct.provider)))
    if (ct.schema != meta.schema) {
      try sessionCatalog.alterTableDataSchema(ct.identifier, meta.schema)
      catch { case NonFatal(_) => () } // a mirror for tools only: the log holds the schema
    }
  }

  private def createUse(ident: Identifier, schema: StructType, partitions: Array[Transform], props: util.Map[String, String]): Table = {
    val spec = createSpec(ident, schema, partitions, props, "create", None)
    val result = Bridge.call(CreateRequest(spec), session) // the statement's session: its defaults of new tables' properties
    val meta = TableMeta.of(spec.table, result.table)
    // a table named by its path (CREATE TABLE delta.`/p`) has no metastore entry: the log is all of it
    if (isPathIdentifier(ident)) return new UseTable(meta, None, pathName(ident), pinned = false)
    val ct = try register(ident, spec, meta) catch {
      case e: Throwable =>
        if (result.created) Bridge.call(AbandonRequest(meta.ref))
        throw e
    }
    new UseTable(meta, Some(ct), ct.identifier.unquotedString, pinned = false)
  }

  override def createTable(ident: Identifier, columns: Array[Column], partitions: Array[Transform], properties: util.Map[String, String]): Table =
    if (isUseProvider(properties)) createUse(ident, schemaOf(columns), partitions, properties)
    else super.createTable(ident, columns, partitions, properties)

  override def createTable(ident: Identifier, schema: StructType, partitions: Array[Transform], properties: util.Map[String, String]): Table =
    if (isUseProvider(properties)) createUse(ident, schema, partitions, properties)
    else super.createTable(ident, schema, partitions, properties)

  override def createTable(ident: Identifier, info: TableInfo): Table =
    createTable(ident, info.columns(), info.partitions(), info.properties())

  // --- CTAS / RTAS / REPLACE (staged: one commit when the write or the statement ends) ----------------

  private def stage(ident: Identifier, columns: Array[Column], partitions: Array[Transform], props: util.Map[String, String],
                    existing: Option[CatalogTable]): StagedTable = {
    existing.foreach { ct =>
      if (!isUse(ct)) {
        throw new UseException(s"${ct.identifier.unquotedString} is a ${ct.provider.getOrElse("hive")} table; REPLACE it with a " +
          s"Delta/Qbeast table only after DROP TABLE", UseException.Kinds.NotSupported)
      }
    }
    val schema = schemaOf(columns)
    val spec = createSpec(ident, schema, partitions, props, if (existing.isDefined) "replace" else "ctas", existing)
    val checked = Bridge.call(StageRequest(spec)).spec
    new StagedUseTable(this, ident, checked, schema, partitionColumns(partitions), props)
  }

  /** Called by a staged table once its commit is made: the metastore follows the log. */
  private[sql] def registerStaged(ident: Identifier, spec: CreateSpec, meta: TableMeta): Unit = {
    if (isPathIdentifier(ident)) return // named by its path: nothing to register
    if (spec.mode == "replace") {
      catalogTableOf(ident).foreach(ct => updateRegistration(ct, meta, spec.owner, Some(spec.provider)))
    } else {
      register(ident, spec, meta)
    }
  }

  private def stageNotUse(ident: Identifier, columns: Array[Column], partitions: Array[Transform], props: util.Map[String, String],
                          replace: Boolean): StagedTable = {
    if (replace && tableExists(ident)) super.dropTable(ident)
    super.createTable(ident, columns, partitions, props) // Spark's catalog returns no table here
    new BestEffortStagedTable(super.loadTable(ident), () => super.dropTable(ident))
  }

  override def stageCreate(ident: Identifier, columns: Array[Column], partitions: Array[Transform], props: util.Map[String, String]): StagedTable =
    if (isUseProvider(props)) stage(ident, columns, partitions, props, None)
    else stageNotUse(ident, columns, partitions, props, replace = false)

  override def stageReplace(ident: Identifier, columns: Array[Column], partitions: Array[Transform], props: util.Map[String, String]): StagedTable = {
    if (isPathIdentifier(ident) && pathTableExists(ident)) refusePathReplace(ident)
    val existing = catalogTableOf(ident).getOrElse(throw new NoSuchTableException(ident))
    if (isUseProvider(props)) stage(ident, columns, partitions, props, Some(existing))
    else if (isUse(existing)) {
      throw new UseException(s"${existing.identifier.unquotedString} is a ${existing.provider.get} table; REPLACE it with a " +
        s"${props.getOrDefault(TableCatalog.PROP_PROVIDER, "other")} table only after DROP TABLE", UseException.Kinds.NotSupported)
    } else stageNotUse(ident, columns, partitions, props, replace = true)
  }

  override def stageCreateOrReplace(ident: Identifier, columns: Array[Column], partitions: Array[Transform],
                                    props: util.Map[String, String]): StagedTable =
    if (catalogTableOf(ident).isDefined) stageReplace(ident, columns, partitions, props)
    else {
      if (isPathIdentifier(ident) && pathTableExists(ident)) refusePathReplace(ident)
      stageCreate(ident, columns, partitions, props)
    }

  private def pathTableExists(ident: Identifier): Boolean =
    try { pathTable(ident, None, None); true } catch {
      case e: UseException if e.kind == UseException.Kinds.TableNotFound => false
    }

  private def refusePathReplace(ident: Identifier): Nothing = throw new UseException(
    s"replacing ${pathName(ident)}, a table named by its path, is not supported yet: register it (CREATE TABLE <name> USING " +
      s"${pathProvider(ident)} LOCATION '${ident.name()}') and CREATE OR REPLACE TABLE <name>, or replace " +
      s"its rows with INSERT OVERWRITE ${pathName(ident)} SELECT ...", UseException.Kinds.NotSupported)

  override def stageCreate(ident: Identifier, info: TableInfo): StagedTable =
    stageCreate(ident, info.columns(), info.partitions(), info.properties())

  override def stageReplace(ident: Identifier, info: TableInfo): StagedTable =
    stageReplace(ident, info.columns(), info.partitions(), info.properties())

  override def stageCreateOrReplace(ident: Identifier, info: TableInfo): StagedTable =
    stageCreateOrReplace(ident, info.columns(), info.partitions(), info.properties())

  // --- ALTER ----------------------------------------------------------------------------------------

  /** The table an ALTER changes: a registered USE table (`ct`, whose metastore copy follows the
    * log), or one named by its path (`delta.`/p``: the log is all of it). */
  private case class AlterTarget(name: String, ref: TableRef, provider: String, ct: Option[CatalogTable]) {
    def follow(meta: TableMeta, owner: Option[String] = None): Unit = ct.foreach(c => updateRegistration(c, meta, owner))
  }

  override def alterTable(ident: Identifier, changes: TableChange*): Table = {
    val target = catalogTableOf(ident) match {
      case Some(ct) if isUse(ct) => AlterTarget(ct.identifier.unquotedString, TableRefs.entry(ct), ct.provider.get, Some(ct))
      case None if isPathIdentifier(ident) && pathTableExists(ident) => AlterTarget(pathName(ident), pathRef(ident), pathProvider(ident), None)
      case _ => return super.alterTable(ident, changes: _*)
    }
    val (columnChanges, propertyChanges) = changes.partition(_.isInstanceOf[TableChange.ColumnChange])
    if (columnChanges.nonEmpty) {
      val meta = alterColumns(ident, target, columnChanges.toSeq)
      target.follow(meta)
      if (propertyChanges.isEmpty) return new UseTable(meta, catalogTableOf(ident), target.name, pinned = false)
    }
    alterProperties(ident, target, propertyChanges.toSeq)
  }

  /** ADD COLUMNS, ALTER COLUMN ... COMMENT and ... DROP NOT NULL: the new schema (Spark's own `applySchemaChanges`, which
    * places a column FIRST or AFTER another and adds into structs) committed as one metaData action.
    * A NOT NULL or DEFAULT column is refused (the rows already written have no value for it), and so
    * are the changes that need Delta's column mapping or a rewrite (RENAME, DROP, a type change). */
  private def alterColumns(ident: Identifier, target: AlterTarget, changes: Seq[TableChange]): TableMeta = {
    def name(parts: Array[String]): String = parts.map(p => if (p.matches("[A-Za-z_][A-Za-z0-9_]*")) p else s"`$p`").mkString(".")
    def refuse(what: String, why: String): Nothing =
      throw new UseException(s"ALTER TABLE ... $what is not supported for Delta/Qbeast tables yet: $why", UseException.Kinds.NotSupported)
    val added = Seq.newBuilder[String]
    changes.foreach {
      case a: TableChange.AddColumn =>
        if (!a.isNullable) throw new UseException(s"ALTER TABLE ... ADD COLUMNS: column ${name(a.fieldNames)} is NOT NULL, " +
          "which the rows already in the table cannot satisfy (they have no value for it); add it without NOT NULL",
          UseException.Kinds.InvalidArgument)
        if (a.defaultValue() != null) refuse("ADD COLUMNS ... DEFAULT", s"add ${name(a.fieldNames)} without a DEFAULT (its value is NULL in the rows already written)")
        added += name(a.fieldNames)
      case _: TableChange.UpdateColumnComment =>
      case n: TableChange.UpdateColumnNullability if n.nullable() => // DROP NOT NULL: the rows written all fit
      case n: TableChange.UpdateColumnNullability => refuse(s"ALTER COLUMN ${name(n.fieldNames)} SET NOT NULL",
        "the rows already written are not checked for NULLs; rewrite the table with the column NOT NULL (CREATE OR REPLACE TABLE t (... NOT NULL) then INSERT)")
      case _: TableChange.RenameColumn => refuse("RENAME COLUMN", "renaming needs Delta column mapping, which USE does not write; add a new column, or rewrite the table (CREATE OR REPLACE TABLE ... AS SELECT)")
      case _: TableChange.DeleteColumn => refuse("DROP COLUMN", "dropping needs Delta column mapping, which USE does not write; rewrite the table without it (CREATE OR REPLACE TABLE ... AS SELECT)")
      case _: TableChange.UpdateColumnType => refuse("ALTER COLUMN ... TYPE", "a type change rewrites the data; rewrite the table with the new type (CREATE OR REPLACE TABLE ... AS SELECT CAST(...))")
      case other => refuse(s"(${other.getClass.getSimpleName})", "the column changes supported are ADD COLUMNS, ALTER COLUMN ... COMMENT and ALTER COLUMN ... DROP NOT NULL")
    }
    val current = load(ident, None, None)(super.loadTable(ident)) match {
      case t: UseTable => t.meta
      case _ => throw new UseException(s"${target.name} is not a Delta/Qbeast table", UseException.Kinds.Internal)
    }
    val schema = UseCatalog.applySchemaChanges(current.schema, changes, Some(target.provider))
    TableMeta.of(target.ref, Bridge.call(AlterSchemaRequest(target.ref, schema.json, current.version, added.result())).table)
  }

  private def alterProperties(ident: Identifier, target: AlterTarget, changes: Seq[TableChange]): Table = {
    val set = Map.newBuilder[String, String]
    val unset = Seq.newBuilder[String]
    var owner: Option[String] = None
    changes.foreach {
      case s: SetProperty if s.property() == TableCatalog.PROP_OWNER => owner = Some(s.value())
      case s: SetProperty if s.property() == TableCatalog.PROP_LOCATION =>
        throw new UseException("ALTER TABLE ... SET LOCATION is not supported for Delta/Qbeast tables: the log lives at the " +
          "location; register the table at the new location with CREATE TABLE ... LOCATION", UseException.Kinds.NotSupported)
      case s: SetProperty => set += s.property() -> s.value()
      case r: RemoveProperty => unset += r.property()
      case other =>
        throw new UseException(s"ALTER TABLE (${other.getClass.getSimpleName}) is not supported for Delta/Qbeast tables yet; " +
          "only SET/UNSET TBLPROPERTIES, ADD COLUMNS and ALTER COLUMN ... COMMENT", UseException.Kinds.NotSupported)
    }
    val meta = TableMeta.of(target.ref, Bridge.call(AlterPropertiesRequest(target.ref, set.result(), unset.result())).table)
    target.follow(meta, owner)
    new UseTable(meta, catalogTableOf(ident), target.name, pinned = false)
  }

  // --- DROP -----------------------------------------------------------------------------------------

  private def dropUse(ident: Identifier, drop: => Boolean): Boolean = {
    val ct = catalogTableOf(ident)
    val dropped = drop
    // A managed table's data goes with it (the catalog removes the directory; this makes sure of
    // it for any catalog); an external table's stays where it is.
    ct.filter(c => dropped && isUse(c) && c.tableType == CatalogTableType.MANAGED).foreach { c =>
      val path = new Path(c.location)
      val fs = path.getFileSystem(session.sessionState.newHadoopConf())
      if (fs.exists(path)) fs.delete(path, true)
    }
    dropped
  }

  override def dropTable(ident: Identifier): Boolean = { refusePathDrop(ident); dropUse(ident, super.dropTable(ident)) }

  override def purgeTable(ident: Identifier): Boolean = { refusePathDrop(ident); dropUse(ident, super.purgeTable(ident)) }

  /** DROP TABLE removes a registration, and a table named by its path has none: Spark's catalog
    * would answer "nothing dropped" and the statement succeed with the table untouched. */
  private def refusePathDrop(ident: Identifier): Unit = if (isPathIdentifier(ident) && catalogTableOf(ident).isEmpty) {
    throw new UseException(s"${pathName(ident)} is a table named by its path, not registered in the catalog, so DROP TABLE has " +
      s"nothing to drop: delete its directory (${ident.name()}) to remove the table, or TRUNCATE TABLE ${pathName(ident)} to " +
      "remove its rows and keep its history", UseException.Kinds.NotSupported)
  }
}

/** A staged table for a provider this catalog does not serve: created at once, dropped on abort
  * (the best Spark's own session catalog can do). */
private[sql] class BestEffortStagedTable(table: Table, drop: () => Unit) extends StagedTable with SupportsWrite {
  override def name(): String = table.name()
  override def columns(): Array[Column] = table.columns()
  override def partitioning(): Array[Transform] = table.partitioning()
  override def properties(): util.Map[String, String] = table.properties()
  override def capabilities(): util.Set[TableCapability] = table.capabilities()
  override def newWriteBuilder(info: org.apache.spark.sql.connector.write.LogicalWriteInfo): org.apache.spark.sql.connector.write.WriteBuilder =
    table match {
      case w: SupportsWrite => w.newWriteBuilder(info)
      case _ => throw new UseException(s"${table.name()} does not support writes", UseException.Kinds.NotSupported)
    }
  override def commitStagedChanges(): Unit = ()
  override def abortStagedChanges(): Unit = drop()
}

object UseCatalog {
  /** `catchUpMirror`'s table -> the log version its mirror was last compared at. */
  private[sql] val mirrorChecked = new java.util.concurrent.ConcurrentHashMap[String, java.lang.Long]()

  /** Spark's own `CatalogV2Util.applySchemaChanges` (positions, nested fields, comments, as Spark's
    * v2 tables get them): the object is private to Spark's `sql` package, so it is called by
    * reflection on its public static forwarder (the same signature in Spark 4.1 and 4.3). */
  def applySchemaChanges(schema: StructType, changes: Seq[TableChange], provider: Option[String]): StructType = {
    val method = Class.forName("org.apache.spark.sql.connector.catalog.CatalogV2Util").getMethod(
      "applySchemaChanges", classOf[StructType], classOf[scala.collection.immutable.Seq[_]], classOf[Option[_]], classOf[String])
    try method.invoke(null, schema, changes.toList, provider, "ALTER TABLE").asInstanceOf[StructType]
    catch { case e: java.lang.reflect.InvocationTargetException if e.getCause != null => throw e.getCause }
  }
}
