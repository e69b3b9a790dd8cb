"""`Table`: what every USE table offers in Python, whatever its format.

A table object holds only its path and session; every call reads the latest snapshot, so an object
kept around never serves stale metadata after other writers commit. Each method delegates to the
layer that owns the work: the Delta log (history, vacuum, restore, manifests), the optimizer
(properties, optimize, events), the insights (`inspect`), the SQL surface (DELETE, UPDATE).
`QbeastTable` and `DeltaTable` add what belongs to their format only.
"""

from __future__ import annotations

import abc
import datetime as dt
import json
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import use.sql
from use.delta import DeltaLog
from use.delta.manifest import generate_table
from use.delta.restore import restore
from use.delta.vacuum import vacuum
from use.errors import InvalidArgumentError
from use.insights import for_path
from use.optimize.loop import optimizations
from use.optimize.loop_core import session_defaults
from use.optimize.properties import alter_properties, table_properties
from use.qbeast.revision import is_qbeast
from use.tables.inspect import Inspect
from use.tables.optimize import Optimize

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from use.delta.manifest import ManifestResult
    from use.delta.restore import RestoreResult
    from use.delta.vacuum import VacuumResult

__all__ = ["HISTORY_DDL", "Table"]

#: DESCRIBE HISTORY's columns, as Delta's (`DeltaHistory`) and as `history()` returns them.
HISTORY_DDL = (
    "version long, timestamp timestamp, userId string, userName string, operation string, "
    "operationParameters map<string,string>, job struct<jobId:string,jobName:string,jobRunId:string,runId:string,"
    "jobOwnerId:string,triggerType:string>, notebook struct<notebookId:string>, clusterId string, readVersion long, "
    "isolationLevel string, isBlindAppend boolean, operationMetrics map<string,string>, userMetadata string, engineInfo string"
)

_JOB_FIELDS = ("jobId", "jobName", "jobRunId", "runId", "jobOwnerId", "triggerType")

#: The snapshot type of a table class (`use.delta.Snapshot`, `use.qbeast.snapshot.QbeastSnapshot`).
SnapshotT = TypeVar("SnapshotT")


def _text_map(values: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): v if isinstance(v, str) else json.dumps(v, sort_keys=True) for k, v in values.items()}


class Table(abc.ABC, Generic[SnapshotT]):
    """A table at a path: history, properties, optimize and its events, insights, vacuum, restore,
    manifests, DELETE and UPDATE. `t.optimize(...)` runs the optimizer (`t.optimize.dry_run(...)`
    only plans); `t.inspect.<name>()` returns an insight table as pyarrow."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self._spark = spark
        self._path = os.path.abspath(path)

    @property
    def path(self) -> str:
        return self._path

    @property
    def log(self) -> DeltaLog:
        return DeltaLog.for_path(self._path)

    @abc.abstractmethod
    def snapshot(self) -> SnapshotT:
        """The latest snapshot (read now, never cached)."""

    # --- accessors ----------------------------------------------------------------------------------

    @property
    def optimize(self) -> Optimize:
        """Optimize the table: `t.optimize(...)` runs until nothing is selected, `t.optimize.dry_run(...)`
        plans only (`use.tables.optimize.Optimize`: the arguments, the same on every table)."""
        return Optimize(self._spark, self._path)

    @property
    def inspect(self) -> Inspect:
        """The table's insight tables as pyarrow: `t.inspect.layout()`, `t.inspect.files()`, ...
        (`use.tables.inspect.Inspect`)."""
        return Inspect(self)

    def insight(self, name: str, **options: Any) -> pa.Table:
        """The insight table `name` (optimizations, history, detail, files, cubes, revisions, layout, plan;
        see `use.insights`) of the latest snapshot, as a `pyarrow.Table` (no Spark job). The
        session's `spark.qbeast.use.optimization.*` defaults count for `layout` and `plan`, as they
        do for `optimize()`; `plan` also takes `revision_id`. The same rows as SQL's
        `use_catalog.path.`<path>`.<name>`; `t.inspect.<name>()` is the same per name."""
        return for_path(self._path, name, spark_conf=session_defaults(self._spark), **options)

    # --- history, events, properties ------------------------------------------------------------------

    def history(self, limit: int | None = None) -> DataFrame:
        """Commits, newest first, as DESCRIBE HISTORY shows them (a DataFrame; `timestamp` is a
        timestamp). `self.log.history()` gives the same as Python objects."""
        rows = []
        for e in self.log.history(limit):
            info = e.commit_info
            job, notebook = info.get("job"), info.get("notebook")
            rows.append(
                (
                    e.version,
                    dt.datetime.fromtimestamp(e.timestamp / 1000, dt.UTC),
                    info.get("userId"),
                    info.get("userName"),
                    e.operation,
                    _text_map(e.parameters),
                    tuple(job.get(k) for k in _JOB_FIELDS) if isinstance(job, Mapping) else None,
                    (notebook.get("notebookId"),) if isinstance(notebook, Mapping) else None,
                    info.get("clusterId"),
                    info.get("readVersion"),
                    info.get("isolationLevel"),
                    info.get("isBlindAppend"),
                    _text_map(e.metrics),
                    info.get("userMetadata"),
                    info.get("engineInfo"),
                )
            )
        return self._spark.createDataFrame(rows, HISTORY_DDL)

    def optimizations(self) -> DataFrame:
        """One row per committed optimization (OptimizationEvent fields), oldest first; `started_at`
        and `finished_at` are timestamps."""
        return optimizations(self._spark, self._path)

    def properties(self) -> dict[str, str]:
        """The table properties (`metaData.configuration`), sorted by key."""
        return table_properties(self._path)

    def set_properties(self, properties: Mapping[str, Any] | None = None, /, **more: Any) -> int | None:
        """Set table properties in one commit; the new version (None when nothing changed).

        Keys with dots go in the mapping (`{"use.optimization.bytes-per-iter": 100_000_000}`);
        `use.optimization.*` values are checked by the optimizer's config parser and `delta.*` ones
        by the Delta log, before anything is written. Keyword arguments are for simple names.
        """
        return alter_properties(self._path, {**dict(properties or {}), **more})

    def unset_properties(self, *keys: str | Iterable[str]) -> int | None:
        """Remove table properties in one commit (each must exist); the new version."""
        flat: list[str] = []
        for k in keys:
            flat.extend([k] if isinstance(k, str) else list(k))
        return alter_properties(self._path, None, flat)

    # --- files and versions -----------------------------------------------------------------------------

    def vacuum(
        self, retention_hours: float | None = None, *, dry_run: bool = False, enforce_retention_check: bool = True
    ) -> VacuumResult:
        """Delete unreferenced data files older than the retention (Delta VACUUM)."""
        return vacuum(self.log, retention_hours, dry_run=dry_run, enforce_retention_check=enforce_retention_check)

    def restore(self, version: int | None = None, *, timestamp: Any = None) -> RestoreResult:
        """Bring the table back to `version`, or to the version current at `timestamp`, in one new
        commit (Delta RESTORE): the history stays, and the restore is undone by another restore."""
        return restore(self.log, version, timestamp)

    def generate(self, mode: str = "symlink_format_manifest") -> ManifestResult:
        """Delta's `generate("symlink_format_manifest")`: rewrite the table's symlink format manifests
        (what Presto, Trino's Hive connector and Athena read it through) and delete stale ones; with
        `delta.compatibility.symlinkFormatManifest.enabled` every commit keeps them current."""
        return generate_table(self.log, mode)

    # --- rows ---------------------------------------------------------------------------------------------

    def delete(self, where: str | None = None) -> int:
        """Delete the rows matching `where` (a SQL condition on the table's columns; every row without
        one) as SQL's `DELETE FROM` does: copy-on-write, one commit; the rows deleted."""
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
        The SQL extension is installed in the session first when it is missing."""
        if where is not None and not isinstance(where, str):
            raise InvalidArgumentError(f'where must be a SQL condition (a string such as "id < 10"), got {where!r}')
        if not use.sql.installed(self._spark):
            use.sql.install(self._spark)
        provider = "qbeast" if is_qbeast(DeltaLog.for_path(self._path).snapshot().configuration) else "delta"
        statement = template.replace("{table}", f"{provider}.`{self._path.replace('`', '``')}`")
        if where is not None and where.strip():
            statement += f" WHERE {where}"
        return int(self._spark.sql(statement).collect()[0][0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._path!r})"
