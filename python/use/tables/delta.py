"""`DeltaTable` (exported as `use.DeltaTable`): a plain Delta table, one without Qbeast metadata.

What a plain Delta table adds to `Table`: DataFrame writes in Spark's save modes (one commit each,
through the write path `df.write.format("delta").save(path)` takes too:
`use.runtime.delta_write`), reads pruned by Delta stats and partition values, and Delta's OPTIMIZE
ZORDER BY as `zorder(columns)`. It gets the same continuous optimization as a Qbeast table, with
the strategies that apply to plain files: Delta bin packing, Relyt's small-file and cluster-key
overlap strategies, ZOrder and Hilbert.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from use.delta import DeltaLog
from use.delta.commit_options import CommitOptions
from use.delta.snapshot import Snapshot
from use.errors import InvalidArgumentError, TableNotFoundError
from use.optimize.auto_compact import compacting_after
from use.optimize.properties import check_configuration, property_text
from use.qbeast.reader import read
from use.runtime.conf import session_table_defaults
from use.runtime.delta_write import DeltaWriteResult, write_delta_table
from use.tables.base import Table

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from use.optimize.loop_core import OptimizeResult

__all__ = ["DeltaTable"]


class DeltaTable(Table[Snapshot]):
    """A plain Delta table at a path: write, read, zorder, and what every table offers (`Table`:
    history, properties, optimize, insights, vacuum, ...)."""

    @classmethod
    def for_path(cls, spark: SparkSession, path: str) -> DeltaTable:
        """The Delta table at `path`; TableNotFoundError when there is none."""
        if not isinstance(path, str) or not path:
            raise InvalidArgumentError(f"a table path must be a non-empty string, got {path!r}")
        if not DeltaLog.for_path(path).exists():
            raise TableNotFoundError(
                f"no Delta table at {path!r}: there is no _delta_log with commits; check the path or create the "
                "table with DeltaTable.write(df, path)"
            )
        return cls(spark, path)

    @staticmethod
    def write(
        df: DataFrame,
        path: str,
        mode: str = "append",
        partition_by: Sequence[str] | str | None = None,
        *,
        properties: Mapping[str, Any] | None = None,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
        user_metadata: str | None = None,
    ) -> DeltaWriteResult:
        """Write `df` to the plain Delta table at `path` in one commit (the table is created if missing).

        Modes as Spark's: `append` (the default, as `QbeastTable.write`), `overwrite` (replaces the
        data and the schema with the DataFrame's, and the partitioning when `partition_by` is given),
        `error`/`errorifexists` (fail if the table exists) and `ignore` (write nothing if it exists).
        `partition_by` names the partition columns; on append it must match the table's.
        `properties` are the table properties of a new table, checked as `set_properties` checks
        them. Files are written by the Spark tasks, with Delta stats from their parquet footers;
        readable by every Delta reader. `txn_app_id`/`txn_version` make the write idempotent
        (Delta's `txn` action, as a streaming `foreachBatch` uses its query id and batch id): a
        version the table has already committed for that app id writes nothing. `user_metadata` is
        the commit's `commitInfo.userMetadata` (Delta's `userMetadata` writer option). A new table
        takes the session's Delta property defaults (`spark.databricks.delta.properties.defaults.*`).
        A table with Delta's auto compaction on (`delta.autoOptimize.autoCompact`) is compacted after the write
        (`use.optimize.auto_compact`).
        """
        configuration = {str(k): property_text(v) for k, v in (properties or {}).items()}
        if configuration:
            check_configuration(configuration)
        with compacting_after(df.sparkSession) as recorder:
            options = CommitOptions(user_metadata, session_table_defaults(df.sparkSession), recorder)
            return write_delta_table(
                df, path, mode, partition_by, configuration=configuration, txn_app_id=txn_app_id, txn_version=txn_version,
                commit_options=options,
            )  # fmt: skip

    def snapshot(self) -> Snapshot:
        """The latest snapshot (read now, never cached)."""
        return self.log.snapshot()

    def read(self, filter: Any = None) -> DataFrame:
        """The table's rows (logical column names, also under column mapping), optionally filtered:
        files are pruned by Delta stats and partition values before Spark's parquet reader runs."""
        return read(self._spark, self._path, filter=filter)

    def zorder(self, columns: str | Sequence[str], *, where: str | None = None, **options: Any) -> OptimizeResult:
        """Delta's OPTIMIZE ... ZORDER BY (columns): cluster each partition's files by the columns,
        once (a second call commits nothing until new files arrive); `where` keeps it to the
        partitions a predicate on partition columns selects. `optimize(zorder_by=columns, ...)`;
        `options` are `optimize()`'s (`strategy="Hilbert"` for the Hilbert curve, `dry_run`,
        `progress`, ...)."""
        return self.optimize(zorder_by=columns, where=where, **options)
