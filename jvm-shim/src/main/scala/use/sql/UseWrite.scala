package use.sql

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{Dataset, Row}
import org.apache.spark.sql.connector.write.{LogicalWriteInfo, SupportsDynamicOverwrite, SupportsOverwrite, SupportsTruncate, V1Write, Write, WriteBuilder}
import org.apache.spark.sql.sources._

/** Every write into a USE table (INSERT INTO/OVERWRITE, writeTo, saveAsTable, CTAS/RTAS): Spark
  * resolves and casts the query to the table's schema, then hands the DataFrame to the Python side,
  * which runs the OTree write (Qbeast tables) or a parquet write with stats (Delta tables) and
  * commits once. The builder only records what kind of write Spark asked for.
  *
  * INSERT OVERWRITE ... PARTITION (p = v) arrives as `overwrite(filters)` on partition columns;
  * filters on other columns (`INSERT INTO t REPLACE WHERE <cond>`, `writeTo(t).overwrite(<cond>)`)
  * are Delta's replaceWhere: the Python side replaces the rows matching the condition, handed over
  * as Spark SQL text (`UseWriteBuilder.filterSql`).
  */
class UseWriteBuilder(
    table: TableRef,
    partitionColumns: Seq[String],
    staged: Option[StagedUseTable],
    info: LogicalWriteInfo)
  extends WriteBuilder with SupportsTruncate with SupportsOverwrite with SupportsDynamicOverwrite {

  private var mode: String = if (info.options().containsKey(UseAnalysis.DynamicOverwrite)) "dynamic" else "append"
  private var filters: Seq[PartitionFilter] = Nil
  private var condition: Option[String] = None

  override def truncate(): WriteBuilder = { mode = "overwrite"; this }

  override def overwriteDynamicPartitions(): WriteBuilder = { mode = "dynamic"; this }

  override def overwrite(fs: Array[Filter]): WriteBuilder = {
    if (fs.forall(_.isInstanceOf[AlwaysTrue])) return truncate()
    val partitions = try fs.toSeq.map(UseWriteBuilder.partitionFilter(_, partitionColumns))
    catch {
      case _: UseException => // not whole partitions: the rows matching the condition (replaceWhere)
        condition = Some(fs.map(UseWriteBuilder.filterSql).mkString(" AND "))
        mode = "replaceWhere"
        return this
    }
    filters = partitions
    mode = "partitions"
    this
  }

  override def build(): Write = new V1Write {
    override def toInsertableRelation: InsertableRelation = new InsertableRelation {
      override def insert(data: Dataset[Row], overwrite: Boolean): Unit = {
        val options = info.options().asCaseSensitiveMap().asScala.toMap - UseAnalysis.DynamicOverwrite
        val req = WriteRequest(table, if (overwrite && mode == "append") "overwrite" else mode, filters, condition, options,
          staged.map(_.stagedSpec))
        val result = Bridge.call(req, data)
        staged.foreach(_.wrote(result))
      }
    }
  }
}

object UseWriteBuilder {
  private def unsupported(f: Filter): Nothing = throw new UseException(
    s"overwriting the rows matching $f is not supported yet: only INSERT OVERWRITE of whole partitions " +
      "(PARTITION (p = value)) or of the whole table", UseException.Kinds.NotSupported)

  private def column(name: String, partitionColumns: Seq[String], f: Filter): String = {
    if (!partitionColumns.exists(_.equalsIgnoreCase(name))) unsupported(f)
    partitionColumns.find(_.equalsIgnoreCase(name)).get
  }

  /** A filter's value as a JSON scalar, typed by the Python side by the column's type. */
  private def value(v: Any): Any = v match {
    case null => null
    case b: Boolean => b
    case i: Int => i.toLong
    case l: Long => l
    case s: Short => s.toLong
    case b: Byte => b.toLong
    case d: Double => d
    case f: Float => f.toDouble
    case d: java.math.BigDecimal => d.toPlainString
    // an instant with its zone (`2024-03-10T09:30:00Z`): java.sql.Timestamp's own text is the JVM's wall clock
    case t: java.sql.Timestamp => t.toInstant.toString
    case other => other.toString // strings, dates, timestamps
  }

  /** A column of a filter in Spark SQL: each dotted part quoted (a nested field `a.b`). */
  private def sqlColumn(name: String): String = name.split('.').map(p => "`" + p.replace("`", "``") + "`").mkString(".")

  /** A filter's value as a Spark SQL literal. */
  private def sqlValue(v: Any, f: Filter): String = v match {
    case null => "NULL"
    case s: String => UseParser.literal(s)
    case b: Boolean => b.toString
    case i: Int => i.toString
    case l: Long => s"${l}L"
    case s: Short => s"${s}S"
    case b: Byte => s"${b}Y"
    case d: Double if !d.isNaN && !d.isInfinite => s"${d}D"
    case x: Float if !x.isNaN && !x.isInfinite => s"CAST('${x}' AS FLOAT)"
    case d: java.math.BigDecimal => s"${d.toPlainString}BD"
    case d: java.sql.Date => s"DATE'$d'"
    case d: java.time.LocalDate => s"DATE'$d'"
    case t: java.sql.Timestamp => s"TIMESTAMP'${t.toInstant}'"
    case t: java.time.Instant => s"TIMESTAMP'$t'"
    case t: java.time.LocalDateTime => s"TIMESTAMP_NTZ'$t'"
    case _ => unsupportedCondition(f)
  }

  private def unsupportedCondition(f: Filter): Nothing = throw new UseException(
    s"overwriting the rows matching $f is not supported: its value has no SQL literal here; write a condition on " +
      "columns of numbers, strings, booleans, dates or timestamps", UseException.Kinds.NotSupported)

  /** A filter Spark made of an overwrite's condition, as Spark SQL (the Python side evaluates it). */
  def filterSql(f: Filter): String = f match {
    case EqualTo(a, v) => s"${sqlColumn(a)} = ${sqlValue(v, f)}"
    case EqualNullSafe(a, v) => s"${sqlColumn(a)} <=> ${sqlValue(v, f)}"
    case GreaterThan(a, v) => s"${sqlColumn(a)} > ${sqlValue(v, f)}"
    case GreaterThanOrEqual(a, v) => s"${sqlColumn(a)} >= ${sqlValue(v, f)}"
    case LessThan(a, v) => s"${sqlColumn(a)} < ${sqlValue(v, f)}"
    case LessThanOrEqual(a, v) => s"${sqlColumn(a)} <= ${sqlValue(v, f)}"
    case In(a, vs) if vs.isEmpty => "false"
    case In(a, vs) => s"${sqlColumn(a)} IN (${vs.map(sqlValue(_, f)).mkString(", ")})"
    case IsNull(a) => s"${sqlColumn(a)} IS NULL"
    case IsNotNull(a) => s"${sqlColumn(a)} IS NOT NULL"
    case StringStartsWith(a, v) => s"startswith(${sqlColumn(a)}, ${sqlValue(v, f)})"
    case StringEndsWith(a, v) => s"endswith(${sqlColumn(a)}, ${sqlValue(v, f)})"
    case StringContains(a, v) => s"contains(${sqlColumn(a)}, ${sqlValue(v, f)})"
    case And(l, r) => s"(${filterSql(l)}) AND (${filterSql(r)})"
    case Or(l, r) => s"(${filterSql(l)}) OR (${filterSql(r)})"
    case Not(c) => s"NOT (${filterSql(c)})"
    case _: AlwaysTrue => "true"
    case _: AlwaysFalse => "false"
    case _ => unsupportedCondition(f)
  }

  /** A partition overwrite's filter as the Python side reads it (typed there by the column's type). */
  def partitionFilter(f: Filter, partitionColumns: Seq[String]): PartitionFilter = {
    def on(op: String, a: String, v: Any = null, vs: Seq[Any] = Nil) =
      PartitionFilter(op, Some(column(a, partitionColumns, f)), value(v), vs.map(value), None, None)
    f match {
      case EqualTo(a, v) => on("=", a, v)
      case EqualNullSafe(a, v) => on("<=>", a, v)
      case IsNull(a) => on("isnull", a)
      case IsNotNull(a) => on("isnotnull", a)
      case In(a, vs) => on("in", a, vs = vs.toSeq)
      case And(l, r) =>
        PartitionFilter("and", None, null, Nil, Some(partitionFilter(l, partitionColumns)), Some(partitionFilter(r, partitionColumns)))
      case _ => unsupported(f)
    }
  }
}
