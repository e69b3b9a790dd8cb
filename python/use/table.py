"""`QbeastTable`, the public Python entry point to a Qbeast table (exported as `use.QbeastTable`).

A thin facade above every layer it serves: each method delegates to the module that owns the work
(the format's writer, reader, convert and metrics; the optimizer's loop). It lives at the top of the
package so that the format layer never imports the optimizer. A `QbeastTable` holds only its path and
session; every call reads the latest snapshot, so an object kept around never serves stale metadata
after other writers commit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType, StringType

import use.sql
from use.delta import DeltaLog
from use.errors import InvalidArgumentError, NotAQbeastTableError, VersionNotFoundError
from use.insights import for_path
from use.optimize.auto_compact import compacting_after
from use.optimize.delta_table import DeltaTable as _OptimizeDeltaTable
from use.optimize.delta_table import Progress, TableSurface, progress_callback
from use.optimize.loop import optimize_path
from use.optimize.loop_core import session_defaults
from use.qbeast.convert import ConvertResult, convert_to_qbeast
from use.qbeast.datasource import register
from use.qbeast.metrics import index_metrics
from use.qbeast.reader import FilterArg, load_snapshot
from use.qbeast.reader import read as _read
from use.qbeast.revision import is_qbeast
from use.qbeast.writer import write as _write
from use.runtime.conf import statement_table_defaults

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from use.optimize.loop_core import OptimizeResult, StopLike
    from use.qbeast.metrics import IndexMetrics
    from use.qbeast.revision import Revision
    from use.qbeast.snapshot import QbeastSnapshot
    from use.qbeast.writer import WriteResult


def _register_format(spark: SparkSession) -> None:
    """Make `spark.read.format("qbeast")` work on sessions that open tables through the facade.

    Spark >= 4.1 (our floor) always has Python data sources, so a failure here is a real bug and is
    not hidden.
    """
    register(spark)


class IndexMetricsByRevision(dict):  # type: ignore[type-arg]
    """`index_metrics()` of every revision: a dict of revision id -> `IndexMetrics` that prints as
    the metrics' text, revision by revision (a plain dict would print object dumps)."""

    def __str__(self) -> str:
        return "\n\n".join(str(m) for _, m in sorted(self.items())) or "no indexed data"

    __repr__ = __str__


class Insights:
    """`insight(name)` for the tables of the Python API. Here, not in `TableSurface`: the insights
    (layer 4) sit above the optimizer (layer 3), which defines the table surface."""

    _spark: SparkSession
    _path: str

    def insight(self, name: str, **options: Any) -> pa.Table:
        """The insight table `name` (optimizations, history, detail, files, cubes, revisions, layout, plan;
        see `use.insights`) of the latest snapshot, as a `pyarrow.Table` (no Spark job). The
        session's `spark.qbeast.use.optimization.*` defaults count for `layout` and `plan`, as they
        do for `optimize()`; `plan` also takes `revision_id`. The same rows as SQL's
        `use_catalog.path.`<path>`.<name>`."""
        return for_path(self._path, name, spark_conf=session_defaults(self._spark), **options)


class RowChanges:
    """`delete(where)` and `update(values, where)` for the tables of the Python API: SQL's DELETE and
    UPDATE (the shim's copy-on-write command and `use.sql.dml`). Here, not in `TableSurface`: the
    SQL layer sits above the optimizer, which defines the table surface."""

    _spark: SparkSession
    _path: str

    def delete(self, where: str | None = None) -> int:
        """Delete the rows matching `where` (a SQL condition on the table's columns; every row without
        one) as SQL's `DELETE FROM` does: copy-on-write, one commit (README: DELETE and UPDATE); the
        rows deleted."""
        return self._row_statement("DELETE FROM {table}", where)

    def update(self, values: Mapping[str, str], where: str | None = None) -> int:
        """Set columns of the rows matching `where` (every row without one) to SQL expressions
        (`{"v": "upper(v)", "n": "n + 1"}`, evaluated on each row's old values) as SQL's `UPDATE`
        does: copy-on-write, one commit; the rows updated."""
        if (
            not isinstance(values, Mapping)
            or not values
            or not all(isinstance(k, str) and k and isinstance(v, str) and v.strip() for k, v in values.items())
        ):
            raise InvalidArgumentError(
                f'values must map column names to SQL expressions (e.g. {{"v": "upper(v)"}}), got {values!r}'
            )
        assignments = ", ".join(f"`{k.replace('`', '``')}` = {v}" for k, v in values.items())
        return self._row_statement(f"UPDATE {{table}} SET {assignments}", where)

    def _row_statement(self, template: str, where: str | None) -> int:
        """Runs the statement on this table (`{table}` in `template`) with `where`; its row count.
        The session needs USE's SQL extension (`use.session.spark_session()` has it)."""
        if where is not None and not isinstance(where, str):
            raise InvalidArgumentError(f'where must be a SQL condition (a string such as "id < 10"), got {where!r}')
        if not use.sql.installed(self._spark):
            use.sql.install(self._spark)
        provider = "qbeast" if is_qbeast(DeltaLog.for_path(self._path).snapshot().configuration) else "delta"
        statement = template.replace("{table}", f"{provider}.`{self._path.replace('`', '``')}`")
        if where is not None and where.strip():
            statement += f" WHERE {where}"
        return int(self._spark.sql(statement).collect()[0][0])


class DeltaTable(_OptimizeDeltaTable, Insights, RowChanges):
    """A plain Delta table at a path (`use.DeltaTable`): everything of
    `use.optimize.delta_table.DeltaTable` plus `insight(name)`, `delete(where)` and `update(values, where)`."""


class QbeastTable(TableSurface, Insights, RowChanges):
    """A Qbeast table at a path: write, read/sample, revisions, index metrics, optimize, and what
    every table offers (`TableSurface`: history, properties, optimizations, vacuum)."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self._spark = spark
        self._path = os.path.abspath(path)

    # --- construction -----------------------------------------------------------------------

    @classmethod
    def for_path(cls, spark: SparkSession, path: str) -> QbeastTable:
        """The Qbeast table at `path`; TableNotFoundError if there is no table, NotAQbeastTableError
        for a Delta table without Qbeast metadata (convert it first)."""
        qsnap = load_snapshot(os.path.abspath(path) if isinstance(path, str) and path else path)
        if not qsnap.is_qbeast:
            raise NotAQbeastTableError(
                f"{path!r} is a Delta table without Qbeast metadata (no qbeast.revision.* properties); convert it "
                f"with QbeastTable.convert(spark, {path!r}, columns_to_index=[...]) or write it with QbeastTable.write"
            )
        _register_format(spark)
        return cls(spark, path)

    @staticmethod
    def write(
        df: DataFrame,
        path: str,
        columns_to_index: Sequence[str] | str,
        cube_size: int | None = None,
        mode: str = "append",
        column_stats: Mapping[str, Any] | str | None = None,
        *,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
        optimize_write: bool | None = None,
    ) -> WriteResult:
        """Index `df` into the table at `path` (created if missing) with the OTree writer.

        `cube_size=None` keeps the table's desired cube size on append (5,000,000 for a new table);
        a different size starts a new revision. `txn_app_id`/`txn_version` make the write idempotent.
        `optimize_write=True` shuffles so each planned file is written once, `False` lets every
        write task write its own part of each file; by default the settings, else the size of the
        write decide (see `use.qbeast.writer.write`). A table with Delta's auto compaction on
        (`delta.autoOptimize.autoCompact`) is optimized after the write (`use.optimize.auto_compact`).
        """
        with compacting_after(df.sparkSession), statement_table_defaults(df.sparkSession):
            return _write(
                df.sparkSession,
                df,
                path,
                columns_to_index,
                cube_size=cube_size,
                mode=mode,
                column_stats=column_stats,
                txn_app_id=txn_app_id,
                txn_version=txn_version,
                optimize_write=optimize_write,
            )

    @staticmethod
    def convert(
        spark: SparkSession, path: str, columns_to_index: Sequence[str] | str, cube_size: int | None = None
    ) -> ConvertResult:
        """Make the parquet directory or Delta table at `path` a Qbeast table (staging revision 0);
        `cube_size` None is 5,000,000. A Qbeast table is left as it is when the arguments match its
        index, refused when they do not."""
        return convert_to_qbeast(path, columns_to_index, cube_size)

    # --- reading ----------------------------------------------------------------------------

    def snapshot(self) -> QbeastSnapshot:
        """The latest snapshot (read now, never cached)."""
        return load_snapshot(self._path)

    def read(self, sample: float | None = None, filter: FilterArg = None) -> DataFrame:
        """The table's rows, optionally a deterministic sample (fraction in (0,1]) and/or filtered."""
        return _read(self._spark, self.snapshot(), sample=sample, filter=filter)

    # --- revisions and metrics ----------------------------------------------------------------

    def revision_ids(self) -> list[int]:
        """All revision ids, ascending (0 is the staging revision)."""
        return sorted(self.snapshot().revisions)

    @property
    def latest_revision_id(self) -> int:
        return int(self.snapshot().latest_revision_id)

    def revision(self, revision_id: int | None = None) -> Revision:
        """One revision (the latest when `revision_id` is None)."""
        qsnap = self.snapshot()
        rid = qsnap.latest_revision_id if revision_id is None else revision_id
        if isinstance(rid, bool) or not isinstance(rid, int):
            raise InvalidArgumentError(f"revision_id must be an int, got {revision_id!r}")
        if rid not in qsnap.revisions:
            raise VersionNotFoundError(
                f"revision {rid} does not exist in the table at {self._path!r}; its revisions are {sorted(qsnap.revisions)}"
            )
        return qsnap.revisions[rid]

    def indexed_columns(self) -> list[str]:
        return list(self.revision().columns)

    def cube_size(self) -> int:
        return int(self.revision().desired_cube_size)

    def revisions_metadata(self) -> list[dict[str, Any]]:
        """Every revision as plain data (the JSON qbeast-spark stores, parsed), plus file/row counts."""
        qsnap = self.snapshot()
        files = qsnap.files
        rev_col = files.column("revision_id").to_numpy() if files.num_rows else np.zeros(0, dtype=np.int64)
        sizes = files.column("size").to_numpy() if files.num_rows else np.zeros(0, dtype=np.int64)
        blocks = qsnap.blocks
        b_rev = blocks.column("revision_id").to_numpy() if blocks.num_rows else np.zeros(0, dtype=np.int64)
        b_cnt = blocks.column("element_count").to_numpy() if blocks.num_rows else np.zeros(0, dtype=np.int64)
        out = []
        for rid in sorted(qsnap.revisions):
            rev = qsnap.revisions[rid]
            entry = json.loads(rev.to_json())
            entry.update(
                {
                    "revision_id": int(rid),
                    "is_staging": rid == 0,
                    "indexed_columns": list(rev.columns),
                    "num_files": int((rev_col == rid).sum()),
                    "num_bytes": int(sizes[rev_col == rid].sum()),
                    "num_rows": int(b_cnt[b_rev == rid].sum()),
                }
            )
            out.append(entry)
        return out

    def index_metrics(self, revision_id: int | None = None) -> IndexMetricsByRevision | IndexMetrics:
        """OTree metrics per revision (prints as text); with `revision_id`, that revision's metrics only."""
        metrics = index_metrics(self.snapshot())
        if revision_id is None:
            return IndexMetricsByRevision(metrics)
        if revision_id not in metrics:
            raise VersionNotFoundError(
                f"revision {revision_id} has no index in the table at {self._path!r}; revisions with data: {sorted(metrics)}"
            )
        return metrics[revision_id]

    @staticmethod
    def compute_quantiles(df: DataFrame, column: str, num_quantiles: int = 50, relative_error: float = 0.01) -> list[Any]:
        """Boundaries for indexing `column` as `<column>:quantiles`: `num_quantiles + 1` values from
        the minimum to the maximum (Spark's approxQuantile for numbers and dates; a sorted sample
        for strings). Pass them as `column_stats={"<column>_quantiles": [...]}` to `QbeastTable.write`.
        """
        return _compute_quantiles(df, column, num_quantiles, relative_error)

    # --- optimization (delegated to use.optimize) ----------------------------------------------

    def optimize(
        self,
        revision_id: int | None = None,
        files: Sequence[str] | None = None,
        strategy: str | Sequence[str] | None = None,
        bytes_per_iter: int | str | None = None,
        dry_run: bool = False,
        max_iterations: int | None = None,
        stop: StopLike = None,
        all_tasks: bool = False,
        progress: Progress = True,
        **config_overrides: Any,
    ) -> OptimizeResult:
        """Optimize until nothing is selected; returns `use.optimize.loop_core.OptimizeResult`.

        Prints one line per iteration (as `use optimize`) unless `progress=False` (or a callable,
        which gets each iteration's metrics); `print(result)` shows the metrics table and a summary.
        `all_tasks=True` runs every task of each plan before re-planning. The optimizer owns the work
        (`use.optimize.loop.optimize_path`); `config_overrides` are `use.optimization.*` keys.
        """
        overrides = dict(config_overrides.pop("overrides", None) or {})
        overrides.update(config_overrides)
        return optimize_path(
            self._spark, self._path, revision_id=revision_id, files=files, strategy=strategy,
            bytes_per_iter=bytes_per_iter, dry_run=dry_run, max_iterations=max_iterations, stop=stop,
            all_tasks=all_tasks, overrides=overrides, on_iteration=progress_callback(progress),
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"QbeastTable({self._path!r})"


#: Rows a string-quantile sample keeps (sorted on the driver).
_STRING_SAMPLE_ROWS = 100_000


def _compute_quantiles(df: DataFrame, column: str, num_quantiles: int, relative_error: float) -> list[Any]:
    if not isinstance(column, str) or column not in df.columns:
        raise InvalidArgumentError(f"column {column!r} is not a column of the DataFrame (columns: {df.columns})")
    if isinstance(num_quantiles, bool) or not isinstance(num_quantiles, int) or num_quantiles < 1:
        raise InvalidArgumentError(f"num_quantiles must be a positive integer, got {num_quantiles!r}")
    if isinstance(relative_error, bool) or not isinstance(relative_error, (int, float)) or not 0 <= relative_error < 1:
        raise InvalidArgumentError(f"relative_error must be a number in [0, 1), got {relative_error!r}")
    dtype = df.schema[column].dataType
    probabilities = [i / num_quantiles for i in range(num_quantiles + 1)]
    values = df.select(F.col(f"`{column}`").alias("v")).where(F.col("v").isNotNull())
    if isinstance(dtype, NumericType):
        out: list[Any] = values.select(F.col("v").cast("double").alias("v")).stat.approxQuantile(
            "v", probabilities, float(relative_error)
        )
    elif isinstance(dtype, StringType):
        total = values.count()
        if total > _STRING_SAMPLE_ROWS:
            values = values.sample(fraction=min(1.0, 2.0 * _STRING_SAMPLE_ROWS / total), seed=42)
        sample = sorted(r[0] for r in values.collect())
        out = [sample[round(p * (len(sample) - 1))] for p in probabilities] if sample else []
    else:
        raise InvalidArgumentError(
            f"column {column!r} has type {dtype.simpleString()}; quantiles are computed for number and string columns"
        )
    if not out:
        raise InvalidArgumentError(f"column {column!r} has no non-null values to compute quantiles from")
    return list(dict.fromkeys(out))  # boundaries in order, repeats (skewed data) once
