package use.sql

import java.lang.reflect.{InvocationHandler, InvocationTargetException, Method, Proxy}

import org.apache.spark.sql.catalyst.expressions.{Attribute, Literal}
import org.apache.spark.sql.catalyst.parser.ParserInterface
import org.apache.spark.sql.catalyst.plans.logical.{LeafNode, Limit, LogicalPlan}

/** The SQL parser of a session with USE's extension: Spark's own, plus the Delta statements that
  * Spark's grammar cannot read at all, each rewritten into the statement that does the same here:
  *  - `DESCRIBE HISTORY <table> LIMIT <n>`: the statement without its LIMIT, under a limit of n rows
  *    (the newest n commits, as Delta's; the plain `DESCRIBE HISTORY <table>` parses, as a column of
  *    a table named HISTORY, and `UseAnalysis` turns it into the `history` insight table);
  *  - `DESCRIBE HISTORY '<path>'` and `DESCRIBE DETAIL '<path>'` (a table by its location,
  *    quoted): read as ``delta.`<path>` ``;
  *  - `OPTIMIZE <table> [WHERE <predicate>] [ZORDER BY (<col>, ...)]`: `CALL
  *    use_catalog.system.optimize(table => ..., where => ..., zorder_by => ...)` (the table's
  *    optimization, of the partitions the predicate selects; with ZORDER BY, Delta's Z-order);
  *  - `VACUUM <table> [FULL] [RETAIN <n> HOURS] [DRY RUN]`: `CALL use_catalog.system.vacuum(table
  *    => ..., retention_hours => n, dry_run => true)`;
  *  - `RESTORE [TABLE] <table> [TO] VERSION AS OF <n>` (or `TIMESTAMP AS OF '<time>'`): `CALL
  *    use_catalog.system.restore(table => ..., version => n)` (or `timestamp => ...`).
  *  - `CONVERT TO DELTA <table> [NO STATISTICS] [PARTITIONED BY (<col> <type>, ...)]`: `CALL
  *    use_catalog.system.convert_to_delta(table => ..., partitioned_by => '...', statistics => false)`
  *    (`parquet.`/path``, a quoted path or a parquet table of the catalog).
  *  - `GENERATE <mode> FOR TABLE <table>`: `CALL use_catalog.system.generate(table => ..., mode => '<mode>')`
  *    (Delta's symlink format manifests).
  * The forms USE does not have (VACUUM LITE) and bad values are refused with
  * one clear error each; `<table>` is a name or a path as the procedures take it (also quoted).
  *
  * Why a proxy rather than a class: `ParserInterface` gains abstract methods across Spark versions
  * (4.3 adds `splitStatements`, of a type 4.1 does not have), so no one class compiles against
  * both; the proxy implements the interface of whichever Spark loads it and hands every call but
  * the two `parsePlan` forms to Spark's parser unchanged. */
object UseParser {
  /** `DESC[RIBE] HISTORY|DETAIL <name> [LIMIT <x>]`, case-insensitive, over the whole statement. */
  private val Describe = """(?is)\s*(desc|describe)\s+(history|detail)\s+(.+?)(?:\s+limit\s+(\S+?))?\s*;?\s*""".r
  private val Quoted = """(?s)'(.*)'|"(.*)"""".r
  /** `OPTIMIZE <table> [WHERE <predicate>] [ZORDER BY <columns>]`. */
  private val Optimize = """(?is)\s*optimize\s+(.+?)(?:\s+where\s+(.+?))?(?:\s+zorder\s+by\s+(.+?))?\s*;?\s*""".r
  /** `CONVERT TO DELTA <table> [NO STATISTICS] [PARTITIONED BY (<col type>, ...)]`. */
  private val Convert = """(?is)\s*convert\s+to\s+delta\s+(.+?)(\s+no\s+statistics)?(?:\s+partitioned\s+by\s*\((.+)\))?\s*;?\s*""".r
  /** `GENERATE <mode> FOR TABLE <table>`. */
  private val Generate = """(?is)\s*generate\s+(\S+)\s+for\s+table\s+(.+?)\s*;?\s*""".r
  /** `RESTORE [TABLE] <table> [TO] VERSION|TIMESTAMP AS OF <x>`. */
  private val Restore = """(?is)\s*restore\s+(?:table\s+)?(.+?)\s+(?:to\s+)?(version|timestamp)\s+as\s+of\s+(.+?)\s*;?\s*""".r
  /** `ALTER TABLE delta.`<path>` ADD|DROP CONSTRAINT ...` (or `qbeast.`<path>``). */
  private val PathConstraint = """(?is)\s*alter\s+table\s+((?:delta|qbeast)\s*\.\s*`(?:[^`]|``)*`)\s+(add|drop)\s+constraint\b.*""".r
  /** `VACUUM <table> [LITE|FULL] [RETAIN <x> HOURS] [DRY RUN]`. */
  private val Vacuum = """(?is)\s*vacuum\s+(.+?)(?:\s+(lite|full))?(?:\s+retain\s+(\S+)\s+hours)?(\s+dry\s+run)?\s*;?\s*""".r

  def wrap(delegate: ParserInterface): ParserInterface =
    Proxy.newProxyInstance(classOf[ParserInterface].getClassLoader, Array[Class[_]](classOf[ParserInterface]), new Handler(delegate))
      .asInstanceOf[ParserInterface]

  /** The statement Spark's parser is given instead of `sql`, and the limit to put over its plan;
    * None for every statement but the forms above (a UseException for a bad value in one). */
  private[sql] def rewrite(sql: String): Option[(String, Option[Int])] = sql match {
    case Describe(verb, what, name, limit) =>
      val table = name.trim match {
        case Quoted(single, double) => "delta.`" + Option(single).getOrElse(double).replace("`", "``") + "`"
        case other => other
      }
      if (limit == null && table == name.trim) None
      else Some((s"$verb $what $table", Option(limit).map(limitOf)))
    case Optimize(table, where, zorder) =>
      val args = Seq(s"table => ${literal(tableText(table))}") ++ Option(where).map(w => s"where => ${literal(w.trim)}") ++
        Option(zorder).map(z => s"zorder_by => ${literal(zorderColumns(z))}")
      Some((s"CALL use_catalog.system.optimize(${args.mkString(", ")})", None))
    case Vacuum(table, mode, retain, dryRun) =>
      if (mode != null && mode.equalsIgnoreCase("lite")) refuse(
        "VACUUM ... LITE is not supported: VACUUM lists the table's directory (FULL, the default); drop LITE")
      val hours = Option(retain).map { raw =>
        scala.util.Try(raw.toDouble).toOption.filter(h => h >= 0 && !h.isInfinite).getOrElse(refuse(
          s"VACUUM ... RETAIN takes a number of hours (0 or more), got '$raw'; e.g. VACUUM db.t RETAIN 168 HOURS"))
      }
      val args = Seq(s"table => ${literal(tableText(table))}") ++ hours.map(h => s"retention_hours => $h") ++
        Option(dryRun).map(_ => "dry_run => true")
      Some((s"CALL use_catalog.system.vacuum(${args.mkString(", ")})", None))
    case Convert(table, noStats, partitions) =>
      val args = Seq(s"table => ${literal(tableText(table))}") ++ Option(partitions).map(p => s"partitioned_by => ${literal(p.trim)}") ++
        Option(noStats).map(_ => "statistics => false")
      Some((s"CALL use_catalog.system.convert_to_delta(${args.mkString(", ")})", None))
    case Generate(mode, table) =>
      Some((s"CALL use_catalog.system.generate(table => ${literal(tableText(table))}, mode => ${literal(mode)})", None))
    case Restore(table, kind, at) =>
      val target = if (kind.equalsIgnoreCase("version")) {
        val v = scala.util.Try(at.trim.toLong).toOption.filter(_ >= 0).getOrElse(refuse(
          s"RESTORE ... VERSION AS OF takes a table version (an integer of 0 or more), got '${at.trim}'; e.g. RESTORE TABLE db.t TO VERSION AS OF 3"))
        s"version => $v"
      } else at.trim match {
        case Quoted(single, double) => s"timestamp => ${literal(Option(single).getOrElse(double))}"
        case other => refuse(
          s"RESTORE ... TIMESTAMP AS OF takes a quoted time, e.g. TIMESTAMP AS OF '2025-01-01 00:00:00' (UTC), got '$other'")
      }
      Some((s"CALL use_catalog.system.restore(table => ${literal(tableText(table))}, $target)", None))
    case PathConstraint(table, verb) => throw constraintsNotSupported(s"ALTER TABLE $table ${verb.toUpperCase(java.util.Locale.ROOT)} CONSTRAINT")
    case _ => None
  }

  /** Table constraints (Delta's CHECK constraints, the `checkConstraints` feature, and Spark's
    * PRIMARY/FOREIGN KEY, UNIQUE): USE does not enforce them on its writes, so it cannot add them.
    * The same error for a registered table (`UseAnalysis`) and a table named by its path (here:
    * Spark's session catalog fails on such a statement with a bare NoSuchElementException before any
    * analysis rule sees it). */
  private[sql] def constraintsNotSupported(statement: String): UseException = new UseException(
    s"$statement: table constraints (Delta's CHECK constraints, feature checkConstraints) are not supported by USE yet, " +
      "since its writes could not enforce them; check the rule in the job that writes (e.g. a filter or an assertion on " +
      "the DataFrame before the write), or add the constraint with delta-spark (USE then reads the table but does not " +
      "write it)", UseException.Kinds.NotSupported)

  private def refuse(message: String): Nothing = throw new UseException(message, UseException.Kinds.InvalidArgument)

  /** The table as the procedures' `table` argument takes it: a quoted path unquoted, a name as written. */
  private def tableText(raw: String): String = raw.trim match {
    case Quoted(single, double) => Option(single).getOrElse(double)
    case other => other
  }

  /** A Spark SQL string literal of `text` (backslashes and quotes escaped). */
  private[sql] def literal(text: String): String = "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

  /** `(a, `b c`)` or `a, b` -> `a,b c`: the procedure's `zorder_by`. */
  private def zorderColumns(raw: String): String = {
    val inner = raw.trim.stripPrefix("(").stripSuffix(")")
    val names = inner.split(",").map(_.trim.stripPrefix("`").stripSuffix("`")).toSeq
    if (names.isEmpty || names.exists(_.isEmpty)) refuse(
      s"OPTIMIZE ... ZORDER BY takes a list of columns, e.g. ZORDER BY (a, b), got '${raw.trim}'")
    names.mkString(",")
  }

  private def limitOf(raw: String): Int = scala.util.Try(raw.toInt).toOption.filter(_ >= 0).getOrElse(refuse(
    s"DESCRIBE HISTORY ... LIMIT takes the number of newest commits to show (an integer of 0 or more), got '$raw'; " +
      "e.g. DESCRIBE HISTORY db.t LIMIT 5"))

  /** A statement refused as it was parsed (a bad value, a form USE does not have): its error is raised by `UseAnalysis`, as
    * a parser may only throw Spark's ParseException (the proxy turns any other into an
    * UndeclaredThrowableException). */
  private[sql] case class Refused(error: UseException) extends LeafNode {
    override def output: Seq[Attribute] = Nil
  }

  private final class Handler(delegate: ParserInterface) extends InvocationHandler {
    override def invoke(proxy: AnyRef, method: Method, args: Array[AnyRef]): AnyRef = {
      val rewritten = method.getName match {
        case "parsePlan" | "parsePlanWithParameters" if args != null && args.nonEmpty =>
          args(0) match {
            case sql: String =>
              try rewrite(sql)
              catch { case e: UseException => return Refused(e) }
            case _ => None
          }
        case _ => None
      }
      rewritten match {
        case Some((sql, limit)) =>
          val changed = args.clone()
          changed(0) = sql
          val plan = call(method, changed).asInstanceOf[LogicalPlan]
          limit.fold(plan)(n => Limit(Literal(n), plan))
        case None => call(method, args)
      }
    }

    /** Spark's parser's own answer, its own exceptions (a ParseException) thrown as they are. */
    private def call(method: Method, args: Array[AnyRef]): AnyRef =
      try method.invoke(delegate, (if (args == null) Array.empty[AnyRef] else args): _*)
      catch { case e: InvocationTargetException if e.getCause != null => throw e.getCause }
  }
}
