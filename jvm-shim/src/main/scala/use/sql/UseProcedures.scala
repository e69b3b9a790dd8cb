package use.sql

import java.util

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.{InternalRow, TableIdentifier}
import org.apache.spark.sql.classic.{SparkSession => ClassicSession}
import org.apache.spark.sql.connector.catalog.{Identifier, TableChange}
import org.apache.spark.sql.connector.catalog.TableChange.SetProperty
import org.apache.spark.sql.connector.catalog.procedures.{BoundProcedure, UnboundProcedure, ProcedureParameter => SparkParameter}
import org.apache.spark.sql.connector.read.{LocalScan, Scan}
import org.apache.spark.sql.types._
import org.apache.spark.sql.use.ArrowRows

/** `CALL use_catalog.system.<name>(...)` and the manual trigger (see `UseLakeCatalog`).
  *
  * Generic: the procedures (names, descriptions, parameters with their Spark types and SQL
  * defaults) are the Python side's (`use.sql.procedures`), asked for once. A call sends its
  * arguments as Spark gives them (an Arrow IPC row; a `table` parameter also resolved here first,
  * as Spark resolves names: the session's current catalog and database) and serves the rows Python
  * returns (an Arrow IPC stream, read with Spark's converters) as a `LocalScan`. Spark runs a
  * procedure while analysing the CALL.
  */
object UseProcedures {

  val Namespace = "system"
  private val SessionCatalogName = "spark_catalog"

  private case class Param(name: String, dataType: DataType, default: Option[String], doc: String, isTable: Boolean)

  private case class Spec(name: String, description: String, params: Seq[Param])

  @volatile private var cached: Map[String, Spec] = _

  /** The procedures, asked from Python once per JVM (they are fixed by the installed package). */
  private def specs: Map[String, Spec] = {
    if (cached == null) {
      cached = Bridge.call(ProceduresRequest()).procedures.map { p =>
        p.name -> Spec(p.name, p.description, p.parameters.map(q => Param(q.name, DataType.fromDDL(q.`type`), q.default, q.doc, q.table)))
      }.toMap
    }
    cached
  }

  private def valid: String = specs.keys.toSeq.sorted.map(n => s"use_catalog.$Namespace.$n").mkString(", ")

  /** The procedure `ident` names (namespace `system`); unknown names fail with the valid ones. */
  def load(ident: Identifier): UnboundProcedure = {
    val found = if (ident.namespace().toSeq.map(_.toLowerCase) == Seq(Namespace)) specs.get(ident.name().toLowerCase) else None
    found.map(new Procedure(_)).getOrElse(throw new UseException(
      s"no procedure ${(("use_catalog" +: ident.namespace().toSeq) :+ ident.name()).mkString(".")}; the procedures are $valid",
      UseException.Kinds.ProcedureNotFound))
  }

  def list(namespace: Array[String]): Array[Identifier] =
    if (namespace.toSeq.map(_.toLowerCase) == Seq(Namespace)) specs.keys.toSeq.sorted.map(n => Identifier.of(Array(Namespace), n)).toArray
    else Array.empty

  /** ALTER TABLE use_catalog.<catalog>.<db>.<t> SET TBLPROPERTIES: one optimization with those
    * settings; the table's properties are not changed (the Python side decides whether it runs). */
  def manualTrigger(ident: Identifier, changes: Seq[TableChange]): Unit = {
    val ns = ident.namespace().toSeq
    val shown = (("use_catalog" +: ns) :+ ident.name()).mkString(".")
    if (ns.length < 2) {
      throw new UseException(s"ALTER TABLE $shown: use_catalog triggers a manual optimization of a table named " +
        "use_catalog.<catalog>.<database>.<table> (e.g. use_catalog.spark_catalog.default.t)", UseException.Kinds.InvalidArgument)
    }
    val settings = changes.map {
      case set: SetProperty => set.property() -> set.value()
      case other => throw new UseException(s"ALTER TABLE $shown only takes SET TBLPROPERTIES ('use.optimization.type'=..., ...): " +
        s"it triggers one optimization with those settings and changes nothing (${other.getClass.getSimpleName} is not " +
        s"possible here); change the table itself in its own catalog, e.g. ALTER TABLE ${(ns :+ ident.name()).mkString(".")}",
        UseException.Kinds.NotSupported)
    }.toMap
    val table = TableRefs.identifier(session, ns.head, ns.tail, ident.name(), shown)
    table.location.foreach(location => UseAccess.check(session, location, s"the table of ALTER TABLE $shown"))
    Bridge.call(ManualTriggerRequest(table, settings), session)
  }

  private def session: ClassicSession = SparkSession.active.asInstanceOf[ClassicSession]

  /** A catalog table whose files a procedure converted (a parquet table now a Delta table): its
    * registration names the new provider, so the catalog serves it as a Delta/Qbeast table. */
  private def reregister(r: Registration): Unit = {
    val catalog = session.sessionState.catalog
    val ident = TableIdentifier(r.table, Some(r.database), Some(SessionCatalogName))
    val ct = catalog.getTableMetadata(ident)
    catalog.alterTable(ct.copy(provider = Some(r.provider), storage = ct.storage.copy(inputFormat = None, outputFormat = None, serde = None)))
    catalog.refreshTable(ident)
  }

  // --- Spark's procedure API ------------------------------------------------------------------------

  /** Rows computed by the call, served as they are. */
  private class Result(schema: StructType, result: Array[InternalRow], what: String) extends LocalScan {
    override def readSchema(): StructType = schema
    override def rows(): Array[InternalRow] = result
    override def description(): String = what
  }

  private class Procedure(spec: Spec) extends UnboundProcedure {
    override def name(): String = spec.name
    override def description(): String = spec.description

    /** A parameter given an argument takes the argument's type, so Spark casts nothing and the
      * Python side reads every value as it was given (`bytes_per_iter => '1g'`, `dry_run => 'maybe'`),
      * naming the argument when it is not one (`use.sql.procedures.typed_arguments`); its default,
      * which Spark checks against that type but never uses, becomes NULL. The others keep their
      * declared type and default. An argument is matched to its parameter by name, else by position. */
    override def bind(inputType: StructType): BoundProcedure = {
      val given = inputType.fields.toSeq.zipWithIndex.flatMap { case (field, i) =>
        spec.params.find(_.name.equalsIgnoreCase(field.name)).orElse(spec.params.lift(i)).map(_.name -> field.dataType)
      }.toMap
      new Bound(spec.copy(params = spec.params.map { p =>
        given.get(p.name).fold(p)(t => p.copy(dataType = t, default = p.default.map(_ => "NULL")))
      }))
    }
  }

  private class Bound(spec: Spec) extends BoundProcedure {
    override def name(): String = spec.name
    override def description(): String = spec.description
    override def isDeterministic: Boolean = false

    override lazy val parameters: Array[SparkParameter] = spec.params.map { p =>
      val b = SparkParameter.in(p.name, p.dataType).comment(p.doc)
      p.default.foreach(b.defaultValue)
      b.build()
    }.toArray

    /** Confined file access (`UseAccess`): the table's location lies under an allowed root, and
      * `force => true` on vacuum (which deletes files younger than the retention) is for
      * administrators, unless with `dry_run => true`, which deletes nothing and only lists the files.
      * Spark runs a procedure while analysing the CALL, before any check rule. */
    private def checkAccess(input: InternalRow, tables: Map[String, TableRef]): Unit = {
      tables.values.flatMap(_.location)
        .foreach(location => UseAccess.check(session, location, s"the table of CALL use_catalog.$Namespace.${spec.name}"))
      if (spec.name == "vacuum" && isTrue(input, "force") && !isTrue(input, "dry_run")) {
        UseAccess.requireAdmin(session, "VACUUM with force => true (without dry_run => true)")
      }
    }

    /** Whether the argument `name` is given as true (a default is false for the flags read here). */
    private def isTrue(input: InternalRow, name: String): Boolean = spec.params.zipWithIndex.exists { case (p, i) =>
      p.name == name && !input.isNullAt(i) && String.valueOf(input.get(i, p.dataType)).trim.equalsIgnoreCase("true")
    }

    override def call(input: InternalRow): util.Iterator[Scan] = {
      val s = session
      val tables = spec.params.zipWithIndex.collect {
        case (p, i) if p.isTable && !input.isNullAt(i) => p.name -> TableRefs.name(input.get(i, p.dataType).toString)
      }.toMap
      val schema = StructType(spec.params.map(p => StructField(p.name, p.dataType)))
      val arguments = ArrowRows.write(schema, Seq(input), s.sessionState.conf.sessionLocalTimeZone)
      checkAccess(input, tables)
      // The calling session goes along: the procedure runs with its settings (e.g. the
      // spark.qbeast.use.optimization.* defaults a JDBC client SET), as the Python API does.
      val reply = Bridge.call(CallProcedureRequest(spec.name, arguments, tables), s)
      reply.register.foreach(reregister)
      val (resultSchema, rows) = ArrowRows.read(reply.rows)
      Iterator[Scan](new Result(resultSchema, rows, s"CALL use_catalog.$Namespace.${spec.name}")).asJava
    }
  }
}
