package org.apache.spark.sql.use

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection
import org.apache.spark.sql.execution.arrow.ArrowConverters
import org.apache.spark.sql.types.StructType

/** Rows to and from Arrow IPC streams with Spark's own converters (`ArrowConverters`, which Spark
  * declares private to its sql package): how rows cross between the shim and USE's Python side (a
  * procedure's arguments and result, a scan's files), each value in its Spark type. */
object ArrowRows {

  /** The rows of an Arrow IPC stream and their schema, copied out of Arrow's buffers. */
  def read(stream: Array[Byte]): (StructType, Array[InternalRow]) = {
    val (rows, schema) = ArrowConverters.fromIPCStream(stream)
    try {
      val toUnsafe = UnsafeProjection.create(schema)
      (schema, rows.map(r => toUnsafe(r).copy(): InternalRow).toArray)
    } finally rows.close()
  }

  /** `rows` (of `schema`) as one Arrow IPC stream, timestamps in `timeZone`. */
  def write(schema: StructType, rows: Seq[InternalRow], timeZone: String): Array[Byte] = {
    val batches = ArrowConverters.toBatchWithSchemaIterator(rows.iterator, schema, Long.MaxValue, Long.MaxValue, timeZone,
      errorOnDuplicatedFieldNames = true, largeVarTypes = false)
    try {
      if (batches.hasNext) batches.next()
      else ArrowConverters.createEmptyArrowBatch(schema, timeZone, errorOnDuplicatedFieldNames = true, largeVarTypes = false)
    } finally batches.close()
  }
}
