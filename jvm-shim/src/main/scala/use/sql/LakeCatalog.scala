package use.sql

import java.util

import org.apache.spark.sql.connector.catalog._
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/** `use_catalog` (`spark.sql.catalog.use_catalog=use.sql.UseLakeCatalog`): USE's insight tables and
  * procedures as one Spark catalog, so SQL users and BI tools see the optimizer with plain SQL.
  *
  * It owns no data: every name is resolved by one of two adapters, each in its own file so the two
  * concerns change apart —
  *  - `LakeTables`: namespaces and read-only tables (`<catalog>.<db>.<table>.<insight>`,
  *    `path.`/dir`.<insight>`, `system_lake_tables.<name>`), read by Python Arrow readers;
  *  - `UseProcedures`: `CALL use_catalog.system.<name>(...)` and the manual trigger (ALTER TABLE
  *    `use_catalog.<catalog>.<db>.<t>` SET TBLPROPERTIES runs one optimization and changes nothing).
  * Nothing here is created, dropped or renamed: such DDL is refused with a message naming the
  * catalog that owns the table.
  */
class UseLakeCatalog extends TableCatalog with SupportsNamespaces with ProcedureCatalog {

  private var catalogName: String = "use_catalog"

  override def initialize(name: String, options: CaseInsensitiveStringMap): Unit = { catalogName = name }

  override def name(): String = catalogName

  // --- tables ----------------------------------------------------------------------------------

  override def listTables(namespace: Array[String]): Array[Identifier] = LakeTables.list(namespace)

  override def loadTable(ident: Identifier): Table = LakeTables.load(ident)

  override def createTable(
      ident: Identifier,
      schema: StructType,
      partitions: Array[Transform],
      properties: util.Map[String, String]): Table = throw LakeTables.readOnly(ident, "CREATE TABLE")

  override def alterTable(ident: Identifier, changes: TableChange*): Table = {
    UseProcedures.manualTrigger(ident, changes.toSeq)
    LakeTables.load(ident)
  }

  override def dropTable(ident: Identifier): Boolean = throw LakeTables.readOnly(ident, "DROP TABLE")

  override def renameTable(oldIdent: Identifier, newIdent: Identifier): Unit =
    throw LakeTables.readOnly(oldIdent, "ALTER TABLE ... RENAME")

  // --- namespaces ------------------------------------------------------------------------------

  override def listNamespaces(): Array[Array[String]] = LakeTables.namespaces(Array.empty)

  override def listNamespaces(namespace: Array[String]): Array[Array[String]] = LakeTables.namespaces(namespace)

  override def namespaceExists(namespace: Array[String]): Boolean = LakeTables.namespaceExists(namespace)

  override def loadNamespaceMetadata(namespace: Array[String]): util.Map[String, String] =
    LakeTables.namespaceMetadata(namespace)

  override def createNamespace(namespace: Array[String], metadata: util.Map[String, String]): Unit =
    throw LakeTables.readOnlyNamespace(namespace, "CREATE NAMESPACE")

  override def alterNamespace(namespace: Array[String], changes: NamespaceChange*): Unit =
    throw LakeTables.readOnlyNamespace(namespace, "ALTER NAMESPACE")

  override def dropNamespace(namespace: Array[String], cascade: Boolean): Boolean =
    throw LakeTables.readOnlyNamespace(namespace, "DROP NAMESPACE")

  // --- procedures ------------------------------------------------------------------------------

  override def loadProcedure(ident: Identifier): UnboundProcedure = UseProcedures.load(ident)

  /** Abstract in Spark 4.3, absent in 4.0/4.1: defined without `override` to compile against both. */
  def listProcedures(namespace: Array[String]): Array[Identifier] = UseProcedures.list(namespace)
}
