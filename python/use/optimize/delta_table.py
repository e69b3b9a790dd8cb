"""`DeltaTable` (exported as `use.DeltaTable`): the optimize surface for plain Delta tables.

A plain Delta table (one without Qbeast metadata) gets the same continuous optimization as a Qbeast
table, with the strategies that apply to plain files: Delta bin packing, Relyt's small-file and
cluster-key-overlap strategies, and Delta's OPTIMIZE ZORDER BY (ZOrder, Hilbert). The object only holds the
path and session; each call reads the latest snapshot. Every method delegates: reading to
`use.qbeast.reader` (as `QbeastTable.read`), optimization to `use.optimize.loop`, history and vacuum
to `use.delta`, so the two table classes cannot drift apart.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

from use.errors import InvalidArgumentError, TableNotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from use.delta.log import DeltaLog, HistoryEntry
    from use.delta.snapshot import Snapshot
    from use.delta.vacuum import VacuumResult
    from use.optimize.loop import OptimizeResult, StopLike


class DeltaTable:
    """A Delta table at a path: read, optimize, optimizations, history, vacuum."""

    def __init__(self, spark: "SparkSession", path: str) -> None:
        self._spark = spark
        self._path = os.path.abspath(path)

    @classmethod
    def for_path(cls, spark: "SparkSession", path: str) -> "DeltaTable":
        """The Delta table at `path`; TableNotFoundError when there is none."""
        from use.delta import DeltaLog

        if not isinstance(path, str) or not path:
            raise InvalidArgumentError(f"a table path must be a non-empty string, got {path!r}")
        if not DeltaLog.for_path(path).exists():
            raise TableNotFoundError(
                f"no Delta table at {path!r}: there is no _delta_log with commits; check the path or create the table"
            )
        return cls(spark, path)

    @property
    def path(self) -> str:
        return self._path

    @property
    def log(self) -> "DeltaLog":
        from use.delta import DeltaLog

        return DeltaLog.for_path(self._path)

    def snapshot(self) -> "Snapshot":
        """The latest snapshot (read now, never cached)."""
        return self.log.snapshot()

    def read(self, filter: Any = None) -> "DataFrame":
        """The table's rows (logical column names, also under column mapping), optionally filtered:
        files are pruned by Delta stats and partition values before Spark's parquet reader runs."""
        from use.qbeast.reader import read

        return read(self._spark, self._path, filter=filter)

    def optimize(
        self,
        files: Sequence[str] | None = None,
        strategy: str | Sequence[str] | None = None,
        bytes_per_iter: int | str | None = None,
        dry_run: bool = False,
        max_iterations: int | None = None,
        stop: "StopLike" = None,
        all_tasks: bool = False,
        zorder_by: str | Sequence[str] | None = None,
        **config_overrides: Any,
    ) -> "OptimizeResult":
        """Optimize until nothing is selected (see `use.optimize.loop.optimize_path`).

        `zorder_by` (columns, or "a,b") is Delta's OPTIMIZE ... ZORDER BY: the `ZOrder` strategy, or
        the key of `strategy="Hilbert"`. `config_overrides` are `use.optimization.*` keys given as
        keyword arguments (field names such as `max_file_size=...`, or a mapping passed as
        `overrides=`); they win over table properties.
        """
        from use.optimize.config import zorder_request
        from use.optimize.loop import optimize_path

        if zorder_by is not None and files is not None:
            raise InvalidArgumentError(
                "zorder_by and files cannot be combined: an explicit file list is bin-packed as it is; "
                "Z-ordering selects the files of each partition itself (give zorder_by alone)"
            )
        overrides: dict[str, Any] = dict(config_overrides.pop("overrides", None) or {})
        overrides.update(config_overrides)
        strategy, zorder = zorder_request(strategy, zorder_by)
        overrides.update(zorder)
        return optimize_path(
            self._spark,
            self._path,
            files=files,
            strategy=strategy,
            bytes_per_iter=bytes_per_iter,
            dry_run=dry_run,
            max_iterations=max_iterations,
            stop=stop,
            all_tasks=all_tasks,
            overrides=overrides,
        )

    def optimizations(self) -> "DataFrame":
        """One row per committed optimization (OptimizationEvent fields), oldest first."""
        from use.optimize.loop import optimizations

        return optimizations(self._spark, self._path)

    def history(self, limit: int | None = None) -> list["HistoryEntry"]:
        """Commits, newest first (DESCRIBE HISTORY)."""
        return self.log.history(limit)

    def vacuum(
        self, retention_hours: float | None = None, *, dry_run: bool = False, enforce_retention_check: bool = True
    ) -> "VacuumResult":
        """Delete unreferenced data files older than the retention (Delta VACUUM)."""
        from use.delta.vacuum import vacuum

        return vacuum(self.log, retention_hours, dry_run=dry_run, enforce_retention_check=enforce_retention_check)

    def __repr__(self) -> str:
        return f"DeltaTable({self._path!r})"
