package use.shim

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.charset.StandardCharsets
import java.util.{Locale, UUID}

import scala.collection.mutable

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.hadoop.mapreduce.{Job, JobID, TaskAttemptID, TaskID, TaskType}
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl
import org.apache.spark.TaskContext
import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection}
import org.apache.spark.sql.classic.Dataset
import org.apache.spark.sql.execution.datasources.{OutputWriter, OutputWriterFactory}
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.types.{DoubleType, FloatType, StructType}
import org.apache.spark.util.SerializableConfiguration

/** The cubes of one write's plan, as the row walk probes them: per depth, cube bits -> entry.
  *
  * Decided on the driver in Python (`use.qbeast.jvm_write`): each entry says whether the cube has a
  * maxWeight (and which) and which file of the rollup plan holds it (-1: none, the nearest ancestor's).
  * Records are little-endian `depth:int32, hasWeight:int32, weight:int32, file:int32, bits:int64`.
  */
final class CubeTable(val maxDepth: Int, val hasWeight: Array[Boolean], val weight: Array[Int], val file: Array[Int],
                      byDepth: Array[mutable.LongMap[Int]]) extends Serializable {
  def find(depth: Int, bits: Long): Int = byDepth(depth).getOrElse(bits, -1)
}

object CubeTable {
  private val RecordBytes = 24

  def decode(records: Array[Byte], maxDepth: Int): CubeTable = {
    require(records.length % RecordBytes == 0, s"cube records must be $RecordBytes bytes each, got ${records.length} bytes")
    val n = records.length / RecordBytes
    val buf = ByteBuffer.wrap(records).order(ByteOrder.LITTLE_ENDIAN)
    val hasWeight = new Array[Boolean](n)
    val weight = new Array[Int](n)
    val file = new Array[Int](n)
    val byDepth = Array.fill(maxDepth + 1)(mutable.LongMap.empty[Int])
    var i = 0
    while (i < n) {
      val depth = buf.getInt()
      hasWeight(i) = buf.getInt() != 0
      weight(i) = buf.getInt()
      file(i) = buf.getInt()
      val bits = buf.getLong()
      if (depth <= maxDepth) byDepth(depth).update(bits, i)
      i += 1
    }
    new CubeTable(maxDepth, hasWeight, weight, file, byDepth)
  }
}

/** The data files of one OTree write, written by Spark's own parquet writer with the rows never
  * leaving the JVM (the Python path moves every row to Python and back as Arrow, which costs about
  * as much as the parquet write itself).
  *
  * The rows come as `data columns..., weight: int, coordinates: double * d` with the coordinates
  * already transformed into [0, 1] by Spark expressions the driver built. Every task walks each row
  * down its containers (the same arithmetic as `use.qbeast.cube.container_symbols`: double `x*2`,
  * `x >= 1` -> upper half) and stops at the first cube whose maxWeight is at least the row's weight,
  * or that has none, exactly as `use.qbeast.estimate.assign_cubes`; the row goes to the file of that
  * cube or of its nearest ancestor in the plan. Each task writes its own part of every file its rows
  * fall into, named `uuid3(writeId, "task/file")` as the Python path names them, and returns one line
  * per file with its size, rows, NaN-holding float columns and exact block statistics. The Delta
  * stats come from the file's footer on the driver; what a cube is called is decided there too.
  *
  * No planning happens here: the plan (cube weights, files) arrives decided.
  */
object OTreeFileWriter {
  val MaxWeight: Int = Int.MaxValue

  def write(df: Dataset[Row], dataColumns: Int, dimensions: Int, cubes: Array[Byte], maxDepth: Int, numFiles: Int,
            tableRoot: String, writeId: String, codec: String,
            plainColumns: java.util.List[String]): Array[String] = {
    val schema = df.schema
    require(schema.length == dataColumns + 1 + dimensions,
      s"expected $dataColumns data columns, the weight and $dimensions coordinates, got ${schema.length} columns")
    require(maxDepth * dimensions <= 57, s"cube bits of depth $maxDepth in $dimensions dimensions do not fit a long key")
    val table = CubeTable.decode(cubes, maxDepth)
    require(table.file.forall(_ < numFiles), s"the cube table names files beyond the plan's $numFiles")
    val dataSchema = StructType(schema.fields.take(dataColumns))
    val spark = df.sparkSession
    val job = Job.getInstance(spark.sessionState.newHadoopConf())
    val factory = new ParquetFileFormat().prepareWrite(spark, job, Map("compression" -> codec), dataSchema)
    val conf = job.getConfiguration
    // INT64 microsecond timestamps, as the Python path writes them (Spark's default INT96 has no
    // statistics, so Delta stats could not bound them). Row groups are parquet-mr's, as in any
    // Spark write (`parquet.block.size`, 128 MB): measured on 5M rows, 8 MB row groups made
    // Spark's writer 25% slower.
    conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    // Columns of distinct values (ids, measurements) are written without a dictionary: in files
    // of a few thousand rows a dictionary never outgrows its page and falls back, so every value
    // is hashed for nothing (measured on 5M rows in 292 files: 8-11 s with, 5.1-5.4 s without).
    plainColumns.forEach(c => conf.setBoolean(s"parquet.enable.dictionary#$c", false))
    // No `.crc` side files next to the data files: the table root holds only what the log names.
    conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
    conf.setBoolean("fs.file.impl.disable.cache", true)
    val serializableConf = new SerializableConfiguration(conf)
    val floatColumns = dataSchema.fields.indices.filter { i =>
      dataSchema(i).dataType == FloatType || dataSchema(i).dataType == DoubleType
    }.toArray
    val isFloat = floatColumns.map(i => dataSchema(i).dataType == FloatType)
    val namespace = uuidBytes(UUID.fromString(writeId))
    val jobTrackerId = "use-otree-" + writeId.replace("-", "")
    val rdd = df.queryExecution.toRdd
    val rddId = rdd.id
    rdd.mapPartitionsWithIndex { (task, rows) =>
      val files = new TaskFiles(
        task, serializableConf.value, factory, dataSchema, dataColumns, dimensions, table, numFiles, tableRoot,
        namespace, floatColumns, isFloat, jobTrackerId, rddId)
      try {
        rows.foreach(files.add)
        files.finish().iterator
      } catch {
        case t: Throwable =>
          files.abort()
          throw t
      }
    }.collect()
  }

  private def uuidBytes(u: UUID): Array[Byte] =
    ByteBuffer.allocate(16).putLong(u.getMostSignificantBits).putLong(u.getLeastSignificantBits).array()

  /** `uuid.uuid3(namespace, name)` of Python: MD5 over the namespace bytes and the UTF-8 name. */
  def fileName(namespace: Array[Byte], task: Int, file: Int): String =
    UUID.nameUUIDFromBytes(namespace ++ s"$task/$file".getBytes(StandardCharsets.UTF_8)).toString + ".parquet"
}

/** One open data file of a task: its writer, rows and blocks (cube key -> count, min weight; the
  * block's maxWeight is its cube's, which the driver knows). */
private final class OpenFile(val name: String, val path: Path, val writer: OutputWriter, floats: Int) {
  var rows: Long = 0L
  // Rows are handed to the parquet writer a run at a time: interleaving single rows over dozens of
  // open writers touches every writer's page buffers per row and thrashes the CPU caches.
  val buffer: Array[InternalRow] = new Array[InternalRow](OpenFile.RunRows)
  var buffered: Int = 0

  def flush(): Unit = {
    var i = 0
    while (i < buffered) {
      writer.write(buffer(i))
      buffer(i) = null
      i += 1
    }
    buffered = 0
  }
  val blocks: mutable.LongMap[Array[Long]] = mutable.LongMap.empty[Array[Long]]
  val nan: Array[Boolean] = new Array[Boolean](floats)
}

private object OpenFile {
  val RunRows = 1024
}

private final class TaskFiles(task: Int, baseConf: Configuration, factory: OutputWriterFactory, dataSchema: StructType,
                              dataColumns: Int, dimensions: Int, table: CubeTable, numFiles: Int, tableRoot: String,
                              namespace: Array[Byte], floatColumns: Array[Int], isFloat: Array[Boolean],
                              jobTrackerId: String, rddId: Int) {
  private val context = {
    val tc = TaskContext.get()
    val attempt = if (tc == null) 0 else tc.attemptNumber()
    val conf = new Configuration(baseConf)
    val attemptId = new TaskAttemptID(new TaskID(new JobID(jobTrackerId, rddId), TaskType.MAP, task), attempt)
    conf.set("mapreduce.job.id", attemptId.getJobID.toString)
    conf.set("mapreduce.task.id", attemptId.getTaskID.toString)
    conf.set("mapreduce.task.attempt.id", attemptId.toString)
    conf.setBoolean("mapreduce.task.ismap", true)
    conf.setInt("mapreduce.task.partition", task)
    new TaskAttemptContextImpl(conf, attemptId)
  }
  private val project = UnsafeProjection.create(
    dataSchema.fields.indices.map(i => BoundReference(i, dataSchema(i).dataType, dataSchema(i).nullable)).toSeq)
  private val files = new Array[OpenFile](numFiles)
  private val coords = new Array[Double](dimensions)
  private val weightOrdinal = dataColumns
  private val maxDepth = table.maxDepth

  def add(row: InternalRow): Unit = {
    val w = row.getInt(weightOrdinal)
    var i = 0
    while (i < dimensions) {
      coords(i) = row.getDouble(dataColumns + 1 + i)
      i += 1
    }
    var depth = 0
    var bits = 0L
    var file = -1
    var walking = true
    while (walking) {
      val idx = table.find(depth, bits)
      if (idx >= 0 && table.file(idx) >= 0) file = table.file(idx)
      val hasWeight = idx >= 0 && table.hasWeight(idx)
      val cw = if (hasWeight) table.weight(idx) else OTreeFileWriter.MaxWeight
      if (!hasWeight || w <= cw || depth == maxDepth) {
        walking = false
      } else {
        var dim = 0
        while (dim < dimensions) {
          var x = coords(dim) * 2.0
          if (x >= 1.0) {
            bits |= 1L << (depth * dimensions + dim)
            x -= 1.0
          }
          coords(dim) = x
          dim += 1
        }
        depth += 1
      }
    }
    if (file < 0 || file >= files.length) throw new IllegalStateException("the rollup plan has no file for a row (it must hold the root cube)")
    var open = files(file)
    if (open == null) {
      open = openFile(file)
      files(file) = open
    }
    open.buffer(open.buffered) = project(row).copy()
    open.buffered += 1
    if (open.buffered == open.buffer.length) open.flush()
    open.rows += 1
    val key = (depth.toLong << 57) | bits
    var block = open.blocks.getOrNull(key)
    if (block == null) {
      block = Array(0L, Long.MaxValue)
      open.blocks.update(key, block)
    }
    block(0) += 1
    if (w < block(1)) block(1) = w
    var f = 0
    while (f < floatColumns.length) {
      if (!open.nan(f)) {
        val o = floatColumns(f)
        if (!row.isNullAt(o) && (if (isFloat(f)) row.getFloat(o).isNaN else row.getDouble(o).isNaN)) open.nan(f) = true
      }
      f += 1
    }
  }

  private def openFile(file: Int): OpenFile = {
    val name = OTreeFileWriter.fileName(namespace, task, file)
    val path = new Path(tableRoot, name)
    // A retry of a task that failed after writing its file finds it there; the driver never saw
    // that attempt's metadata, so the file is replaced.
    val fs = path.getFileSystem(context.getConfiguration)
    fs.delete(path, false)
    new OpenFile(name, path, factory.newInstance(path.toString, dataSchema, context), floatColumns.length)
  }

  /** Close every file; one line each: name, size, mtime, rows, NaN float ordinals, blocks. */
  def finish(): Seq[String] = {
    files.toSeq.filter(_ != null).map { open =>
      open.flush()
      open.writer.close()
      val status = open.path.getFileSystem(context.getConfiguration).getFileStatus(open.path)
      val nans = floatColumns.indices.filter(open.nan(_)).map(floatColumns(_)).mkString(",")
      val blocks = open.blocks.toSeq.map { case (key, b) =>
        s"${key >>> 57},${key & ((1L << 57) - 1)},${b(0)},${b(1)}"
      }.mkString(";")
      String.format(Locale.ROOT, "%s\t%d\t%d\t%d\t%s\t%s",
        open.name, Long.box(status.getLen), Long.box(status.getModificationTime), Long.box(open.rows), nans, blocks)
    }
  }

  /** After a failure: close and delete what this attempt wrote (the driver deletes every name too). */
  def abort(): Unit = {
    files.filter(_ != null).foreach { open =>
      try open.writer.close() catch { case _: Throwable => }
      try open.path.getFileSystem(context.getConfiguration).delete(open.path, false) catch { case _: Throwable => }
    }
    java.util.Arrays.fill(files.asInstanceOf[Array[AnyRef]], null)
  }
}
