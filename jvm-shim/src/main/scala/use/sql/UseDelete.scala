package use.sql

import java.net.URI

import com.fasterxml.jackson.databind.node.{ArrayNode, ObjectNode}
import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.catalyst.analysis.EliminateSubqueryAliases
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference, EqualNullSafe, Expression, InputFileName, Literal, Not, SubqueryExpression}
import org.apache.spark.sql.catalyst.expressions.aggregate.Count
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, LogicalPlan}
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.LongType

/** `DELETE FROM <USE table> [WHERE cond]`, copy-on-write as Delta's DELETE without deletion vectors,
  * one commit. The files the condition can match are planned from one snapshot (partition, stats
  * and, for Qbeast tables, cube-space pruning: the scan planning of every query); when the condition
  * names partition columns only (or there is none), those files are removed whole, nothing is read.
  * Otherwise a first pass finds the files holding a matching row and counts the rows, and the rows
  * of those files that do not match (`NOT (cond <=> true)`: a row whose condition is null stays, as
  * in Delta) are handed to the Python side, which writes them as new files and commits them with
  * the removes (`use.sql.delete.delete`). Returns Delta's `num_affected_rows`. */
case class UseDeleteCommand(target: LogicalPlan, predicate: DeletePredicate) extends LeafRunnableCommand {

  private def condition: Expression = predicate.expression

  override val output: Seq[Attribute] = Seq(AttributeReference("num_affected_rows", LongType, nullable = false)())

  private def scanOf(plan: LogicalPlan): (LogicalRelation, HadoopFsRelation, UseFileIndex) =
    UseFileIndex.of(EliminateSubqueryAliases(plan)).getOrElse(
      throw new UseException(s"internal: DELETE target is not a USE table scan: ${plan.nodeName}", UseException.Kinds.Internal))

  private def over(l: LogicalRelation, fs: HadoopFsRelation, index: UseFileIndex): LogicalRelation =
    l.copy(relation = fs.copy(location = index)(fs.sparkSession))

  /** A data file as input_file_name() and the scan plan spell it, compared by decoded path. */
  private def pathOf(uri: String): String = new URI(uri).getPath

  override def run(spark: SparkSession): Seq[Row] = {
    if (!condition.deterministic) {
      throw new UseException(s"DELETE's condition ${condition.sql} is not deterministic (it could match other rows each " +
        "time it is evaluated); delete by a condition on the rows' values", UseException.Kinds.InvalidArgument)
    }
    val (l, fs, index) = scanOf(target)
    // A concurrent commit that removed a file this DELETE rewrites (an optimization compacting it,
    // another DELETE) fails the commit; the DELETE then runs again on the new snapshot, as Delta
    // users retry, a bounded number of times.
    var meta = index.meta
    var attempt = 1
    while (true) {
      try return Seq(Row(once(spark, l, fs, meta)))
      catch {
        case e: UseException if UseDeleteCommand.Retried.contains(e.kind) && attempt < UseDeleteCommand.Attempts =>
          attempt += 1
          meta = TableMeta.describe(meta.uri, meta.provider)
      }
    }
    throw new IllegalStateException("unreachable")
  }

  /** One attempt on the snapshot `meta`: the rows deleted. */
  private def once(spark: SparkSession, l: LogicalRelation, fs: HadoopFsRelation, meta: TableMeta): Long = {
    val cond = Option(condition).filterNot(_ == Literal.TrueLiteral)
    val plan = ScanPlan.plan(Seq(ScanRequest(meta, Some(meta.version), None, cond))).head
    val resolver = SQLConf.get.resolver
    val partitionOnly = cond.forall(c => !SubqueryExpression.hasSubquery(c) &&
      c.references.forall(a => meta.partitionColumns.exists(p => resolver(p, a.name))))
    val req = Bridge.obj()
    req.set[ObjectNode]("table", meta.ref)
    req.put("version", meta.version)
    req.put("predicate", cond.map(_.sql).getOrElse("true"))
    val answer = if (partitionOnly) {
      // every row of the files in the matching partitions goes: remove them whole
      val planned = new UseFileIndex(meta, Some(meta.version), None, Some(plan))
      val files = planned.listFiles(cond.toSeq, Nil).flatMap(_.files).map(_.getPath.toUri.getPath).toSet
      req.set[ArrayNode]("remove", Bridge.strings(plan.files.map(_.uri).filter(u => files.contains(pathOf(u)))))
      req.put("wholeFiles", true)
      Bridge.call("delete", req)
    } else {
      val relation = over(l, fs, new UseFileIndex(meta, Some(meta.version), None, Some(plan)))
      val file = Alias(InputFileName(), "file")()
      val rows = Alias(Count(Literal(1)).toAggregateExpression(), "rows")()
      val matched = Aggregate(Seq(InputFileName()), Seq(file, rows), Filter(condition, relation))
      val counts = Plans.collect(spark, matched).map(r => pathOf(r.getString(0)) -> r.getLong(1)).toMap
      if (counts.isEmpty) return 0L
      val touched = plan.files.filter(f => counts.contains(pathOf(f.uri)))
      val keptScan = over(l, fs, new UseFileIndex(meta, Some(meta.version), None, Some(plan.copy(files = touched))))
      val kept = Plans.dataFrame(spark, Filter(Not(EqualNullSafe(condition, Literal.TrueLiteral)), keptScan))
      req.set[ArrayNode]("remove", Bridge.strings(touched.map(_.uri)))
      req.put("deletedRows", counts.values.sum)
      Bridge.call("delete", req, kept)
    }
    answer.get("deletedRows").asLong()
  }
}

/** The resolved condition of a DELETE, held outside the command's expressions: Spark's analysis
  * checks refuse an IN/EXISTS subquery in a command of ours (they allow them in its own DELETE
  * node), and the condition is analyzed and optimized again, subqueries included, in the plans
  * the command runs (a `Filter`). */
final class DeletePredicate(val expression: Expression) extends Serializable {
  override def toString: String = expression.sql
}

object UseDeleteCommand {
  /** The conflicts a new attempt on the latest snapshot resolves (`use.errors` classes). */
  val Retried: Set[String] = Set(UseException.Kinds.ConcurrentDeleteRead, UseException.Kinds.ConcurrentDeleteDelete)
  val Attempts = 3
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
