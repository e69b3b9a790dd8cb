package use.sql

import java.lang.reflect.{InvocationHandler, InvocationTargetException, Method, Proxy}

import org.apache.spark.sql.catalyst.expressions.Literal
import org.apache.spark.sql.catalyst.parser.ParserInterface
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.logical.{LeafNode, Limit, LogicalPlan}

/** The SQL parser of a session with USE's extension: Spark's own, plus the two forms of Delta's
  * `DESCRIBE HISTORY` that Spark's grammar cannot read at all (the plain `DESCRIBE HISTORY <table>`
  * parses, as a column of a table named HISTORY, and `UseAnalysis` turns it into the `history`
  * insight table):
  *  - `DESCRIBE HISTORY <table> LIMIT <n>`: the statement without its LIMIT, under a limit of n rows
  *    (the newest n commits, as Delta's);
  *  - `DESCRIBE HISTORY '<path>'` (a table by its location, quoted): read as ``delta.`<path>` ``.
  *
  * Why a proxy rather than a class: `ParserInterface` gains abstract methods across Spark versions
  * (4.3 adds `splitStatements`, of a type 4.1 does not have), so no one class compiles against
  * both; the proxy implements the interface of whichever Spark loads it and hands every call but
  * the two `parsePlan` forms to Spark's parser unchanged. */
object UseParser {
  /** `DESC[RIBE] HISTORY <name> [LIMIT <x>]`, case-insensitive, over the whole statement. */
  private val History = """(?is)\s*(desc|describe)\s+history\s+(.+?)(?:\s+limit\s+(\S+?))?\s*;?\s*""".r
  private val Quoted = """(?s)'(.*)'|"(.*)"""".r

  def wrap(delegate: ParserInterface): ParserInterface =
    Proxy.newProxyInstance(classOf[ParserInterface].getClassLoader, Array[Class[_]](classOf[ParserInterface]), new Handler(delegate))
      .asInstanceOf[ParserInterface]

  /** The statement Spark's parser is given instead of `sql`, and the limit to put over its plan;
    * None for every statement but the two forms above. */
  private[sql] def rewrite(sql: String): Option[(String, Option[Int])] = sql match {
    case History(verb, name, limit) =>
      val table = name.trim match {
        case Quoted(single, double) => "delta.`" + Option(single).getOrElse(double).replace("`", "``") + "`"
        case other => other
      }
      if (limit == null && table == name.trim) None
      else Some((s"$verb HISTORY $table", Option(limit).map(limitOf)))
    case _ => None
  }

  private def limitOf(raw: String): Int = scala.util.Try(raw.toInt).toOption.filter(_ >= 0).getOrElse {
    throw new UseException(
      s"DESCRIBE HISTORY ... LIMIT takes the number of newest commits to show (an integer of 0 or more), got '$raw'; " +
        "e.g. DESCRIBE HISTORY db.t LIMIT 5", UseException.Kinds.InvalidArgument)
  }

  /** A statement refused as it was parsed (a bad LIMIT): its error is raised by `UseAnalysis`, as
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
