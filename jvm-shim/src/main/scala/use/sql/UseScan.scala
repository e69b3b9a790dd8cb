/** Reading a USE table with Spark's parquet reader: the files of every scan, planned once per query
  * by the Python side (`UsePrepareScans`, `UseFileIndex`), and the parquet format that keeps
  * floating-point filters out of the reader (`UseParquetFormat`). */
package use.sql

import java.net.URI

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileStatus, Path}
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{And, AttributeReference, BoundReference, Cast, Expression, LessThan, Literal, Murmur3Hash, Predicate}
import org.apache.spark.sql.catalyst.planning.PhysicalOperation
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan, Project, Sample}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute
import org.apache.spark.sql.execution.datasources.{FileIndex, FileStatusWithMetadata, HadoopFsRelation, LogicalRelation, PartitionDirectory, PartitionedFile}
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.sources.{Filter => SourceFilter}
import org.apache.spark.sql.types.{ArrayType, DataType, DoubleType, FloatType, MapType, StructType}
import org.apache.spark.sql.use.ArrowRows

/** One data file of a scan; `deletedRows`, the portable roaring bitmap of the rows its deletion
  * vector deletes (`DeletedRows`). */
case class ScanFile(uri: String, size: Long, modificationTime: Long, partitionValues: Seq[String], deletedRows: Option[Array[Byte]] = None)

/** The files one scan reads, as the Python side selected them from one snapshot (after partition
  * pruning, Delta stats skipping, and for Qbeast tables cube-space and sample weight pruning), and
  * for a Qbeast sample the row filter `hash(columns) < upper` that makes it exact. */
case class PlannedScan(
    version: Long,
    files: Seq[ScanFile],
    totalFiles: Long,
    totalBytes: Long,
    sampleColumns: Seq[String],
    sampleUpper: Option[Int]) {

  def keptBytes: Long = files.iterator.map(_.size).sum

  /** What EXPLAIN shows (in the scan's Format): the files kept out of the snapshot's files. */
  def label(meta: TableMeta, sample: Option[Double]): String =
    s"USE ${meta.provider} version $version: ${files.size} of $totalFiles files ($keptBytes of $totalBytes bytes)" +
      sample.map(f => s", sample $f").getOrElse("") + {
        val withDv = files.count(_.deletedRows.isDefined)
        if (withDv > 0) s", $withDv with deletion vectors" else ""
      }
}

/** A scan to plan: the table, the version (None: the latest when planned), a Qbeast sample
  * fraction, and the scan's filters (one conjunction, or None). */
case class ScanQuery(meta: TableMeta, version: Option[Long], sample: Option[Double], filter: Option[Expression])

object PlannedScan {
  /** A plan as the Python side sent it: its files from their Arrow rows (uri, size, modification
    * time, partition values, the bitmap of the rows a deletion vector deletes or null). */
  private[sql] def of(p: ScanPlan): PlannedScan = {
    val (_, rows) = ArrowRows.read(p.files)
    val files = rows.toSeq.map { r =>
      val parts = r.getArray(3)
      ScanFile(r.getUTF8String(0).toString, r.getLong(1), r.getLong(2),
        (0 until parts.numElements()).map(i => if (parts.isNullAt(i)) null else parts.getUTF8String(i).toString),
        if (r.isNullAt(4)) None else Some(r.getBinary(4)))
    }
    PlannedScan(p.version, files, p.totalFiles, p.totalBytes, p.sample.map(_.columns).getOrElse(Nil), p.sample.map(_.upper))
  }

  /** Plans every scan of a query in one call to the Python side; scans of one table read one
    * snapshot. The filters travel as Catalyst expressions that the Python side translates. */
  def plan(queries: Seq[ScanQuery]): Seq[PlannedScan] = {
    val request = PlanScansRequest(queries.map(q => ScanRequest(q.meta.ref, q.version, q.sample)))
    Bridge.call(request, queries.map(_.filter.orNull): _*).scans.map(of)
  }
}

/** The parquet format of a USE scan: Spark's own parquet reader, described so that EXPLAIN shows
  * which files the scan keeps, and given no filter on a float or double column.
  *
  * Why no such filter: the parquet reader skips row groups by their footer's min/max and
  * dictionary, and both lose rows Spark SQL's comparisons keep. Footers by pyarrow (USE's Python
  * writes and rewrites) and other writers following the parquet spec leave NaN out of min/max, so
  * `d > 1` and `d = double('NaN')` skipped the row group holding the NaN (in Spark SQL NaN equals
  * NaN and is above every number); and the dictionary check compares with `Double.equals`, so
  * `d = 0.0` skips a row group whose dictionary holds only -0.0, even in files Spark wrote. The
  * filters still run on the rows (Spark keeps them above the scan); files are still skipped by
  * the log's stats, which USE reads with Spark's semantics. The no-argument form is the data
  * source the Python reader names (`use.qbeast.reader.scan`). */
class UseParquetFormat(val label: String, val deleted: DeletedRows) extends ParquetFileFormat {
  def this(label: String) = this(label, DeletedRows.empty)
  def this() = this("")

  override def toString: String = if (label.isEmpty) "Parquet" else s"Parquet, $label"

  /** Rows, not columnar batches, when rows are to be dropped by deletion vectors (`DeletedRows`). */
  override def supportBatch(sparkSession: SparkSession, schema: StructType): Boolean =
    deleted.isEmpty && super.supportBatch(sparkSession, schema)

  override def buildReaderWithPartitionValues(
      sparkSession: SparkSession,
      dataSchema: StructType,
      partitionSchema: StructType,
      requiredSchema: StructType,
      filters: Seq[SourceFilter],
      options: Map[String, String],
      hadoopConf: Configuration): PartitionedFile => Iterator[InternalRow] = {
    val pushed = filters.filterNot(UseParquetFormat.readsFloatingPoint(dataSchema))
    def read(required: StructType): PartitionedFile => Iterator[InternalRow] =
      super.buildReaderWithPartitionValues(sparkSession, dataSchema, partitionSchema, required, pushed, options, hadoopConf)
    if (deleted.isEmpty) read(requiredSchema) else DeletedRows.filtered(read, requiredSchema, partitionSchema, deleted)
  }
}

object UseParquetFormat {
  /** Whether a pushed filter reads a float or double value (a column unknown to the schema counts:
    * the filter is then only not pushed, never wrong). */
  def readsFloatingPoint(schema: StructType)(filter: SourceFilter): Boolean =
    filter.references.exists { name =>
      val resolver = SQLConf.get.resolver
      val path = try UnresolvedAttribute.parseAttributeName(name) catch { case _: Exception => Seq(name) }
      path.foldLeft(Option[DataType](schema)) {
        case (Some(s: StructType), part) => s.fields.find(f => resolver(f.name, part)).map(_.dataType)
        case _ => None
      }.forall(floating)
    }

  private def floating(t: DataType): Boolean = t match {
    case FloatType | DoubleType => true
    case s: StructType => s.fields.exists(f => floating(f.dataType))
    case a: ArrayType => floating(a.elementType)
    case m: MapType => floating(m.keyType) || floating(m.valueType)
    case _ => false
  }
}

/** The files of a USE table for Spark's file scan. Unplanned, it asks the Python side for the live
  * files when Spark lists them; `UsePrepareScans` replaces it with a planned one (fixed files) when
  * the query is optimized, so the whole query reads one snapshot and EXPLAIN can tell the files.
  * Files are never listed from storage: a file the log does not reference is never read. */
class UseFileIndex(
    val meta: TableMeta,
    val pinnedVersion: Option[Long],
    val sample: Option[Double],
    val planned: Option[PlannedScan])
  extends FileIndex {

  override def rootPaths: Seq[Path] = Seq(new Path(new URI(meta.uri)))

  override def partitionSchema: StructType = meta.partitionSchema

  override def refresh(): Unit = ()

  override def sizeInBytes: Long = planned.map(_.keptBytes).getOrElse(meta.sizeInBytes)

  override def inputFiles: Array[String] = currentPlan(Nil).files.map(_.uri).toArray

  override def listFiles(partitionFilters: Seq[Expression], dataFilters: Seq[Expression]): Seq[PartitionDirectory] =
    directories(currentPlan(partitionFilters ++ dataFilters), partitionFilters)

  def withSample(fraction: Double): UseFileIndex = new UseFileIndex(meta, pinnedVersion, Some(fraction), None)

  def withPlan(plan: PlannedScan): UseFileIndex = new UseFileIndex(meta, pinnedVersion, sample, Some(plan))

  private def currentPlan(filters: Seq[Expression]): PlannedScan = planned.getOrElse {
    val plan = PlannedScan.plan(Seq(ScanQuery(meta, pinnedVersion, None, filters.reduceOption(And).map(meta.withLogicalNames)))).head
    // only a planned scan's format drops deleted rows (`UsePrepareScans`): never list such files unplanned
    if (plan.files.exists(_.deletedRows.isDefined))
      throw new UseException(s"table ${meta.uri} has files with deletion vectors (Delta feature deletionVectors), which this " +
        "scan cannot drop; query the table with SQL or the Python API", "USE_UNSUPPORTED_FEATURE_ERROR", null, "0A000")
    plan
  }

  private def status(f: ScanFile): FileStatusWithMetadata =
    FileStatusWithMetadata(new FileStatus(f.size, false, 0, UseFileIndex.BlockSize, f.modificationTime, new Path(new URI(f.uri))))

  private def directories(plan: PlannedScan, partitionFilters: Seq[Expression]): Seq[PartitionDirectory] = {
    val schema = partitionSchema
    if (schema.isEmpty) return Seq(PartitionDirectory(InternalRow.empty, plan.files.map(status)))
    // A timestamp partition value names an instant: Delta's UTC ISO form (`...T09:30:00.000000Z`, what
    // USE writes) carries its zone, and a zone-less one (`2024-03-10 09:30:00`, what USE wrote before
    // and delta-rs writes) is UTC, never the session's zone (`use.delta.skipping.typed_partition_values`,
    // by which the Python side prunes). timestamp_ntz values are wall clock: the zone does not apply.
    val tz = Some("UTC")
    val keep = partitionPredicate(partitionFilters)
    plan.files.groupBy(_.partitionValues).toSeq.flatMap { case (values, files) =>
      // Partition values are the log's strings (null or "" = null), typed as Spark casts them.
      val row = InternalRow.fromSeq(schema.fields.toSeq.zip(values).map { case (field, v) =>
        if (v == null || v.isEmpty) null else Cast(Literal(v), field.dataType, tz).eval()
      })
      if (keep(row)) Some(PartitionDirectory(row, files.map(status))) else None
    }
  }

  /** Spark's partition filters evaluated on each partition's values (the Python side prunes by
    * partition too; evaluating them here keeps every filter Spark can express exact). */
  private def partitionPredicate(filters: Seq[Expression]): InternalRow => Boolean = {
    if (filters.isEmpty) return _ => true
    val names = partitionSchema.fieldNames
    val bound = filters.reduce(And).transform {
      case a: AttributeReference =>
        val i = names.indexWhere(n => SQLConf.get.resolver(n, a.name))
        BoundReference(i, partitionSchema(i).dataType, nullable = true)
    }
    val predicate = Predicate.createInterpreted(bound)
    predicate.initialize(0)
    row => predicate.eval(row)
  }

  override def toString: String = s"UseFileIndex(${meta.uri})"
}

object UseFileIndex {
  val BlockSize: Long = 128L * 1024 * 1024

  /** The USE file index under a plan node, if the node is a scan of a USE table. */
  def of(plan: LogicalPlan): Option[(LogicalRelation, HadoopFsRelation, UseFileIndex)] = plan match {
    case l: LogicalRelation => l.relation match {
      case fs: HadoopFsRelation => fs.location match {
        case idx: UseFileIndex => Some((l, fs, idx))
        case _ => None
      }
      case _ => None
    }
    case _ => None
  }
}

/** Optimizer rule (before cost-based reordering): plans the files of every USE scan of a query in
  * one Python call, with the filters that sit on each scan, and turns `TABLESAMPLE` / `df.sample`
  * over a Qbeast table into the sample's weight-range file pruning plus its exact row filter
  * (`hash(indexed columns) < Weight(f)`), so it returns exactly the rows of
  * `QbeastTable.read(sample=f)`. Samples of plain Delta tables stay Spark's random samples.
  */
class UsePrepareScans(spark: SparkSession) extends Rule[LogicalPlan] {

  private def unplanned(p: LogicalPlan): Option[(LogicalRelation, HadoopFsRelation, UseFileIndex)] =
    UseFileIndex.of(p).filter(_._3.planned.isEmpty)

  private def replaceRelation(l: LogicalRelation, fs: HadoopFsRelation, index: UseFileIndex, format: Option[UseParquetFormat]): LogicalRelation =
    l.copy(relation = fs.copy(location = index, fileFormat = format.getOrElse(fs.fileFormat))(fs.sparkSession))

  /** The Qbeast scan a sample applies to, below projections and filters. */
  private def sampledScan(p: LogicalPlan): Option[LogicalPlan] = p match {
    case Project(_, child) => sampledScan(child)
    case Filter(_, child) => sampledScan(child)
    case leaf => unplanned(leaf).filter(s => s._3.meta.isQbeast && s._3.sample.isEmpty).map(_ => leaf)
  }

  private def absorbSamples(plan: LogicalPlan): LogicalPlan = plan.transformDown {
    case s: Sample if s.lowerBound == 0.0 && !s.withReplacement && sampledScan(s.child).isDefined =>
      val scan = sampledScan(s.child).get
      val (l, fs, index) = unplanned(scan).get
      val marked = replaceRelation(l, fs, index.withSample(math.min(1.0, s.upperBound)), None)
      s.child.transformDown { case leaf if leaf eq scan => marked }
  }

  override def apply(plan: LogicalPlan): LogicalPlan = {
    if (plan.find(p => unplanned(p).isDefined).isEmpty) return plan
    val sampled = absorbSamples(plan)
    // The outermost Project/Filter chain above each scan holds its filters (pre-order: parents first).
    val filters = new java.util.IdentityHashMap[LogicalRelation, Seq[Expression]]()
    val order = mutable.ArrayBuffer.empty[LogicalRelation]
    sampled.foreach {
      case op @ PhysicalOperation(_, fs, leaf) if unplanned(leaf).isDefined =>
        val l = leaf.asInstanceOf[LogicalRelation]
        if (!filters.containsKey(l)) { filters.put(l, fs); order += l }
      case _ =>
    }
    if (order.isEmpty) return sampled
    val requests = order.map { l =>
      val index = unplanned(l).get._3
      ScanQuery(index.meta, index.pinnedVersion, index.sample, filters.get(l).reduceOption(And).map(index.meta.withLogicalNames))
    }
    val plans = PlannedScan.plan(requests.toSeq)
    val byRelation = new java.util.IdentityHashMap[LogicalRelation, PlannedScan]()
    order.zip(plans).foreach { case (l, p) => byRelation.put(l, p) }
    sampled.transformUp {
      case l: LogicalRelation if byRelation.containsKey(l) =>
        val (_, fs, index) = unplanned(l).get
        val scanPlan = byRelation.get(l)
        val format = new UseParquetFormat(scanPlan.label(index.meta, index.sample), DeletedRows.of(scanPlan.files))
        val planned = replaceRelation(l, fs, index.withPlan(scanPlan), Some(format))
        scanPlan.sampleUpper match {
          case Some(upper) =>
            val columns = scanPlan.sampleColumns.map { c =>
              val stored = index.meta.storedName(c)  // the files' name for it (Delta column mapping)
              l.output.find(a => SQLConf.get.resolver(a.name, stored)).getOrElse(
                throw new UseException(s"the sample's indexed column $c is not a column of ${index.meta.uri}", UseException.Kinds.Internal))
            }
            Filter(LessThan(new Murmur3Hash(columns), Literal(upper)), planned)
          case None => planned
        }
    }
  }
}
