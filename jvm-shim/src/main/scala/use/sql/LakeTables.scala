package use.sql

import java.util

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.sql.{AnalysisException, SparkSession}
import org.apache.spark.sql.catalyst.analysis.{NoSuchNamespaceException, NoSuchTableException}
import org.apache.spark.sql.classic.{SparkSession => ClassicSession}
import org.apache.spark.sql.connector.catalog._
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.execution.datasources.v2.python.{PythonDataSourceV2, UserDefinedPythonDataSource}
import org.apache.spark.sql.types.{DataType, StructType}
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/** The tables and namespaces of `use_catalog` (see `UseLakeCatalog`).
  *
  * Names (namespace, then table):
  *  - `<catalog>.<db>.<table>.<insight>`: an insight table (`use.insights.TABLE_INSIGHTS`) of a
  *    Delta/Qbeast table of any catalog of the session;
  *  - ``path.`<location>`.<insight>``: the same for a table by location;
  *  - `system_lake_tables.<name>`: the lake-wide tables (metastore_summary, optimizations,
  *    service_status);
  *  - `<catalog>.<db>.<table>`: the table itself, as a name only (its schema, partitioning and
  *    properties, no read or write capability: query it in its own catalog). It exists because ALTER
  *    TABLE resolves the table before calling `alterTable`, which is the manual trigger
  *    (`UseProcedures.manualTrigger`).
  * Namespaces mirror the session: `use_catalog` lists the session's catalogs plus `path` and
  * `system_lake_tables`; a catalog lists its databases; a database lists its tables (as namespaces:
  * each holds the insight tables; SHOW TABLES IN a database lists them too).
  *
  * Every insight table is read by one Python Data Source (`use.sql.insight_source`, registered as
  * `SourceName`): `loadTable` asks the driver's Python (`use.sql.lake.read_request`) for the schema
  * and the reader's options, then serves a `PythonDataSourceV2` table wrapped read-only. Unknown
  * names are Spark's TABLE_OR_VIEW_NOT_FOUND with the valid names in the message.
  */
object LakeTables {

  /** Must equal `use.sql.insight_source.SOURCE_NAME`. */
  val SourceName = "use_insight"
  val PathNamespace = "path"
  val LakeNamespace = "system_lake_tables"
  private val SessionCatalogName = "spark_catalog"

  // --- the reader's registration, copied into every session ---------------------------------------

  @volatile private var source: UserDefinedPythonDataSource = _

  /** Called by `use.sql.install` after registering the source on the driver's session. */
  def remember(session: SparkSession): Unit = {
    source = session.asInstanceOf[ClassicSession].sessionState.dataSourceManager.lookupDataSource(SourceName)
  }

  private def session: ClassicSession = SparkSession.active.asInstanceOf[ClassicSession]

  /** Registrations are per session (each JDBC connection is one): copy the driver's into `s`. */
  private def ensureSource(s: ClassicSession): Unit = {
    val manager = s.sessionState.dataSourceManager
    if (!manager.dataSourceExists(SourceName)) {
      val remembered = source
      if (remembered == null) {
        throw new UseException("use_catalog's readers are not registered in this driver: build the session with " +
          "use.session.spark_session(), or call use.sql.install(spark) once", UseException.Kinds.NotInstalled)
      }
      manager.registerDataSource(SourceName, remembered)
    }
  }

  // --- names ---------------------------------------------------------------------------------------

  private lazy val names: InsightNamesReply = Bridge.call(InsightNamesRequest())

  private def insightNames: Seq[String] = names.table

  private def lakeNames: Seq[String] = names.lake

  private def quoted(parts: Seq[String]): String = parts.map(p => s"`${p.replace("`", "``")}`").mkString(".")

  /** Spark's TABLE_OR_VIEW_NOT_FOUND, with a message saying what exists. Thrown as is (not as a
    * NoSuchTableException, which Spark's analyzer replaces by its own message without the names). */
  private def notFound(parts: Seq[String], why: String): AnalysisException = {
    val relation = quoted(parts)
    new AnalysisException(s"[TABLE_OR_VIEW_NOT_FOUND] The table or view $relation cannot be found: $why", None, None, None,
      Some("TABLE_OR_VIEW_NOT_FOUND"), Map("relationName" -> relation), Array.empty)
  }

  private def fullName(ident: Identifier): Seq[String] = "use_catalog" +: (ident.namespace().toSeq :+ ident.name())

  // --- the session's catalogs --------------------------------------------------------------------

  private def catalogNames(s: ClassicSession): Seq[String] =
    s.sessionState.catalogManager.listCatalogs(None).filterNot { n =>
      try s.sessionState.catalogManager.catalog(n).isInstanceOf[UseLakeCatalog] catch { case NonFatal(_) => true }
    }

  private def catalogOf(s: ClassicSession, name: String): Option[CatalogPlugin] =
    if (name == LakeNamespace || name == PathNamespace) None
    else try Option(s.sessionState.catalogManager.catalog(name)).filterNot(_.isInstanceOf[UseLakeCatalog])
    catch { case NonFatal(_) => None }

  private def tableCatalog(s: ClassicSession, name: String): Option[TableCatalog] = catalogOf(s, name).collect {
    case t: TableCatalog => t
  }

  /** The tables of `cat`.`db`; for the session catalog the metastore's: Spark 4.3's listTables also
    * returns the session's temporary views, which are no table of a database. */
  private def tableNames(s: ClassicSession, cat: String, db: String): Array[String] =
    if (cat == SessionCatalogName) s.sharedState.externalCatalog.listTables(db).sorted.toArray
    else tableCatalog(s, cat).map(_.listTables(Array(db)).map(_.name())).getOrElse(Array.empty)

  private def tableExists(s: ClassicSession, cat: String, db: String, t: String): Boolean =
    tableCatalog(s, cat).exists(c => try c.tableExists(Identifier.of(Array(db), t)) catch { case NonFatal(_) => false })

  private def databaseExists(s: ClassicSession, cat: String, db: String): Boolean = catalogOf(s, cat).exists {
    case n: SupportsNamespaces => try n.namespaceExists(Array(db)) catch { case NonFatal(_) => false }
    case _ => false
  }

  // --- namespaces ----------------------------------------------------------------------------------

  def namespaces(parent: Array[String]): Array[Array[String]] = {
    val s = session
    parent.toSeq match {
      case Seq() => (catalogNames(s) ++ Seq(PathNamespace, LakeNamespace)).map(n => Array(n)).toArray
      case Seq(LakeNamespace) | Seq(PathNamespace) | Seq(PathNamespace, _) => Array.empty
      case Seq(cat) => catalogOf(s, cat) match {
        case Some(n: SupportsNamespaces) => n.listNamespaces().map(ns => cat +: ns)
        case Some(_) => Array.empty
        case None => throw new NoSuchNamespaceException(parent)
      }
      case Seq(cat, db) if databaseExists(s, cat, db) =>
        tableNames(s, cat, db).map(t => Array(cat, db, t))
      case Seq(cat, db, t) if tableExists(s, cat, db, t) => Array.empty
      case _ => throw new NoSuchNamespaceException(parent)
    }
  }

  def namespaceExists(namespace: Array[String]): Boolean = {
    val s = session
    namespace.toSeq match {
      case Seq(LakeNamespace) | Seq(PathNamespace) | Seq(PathNamespace, _) => true
      case Seq(cat) => catalogOf(s, cat).isDefined
      case Seq(cat, db) => databaseExists(s, cat, db)
      case Seq(cat, db, t) => tableExists(s, cat, db, t)
      case _ => false
    }
  }

  def namespaceMetadata(namespace: Array[String]): util.Map[String, String] =
    if (namespaceExists(namespace)) new util.HashMap[String, String]() else throw new NoSuchNamespaceException(namespace)

  // --- tables --------------------------------------------------------------------------------------

  def list(namespace: Array[String]): Array[Identifier] = {
    val s = session
    def named(names: Seq[String]): Array[Identifier] = names.map(n => Identifier.of(namespace, n)).toArray
    namespace.toSeq match {
      case Seq(LakeNamespace) => named(lakeNames)
      case Seq(PathNamespace, _) => named(insightNames)
      case Seq(cat, db, t) if tableExists(s, cat, db, t) => named(insightNames)
      case Seq(cat, db) if databaseExists(s, cat, db) =>
        tableNames(s, cat, db).map(t => Identifier.of(namespace, t))
      case ns if namespaceExists(namespace) => Array.empty
      case _ => throw new NoSuchNamespaceException(namespace)
    }
  }

  def load(ident: Identifier): Table = load(ident, None)

  /** The insight table a statement reads for a user who named only the table (DESCRIBE HISTORY /
    * DETAIL, `given` as written): a missing table is USE_TABLE_NOT_FOUND_ERROR naming it, in the
    * words of OPTIMIZE and RESTORE (`TableRefs.identifier`, or the Python side's for a path), not
    * Spark's not-found of a `use_catalog` insight table the user never wrote. */
  def loadForStatement(ident: Identifier, given: String): Table = load(ident, Some(given))

  private def load(ident: Identifier, statement: Option[String]): Table = {
    val s = session
    ident.namespace().toSeq match {
      case Seq(LakeNamespace) => lakeTable(s, ident)
      case Seq(PathNamespace, location) =>
        val table = TableRefs.path(location, None, Some(s"path.`$location`"))
        insightTable(s, ident, InsightReadRequest("table", ident.name(), Some(table), Nil), statement.isDefined)
      case Seq(cat, db, t) => insightTable(s, ident, tableRequest(s, ident, cat, db, t, statement), statement.isDefined)
      case Seq(cat, db) => ownTable(s, ident, cat, db)
      case _ => throw notFound(fullName(ident),
        "use_catalog names <catalog>.<database>.<table>.<insight>, path.`<location>`.<insight> or " +
          s"$LakeNamespace.<name>; the insight tables are ${insightNames.mkString(", ")}; the lake tables are " +
          lakeNames.mkString(", "))
    }
  }

  /** The insight `ident` names of `cat`.`db`.`t`, looked up as the procedures look up a table
    * argument (`TableRefs.identifier`: the metastore entry, no log read). A missing table is Spark's
    * not-found of the insight table; for a statement (`given`: the table as the user wrote it),
    * USE_TABLE_NOT_FOUND_ERROR naming it. */
  private def tableRequest(s: ClassicSession, ident: Identifier, cat: String, db: String, t: String,
                           given: Option[String]): InsightReadRequest = {
    val ref = try TableRefs.identifier(s, cat, Seq(db), t, given.getOrElse(s"$cat.$db.$t")) catch {
      case e: UseException if e.kind == UseException.Kinds.TableNotFound && given.isEmpty =>
        throw notFound(fullName(ident), s"there is no table $cat.$db.$t (insight tables are named " +
          s"<catalog>.<database>.<table>.<insight>, the insight tables are ${insightNames.mkString(", ")})")
    }
    InsightReadRequest("table", ident.name(), Some(ref), Nil)
  }

  private def lakeTable(s: ClassicSession, ident: Identifier): Table = {
    val tables = if (ident.name() == "metastore_summary" || ident.name() == "optimizations") metastoreTables(s) else Nil
    insightTable(s, ident, InsightReadRequest("lake", ident.name(), None, tables))
  }

  /** Every table of every namespace of the session catalog, as `use.insights.TableIdentity` fields:
    * one `getTablesByName` per database on the external catalog (no log read here). */
  private def metastoreTables(s: ClassicSession): Seq[MetastoreTable] = {
    val external = s.sharedState.externalCatalog
    external.listDatabases().sorted.flatMap { db =>
      val names = external.listTables(db).sorted
      if (names.isEmpty) Nil
      else external.getTablesByName(db, names).sortBy(_.identifier.table).map { ct =>
        MetastoreTable(SessionCatalogName, db, ct.identifier.table, Some(ct.tableType.name), ct.provider,
          ct.storage.locationUri.map(_.toString), ct.properties)
      }
    }
  }

  private def insightTable(s: ClassicSession, ident: Identifier, req: InsightReadRequest, keepUseErrors: Boolean = false): Table = {
    // The querying session goes along: its settings (the session's optimization defaults) are read
    // on the Python side as the Python API reads them.
    val answer = try Bridge.call(req, s) catch {
      case e: UseException if e.kind == UseException.Kinds.TableNotFound && !keepUseErrors =>
        throw notFound(fullName(ident), e.message.stripPrefix(s"[${e.kind}] "))
    }
    val schema = DataType.fromJson(answer.schema).asInstanceOf[StructType]
    val options = answer.options
    ensureSource(s)
    val python = new PythonDataSourceV2()
    python.setShortName(SourceName)
    val inner = python.getTable(schema, Array.empty[Transform], options.asJava)
    new InsightTable(quoted(fullName(ident)), inner.asInstanceOf[SupportsRead], options)
  }

  /** `<catalog>.<db>.<t>` itself: its schema and properties, nothing to read or write here. */
  private def ownTable(s: ClassicSession, ident: Identifier, cat: String, db: String): Table = {
    val catalog = tableCatalog(s, cat).getOrElse(throw new NoSuchTableException(ident))
    new OwnTable(quoted(fullName(ident)), catalog.loadTable(Identifier.of(Array(db), ident.name())))
  }

  def readOnly(ident: Identifier, what: String): Throwable = new UseException(
    s"$what is not possible in use_catalog: it only shows insight tables and runs procedures; " +
      s"run it on the table's own catalog (e.g. spark_catalog.<db>.<table>) instead of ${ident.toString}",
    UseException.Kinds.ReadOnlyCatalog)

  def readOnlyNamespace(namespace: Array[String], what: String): Throwable = new UseException(
    s"$what is not possible in use_catalog (namespace ${namespace.mkString(".")}): its namespaces mirror " +
      "the catalogs and databases of the session; create databases in spark_catalog",
    UseException.Kinds.ReadOnlyCatalog)
}

/** An insight table: the Python data source's table, read-only, its options fixed by the driver
  * (catalog reads hand a scan only the query's options, so they are merged in here). */
class InsightTable(tableName: String, inner: SupportsRead, options: Map[String, String]) extends Table with SupportsRead {
  override def name(): String = tableName
  override def schema(): StructType = inner.schema()
  override def columns(): Array[Column] = TableMeta.columns(inner.schema())
  override def capabilities(): util.Set[TableCapability] = util.EnumSet.of(TableCapability.BATCH_READ)
  override def newScanBuilder(given: CaseInsensitiveStringMap): ScanBuilder =
    inner.newScanBuilder(new CaseInsensitiveStringMap((given.asCaseSensitiveMap().asScala.toMap ++ options).asJava))
}

/** A table of another catalog as `use_catalog` names it (see `LakeTables`): metadata only. */
class OwnTable(tableName: String, inner: Table) extends Table {
  override def name(): String = tableName
  override def schema(): StructType = inner.schema()
  override def columns(): Array[Column] = inner.columns()
  override def partitioning(): Array[Transform] = inner.partitioning()
  override def properties(): util.Map[String, String] = inner.properties()
  override def capabilities(): util.Set[TableCapability] = util.EnumSet.noneOf(classOf[TableCapability])
}
