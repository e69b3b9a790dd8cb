package use.sql

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.catalyst.TableIdentifier
import org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.connector.catalog.{Identifier, TableCatalog}
import org.apache.spark.sql.connector.expressions.{Expressions, Transform}
import org.apache.spark.sql.execution.command.{CreateTableLikeCommand, LeafRunnableCommand}
import org.apache.spark.sql.types.StructType

/** `CREATE TABLE [IF NOT EXISTS] t LIKE s [USING delta|qbeast] [LOCATION ...] [TBLPROPERTIES (...)]`
  * when `s` is a Delta/Qbeast table or the new table is one: an empty table with the source's
  * columns, partitioning, comment and properties (a Qbeast table's index options, not its
  * revisions: as SHOW CREATE TABLE prints them), created through this catalog's CREATE so it has
  * a Delta log, as Delta's CREATE TABLE LIKE does. Spark's own command only registered the name
  * (no log, no partitioning, no properties): every later read of the table failed. `source`: the
  * source as the analysis loaded it, when it is a USE table. */
case class UseCreateTableLike(like: CreateTableLikeCommand, source: Option[UseTable]) extends LeafRunnableCommand {

  override def output: Seq[Attribute] = Seq.empty

  override def run(spark: SparkSession): Seq[Row] = {
    val catalog = UseCreateTableLike.sessionCatalog(spark)
    val target = UseCreateTableLike.identifier(spark, like.targetTable)
    if (catalog.tableExists(target)) {
      if (like.ifNotExists) return Seq.empty
      throw new TableAlreadyExistsException(target.namespace() :+ target.name())
    }
    val (schema, partitioning, sourceProps) = UseCreateTableLike.definition(spark, source, like.sourceTable)
    val props = new java.util.HashMap[String, String]()
    sourceProps.foreach { case (k, v) => props.put(k, v) }
    like.provider.foreach(p => props.put(TableCatalog.PROP_PROVIDER, p.toLowerCase(java.util.Locale.ROOT)))
    like.fileFormat.locationUri.foreach { uri =>
      props.put(TableCatalog.PROP_LOCATION, uri.toString)
      props.put(TableCatalog.PROP_EXTERNAL, "true")
    }
    like.properties.foreach { case (k, v) => props.put(k, v) }
    catalog.createTable(target, schema, partitioning, props)
    Seq.empty
  }
}

object UseCreateTableLike {
  /** The properties of a table that describe where and whose it is, not what it is: a table made
    * LIKE it gets its own. */
  private val Placement = Set(TableCatalog.PROP_LOCATION, TableCatalog.PROP_OWNER, TableCatalog.PROP_EXTERNAL,
    TableCatalog.PROP_IS_MANAGED_LOCATION)

  /** The plan for `c`: this command when the source is a USE table or the new table is one (USING
    * delta/qbeast); Spark's command for everything else. */
  def of(spark: SparkSession, c: CreateTableLikeCommand): Option[UseCreateTableLike] = {
    val source = try sessionCatalog(spark).loadTable(identifier(spark, c.sourceTable)) match {
      case u: UseTable => Some(u)
      case _ => None
    } catch { case scala.util.control.NonFatal(_) => None }
    if (source.isDefined || Bridge.isUseProvider(c.provider)) Some(UseCreateTableLike(c, source)) else None
  }

  /** This session's `spark_catalog` (USE's catalog when the extension is installed). */
  private def sessionCatalog(spark: SparkSession): TableCatalog =
    spark.sessionState.catalogManager.catalog("spark_catalog").asInstanceOf[TableCatalog]

  private[sql] def identifier(spark: SparkSession, t: TableIdentifier): Identifier =
    Identifier.of(Array(t.database.getOrElse(spark.sessionState.catalog.getCurrentDatabase)), t.table)

  /** The source's columns, partitioning and properties (provider and comment included). */
  private def definition(spark: SparkSession, source: Option[UseTable], t: TableIdentifier)
      : (StructType, Array[Transform], Map[String, String]) = source match {
    case Some(u) =>
      val shown = u.asShownByShowCreate
      (u.meta.schema, shown.partitioning(), shown.properties().asScala.toMap.filterNot { case (k, _) => Placement.contains(k) })
    case None => // a table of another format, or a view: its columns and partitioning
      val meta = spark.sessionState.catalog.getTempViewOrPermanentTableMetadata(t)
      (meta.schema, meta.partitionColumnNames.map(c => Expressions.identity(c): Transform).toArray,
        meta.comment.map(TableCatalog.PROP_COMMENT -> _).toMap)
  }
}
