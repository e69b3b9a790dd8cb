package use.sql

import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.analysis.EliminateSubqueryAliases
import org.apache.spark.sql.catalyst.plans.logical.{AppendData, DeleteFromTable, LogicalPlan, MergeIntoTable, OverwritePartitionsDynamic, UpdateTable}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/** USE's Spark SQL extension (`spark.sql.extensions=use.sql.UseSparkSessionExtension`), used with
  * `spark.sql.catalog.spark_catalog=use.sql.UseCatalog`: the analysis rule that reads USE tables
  * with Spark's parquet reader and refuses what is not supported yet, and the optimizer rule that
  * plans each query's files. */
class UseSparkSessionExtension extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    extensions.injectResolutionRule(spark => new UseAnalysis(spark))
    extensions.injectPreCBORule(spark => new UsePrepareScans(spark))
  }
}

/** Analysis of plans over USE tables:
  *  - a read of a USE table (its DSv2 relation) becomes a LogicalRelation over a HadoopFsRelation
  *    with Spark's parquet format and a `UseFileIndex`, so scans, column pruning, filter pushdown
  *    into parquet and partition pruning are Spark's own; the index lists only the log's files;
  *  - a dynamic partition overwrite becomes an append whose write replaces the partitions it
  *    writes (Spark's V1 write fallback has no dynamic overwrite of its own);
  *  - DELETE, UPDATE and MERGE fail with one clear "not supported yet".
  */
class UseAnalysis(spark: SparkSession) extends Rule[LogicalPlan] {

  private def isUseTarget(p: LogicalPlan): Boolean = EliminateSubqueryAliases(p) match {
    case r: DataSourceV2Relation => r.table.isInstanceOf[UseTable]
    case other => UseFileIndex.of(other).isDefined
  }

  private def notSupported(what: String): Nothing = throw new UseException(
    s"$what on Delta/Qbeast tables is not supported yet: rewrite the table (INSERT OVERWRITE, or CREATE OR REPLACE " +
      "TABLE ... AS SELECT) with the rows it should keep", UseException.Kinds.NotSupported)

  private def toRelation(r: DataSourceV2Relation): LogicalPlan = {
    val table = r.table.asInstanceOf[UseTable]
    val meta = table.meta
    val index = new UseFileIndex(meta, if (table.pinned) Some(meta.version) else None, None, None)
    val fs = HadoopFsRelation(index, meta.partitionSchema, meta.dataSchema, None, new UseParquetFormat(""), Map.empty[String, String])(spark)
    val relation = table.catalogTable match {
      case Some(ct) => LogicalRelation(fs, ct)
      case None => LogicalRelation(fs, false)
    }
    relation.copy(output = r.output)
  }

  override def apply(plan: LogicalPlan): LogicalPlan = {
    plan.foreach {
      case d: DeleteFromTable if isUseTarget(d.table) => notSupported("DELETE")
      case u: UpdateTable if isUseTarget(u.table) => notSupported("UPDATE")
      case m: MergeIntoTable if isUseTarget(m.targetTable) => notSupported("MERGE")
      case _ =>
    }
    plan.resolveOperatorsUp {
      case o: OverwritePartitionsDynamic if o.resolved && isUseTarget(o.table) =>
        AppendData.byName(o.table, o.query, o.writeOptions + (UseAnalysis.DynamicOverwrite -> "true"))
      case r: DataSourceV2Relation if r.table.isInstanceOf[UseTable] => toRelation(r)
    }
  }
}

object UseAnalysis {
  /** Write option marking an append that is a dynamic partition overwrite (see `UseAnalysis`). */
  val DynamicOverwrite = "__use_dynamic_partition_overwrite"
}
