/** `MERGE INTO` a USE table (`UseMergeCommand`): the target files the MERGE touches, their rows joined
  * with the source, and the rewritten rows handed to the Python side, which commits them. */
package use.sql

import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeReference, CaseWhen, Expression, In, InputFileName, IsNotNull, Literal, MonotonicallyIncreasingID, Not, PredicateHelper}
import org.apache.spark.sql.catalyst.expressions.aggregate.{Count, Max}
import org.apache.spark.sql.catalyst.plans.{FullOuter, Inner, LeftAnti}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, DeleteAction, Filter, InsertAction, Join, JoinHint, LogicalPlan, MergeAction, Project, UpdateAction}
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}
import org.apache.spark.sql.types.LongType

/** One WHEN clause of a MERGE: its condition (true when it has none) and what it does. */
final case class MergeClause(condition: Expression, action: MergeClause.Action)

object MergeClause {
  sealed trait Action
  /** UPDATE SET / UPDATE SET *: the new value of every target column. */
  final case class Update(values: Seq[Expression]) extends Action
  case object Delete extends Action
  /** INSERT (...) VALUES (...) / INSERT *: the value of every target column (NULL when not given). */
  final case class Insert(values: Seq[Expression]) extends Action

  val Updated = 1
  val Deleted = 2
  val Inserted = 3
  val Copied = 0 // a target row of a rewritten file that no clause changed
  val Dropped = -1 // a source row no clause inserts

  /** Spark's resolved `MergeAction`s as clauses over the target's columns (`output`). */
  def of(output: Seq[Attribute], actions: Seq[MergeAction]): Seq[MergeClause] = actions.map { a =>
    val condition = a.condition.getOrElse(Literal.TrueLiteral)
    a match {
      case u: UpdateAction => MergeClause(condition, Update(RowLevel.columnValues(output, u.assignments, "MERGE")))
      case _: DeleteAction => MergeClause(condition, Delete)
      case i: InsertAction =>
        MergeClause(condition, Insert(RowLevel.columnValues(output, i.assignments, "MERGE", c => Literal(null, c.dataType))))
      case other => throw new UseException(s"MERGE clause ${other.sql} is not supported yet", UseException.Kinds.NotSupported)
    }
  }
}

/** The resolved parts of a MERGE, held outside the command's expressions and children (as
  * `RowLevelSpec` is, for the same reason: Spark's checks allow subqueries in its own MERGE node
  * only; they are analyzed again in the plans the command runs). */
final class MergeSpec(
    val source: LogicalPlan,
    val condition: Expression,
    val matched: Seq[MergeClause],
    val notMatched: Seq[MergeClause],
    val notMatchedBySource: Seq[MergeClause]) extends Serializable {
  override def toString: String = s"MERGE ON ${condition.sql}"

  def expressions: Seq[(String, Expression)] = ("condition" -> condition) +: (matched ++ notMatched ++ notMatchedBySource).flatMap { c =>
    ("clause condition" -> c.condition) +: (c.action match {
      case MergeClause.Update(v) => v.map("new value" -> _)
      case MergeClause.Insert(v) => v.map("inserted value" -> _)
      case MergeClause.Delete => Nil
    })
  }
}

/** `MERGE INTO <USE table> USING <source> ON <cond> WHEN ...`, copy-on-write as Delta's without
  * deletion vectors, one `MERGE` commit.
  *
  * With MATCHED or NOT MATCHED BY SOURCE clauses, the target files to rewrite are those holding a
  * row the condition matches (every planned file when there are NOT MATCHED BY SOURCE clauses); one
  * pass finds them and refuses a target row that several source rows match (Delta's rule, as the
  * outcome would depend on their order). Those files' rows and the source's rows are then joined
  * (full outer) and each pair takes the first clause that applies, in the statement's order:
  * MATCHED clauses for a pair, NOT MATCHED BY SOURCE for a target row alone, NOT MATCHED for a
  * source row alone (a source row matched in no rewritten file matches no target row at all); a
  * target row no clause changes is copied as is, a source row no clause inserts is dropped. An
  * insert-only MERGE rewrites nothing: the source rows matching no target row (an anti join with
  * the table) are appended. The rows go to the Python side (`use.sql.dml.rewrite_rows`), which
  * writes them and commits them with the removes; a lost conflict runs the MERGE again. Returns
  * Delta's `num_affected_rows`, `num_updated_rows`, `num_deleted_rows`, `num_inserted_rows`. */
case class UseMergeCommand(target: LogicalPlan, spec: MergeSpec) extends LeafRunnableCommand with PredicateHelper {

  override val output: Seq[Attribute] = Seq("num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows")
    .map(n => AttributeReference(n, LongType, nullable = false)())

  override def run(spark: SparkSession): Seq[Row] = {
    RowLevel.requireDeterministic("MERGE", spec.expressions)
    val (l, fs, index) = RowLevel.scanOf(target, "MERGE")
    val counts = RowLevel.withRetries(index.meta)(meta => once(spark, l, fs, meta))
    val (u, d, i) = (counts.getOrElse(MergeClause.Updated, 0L), counts.getOrElse(MergeClause.Deleted, 0L), counts.getOrElse(MergeClause.Inserted, 0L))
    Seq(Row(u + d + i, u, d, i))
  }

  private def once(spark: SparkSession, l: LogicalRelation, fs: HadoopFsRelation, meta: TableMeta): Map[Int, Long] = {
    val source = spec.source
    val targetAttrs = l.output
    // the target's files the condition can match: its conjuncts on target columns prune them
    val onTarget = splitConjunctivePredicates(spec.condition).filter(_.references.subsetOf(l.outputSet))
    val filter = if (spec.notMatchedBySource.isEmpty) onTarget.reduceOption(And) else None
    val plan = PlannedScan.plan(Seq(ScanQuery(meta, Some(meta.version), None, filter))).head
    val planned = RowLevel.over(l, fs, meta, plan)

    val rewrites = spec.matched.nonEmpty || spec.notMatchedBySource.nonEmpty
    val (rows, counts, touched) = if (rewrites) {
      val touched = touchedFiles(spark, planned, plan)
      val scan = RowLevel.over(l, fs, meta, plan.copy(files = touched))
      val t = Alias(Literal.TrueLiteral, "__use_target")()
      val s = Alias(Literal.TrueLiteral, "__use_source")()
      val joined = Join(Project(scan.output :+ t, scan), Project(source.output :+ s, source), FullOuter, Some(spec.condition), JoinHint.NONE)
      val tP = IsNotNull(t.toAttribute)
      val sP = IsNotNull(s.toAttribute)
      val branches = spec.matched.map(c => And(And(tP, sP), c.condition) -> c.action) ++
        spec.notMatchedBySource.map(c => And(And(tP, Not(sP)), c.condition) -> c.action) ++
        spec.notMatched.map(c => And(And(Not(tP), sP), c.condition) -> c.action)
      (rowsOf(joined, branches, targetAttrs, tP, insertOnly = false), outcomes(spark, joined, branches, tP), touched)
    } else {
      // insert-only: the source rows that match no target row, appended
      val unmatched = Join(source, planned, LeftAnti, Some(spec.condition), JoinHint.NONE)
      val branches = spec.notMatched.map(c => c.condition -> c.action)
      (rowsOf(unmatched, branches, targetAttrs, Literal.FalseLiteral, insertOnly = true),
        outcomes(spark, unmatched, branches, Literal.FalseLiteral), Nil)
    }
    val affected = counts.filter(_._1 > 0).values.sum
    if (affected == 0) return counts
    val metrics = MergeMetrics(counts.getOrElse(MergeClause.Updated, 0L), counts.getOrElse(MergeClause.Deleted, 0L),
      counts.getOrElse(MergeClause.Inserted, 0L), counts.getOrElse(MergeClause.Copied, 0L), touched.size.toLong)
    val req = RewriteRowsRequest("MERGE", meta.ref, meta.version, spec.condition.sql, touched.map(_.uri), Some(affected),
      wholeFiles = false, Some(metrics))
    Bridge.call(req, Plans.dataFrame(spark, rows), filter.orNull)
    counts
  }

  /** The files of `plan` holding a target row the condition matches (all of them with NOT MATCHED BY
    * SOURCE clauses); refuses a target row matched by several source rows when a MATCHED clause
    * would change it. One pass: per file, the most source rows any of its rows matched. */
  private def touchedFiles(spark: SparkSession, planned: LogicalRelation, plan: PlannedScan): Seq[ScanFile] = {
    val file = Alias(InputFileName(), "__use_file")()
    val id = Alias(MonotonicallyIncreasingID(), "__use_row")()
    val withIds = Project(planned.output ++ Seq(file, id), planned)
    val pairs = Join(withIds, spec.source, Inner, Some(spec.condition), JoinHint.NONE)
    val perRow = Alias(Count(Literal(1)).toAggregateExpression(), "__use_n")()
    val rowsMatched = Aggregate(Seq(file.toAttribute, id.toAttribute), Seq(file.toAttribute, perRow), pairs)
    val most = Alias(Max(perRow.toAttribute).toAggregateExpression(), "__use_most")()
    val perFile = Aggregate(Seq(file.toAttribute), Seq(file.toAttribute, most), rowsMatched)
    val found = Plans.collect(spark, perFile).map(r => RowLevel.pathOf(r.getString(0)) -> r.getLong(1)).toMap
    if (spec.matched.nonEmpty && found.values.exists(_ > 1)) {
      throw new UseException("MERGE matched one target row with more than one source row, so which change applies " +
        "would depend on their order; make the ON condition match at most one source row per target row (deduplicate " +
        "the source, e.g. keep the latest row per key)", UseException.Kinds.InvalidArgument)
    }
    if (spec.notMatchedBySource.nonEmpty) plan.files else plan.files.filter(f => found.contains(RowLevel.pathOf(f.uri)))
  }

  /** Which branch each joined row takes (its outcome code), in the clauses' order. */
  private def outcome(branches: Seq[(Expression, MergeClause.Action)], targetPresent: Expression): Expression =
    CaseWhen(branches.map { case (c, a) => c -> Literal(a match {
      case _: MergeClause.Update => MergeClause.Updated
      case MergeClause.Delete => MergeClause.Deleted
      case _: MergeClause.Insert => MergeClause.Inserted
    }) }, Some(CaseWhen(Seq(targetPresent -> Literal(MergeClause.Copied)), Some(Literal(MergeClause.Dropped)))))

  /** The rows that replace the rewritten files (and the inserted ones), in the target's columns
    * (`insertOnly`: `joined` holds source rows only, every kept one an insert). */
  private def rowsOf(joined: LogicalPlan, branches: Seq[(Expression, MergeClause.Action)], targetAttrs: Seq[Attribute],
                     targetPresent: Expression, insertOnly: Boolean): LogicalPlan = {
    val code = Alias(outcome(branches, targetPresent), "__use_outcome")()
    val notWritten = In(code.toAttribute, Seq(Literal(MergeClause.Deleted), Literal(MergeClause.Dropped)))
    val kept = Filter(Not(notWritten), Project(joined.output :+ code, joined))
    val columns = targetAttrs.zipWithIndex.map { case (col, j) =>
      val cases = branches.collect {
        case (c, MergeClause.Update(v)) => c -> v(j)
        case (c, MergeClause.Insert(v)) => c -> v(j)
      }
      val unchanged = if (insertOnly) Literal(null, col.dataType) else col
      Alias(if (cases.isEmpty) unchanged else CaseWhen(cases, Some(unchanged)), col.name)()
    }
    Project(columns, kept)
  }

  /** Rows per outcome (updated, deleted, inserted, copied, dropped): Delta's metrics and the answer. */
  private def outcomes(spark: SparkSession, joined: LogicalPlan, branches: Seq[(Expression, MergeClause.Action)],
                       targetPresent: Expression): Map[Int, Long] = {
    val code = Alias(outcome(branches, targetPresent), "__use_outcome")()
    val n = Alias(Count(Literal(1)).toAggregateExpression(), "__use_n")()
    val plan = Aggregate(Seq(code.toAttribute), Seq(code.toAttribute, n), Project(Seq(code), joined))
    Plans.collect(spark, plan).map(r => r.getInt(0) -> r.getLong(1)).toMap
  }
}
