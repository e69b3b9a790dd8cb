package org.apache.spark.sql.use

import org.apache.spark.sql.connector.catalog.V2TableWithV1Fallback

/** Spark's marker of a DSv2 table that also has a V1 form (`v1Table`: its catalog entry), which
  * Spark declares private to its sql package; USE's tables (`use.sql.UseTable`) take it through
  * this alias. Spark 4.1 reads it in two places only: `df.writeStream.format(p).toTable(t)` then
  * starts the provider's stream sink on the table's location (the exactly-once sink of
  * `format("delta").start(path)`, as for Delta's own tables), and `spark.readStream.table(t)` reads
  * the provider's stream source on it (`use.sql.UseStreamSource`). */
trait UseV1Fallback extends V2TableWithV1Fallback
