"""The "cluster" rewrite on Spark: a task's rows ordered by their ZOrder/Hilbert key, cut into files.

This is Delta's MultiDimClustering, in our own terms:

1. bucket bounds per key column from a seeded sample of the task's rows (about
   `SAMPLE_ROWS_PER_RANGE` values per bucket, 100,000 for 1000 buckets; the row count comes from the
   Delta stats, so the sample is one pass over the key columns only);
2. the key of every row, computed by an Arrow UDF over the key columns only (`use.optimize.curves`:
   bucket ids, then the Z-order interleave or the Hilbert index);
3. `repartitionByRange(files, key, tie)`: each output file gets its own key range; the tie-breaker, a
   hash of the row, spreads rows of one key value over several files (Delta adds a random byte for
   the same reason; a hash keeps retried tasks deterministic);
4. rows sorted by key inside each file, so row groups are clustered too, then the executor's
   bin-packing writer writes each range as one file.

The executor calls `clustered` for the order, `tagged` for the ZCube tags of the written files and
`commit_parameters` for the commit's operationParameters; nothing else of the executor changes.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.types import ArrayType, MapType, StructType

from use.delta.actions import AddFile
from use.optimize import curves
from use.optimize.strategies.zorder import zcube_tags

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from use.optimize.plan import MergeTask

KEY_COLUMN = "__use_cluster_key"
TIE_COLUMN = "__use_cluster_tie"
SAMPLE_SEED = 1_000_003


def key_bounds(df: DataFrame, columns: Sequence[str], rows: int | None, num_ranges: int = curves.RANGE_IDS) -> list[np.ndarray]:
    """Bucket bounds of each key column, from a seeded sample of about SAMPLE_ROWS_PER_RANGE rows
    per bucket (all rows when the input is smaller). `rows` (from the Delta stats) sizes the sample;
    unknown, it is counted."""
    keys = df.select(*[F.col(c).alias(f"k{i}") for i, c in enumerate(columns)])
    target = curves.SAMPLE_ROWS_PER_RANGE * num_ranges
    if rows is None:
        rows = keys.count()
    if rows > target:
        keys = keys.sample(withReplacement=False, fraction=target / rows, seed=SAMPLE_SEED)
    sample = keys.toArrow()
    return [curves.range_bounds(sample.column(i), num_ranges) for i in range(len(columns))]


def _hashable(df: DataFrame) -> list[Any]:
    """Columns Spark can hash (maps cannot be), for the tie-breaker."""

    def ok(t: Any) -> bool:
        if isinstance(t, MapType):
            return False
        if isinstance(t, StructType):
            return all(ok(f.dataType) for f in t.fields)
        if isinstance(t, ArrayType):
            return ok(t.elementType)
        return True

    return [F.col("`" + f.name.replace("`", "``") + "`") for f in df.schema.fields if ok(f.dataType)]


def clustered(df: DataFrame, task: MergeTask, num_files: int, rows: int | None) -> DataFrame:
    """`df` (the task's rows, partition columns already dropped) in clustered order: `num_files`
    key ranges, sorted by key within each (see the module docstring); same columns as `df`."""
    columns = task.cluster_by
    curve = task.curve
    bounds = key_bounds(df, columns, rows)

    def key(*values: pa.Array) -> pa.Array:
        return curves.key_of_columns(values, bounds, curve)

    key_type = "bigint" if curves.key_is_long(len(columns)) else "binary"
    # scalar: the type hints say arrays in, array out. pyspark's stubs know only the form with an
    # explicit functionType, which makes pyspark warn that type hints are preferred.
    key_udf = arrow_udf(key, key_type)  # type: ignore[call-overload]
    hashable = _hashable(df)
    keyed = df.withColumn(KEY_COLUMN, key_udf(*[F.col(c) for c in columns])).withColumn(
        TIE_COLUMN, F.xxhash64(*hashable) if hashable else F.lit(0)
    )
    if num_files > 1:
        keyed = keyed.repartitionByRange(num_files, F.col(KEY_COLUMN), F.col(TIE_COLUMN))
    else:
        keyed = keyed.coalesce(1)
    return keyed.sortWithinPartitions(KEY_COLUMN, TIE_COLUMN).drop(KEY_COLUMN, TIE_COLUMN)


def tagged(adds: Sequence[AddFile], task: MergeTask) -> tuple[AddFile, ...]:
    """The written files tagged as one ZCube of the task's key (what the strategies read back)."""
    tags = zcube_tags(task.cluster_by, task.curve, str(uuid.uuid4()))
    return tuple(dataclasses.replace(a, tags={**(a.tags or {}), **tags}) for a in adds)


def commit_parameters(task: MergeTask) -> dict[str, Any]:
    """operationParameters of a cluster commit, as Delta writes them: `zOrderBy` for a Z-order
    rewrite; a Hilbert one (Delta's curve for clustering) lists its columns under `clusterBy` with
    an empty `zOrderBy`, as Delta's OPTIMIZE of a clustered table does. `curve` names ours."""
    columns = list(task.cluster_by)
    if task.curve == curves.ZORDER:
        return {"zOrderBy": columns, "clusterBy": [], "curve": task.curve}
    return {"zOrderBy": [], "clusterBy": columns, "curve": task.curve}
