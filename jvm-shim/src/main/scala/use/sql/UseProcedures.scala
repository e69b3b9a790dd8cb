package use.sql

import org.apache.spark.sql.catalyst.analysis.NoSuchTableException
import org.apache.spark.sql.connector.catalog.{Identifier, TableChange}
import org.apache.spark.sql.connector.catalog.procedures.UnboundProcedure

/** `CALL use_catalog.system.<name>(...)` and the manual trigger (see `UseLakeCatalog`).
  *
  * STUB: the contract only; the procedures land with issue 12 §4. */
object UseProcedures {

  /** The procedure `ident` names (namespace `system`); unknown names fail with the valid ones. */
  def load(ident: Identifier): UnboundProcedure =
    throw new UseException(s"no procedure ${ident.toString} in use_catalog yet", "USE_PROCEDURE_NOT_FOUND")

  def list(namespace: Array[String]): Array[Identifier] = Array.empty

  /** ALTER TABLE use_catalog.<catalog>.<db>.<t> SET/UNSET TBLPROPERTIES: one optimization with
    * those settings; the table's properties are not changed. */
  def manualTrigger(ident: Identifier, changes: Seq[TableChange]): Unit =
    throw new UseException(s"ALTER TABLE on use_catalog (${ident.toString}) is not supported yet", "USE_NOT_SUPPORTED")
}
