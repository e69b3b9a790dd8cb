"""`QbeastTable` (exported as `use.QbeastTable`): a Qbeast table, a Delta table whose files are laid
out by an OTree index.

What a Qbeast table adds to `Table`: the OTree write, reads with exact samples, conversion of a
parquet directory or Delta table, its revisions and index metrics. Each method delegates to the
format's own module (`use.qbeast.writer`, `reader`, `convert`, `metrics`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType, StringType

from use.delta.commit_options import CommitOptions
from use.errors import InvalidArgumentError, NotAQbeastTableError, VersionNotFoundError
from use.optimize.auto_compact import compacting_after
from use.qbeast.convert import ConvertResult, convert_to_qbeast
from use.qbeast.datasource import register
from use.qbeast.metrics import index_metrics
from use.qbeast.reader import FilterArg, load_snapshot
from use.qbeast.reader import read as _read
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.writer import write as _write
from use.runtime.conf import session_table_defaults
from use.tables.base import Table

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from use.qbeast.metrics import IndexMetrics
    from use.qbeast.revision import Revision
    from use.qbeast.writer import WriteResult

__all__ = ["IndexMetricsByRevision", "QbeastTable"]


class IndexMetricsByRevision(dict):  # type: ignore[type-arg]
    """`index_metrics()` of every revision: a dict of revision id -> `IndexMetrics` that prints as
    the metrics' text, revision by revision (a plain dict would print object dumps)."""

    def __str__(self) -> str:
        return "\n\n".join(str(m) for _, m in sorted(self.items())) or "no indexed data"

    __repr__ = __str__


class QbeastTable(Table[QbeastSnapshot]):
    """A Qbeast table at a path: write, read and sample, convert, revisions, index metrics, and what
    every table offers (`Table`: history, properties, optimize, insights, vacuum, ...)."""

    # --- construction -----------------------------------------------------------------------

    @classmethod
    def for_path(cls, spark: SparkSession, path: str) -> QbeastTable:
        """The Qbeast table at `path`; TableNotFoundError if there is no table, NotAQbeastTableError
        for a Delta table without Qbeast metadata (convert it first). Makes `spark.read.format("qbeast")`
        work in the session (a Python data source where USE's SQL extension is not installed)."""
        qsnap = load_snapshot(os.path.abspath(path) if isinstance(path, str) and path else path)
        if not qsnap.is_qbeast:
            raise NotAQbeastTableError(
                f"{path!r} is a Delta table without Qbeast metadata (no qbeast.revision.* properties); convert it "
                f"with QbeastTable.convert(spark, {path!r}, columns_to_index=[...]) or write it with QbeastTable.write"
            )
        register(spark)
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
        user_metadata: str | None = None,
    ) -> WriteResult:
        """Index `df` into the table at `path` (created if missing) with the OTree writer.

        `cube_size=None` keeps the table's desired cube size on append (5,000,000 for a new table);
        a different size starts a new revision. `txn_app_id`/`txn_version` make the write idempotent.
        `optimize_write=True` shuffles so each planned file is written once, `False` lets every
        write task write its own part of each file; by default the settings, else the size of the
        write decide (see `use.qbeast.writer.write`). `user_metadata` is the commit's
        `commitInfo.userMetadata` (Delta's `userMetadata` writer option). A new table takes the
        session's Delta property defaults (`spark.databricks.delta.properties.defaults.*`). A table
        with Delta's auto compaction on (`delta.autoOptimize.autoCompact`) is optimized after the
        write (`use.optimize.auto_compact`).
        """
        with compacting_after(df.sparkSession) as recorder:
            options = CommitOptions(user_metadata, session_table_defaults(df.sparkSession), recorder)
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
                commit_options=options,
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

    def sample(self, fraction: float, filter: FilterArg = None) -> DataFrame:
        """The table's exact Qbeast sample: the rows whose weight is below `fraction` (in (0, 1]),
        read from the cubes that hold them only; `read(sample=fraction, filter=filter)`."""
        return self.read(sample=fraction, filter=filter)

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
