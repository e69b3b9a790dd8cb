"""Delta's `OPTIMIZE ... WHERE <predicate>`: which partitions a run may rewrite.

The predicate names partition columns only (as Delta requires: a rewrite works on whole files, and
only partition values are the same for every row of a file). It is evaluated by Spark itself, over
the table's distinct partition values cast to the columns' types, so its semantics are Spark SQL's
(`date >= '2024-01-01'`, `p IN ('a', 'b')`, `p IS NULL`, functions); the result is the set of
partitions, fixed when the run starts, as Delta evaluates it against the snapshot it read. The run
then plans on a snapshot restricted to those partitions' files (`restrict`), so every strategy
plans, budgets and scores as usual, just never outside them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type

from use.delta.datafile import timestamp_partition_columns
from use.delta.skipping import partition_text_table, utc_timestamp_texts
from use.errors import CLI, PYTHON, SQL, InvalidArgumentError
from use.optimize.request import check_where, where_hints
from use.runtime.query_errors import quiet_query_errors

__all__ = ["PartitionFilter", "partition_filter"]


class PartitionFilter:
    """The partitions a run may rewrite: `partitions`, one row per partition, one string column per
    partition column (values as the log stores them). Matching is columnar, so restricting the
    snapshot each iteration costs a few Arrow passes, not a Python object per file."""

    def __init__(self, where: str, partitions: pa.Table) -> None:
        self.where = where
        self.partitions = partitions

    def mask(self, files: pa.Table) -> np.ndarray:
        """Per row of a snapshot's `files`: is the file in one of the partitions?"""
        n, m = files.num_rows, self.partitions.num_rows
        if m == 0 or n == 0:
            return np.zeros(n, dtype=bool)
        found = partition_text_table(files, self.partitions.column_names)
        # one key per row of files + partitions, equal exactly when every column's value is: per
        # column a code among the kept partitions' values (null matches null; a value no kept
        # partition has is code 0, which no kept row gets), folded in and made dense again
        key = np.zeros(n + m, dtype=np.int64)
        for c in self.partitions.column_names:
            kept = self.partitions.column(c)
            values = pc.unique(kept)
            codes = pc.index_in(pa.concat_arrays([*found.column(c).chunks, *kept.chunks]), value_set=values, skip_nulls=False)
            key = key * (len(values) + 1) + codes.fill_null(-1).to_numpy(zero_copy_only=False) + 1
            key = np.unique(key, return_inverse=True)[1].astype(np.int64)
        return np.isin(key[:n], key[n:])

    def restrict(self, snapshot: Any) -> Any:
        """`snapshot` (a `use.delta.Snapshot`) with only the files of the partitions."""
        state = snapshot._state
        return replace(snapshot, _state=replace(state, files=state.files.filter(pa.array(self.mask(state.files)))))


def partition_filter(spark: Any, snapshot: Any, where: Any) -> PartitionFilter:
    """The partitions of `snapshot` (a `use.delta.Snapshot`) that satisfy `where`, evaluated by Spark
    (module docstring). InvalidArgumentError for an empty predicate, a table without partition
    columns, a predicate on other columns or one Spark cannot read."""
    check_where(where)
    columns = list(snapshot.metadata.partition_columns)
    if not columns:
        raise InvalidArgumentError(
            f"where ({where}) selects partitions, and {snapshot.table_root} has no partition columns: optimize the "
            "whole table (leave where out)",
            hints={PYTHON: "leave where out", CLI: "leave --where out", SQL: "OPTIMIZE <table> without WHERE"},
        )
    distinct = partition_text_table(snapshot.files, columns).group_by(columns).aggregate([])
    schema = snapshot.schema
    instants = timestamp_partition_columns(schema, columns)
    # what Spark casts: a timestamp's text with its zone (a zone-less one is UTC, as every USE
    # reader takes it), or the cast would read it in the session's time zone
    spelled = {c: (utc_timestamp_texts(distinct.column(c)) if c in instants else distinct.column(c)).to_pylist() for c in columns}
    rows = list(zip(*(spelled[c] for c in columns), strict=False))
    names = ", ".join(columns)
    quoted = [f"`{c.replace('`', '``')}`" for c in columns]
    try:
        df = spark.createDataFrame(rows, ", ".join(f"{q} string" for q in quoted))
        typed = df.select(
            *[F.col(q).cast(from_arrow_type(schema.field(c).type)).alias(c) for q, c in zip(quoted, columns, strict=False)]
        )
        # one boolean per partition, in the order of `rows` (a local relation, no shuffle): the
        # predicate sees the partition columns and nothing else; a bad one's typed error below is
        # the whole report (no ERROR log with a Java stack beside it)
        with quiet_query_errors():
            verdicts = [r[0] for r in typed.select(F.expr(where).alias("keep")).collect()]
    except PySparkException as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise InvalidArgumentError(
            f"where ({where}) must be a predicate on the partition columns ({names}) of {snapshot.table_root}: "
            f"Spark could not use it: {first}",
            hints=where_hints(f"{columns[0]} = '...'"),
        ) from None
    if any(v is not None and not isinstance(v, bool) for v in verdicts):
        raise InvalidArgumentError(
            f"where ({where}) must be a condition (true or false for each partition), e.g. {columns[0]} = '...'",
            hints=where_hints(f"{columns[0]} = '...'"),
        )
    return PartitionFilter(where, distinct.filter(pa.array([v is True for v in verdicts], pa.bool_())))
