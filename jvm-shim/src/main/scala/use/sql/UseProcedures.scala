package use.sql

import java.util

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.node.{JsonNodeFactory, ObjectNode}
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.{InternalRow, TableIdentifier}
import org.apache.spark.sql.catalyst.util.{ArrayBasedMapData, ArrayData, GenericArrayData}
import org.apache.spark.sql.classic.{SparkSession => ClassicSession}
import org.apache.spark.sql.connector.catalog.{Identifier, TableCatalog, TableChange}
import org.apache.spark.sql.connector.catalog.TableChange.SetProperty
import org.apache.spark.sql.connector.catalog.procedures.{BoundProcedure, ProcedureParameter, UnboundProcedure}
import org.apache.spark.sql.connector.read.{LocalScan, Scan}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

/** `CALL use_catalog.system.<name>(...)` and the manual trigger (see `UseLakeCatalog`).
  *
  * Generic: the procedures (names, descriptions, parameters with their Spark types and SQL
  * defaults) are the Python side's (`use.sql.procedures`), asked for once. A call sends its
  * arguments as JSON (a `table` parameter resolved here first, as Spark resolves names: the
  * session's current catalog and database) and serves the rows Python returns (a Spark schema and
  * typed JSON rows) as a `LocalScan`. Spark runs a procedure while analysing the CALL.
  */
object UseProcedures {

  val Namespace = "system"
  private val SessionCatalogName = "spark_catalog"
  /** `<provider>.`/path``: a table named by its path (parquet: a directory to convert). */
  private val PathProviders = Set("delta", "qbeast", "parquet")
  private val json = JsonNodeFactory.instance

  private case class Param(name: String, dataType: DataType, default: Option[String], doc: String, isTable: Boolean)

  private case class Spec(name: String, description: String, params: Seq[Param])

  @volatile private var cached: Map[String, Spec] = _

  /** The procedures, asked from Python once per JVM (they are fixed by the installed package). */
  private def specs: Map[String, Spec] = {
    if (cached == null) {
      val answer = Bridge.call("procedures", Bridge.obj())
      cached = answer.get("procedures").elements().asScala.map { p =>
        val params = p.get("parameters").elements().asScala.map { q =>
          Param(q.get("name").asText(), DataType.fromDDL(q.get("type").asText()), Bridge.optText(q, "default"),
            q.get("doc").asText(), q.get("table").asBoolean(false))
        }.toSeq
        p.get("name").asText() -> Spec(p.get("name").asText(), p.get("description").asText(), params)
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
    val settings = Bridge.obj()
    changes.foreach {
      case set: SetProperty => settings.put(set.property(), set.value())
      case other => throw new UseException(s"ALTER TABLE $shown only takes SET TBLPROPERTIES ('use.optimization.type'=..., ...): " +
        s"it triggers one optimization with those settings and changes nothing (${other.getClass.getSimpleName} is not " +
        s"possible here); change the table itself in its own catalog, e.g. ALTER TABLE ${(ns :+ ident.name()).mkString(".")}",
        UseException.Kinds.NotSupported)
    }
    val req = Bridge.obj()
    val table = tableRef(session, ns.head, ns.tail, ident.name(), shown)
    Bridge.optText(table, "location").foreach(location => UseAccess.check(session, location, s"the table of ALTER TABLE $shown"))
    req.set[ObjectNode]("table", table)
    req.set[ObjectNode]("settings", settings)
    Bridge.call("manualTrigger", req, session)
  }

  // --- table arguments ------------------------------------------------------------------------------

  private def session: ClassicSession = SparkSession.active.asInstanceOf[ClassicSession]

  private def looksLikePath(text: String): Boolean =
    text.startsWith("/") || text.startsWith("file:") || text.matches("^[A-Za-z][A-Za-z0-9+.-]*://.*")

  private def byPath(name: String, location: String): ObjectNode = {
    val ref = Bridge.obj()
    ref.put("name", name)
    ref.put("location", location)
    ref.put("byPath", true)
    ref
  }

  /** A `table` argument as Spark resolves a name (1 part: the current catalog and database; more:
    * a leading registered catalog, else the current catalog), or a path (also delta.`/path`). */
  def resolveTable(text: String): ObjectNode = {
    val given = text.trim
    if (looksLikePath(given)) return byPath(given, given)
    val s = session
    val parts = try s.sessionState.sqlParser.parseMultipartIdentifier(given) catch {
      case NonFatal(_) => throw new UseException(s"table '$text' is neither a table name (table, db.table or " +
        "catalog.db.table; quote odd names with backticks) nor a path", UseException.Kinds.InvalidArgument)
    }
    val manager = s.sessionState.catalogManager
    parts match {
      case Seq(provider, location) if PathProviders.contains(provider.toLowerCase) && looksLikePath(location) =>
        byPath(given, location)
      case Seq(t) => tableRef(s, manager.currentCatalog.name(), manager.currentNamespace.toSeq, t, given)
      case head +: rest if rest.length >= 2 && manager.isCatalogRegistered(head) => tableRef(s, head, rest.init, rest.last, given)
      case _ => tableRef(s, manager.currentCatalog.name(), parts.init, parts.last, given)
    }
  }

  /** Location and provider of `cat`.`ns`.`t`: the metastore entry for the session catalog (no log
    * read), the table's properties for another catalog. */
  private[sql] def tableRef(s: ClassicSession, cat: String, ns: Seq[String], t: String, given: String): ObjectNode = {
    val full = ((cat +: ns) :+ t).mkString(".")
    def missing = new UseException(s"no table $full (from '$given'): check the name (table, db.table or catalog.db.table, " +
      "resolved in the current catalog and database) or give the table's path", UseException.Kinds.TableNotFound)
    val ref = Bridge.obj()
    val (location, provider) =
      if (cat.equalsIgnoreCase(SessionCatalogName)) {
        if (ns.length != 1) throw missing
        val ct = try s.sessionState.catalog.getTableMetadata(TableIdentifier(t, Some(ns.head), Some(SessionCatalogName)))
        catch { case NonFatal(_) => throw missing }
        // the registration, for a procedure that converts the table's files (CONVERT TO DELTA of a parquet table)
        ref.put("database", ct.identifier.database.getOrElse(ns.head))
        ref.put("table", ct.identifier.table)
        ref.put("partitionSchema", ct.partitionSchema.json)
        (ct.storage.locationUri.map(_.toString), ct.provider.orElse(Some(ct.tableType.name.toLowerCase)))
      } else {
        val catalog = try s.sessionState.catalogManager.catalog(cat) catch { case NonFatal(_) => throw missing }
        catalog match {
          case _: UseLakeCatalog => throw missing
          case tc: TableCatalog =>
            val props = try tc.loadTable(Identifier.of(ns.toArray, t)).properties() catch { case NonFatal(_) => throw missing }
            (Option(props.get(TableCatalog.PROP_LOCATION)), Option(props.get(TableCatalog.PROP_PROVIDER)))
          case _ => throw missing
        }
      }
    ref.put("name", full)
    location.foreach(l => ref.put("location", l))
    provider.foreach(p => ref.put("provider", p))
    ref.put("byPath", false)
    ref
  }

  /** A catalog table whose files a procedure converted (a parquet table now a Delta table): its
    * registration names the new provider, so the catalog serves it as a Delta/Qbeast table. */
  private def reregister(r: JsonNode): Unit = {
    val catalog = session.sessionState.catalog
    val ident = TableIdentifier(r.get("table").asText(), Some(r.get("database").asText()), Some(SessionCatalogName))
    val ct = catalog.getTableMetadata(ident)
    catalog.alterTable(ct.copy(provider = Some(r.get("provider").asText()),
      storage = ct.storage.copy(inputFormat = None, outputFormat = None, serde = None)))
    catalog.refreshTable(ident)
  }

  // --- values between Catalyst and JSON -------------------------------------------------------------

  private def toJson(value: Any, dt: DataType): JsonNode = (value, dt) match {
    case (null, _) => json.nullNode()
    case (v: UTF8String, StringType) => json.textNode(v.toString)
    case (v: Int, IntegerType) => json.numberNode(v)
    case (v: Long, LongType) => json.numberNode(v)
    case (v: Double, DoubleType) => json.numberNode(v)
    case (v: Boolean, BooleanType) => json.booleanNode(v)
    case (v: ArrayData, ArrayType(et, _)) =>
      val a = Bridge.arr()
      (0 until v.numElements()).foreach(i => a.add(if (v.isNullAt(i)) json.nullNode() else toJson(v.get(i, et), et)))
      a
    case _ => throw new UseException(s"a procedure argument of type ${dt.simpleString} is not supported", UseException.Kinds.Internal)
  }

  private def fromJson(node: JsonNode, dt: DataType): Any =
    if (node == null || node.isNull) null
    else dt match {
      case StringType => UTF8String.fromString(node.asText())
      case IntegerType => node.asInt()
      case LongType => node.asLong()
      case DoubleType => node.asDouble()
      case BooleanType => node.asBoolean()
      case ArrayType(et, _) => new GenericArrayData(node.elements().asScala.map(fromJson(_, et)).toArray)
      case MapType(kt, vt, _) =>
        val entries = node.fields().asScala.toSeq
        new ArrayBasedMapData(new GenericArrayData(entries.map(e => fromJson(json.textNode(e.getKey), kt)).toArray),
          new GenericArrayData(entries.map(e => fromJson(e.getValue, vt)).toArray))
      case other => throw new UseException(s"a procedure result of type ${other.simpleString} is not supported", UseException.Kinds.Internal)
    }

  // --- Spark's procedure API ------------------------------------------------------------------------

  /** Rows computed by the call, served as they are. */
  private class Result(schema: StructType, result: Array[InternalRow], what: String) extends LocalScan {
    override def readSchema(): StructType = schema
    override def rows(): Array[InternalRow] = result
    override def description(): String = what
  }

  /** Types Spark would cast a text argument to, failing without naming the argument. */
  private def castFromText(dt: DataType): Boolean = dt match {
    case _: NumericType | BooleanType => true
    case _ => false
  }

  private class Procedure(spec: Spec) extends UnboundProcedure {
    override def name(): String = spec.name
    override def description(): String = spec.description

    /** Text given for a number or a boolean parameter (`bytes_per_iter => '1g'`, or 'lots') is
      * declared text in the bound procedure, so Spark passes it on uncast and the Python side reads
      * it, naming the argument when it is not one (`use.sql.procedures.typed_arguments`). An
      * argument is matched to its parameter by name, else by position. */
    override def bind(inputType: StructType): BoundProcedure = {
      val textual = inputType.fields.toSeq.zipWithIndex.flatMap { case (field, i) =>
        val param = spec.params.find(_.name.equalsIgnoreCase(field.name)).orElse(spec.params.lift(i))
        param.filter(p => field.dataType == StringType && castFromText(p.dataType)).map(_.name)
      }.toSet
      new Bound(spec.copy(params = spec.params.map(p => if (textual(p.name)) p.copy(dataType = StringType) else p)))
    }
  }

  private class Bound(spec: Spec) extends BoundProcedure {
    override def name(): String = spec.name
    override def description(): String = spec.description
    override def isDeterministic: Boolean = false

    override lazy val parameters: Array[ProcedureParameter] = spec.params.map { p =>
      val b = ProcedureParameter.in(p.name, p.dataType).comment(p.doc)
      p.default.foreach(b.defaultValue)
      b.build()
    }.toArray

    /** Confined file access (`UseAccess`): the table's location lies under an allowed root, and
      * `force => true` on vacuum (which deletes files younger than the retention) is for
      * administrators. Spark runs a procedure while analysing the CALL, before any check rule. */
    private def checkAccess(args: ObjectNode): Unit = {
      spec.params.filter(_.isTable).flatMap(p => Option(args.get(p.name))).flatMap(Bridge.optText(_, "location"))
        .foreach(location => UseAccess.check(session, location, s"the table of CALL use_catalog.$Namespace.${spec.name}"))
      val force = Option(args.get("force")).exists(v => v.asText().trim.equalsIgnoreCase("true"))
      if (spec.name == "vacuum" && force) UseAccess.requireAdmin(session, "VACUUM with force => true")
    }

    override def call(input: InternalRow): util.Iterator[Scan] = {
      val args = Bridge.obj()
      spec.params.zipWithIndex.foreach { case (p, i) =>
        val value = if (input.isNullAt(i)) null else input.get(i, p.dataType)
        if (p.isTable && value != null) args.set[JsonNode](p.name, resolveTable(value.toString))
        else args.set[JsonNode](p.name, toJson(value, p.dataType))
      }
      checkAccess(args)
      val req = Bridge.obj()
      req.put("procedure", spec.name)
      req.set[ObjectNode]("args", args)
      // The calling session goes along: the procedure runs with its settings (e.g. the
      // spark.qbeast.use.optimization.* defaults a JDBC client SET), as the Python API does.
      val answer = Bridge.call("callProcedure", req, session)
      Option(answer.get("register")).foreach(reregister)
      val schema = DataType.fromJson(answer.get("schema").asText()).asInstanceOf[StructType]
      val rows = answer.get("rows").elements().asScala.map { r =>
        InternalRow.fromSeq(schema.fields.toSeq.zipWithIndex.map { case (f, i) => fromJson(r.get(i), f.dataType) })
      }.toArray
      Iterator[Scan](new Result(schema, rows, s"CALL use_catalog.$Namespace.${spec.name}")).asJava
    }
  }
}
