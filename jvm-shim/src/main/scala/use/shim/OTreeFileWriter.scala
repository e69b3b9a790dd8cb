package use.shim

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.charset.StandardCharsets
import java.util.{Locale, UUID}

import scala.collection.mutable

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.hadoop.mapreduce.{Job, JobID, TaskAttemptID, TaskID, TaskType}
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl
import org.apache.spark.{Partitioner, TaskContext}
import org.apache.spark.rdd.{PartitionCoalescer, PartitionGroup, RDD, ShuffledRDD}
import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, JoinedRow, SpecificInternalRow, UnsafeProjection}
import org.apache.spark.sql.classic.Dataset
import org.apache.spark.sql.execution.UnsafeRowSerializer
import org.apache.spark.sql.execution.datasources.{OutputWriter, OutputWriterFactory}
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.types.{DoubleType, FloatType, IntegerType, LongType, StructType}
import org.apache.spark.util.{MutablePair, SerializableConfiguration}

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

/** The walk of one row down the planned cubes, as `use.qbeast.estimate.assign_cubes` places a row:
  * from the root, halving each coordinate per level (double `x*2`, `x >= 1` -> upper half, the
  * arithmetic of `use.qbeast.cube.container_symbols`), it stops at the first cube whose maxWeight
  * is at least the row's weight, or that has none; the row belongs to that cube, and to the file of
  * that cube or of its nearest ancestor in the plan. One walker per task: it keeps its results in
  * fields (`depth`, `bits`, `file`) so a row costs no allocation. A walk that only counts rows per
  * cube (`needFile` false) takes cubes without a file.
  */
private final class CubeWalker(table: CubeTable, dimensions: Int, firstCoordinate: Int, needFile: Boolean = true) {
  private val coords = new Array[Double](dimensions)
  var depth: Int = 0
  var bits: Long = 0L
  var file: Int = -1

  /** The cube's key as the shim's block lines carry it: `depth << 57 | bits`. */
  def key: Long = (depth.toLong << 57) | bits

  def walk(row: InternalRow, weight: Int): Unit = {
    var i = 0
    while (i < dimensions) {
      coords(i) = row.getDouble(firstCoordinate + i)
      i += 1
    }
    depth = 0
    bits = 0L
    file = -1
    var walking = true
    while (walking) {
      val idx = table.find(depth, bits)
      if (idx >= 0 && table.file(idx) >= 0) file = table.file(idx)
      val hasWeight = idx >= 0 && table.hasWeight(idx)
      val cw = if (hasWeight) table.weight(idx) else OTreeFileWriter.MaxWeight
      if (!hasWeight || weight <= cw || depth == table.maxDepth) {
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
    if (file < 0 && needFile) {
      throw new IllegalStateException("the rollup plan has no file for a row (it must hold the root cube)")
    }
  }
}

/** What every write task of one OTree write needs, prepared on the driver: Spark's parquet
  * writer factory and Hadoop configuration, the data schema and its float columns (checked for
  * NaN), and the file naming of the write. */
private final class WriteSetup(val factory: OutputWriterFactory, val conf: SerializableConfiguration,
                       val dataSchema: StructType, val floatColumns: Array[Int], val isFloat: Array[Boolean],
                       val namespace: Array[Byte], val jobTrackerId: String, val tableRoot: String) extends Serializable

/** The data files of one OTree write, written by Spark's own parquet writer with the rows never
  * leaving the JVM (the Python path moves every row to Python and back as Arrow, which costs about
  * as much as the parquet write itself).
  *
  * The rows come as `data columns..., weight: int, coordinates: double * d` with the coordinates
  * already transformed into [0, 1] by Spark expressions the driver built. Each row is walked down
  * the planned cubes (`CubeWalker`) to its cube and file. Two ways to write:
  *
  *  - `write`: no shuffle. Each task writes its own part of every file its rows fall into.
  *  - `writeShuffled`: the rows are shuffled by file first (the walk on the map side gives each
  *    row its file, the driver's `taskOfFile` its write task; the row travels with its file and
  *    cube, without its coordinates), so each file of the plan is written once, whole, by one task.
  *
  * A file is named `uuid3(writeId, "task/file")` as the Python path names it, so the driver knows
  * every name beforehand; each task returns one line per file with its size, rows, NaN-holding
  * float columns and exact block statistics. The Delta stats come from the file's footer on the
  * driver; what a cube is called is decided there too.
  *
  * No planning happens here: the plan (cube weights, files, the task of each file) arrives decided.
  */
object OTreeFileWriter {
  val MaxWeight: Int = Int.MaxValue

  def write(df: Dataset[Row], dataColumns: Int, dimensions: Int, cubes: Array[Byte], maxDepth: Int, numFiles: Int,
            tableRoot: String, writeId: String, codec: String,
            plainColumns: java.util.List[String]): Array[String] = {
    val table = decodeTable(df, dataColumns, dimensions, cubes, maxDepth, numFiles)
    val setup = prepare(df, dataColumns, tableRoot, writeId, codec, plainColumns)
    val rdd = df.queryExecution.toRdd
    val rddId = rdd.id
    rdd.mapPartitionsWithIndex { (task, rows) =>
      val walker = new CubeWalker(table, dimensions, dataColumns + 1)
      val files = new TaskFiles(task, setup, dataColumns, numFiles, rddId)
      files.run {
        rows.foreach { row =>
          val w = row.getInt(dataColumns)
          walker.walk(row, w)
          files.add(row, w, walker.file, walker.key)
        }
      }
    }.collect()
  }

  /** Rows per cube when the rows (`weight: int, coordinates: double * d`) walk down the table's
    * cubes: the counting pass of a rewrite whose rows per cube its blocks cannot tell
    * (`use.qbeast.index_plan.plan_rewrite`), without moving the rows to Python. One line per task,
    * `depth,bits,count` per cube joined by `;`; the driver sums them. */
  def countCubes(df: Dataset[Row], dimensions: Int, cubes: Array[Byte], maxDepth: Int): Array[String] = {
    require(df.schema.length == 1 + dimensions, s"expected the weight and $dimensions coordinates, got ${df.schema.length} columns")
    require(maxDepth * dimensions <= 57, s"cube bits of depth $maxDepth in $dimensions dimensions do not fit a long key")
    val table = CubeTable.decode(cubes, maxDepth)
    df.queryExecution.toRdd.mapPartitions { rows =>
      val walker = new CubeWalker(table, dimensions, 1, needFile = false)
      val counts = mutable.LongMap.empty[Long]
      rows.foreach { row =>
        walker.walk(row, row.getInt(0))
        counts.update(walker.key, counts.getOrElse(walker.key, 0L) + 1L)
      }
      Iterator.single(counts.toSeq.map { case (key, n) => s"${key >>> 57},${key & ((1L << 57) - 1)},$n" }.mkString(";"))
    }.collect()
  }

  def writeShuffled(df: Dataset[Row], dataColumns: Int, dimensions: Int, cubes: Array[Byte], maxDepth: Int,
                    taskOfFileBytes: Array[Byte], tableRoot: String, writeId: String, codec: String,
                    plainColumns: java.util.List[String]): Array[String] = {
    // Little-endian int32 per file: the write task of each file of the plan.
    require(taskOfFileBytes.length % 4 == 0, s"task of file must be 4 bytes a file, got ${taskOfFileBytes.length} bytes")
    val taskOfFile = new Array[Int](taskOfFileBytes.length / 4)
    ByteBuffer.wrap(taskOfFileBytes).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(taskOfFile)
    val numFiles = taskOfFile.length
    val table = decodeTable(df, dataColumns, dimensions, cubes, maxDepth, numFiles)
    val numTasks = if (numFiles == 0) 1 else taskOfFile.max + 1
    require(taskOfFile.forall(_ >= 0), "every file needs a write task")
    val setup = prepare(df, dataColumns, tableRoot, writeId, codec, plainColumns)
    val schema = df.schema
    // Shuffled rows: the data columns and the weight, then the row's file and cube key.
    val shuffledFields = dataColumns + 3
    val keep = (0 to dataColumns).map(i => BoundReference(i, schema(i).dataType, schema(i).nullable))
    val firstExtra = schema.length
    val project = keep ++ Seq(BoundReference(firstExtra, IntegerType, false), BoundReference(firstExtra + 1, LongType, false))
    // Spark's sort-based shuffle writers serialize each record as it comes (UnsafeRowSerializer
    // relocates serialized rows, nothing is aggregated), so the projection's reused row needs no
    // copy; another shuffle manager may hold records, so there each row is copied.
    val manager = df.sparkSession.sparkContext.getConf.get("spark.shuffle.manager", "sort")
    val copyRows = !(manager.equalsIgnoreCase("sort") || manager.equalsIgnoreCase("tungsten-sort") ||
      manager == "org.apache.spark.shuffle.sort.SortShuffleManager")
    val keyed = df.queryExecution.toRdd.mapPartitions { rows =>
      val walker = new CubeWalker(table, dimensions, dataColumns + 1)
      val extra = new SpecificInternalRow(Seq(IntegerType, LongType))
      val joined = new JoinedRow()
      val toShuffled = UnsafeProjection.create(project)
      val pair = new MutablePair[Int, InternalRow]()
      rows.map { row =>
        walker.walk(row, row.getInt(dataColumns))
        extra.setInt(0, walker.file)
        extra.setLong(1, walker.key)
        val out = toShuffled(joined(row, extra))
        pair.update(walker.file, if (copyRows) out.copy() else out)
      }
    }
    // One shuffle partition per file, and each write task reads its files' partitions one after
    // the other (`FilesOfTask`): a task's rows arrive file by file, so it keeps one parquet writer
    // open and hands it each row as it comes. Partitions by task had every file of the task open
    // at once and each row copied into a per-file run (measured: 10% of the task's CPU in the
    // copies, and dozens of writers' page buffers alive together).
    val shuffled = new ShuffledRDD[Int, InternalRow, InternalRow](keyed, new FilePartitioner(math.max(numFiles, 1)))
      .setSerializer(new UnsafeRowSerializer(shuffledFields))
    val rddId = shuffled.id
    shuffled.coalesce(numTasks, shuffle = false, partitionCoalescer = Some(new FilesOfTask(taskOfFile, numTasks)))
      .mapPartitionsWithIndex { (task, pairs) =>
        val files = new TaskFiles(task, setup, dataColumns, numFiles, rddId)
        files.run {
          pairs.foreach { pair =>
            val row = pair._2
            val file = row.getInt(dataColumns + 1)
            // Only the names the driver registered may be written (it deletes them after a failure).
            if (taskOfFile(file) != task) {
              throw new IllegalStateException(s"file $file belongs to write task ${taskOfFile(file)}, not to $task")
            }
            files.addInOrder(row, row.getInt(dataColumns), file, row.getLong(dataColumns + 2))
          }
        }
      }.collect()
  }

  private def decodeTable(df: Dataset[Row], dataColumns: Int, dimensions: Int, cubes: Array[Byte], maxDepth: Int,
                          numFiles: Int): CubeTable = {
    require(df.schema.length == dataColumns + 1 + dimensions,
      s"expected $dataColumns data columns, the weight and $dimensions coordinates, got ${df.schema.length} columns")
    require(maxDepth * dimensions <= 57, s"cube bits of depth $maxDepth in $dimensions dimensions do not fit a long key")
    val table = CubeTable.decode(cubes, maxDepth)
    require(table.file.forall(_ < numFiles), s"the cube table names files beyond the plan's $numFiles")
    table
  }

  private def prepare(df: Dataset[Row], dataColumns: Int, tableRoot: String, writeId: String, codec: String,
                      plainColumns: java.util.List[String]): WriteSetup = {
    val dataSchema = StructType(df.schema.fields.take(dataColumns))
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
    val floatColumns = dataSchema.fields.indices.filter { i =>
      dataSchema(i).dataType == FloatType || dataSchema(i).dataType == DoubleType
    }.toArray
    val isFloat = floatColumns.map(i => dataSchema(i).dataType == FloatType)
    new WriteSetup(factory, new SerializableConfiguration(conf), dataSchema, floatColumns, isFloat,
      uuidBytes(UUID.fromString(writeId)), "use-otree-" + writeId.replace("-", ""), tableRoot)
  }

  private def uuidBytes(u: UUID): Array[Byte] =
    ByteBuffer.allocate(16).putLong(u.getMostSignificantBits).putLong(u.getLeastSignificantBits).array()

  /** `uuid.uuid3(namespace, name)` of Python: MD5 over the namespace bytes and the UTF-8 name. */
  def fileName(namespace: Array[Byte], task: Int, file: Int): String =
    UUID.nameUUIDFromBytes(namespace ++ s"$task/$file".getBytes(StandardCharsets.UTF_8)).toString + ".parquet"
}

/** Keys are the file of the plan, which is the shuffle partition itself, chosen on the map side. */
private final class FilePartitioner(files: Int) extends Partitioner {
  override def numPartitions: Int = files
  override def getPartition(key: Any): Int = key.asInstanceOf[Int]
}

/** Write task t reads the shuffle partitions (files) `f` with `taskOfFile(f) == t`, in file order:
  * a coalesced partition reads its parents one after the other, so the task sees each file's rows
  * together. */
private final class FilesOfTask(taskOfFile: Array[Int], tasks: Int) extends PartitionCoalescer with Serializable {
  override def coalesce(maxPartitions: Int, parent: RDD[_]): Array[PartitionGroup] = {
    val groups = Array.fill(tasks)(new PartitionGroup())
    parent.partitions.foreach { p =>
      if (p.index < taskOfFile.length) groups(taskOfFile(p.index)).partitions += p
    }
    groups
  }
}

/** One open data file of a task: its writer, rows and blocks (cube key -> count, min weight; the
  * block's maxWeight is its cube's, which the driver knows). */
private final class OpenFile(val file: Int, val name: String, val path: Path, val writer: OutputWriter, floats: Int) {
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

/** The files one write task fills, from rows whose file and cube are known. */
private final class TaskFiles(task: Int, setup: WriteSetup, dataColumns: Int, numFiles: Int, rddId: Int) {
  private val context = {
    val tc = TaskContext.get()
    val attempt = if (tc == null) 0 else tc.attemptNumber()
    val conf = new Configuration(setup.conf.value)
    val attemptId = new TaskAttemptID(new TaskID(new JobID(setup.jobTrackerId, rddId), TaskType.MAP, task), attempt)
    conf.set("mapreduce.job.id", attemptId.getJobID.toString)
    conf.set("mapreduce.task.id", attemptId.getTaskID.toString)
    conf.set("mapreduce.task.attempt.id", attemptId.toString)
    conf.setBoolean("mapreduce.task.ismap", true)
    conf.setInt("mapreduce.task.partition", task)
    new TaskAttemptContextImpl(conf, attemptId)
  }
  private val dataSchema = setup.dataSchema
  private val floatColumns = setup.floatColumns
  private val isFloat = setup.isFloat
  private val project = UnsafeProjection.create(
    dataSchema.fields.indices.map(i => BoundReference(i, dataSchema(i).dataType, dataSchema(i).nullable)).toSeq)
  private val files = new Array[OpenFile](numFiles)
  // Every file this attempt opened (for `abort`), the lines of those already closed, and the file
  // `addInOrder` is filling.
  private val opened = mutable.ArrayBuffer.empty[OpenFile]
  private val done = mutable.ArrayBuffer.empty[String]
  private var current: OpenFile = null
  private val closed = new Array[Boolean](numFiles)

  /** Feed the task's rows (`body`), then close every file and describe it; after a failure,
    * delete what this attempt wrote. */
  def run(body: => Unit): Iterator[String] = {
    try {
      body
      finish().iterator
    } catch {
      case t: Throwable =>
        abort()
        throw t
    }
  }

  /** One row (the data columns first) of weight `w`, in cube `key` of file `file`; the rows of a
    * file may come between other files' rows (each file buffers runs of copied rows). */
  def add(row: InternalRow, w: Int, file: Int, key: Long): Unit = {
    val open = fileFor(file)
    open.buffer(open.buffered) = project(row).copy()
    open.buffered += 1
    if (open.buffered == open.buffer.length) open.flush()
    account(open, row, w, key)
  }

  /** `add` for rows that come file by file (a file's rows all together): each file is closed when
    * the next one starts, so one writer is open at a time and a row goes to it as it comes, uncopied. */
  def addInOrder(row: InternalRow, w: Int, file: Int, key: Long): Unit = {
    if (current != null && current.file != file) {
      done += describe(current)
      closed(current.file) = true
      files(current.file) = null
      current = null
    }
    if (current == null) {
      if (file >= 0 && file < files.length && closed(file)) {
        throw new IllegalStateException(s"the rows of file $file came after another file's rows")
      }
      current = fileFor(file)
    }
    current.writer.write(project(row))
    account(current, row, w, key)
  }

  private def fileFor(file: Int): OpenFile = {
    if (file < 0 || file >= files.length) throw new IllegalStateException(s"file $file is not in the plan's $numFiles")
    var open = files(file)
    if (open == null) {
      open = openFile(file)
      files(file) = open
      opened += open
    }
    open
  }

  private def account(open: OpenFile, row: InternalRow, w: Int, key: Long): Unit = {
    open.rows += 1
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
    val name = OTreeFileWriter.fileName(setup.namespace, task, file)
    val path = new Path(setup.tableRoot, name)
    // A retry of a task that failed after writing its file finds it there; the driver never saw
    // that attempt's metadata, so the file is replaced.
    val fs = path.getFileSystem(context.getConfiguration)
    fs.delete(path, false)
    new OpenFile(file, name, path, setup.factory.newInstance(path.toString, dataSchema, context), floatColumns.length)
  }

  /** Close every file; one line each: name, size, mtime, rows, NaN float ordinals, blocks. */
  private def finish(): Seq[String] = done.toSeq ++ files.toSeq.filter(_ != null).map(describe)

  private def describe(open: OpenFile): String = {
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

  /** After a failure: close and delete what this attempt wrote (the driver deletes every name too). */
  private def abort(): Unit = {
    opened.foreach { open =>
      try open.writer.close() catch { case _: Throwable => }
      try open.path.getFileSystem(context.getConfiguration).delete(open.path, false) catch { case _: Throwable => }
    }
    java.util.Arrays.fill(files.asInstanceOf[Array[AnyRef]], null)
  }
}
