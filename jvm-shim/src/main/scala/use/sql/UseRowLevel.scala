/** `DELETE` and `UPDATE` of a USE table (`UseRowLevelCommand`), and what they share with MERGE
  * (`RowLevel`): the target's file scan, the retries after a lost conflict, the checks. */
package use.sql

import java.net.URI

import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.catalyst.analysis.EliminateSubqueryAliases
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference, Cast, EqualNullSafe, Expression, If, InputFileName, Literal, Not, SubqueryExpression}
import org.apache.spark.sql.catalyst.expressions.aggregate.Count
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Assignment, Filter, LogicalPlan, Project}
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.LongType

/** What a row-level statement does to the rows its condition matches. */
sealed trait RowChange
/** `DELETE FROM t [WHERE cond]`: the matching rows go. */
case object Deletion extends RowChange
/** `UPDATE t SET c = v, ... [WHERE cond]`: each matching row takes the new values (`columns`: one
  * value per column of the table, in order; the column itself where the statement assigns nothing). */
final case class Modification(columns: Seq[Expression]) extends RowChange

/** The resolved condition and new values of a DELETE or UPDATE, held outside the command's
  * expressions: Spark's analysis checks refuse an IN/EXISTS subquery in a command of ours (they
  * allow them in its own DELETE and UPDATE nodes), and they are analyzed and optimized again,
  * subqueries included, in the plans the command runs (a `Filter`, a `Project`). */
final class RowLevelSpec(val condition: Expression, val change: RowChange) extends Serializable {
  override def toString: String = change match {
    case Deletion => s"DELETE WHERE ${condition.sql}"
    case Modification(cols) => s"UPDATE SET ${cols.map(_.sql).mkString(", ")} WHERE ${condition.sql}"
  }
}

/** `DELETE FROM` / `UPDATE` on a USE table, copy-on-write as Delta's without deletion vectors, one
  * commit. The files the condition can match are planned from one snapshot (partition, stats and,
  * for Qbeast tables, cube-space pruning: the scan planning of every query). A DELETE whose
  * condition names partition columns only (or that has none) removes those files whole and reads
  * nothing. Otherwise a first pass finds the files holding a matching row and counts the rows; the
  * rows that replace those files go to the Python side (`use.sql.dml.rewrite_rows`), which writes
  * them and commits them with the removes: for a DELETE the rows that do not match
  * (`NOT (cond <=> true)`: a row whose condition is null stays, as in Delta), for an UPDATE every
  * row, the matching ones with their new values. Returns Delta's `num_affected_rows`. A commit that
  * loses to a concurrent one that removed a file it rewrites runs again on the new snapshot. */
case class UseRowLevelCommand(target: LogicalPlan, spec: RowLevelSpec) extends LeafRunnableCommand {

  override val output: Seq[Attribute] = Seq(AttributeReference("num_affected_rows", LongType, nullable = false)())

  private def condition: Expression = spec.condition

  private def operation: String = spec.change match {
    case Deletion => "DELETE"
    case _: Modification => "UPDATE"
  }

  override def run(spark: SparkSession): Seq[Row] = {
    RowLevel.requireDeterministic(operation, ("condition" -> condition) +: (spec.change match {
      case Modification(cols) => cols.map("new value" -> _)
      case Deletion => Nil
    }))
    val (l, fs, index) = RowLevel.scanOf(target, operation)
    Seq(Row(RowLevel.withRetries(index.meta)(meta => once(spark, l, fs, meta))))
  }

  /** One attempt on the snapshot `meta`: the rows deleted or updated. */
  private def once(spark: SparkSession, l: LogicalRelation, fs: HadoopFsRelation, meta: TableMeta): Long = {
    val cond = Option(condition).filterNot(_ == Literal.TrueLiteral)
    val plan = PlannedScan.plan(Seq(ScanQuery(meta, Some(meta.version), None, cond))).head
    val resolver = SQLConf.get.resolver
    val wholeFiles = spec.change == Deletion && cond.forall(c => !SubqueryExpression.hasSubquery(c) &&
      c.references.forall(a => meta.partitionColumns.exists(p => resolver(p, a.name))))
    val predicate = cond.map(_.sql).getOrElse("true")
    val answer = if (wholeFiles) {
      // every row of the files in the matching partitions goes: remove them whole
      val files = RowLevel.planned(meta, plan).listFiles(cond.toSeq, Nil).flatMap(_.files).map(_.getPath.toUri.getPath).toSet
      val remove = plan.files.map(_.uri).filter(u => files.contains(RowLevel.pathOf(u)))
      Bridge.call(RewriteRowsRequest(operation, meta.ref, meta.version, predicate, remove, None, wholeFiles = true, None), null,
        cond.orNull)
    } else {
      val relation = RowLevel.over(l, fs, meta, plan)
      val file = Alias(InputFileName(), "file")()
      val rows = Alias(Count(Literal(1)).toAggregateExpression(), "rows")()
      val matched = Aggregate(Seq(InputFileName()), Seq(file, rows), Filter(condition, relation))
      val counts = Plans.collect(spark, matched).map(r => RowLevel.pathOf(r.getString(0)) -> r.getLong(1)).toMap
      if (counts.isEmpty) return 0L
      val touched = plan.files.filter(f => counts.contains(RowLevel.pathOf(f.uri)))
      val scan = RowLevel.over(l, fs, meta, plan.copy(files = touched))
      val matches = EqualNullSafe(condition, Literal.TrueLiteral)
      val rewritten = spec.change match {
        case Deletion => Filter(Not(matches), scan)
        case Modification(cols) =>
          Project(scan.output.zip(cols).map { case (a, v) => Alias(If(matches, v, a), a.name)() }, scan)
      }
      val req = RewriteRowsRequest(operation, meta.ref, meta.version, predicate, touched.map(_.uri), Some(counts.values.sum),
        wholeFiles = false, None)
      Bridge.call(req, Plans.dataFrame(spark, rewritten), cond.orNull)
    }
    answer.affectedRows
  }
}

/** What DELETE, UPDATE and MERGE share: the target's file scan, the retries, the checks. */
object RowLevel {
  val Attempts = 5

  def scanOf(plan: LogicalPlan, operation: String): (LogicalRelation, HadoopFsRelation, UseFileIndex) =
    UseFileIndex.of(EliminateSubqueryAliases(plan)).getOrElse(
      throw new UseException(s"internal: $operation target is not a USE table scan: ${plan.nodeName}", UseException.Kinds.Internal))

  /** The files of `plan`, planned on `meta`'s snapshot, as a file index (never listed again). */
  def planned(meta: TableMeta, plan: PlannedScan): UseFileIndex = new UseFileIndex(meta, Some(meta.version), None, Some(plan))

  /** The target's scan over the files of `plan`, with the target's attributes. */
  def over(l: LogicalRelation, fs: HadoopFsRelation, meta: TableMeta, plan: PlannedScan): LogicalRelation =
    l.copy(relation = fs.copy(location = planned(meta, plan))(fs.sparkSession))

  /** A data file as input_file_name() and the scan plan spell it, compared by decoded path. */
  def pathOf(uri: String): String = new URI(uri).getPath

  /** A nondeterministic condition or value could differ between the passes that find the files
    * and rewrite them: refused before anything is read. */
  def requireDeterministic(operation: String, parts: Seq[(String, Expression)]): Unit =
    parts.find(!_._2.deterministic).foreach { case (what, e) =>
      throw new UseException(s"$operation's $what ${e.sql} is not deterministic (it could differ each time it is " +
        "evaluated); use values computed from the rows' own columns", UseException.Kinds.InvalidArgument)
    }

  /** `attempt` on `meta`, then, while its commit loses a conflict the Python side says a new
    * attempt may win (`retryable`: a concurrent commit removed a file it rewrites, an optimization
    * compacting it, another statement), again on the latest snapshot. Each attempt sends the Python
    * side's `RewriteRowsRequest`: the rows that replace the removed files go along (null when whole
    * files go), with the condition the target was read with (null: the whole table), which the
    * commit declares read for Delta's conflict check. Meanwhile this process's optimizations of the
    * table wait (`use.optimize.yielding`), so only other processes' commits can make an attempt lose. */
  def withRetries[T](meta: TableMeta)(attempt: TableMeta => T): T = {
    Bridge.call(RowLevelBeginRequest(meta.ref))
    try {
      var current = meta
      var n = 1
      while (true) {
        try return attempt(current)
        catch {
          case e: UseException if e.retryable && n < Attempts =>
            n += 1
            current = TableMeta.describe(current.ref)
        }
      }
      throw new IllegalStateException("unreachable")
    } finally Bridge.call(RowLevelEndRequest(meta.ref))
  }

  /** An UPDATE's values, one per column of `output` (the column itself where nothing is assigned),
    * each cast to its column's type (`unassigned`: what a column nobody sets takes, default the
    * column itself); a nested field or a column assigned twice is refused. */
  def columnValues(output: Seq[Attribute], assignments: Seq[Assignment], operation: String = "UPDATE",
                   unassigned: Attribute => Expression = a => a): Seq[Expression] = {
    assignments.foreach { a =>
      a.key match {
        case k: Attribute if output.exists(_.semanticEquals(k)) =>
        case k => throw new UseException(s"$operation of ${k.sql}: setting a nested field is not supported yet; set the " +
          "whole column (SET s = named_struct(...))", UseException.Kinds.NotSupported)
      }
    }
    output.map { col =>
      assignments.filter(_.key.asInstanceOf[Attribute].semanticEquals(col)) match {
        case Seq() => unassigned(col)
        case Seq(a) =>
          // cast as an INSERT's values are (ANSI: a malformed or overflowing value fails the
          // statement; a type no cast reaches is Spark's analysis error)
          val v = a.value
          if (v.dataType == col.dataType) v
          else Cast(v, col.dataType, Option(SQLConf.get.sessionLocalTimeZone), evalMode = org.apache.spark.sql.catalyst.expressions.EvalMode.ANSI)
        case _ => throw new UseException(s"$operation sets ${col.name} more than once; set each column once",
          UseException.Kinds.InvalidArgument)
      }
    }
  }
}

/** Running a logical plan from the shim: Spark's `Dataset.ofRows` is private to Spark's `sql`
  * package, so it is called through its public static forwarder (as `UseCatalog.applySchemaChanges`
  * calls Spark's schema changes). */
object Plans {
  private lazy val ofRows = {
    val classic = Class.forName("org.apache.spark.sql.classic.Dataset")
    classic.getMethod("ofRows", Class.forName("org.apache.spark.sql.classic.SparkSession"), classOf[LogicalPlan])
  }

  def dataFrame(spark: SparkSession, plan: LogicalPlan): org.apache.spark.sql.DataFrame =
    try ofRows.invoke(null, spark, plan).asInstanceOf[org.apache.spark.sql.DataFrame]
    catch { case e: java.lang.reflect.InvocationTargetException if e.getCause != null => throw e.getCause }

  def collect(spark: SparkSession, plan: LogicalPlan): Array[Row] = dataFrame(spark, plan).collect()
}
