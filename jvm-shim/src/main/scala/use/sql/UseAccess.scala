package use.sql

import java.net.URI
import java.nio.file.{Files, Paths}

import scala.util.Try

import org.apache.spark.SparkException
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.CurrentUserContext
import org.apache.spark.sql.catalyst.catalog.{CatalogStorageFormat, CatalogTable}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, SetTableLocation, TableSpecBase}
import org.apache.spark.sql.execution.command.{AddArchivesCommand, AddFilesCommand, AddJarsCommand, AlterTableAddPartitionCommand,
  AlterTableSetLocationCommand, CreateFunctionCommand, LoadDataCommand, SetCommand}
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, InsertIntoHadoopFsRelationCommand, LogicalRelation}
import org.apache.spark.sql.execution.datasources.v2.{DataSourceV2Relation, FileTable}

/** Confined file access (`spark.qbeast.use.allowedRoots`, set by `use serve`): every path a
  * statement reads or writes lies under one of the roots, or the statement is refused before it
  * runs. Off (nothing checked) in a session without the setting, as the Python API's sessions are.
  *
  * The rule (`isAllowed`, `normalize`) mirrors `use.server.access` in Python, and both are tested on
  * the same cases: a local path is resolved as the OS opens it (symlinks followed, `..` applied after
  * them, a missing tail kept as written), another URI normalised lexically; a path is allowed when it
  * is a root or lies under one.
  *
  * Also here: the settings a SQL session may not change while confinement is on (they would widen it
  * or its checks: `ProtectedKeys`), and who is an administrator (`spark.qbeast.use.admins`: the users
  * who may `VACUUM ... force => true`).
  */
object UseAccess {
  val AllowedRootsKey = "spark.qbeast.use.allowedRoots"
  val AdminsKey = "spark.qbeast.use.admins"
  /** The JDBC user of a session, set by the server when the session opens (`use.shim.ThriftErrors`). */
  val SessionUserKey = "spark.qbeast.use.session.user"

  /** Keys a SQL session may not SET while confinement is on (`use.server.access.PROTECTED_KEYS`). */
  val ProtectedKeys: Set[String] = Set(AllowedRootsKey, AdminsKey, SessionUserKey,
    "spark.sql.legacy.allowNonEmptyLocationInCTAS", "spark.databricks.delta.retentionDurationCheck.enabled")
    .map(_.toLowerCase(java.util.Locale.ROOT))

  private val MaxLinks = 40

  def isProtected(key: String): Boolean = ProtectedKeys.contains(key.trim.toLowerCase(java.util.Locale.ROOT))

  def parseRoots(value: String): Seq[String] = value.split(",").toSeq.map(_.trim).filter(_.nonEmpty)

  /** The session's roots; None when confinement is off. */
  def roots(spark: SparkSession): Option[Seq[String]] = spark.conf.getOption(AllowedRootsKey).map(parseRoots)

  /** `path` as the rule compares it (see `use.server.access.normalize`). */
  def normalize(path: String): String = {
    val text = path.trim
    val uri = Try(new URI(text)).toOption
    val scheme = uri.flatMap(u => Option(u.getScheme)).map(_.toLowerCase(java.util.Locale.ROOT))
    scheme match {
      case None => realpath(text)
      case Some("file") => realpath(Option(uri.get.getPath).filter(_.nonEmpty).getOrElse("/"))
      case Some(s) =>
        val body = Option(uri.get.getPath).filter(_.nonEmpty).map(p => lexical(p)).getOrElse("/")
        s"$s://${Option(uri.get.getRawAuthority).getOrElse("")}${if (body == "/") "" else body}"
    }
  }

  /** `..` and `.` applied to an absolute path as text (another file system's path). */
  private def lexical(path: String): String = {
    val out = scala.collection.mutable.ArrayBuffer.empty[String]
    path.split("/").foreach {
      case "" | "." =>
      case ".." => if (out.nonEmpty) out.remove(out.length - 1)
      case c => out += c
    }
    "/" + out.mkString("/")
  }

  /** Python's `os.path.realpath` (not strict): component by component, each symlink replaced by
    * its target (relative to its directory), `..` taken from the path resolved so far. */
  private def realpath(path: String): String = {
    val start = if (path.startsWith("/")) "" else realpath(System.getProperty("user.dir"))
    var resolved = if (start == "/") "" else start
    var pending = path.split("/").toList.filter(_.nonEmpty)
    var links = 0
    while (pending.nonEmpty) {
      val c = pending.head
      pending = pending.tail
      if (c == ".") ()
      else if (c == "..") resolved = resolved.substring(0, math.max(resolved.lastIndexOf('/'), 0))
      else {
        val next = s"$resolved/$c"
        val link = Try(Paths.get(next)).toOption.filter(p => Files.isSymbolicLink(p))
        link match {
          case Some(p) =>
            links += 1
            if (links > MaxLinks) throw new UseAccessDenied(s"too many symbolic links under $path")
            val target = Files.readSymbolicLink(p).toString
            if (target.startsWith("/")) resolved = ""
            pending = target.split("/").toList.filter(_.nonEmpty) ++ pending
          case None => resolved = next
        }
      }
    }
    if (resolved.isEmpty) "/" else resolved
  }

  /** Whether `path` is one of `roots` or lies under one. */
  def isAllowed(path: String, roots: Seq[String]): Boolean = {
    val target = normalize(path)
    roots.exists { root =>
      val base = normalize(root)
      target == base || target.startsWith(base.stripSuffix("/") + "/")
    }
  }

  /** For Python's tests: the same cases on both sides (`java.util.List` from py4j). */
  def isAllowed(path: String, roots: java.util.List[String]): Boolean = {
    import scala.jdk.CollectionConverters._
    isAllowed(path, roots.asScala.toSeq)
  }

  private def refused(what: String, path: String, roots: Seq[String]): UseAccessDenied = new UseAccessDenied(
    s"$what '$path' is outside the directories this server may read and write (${roots.mkString(", ")}): start " +
      "`use serve` with --allowed-root DIR (repeatable) to allow another directory, or keep the files under one of them")

  /** Refuses `path` if confinement is on in `spark` and `path` lies under no root. */
  def check(spark: SparkSession, path: String, what: String): Unit =
    roots(spark).foreach(rs => if (!isAllowed(path, rs)) throw refused(what, path, rs))

  /** The user running the statement: the JDBC user on a Thrift server's thread, else the process owner. */
  def currentUser: String = CurrentUserContext.getCurrentUser

  /** Refuses `what` unless the current user is an administrator; nothing checked where
    * `spark.qbeast.use.admins` is not set (the Python API's sessions). */
  def requireAdmin(spark: SparkSession, what: String): Unit = spark.conf.getOption(AdminsKey).foreach { value =>
    val admins = parseRoots(value)
    val user = currentUser
    if (!admins.contains(user)) {
      val who = if (admins.isEmpty) "no user is (start `use serve` with --admin USER to name them)"
        else s"the administrators are ${admins.mkString(", ")} (`use serve --admin`)"
      throw new UseAccessDenied(s"$what is for administrators only; $user is not one: $who")
    }
  }

  /** Jobs of a JDBC session's statement carry its user in their description (`[user NAME] <statement>`,
    * as the Spark UI and event logs show it). Spark's Thrift server sets the description to the
    * statement's text on the statement's thread before analysing it; this runs in the analysis. */
  def tagJobDescription(spark: SparkSession): Unit = spark.conf.getOption(SessionUserKey).foreach { user =>
    val sc = spark.sparkContext
    val tag = s"[user $user]"
    val description = Option(sc.getLocalProperty("spark.job.description")).getOrElse("")
    if (!description.startsWith(tag)) sc.setLocalProperty("spark.job.description", if (description.isEmpty) tag else s"$tag $description")
  }

  /** Every path `plan` reads or writes, with what the statement does there. */
  def paths(plan: LogicalPlan): Seq[(String, String)] = {
    val found = scala.collection.mutable.ArrayBuffer.empty[(String, String)]
    def fromValue(value: Any, what: String): Unit = value match {
      case t: CatalogTable => t.storage.locationUri.foreach(u => found += (u.toString -> s"the location of ${t.identifier.unquotedString}"))
      case s: CatalogStorageFormat => s.locationUri.foreach(u => found += (u.toString -> what))
      case t: TableSpecBase => t.location.foreach(l => found += (l -> "LOCATION"))
      case Some(v) => fromValue(v, what)
      case _ =>
    }
    def visit(p: LogicalPlan): Unit = p.foreach { node =>
      node match {
        case LogicalRelation(fs: HadoopFsRelation, _, _, _, _) => fs.location.rootPaths.foreach(r => found += (r.toString -> "the path"))
        case r: DataSourceV2Relation => r.table match {
          case f: FileTable => f.fileIndex.rootPaths.foreach(x => found += (x.toString -> "the path"))
          case t: UseTable => found += (t.meta.uri -> "the table path")
          case _ =>
        }
        case c: InsertIntoHadoopFsRelationCommand => found += (c.outputPath.toString -> "the output path")
        case c: LoadDataCommand => found += (c.path -> "LOAD DATA's path")
        case c: AddJarsCommand => c.paths.foreach(x => found += (x -> "ADD JAR's path"))
        case c: AddFilesCommand => c.paths.foreach(x => found += (x -> "ADD FILE's path"))
        case c: AddArchivesCommand => c.paths.foreach(x => found += (x -> "ADD ARCHIVE's path"))
        case c: CreateFunctionCommand => c.resources.foreach(r => found += (r.uri -> "the function's resource"))
        case c: AlterTableSetLocationCommand => found += (c.location -> "SET LOCATION")
        case c: AlterTableAddPartitionCommand => c.partitionSpecsAndLocs.flatMap(_._2).foreach(l => found += (l -> "the partition's LOCATION"))
        case c: SetTableLocation => found += (c.location -> "SET LOCATION")
        case _ =>
      }
      node.productIterator.foreach(fromValue(_, "the directory"))
      node.innerChildren.foreach { case c: LogicalPlan => visit(c); case _ => }
      node.subqueries.foreach(visit)
    }
    visit(plan)
    found.toSeq.distinct
  }
}

/** A statement refused by confined file access (SQLSTATE 42501, insufficient privilege). Not an
  * AnalysisException: Spark re-wraps those raised by check rules into one without their SQLSTATE. */
class UseAccessDenied(message: String) extends SparkException(s"[${UseException.Kinds.AccessDenied}] $message") {
  override def getSqlState: String = UseException.sqlState(UseException.Kinds.AccessDenied)
}

/** The analyser's check of confined file access (`UseAccess`), on every analysed plan of a session
  * with `spark.qbeast.use.allowedRoots`: paths outside the roots, and a SET of a protected key; and
  * a JDBC session's user in its jobs' descriptions. */
class UseAccessCheck(spark: SparkSession) extends (LogicalPlan => Unit) {
  override def apply(plan: LogicalPlan): Unit = {
    UseAccess.tagJobDescription(spark)
    confine(plan)
  }

  private def confine(plan: LogicalPlan): Unit = UseAccess.roots(spark).foreach { _ =>
    plan.foreach {
      case SetCommand(Some((key, Some(_)))) if UseAccess.isProtected(key) =>
        throw new UseAccessDenied(s"SET $key is not allowed in a session of this server: it would widen what statements may " +
          "read, write or delete; the server's operator sets it when starting `use serve`")
      case _ =>
    }
    UseAccess.paths(plan).foreach { case (path, what) => UseAccess.check(spark, path, what) }
  }
}
