/** The rows deletion vectors delete, dropped inside a USE scan's parquet reader. The Python side
  * decodes and checks each file's deletion vector once per query (`use.delta.deletion_vectors`) and
  * sends its row indexes as a portable 32-bit roaring bitmap with the file (`use.sql.scan`); the
  * reader asks Spark's parquet reader for each row's position in its file (the temporary row index
  * column, counted over the whole file whatever row groups are skipped or splits read) and keeps the
  * rows whose position is not in the file's bitmap. */
package use.sql

import java.net.URI
import java.nio.ByteBuffer

import org.apache.hadoop.fs.Path
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection}
import org.apache.spark.sql.execution.datasources.PartitionedFile
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.types.{LongType, StructField, StructType}
import org.roaringbitmap.RoaringBitmap

/** Per data file of one scan (by its path), the serialized bitmap of the rows its deletion vector
  * deletes; files without one are absent. Travels to the executors with the reader function. */
final class DeletedRows(private val bitmaps: Map[String, Array[Byte]]) extends Serializable {

  def isEmpty: Boolean = bitmaps.isEmpty

  def size: Int = bitmaps.size

  def of(file: PartitionedFile): Option[RoaringBitmap] =
    bitmaps.get(DeletedRows.key(file.toPath)).map { bytes =>
      val bitmap = new RoaringBitmap()
      bitmap.deserialize(ByteBuffer.wrap(bytes))
      bitmap
    }
}

object DeletedRows {
  val empty: DeletedRows = new DeletedRows(Map.empty)

  /** A file's key: its decoded path (the scan's files are local, so the path names one file). */
  private def key(path: Path): String = path.toUri.getPath

  def of(files: Seq[ScanFile]): DeletedRows =
    new DeletedRows(files.flatMap(f => f.deletedRows.map(bytes => key(new Path(new URI(f.uri))) -> bytes)).toMap)

  /** `read` (a parquet reader for a required schema) as a reader of `requiredSchema` whose rows
    * exclude the deleted ones: it reads the row index too and projects it away. */
  def filtered(
      read: StructType => (PartitionedFile => Iterator[InternalRow]),
      requiredSchema: StructType,
      partitionSchema: StructType,
      deleted: DeletedRows): PartitionedFile => Iterator[InternalRow] = {
    // nullable: the parquet readers fill a column missing from the file with nulls, then the row index
    val withIndex = requiredSchema.add(StructField(ParquetFileFormat.ROW_INDEX_TEMPORARY_COLUMN_NAME, LongType, nullable = true))
    val reader = read(withIndex)
    val n = requiredSchema.length
    // the reader's rows: required columns, the row index, partition values; the scan's: without the index
    val fields = requiredSchema.fields ++ partitionSchema.fields
    val columns = fields.indices.map(i => BoundReference(if (i < n) i else i + 1, fields(i).dataType, fields(i).nullable))
    (file: PartitionedFile) => {
      val project = UnsafeProjection.create(columns)
      val rows = reader(file)
      deleted.of(file) match {
        case None => rows.map(project)
        case Some(gone) => rows.filter(r => !gone.contains(r.getLong(n).toInt)).map(project)
      }
    }
  }
}
