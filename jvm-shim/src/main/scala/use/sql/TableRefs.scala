package use.sql

import java.util.Locale

import scala.util.control.NonFatal

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.TableIdentifier
import org.apache.spark.sql.catalyst.catalog.CatalogTable
import org.apache.spark.sql.classic.{SparkSession => ClassicSession}
import org.apache.spark.sql.connector.catalog.{Identifier, TableCatalog}

/** The one place a `TableRef` is made: from a path, from a table of the session catalog, from an
  * identifier of any catalog of the session, or from a name as a statement wrote it (resolved as
  * Spark resolves names, else a path). Nothing here reads a Delta log. */
object TableRefs {
  private val SessionCatalogName = "spark_catalog"

  private def lower(provider: String): String = provider.toLowerCase(Locale.ROOT)

  /** A table named by its location (`delta.`/p``, `format("delta").load(p)`, a path argument);
    * `name` as the statement shows it (the path itself by default). */
  def path(location: String, provider: Option[String], name: Option[String] = None): TableRef =
    TableRef(name.getOrElse(location), Some(location), provider.map(lower), byPath = true, None, None, None)

  /** A table of the session catalog by its metastore entry: its location, provider (its table type
    * when it has none: a view) and registration. */
  def entry(ct: CatalogTable): TableRef = {
    val db = ct.identifier.database.getOrElse("default")
    TableRef(s"$SessionCatalogName.$db.${ct.identifier.table}", ct.storage.locationUri.map(_.toString),
      ct.provider.orElse(Some(ct.tableType.name)).map(lower), byPath = false, Some(db), Some(ct.identifier.table),
      Some(ct.partitionSchema.json))
  }

  /** A table being created at `location` (its metastore entry comes after its log). */
  def created(name: String, location: String, provider: String, byPath: Boolean): TableRef =
    TableRef(name, Some(location), Some(lower(provider)), byPath, None, None, None)

  /** `cat`.`ns`.`t` of any catalog of the session: the metastore entry for the session catalog (no
    * log read), the table's properties for another catalog. A missing one is USE_TABLE_NOT_FOUND_ERROR
    * naming it as the statement wrote it (`given`). */
  def identifier(s: ClassicSession, cat: String, ns: Seq[String], t: String, given: String): TableRef = {
    val full = ((cat +: ns) :+ t).mkString(".")
    def missing = new UseException(s"no table $full (from '$given'): check the name (table, db.table or catalog.db.table, " +
      "resolved in the current catalog and database) or give the table's path", UseException.Kinds.TableNotFound)
    if (cat.equalsIgnoreCase(SessionCatalogName)) {
      if (ns.length != 1) throw missing
      val ct = try s.sessionState.catalog.getTableMetadata(TableIdentifier(t, Some(ns.head), Some(SessionCatalogName)))
      catch { case NonFatal(_) => throw missing }
      entry(ct).copy(name = full, database = Some(ct.identifier.database.getOrElse(ns.head)))
    } else {
      val catalog = try s.sessionState.catalogManager.catalog(cat) catch { case NonFatal(_) => throw missing }
      catalog match {
        case _: UseLakeCatalog => throw missing
        case tc: TableCatalog =>
          val props = try tc.loadTable(Identifier.of(ns.toArray, t)).properties() catch { case NonFatal(_) => throw missing }
          TableRef(full, Option(props.get(TableCatalog.PROP_LOCATION)), Option(props.get(TableCatalog.PROP_PROVIDER)).map(lower),
            byPath = false, None, None, None)
        case _ => throw missing
      }
    }
  }

  def looksLikePath(text: String): Boolean =
    text.startsWith("/") || text.startsWith("file:") || text.matches("^[A-Za-z][A-Za-z0-9+.-]*://.*")

  /** A table as a statement names it (a procedure's `table` argument): a path, `<provider>.`/path``
    * (a provider the Python side lists for paths), or a name as Spark resolves it (1 part: the
    * current catalog and database; more: a leading registered catalog, else the current catalog). */
  def name(text: String): TableRef = {
    val given = text.trim
    if (looksLikePath(given)) return path(given, None)
    val s = SparkSession.active.asInstanceOf[ClassicSession]
    val parts = try s.sessionState.sqlParser.parseMultipartIdentifier(given) catch {
      case NonFatal(_) => throw new UseException(s"table '$text' is neither a table name (table, db.table or " +
        "catalog.db.table; quote odd names with backticks) nor a path", UseException.Kinds.InvalidArgument)
    }
    val manager = s.sessionState.catalogManager
    parts match {
      case Seq(provider, location) if Bridge.providers.paths.contains(lower(provider)) && looksLikePath(location) =>
        path(location, None, Some(given))
      case Seq(t) => identifier(s, manager.currentCatalog.name(), manager.currentNamespace.toSeq, t, given)
      case head +: rest if rest.length >= 2 && manager.isCatalogRegistered(head) => identifier(s, head, rest.init, rest.last, given)
      case _ => identifier(s, manager.currentCatalog.name(), parts.init, parts.last, given)
    }
  }
}
