package use.sql

import java.util

import org.apache.spark.sql.catalyst.analysis.{NoSuchNamespaceException, NoSuchTableException}
import org.apache.spark.sql.connector.catalog.{Identifier, Table}

/** The tables and namespaces of `use_catalog` (see `UseLakeCatalog`).
  *
  * STUB: the contract only; the insight tables land with issue 12 §1–3. */
object LakeTables {

  def list(namespace: Array[String]): Array[Identifier] = Array.empty

  def load(ident: Identifier): Table = throw new NoSuchTableException(ident.namespace() :+ ident.name())

  def namespaces(parent: Array[String]): Array[Array[String]] = Array.empty

  def namespaceExists(namespace: Array[String]): Boolean = false

  def namespaceMetadata(namespace: Array[String]): util.Map[String, String] =
    throw new NoSuchNamespaceException(namespace)

  def readOnly(ident: Identifier, what: String): Throwable = new UseException(
    s"$what is not possible in use_catalog: it only shows insight tables and runs procedures; " +
      s"run it on the table's own catalog (e.g. spark_catalog.<db>.<table>) instead of ${ident.toString}",
    "USE_READ_ONLY_CATALOG")

  def readOnlyNamespace(namespace: Array[String], what: String): Throwable = new UseException(
    s"$what is not possible in use_catalog (namespace ${namespace.mkString(".")}): its namespaces mirror " +
      "the catalogs and databases of the session; create databases in spark_catalog",
    "USE_READ_ONLY_CATALOG")
}
