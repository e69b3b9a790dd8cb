"""Dropping the rows deletion vectors delete from a Spark scan of data files.

Spark's parquet reader gives every row its file (`_metadata.file_path`) and its position in the file
(`_metadata.row_index`, counted over the whole file whatever row groups are skipped), which is what a
deletion vector indexes. The deleted rows, decoded once on the driver (`use.delta.deletion_vectors`),
become a small broadcast table of (file, row index) that the scan is anti-joined with: no row of a
file without a DV is touched, and no Python code runs per row.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from use.delta.deletion_vectors import DeletedRows
from use.delta.storage import absolute_path

__all__ = ["spark_file_uri", "without_deleted_rows"]

# What java.net.URI leaves unquoted in a path: unreserved and punctuation characters, '/', '@', and
# every non-ASCII character that is neither a space nor a control character.
_QUOTED = re.compile(r"[^A-Za-z0-9_\-!.~'()*,;:$&+=/@\u00a1-\U0010ffff]|[\u2000-\u200a\u2028\u2029\u3000\u1680\u202f\u205f]")


def spark_file_uri(local_path: str) -> str:
    """The `_metadata.file_path` Spark gives the rows of a local file: `file:` and the path as Hadoop's
    `Path.toUri` quotes it (a space as %20, '%' as %25, '#' as %23; non-ASCII letters as they are)."""
    return "file:" + _QUOTED.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), local_path)


_FILE, _ROW = "__use_dv_file", "__use_dv_row"


def without_deleted_rows(spark: SparkSession, df: DataFrame, deleted: DeletedRows, table_root: str) -> DataFrame:
    """`df` (a parquet read of data files of the table at `table_root`, before any projection) without
    the rows `deleted` names; `df` itself when nothing is deleted."""
    if not len(deleted):
        return df
    rows = deleted.as_table()
    uris = pa.array([spark_file_uri(absolute_path(table_root, p)) for p in deleted.paths], pa.string())
    keys = pa.table({_FILE: pc.take(uris, rows.column("file")), _ROW: rows.column("row_index")})
    gone = F.broadcast(spark.createDataFrame(keys))
    marked = df.withColumn(_FILE, F.col("_metadata.file_path")).withColumn(_ROW, F.col("_metadata.row_index"))
    return marked.join(gone, on=[_FILE, _ROW], how="left_anti").drop(_FILE, _ROW)
