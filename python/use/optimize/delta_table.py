"""`DeltaTable` (exported as `use.DeltaTable`): writing and optimizing plain Delta tables.

A plain Delta table (one without Qbeast metadata) gets the same continuous optimization as a Qbeast
table, with the strategies that apply to plain files: Delta bin packing, Relyt's small-file and
cluster-key-overlap strategies, and Delta's OPTIMIZE ZORDER BY (ZOrder, Hilbert). `DeltaTable.write` creates, appends to and overwrites such tables
from a Spark DataFrame, in one commit per write, through the same Spark write path as the
optimizer's bin-packing rewrites (`use.runtime.files`).

`TableSurface` holds what both table classes offer (history, properties, optimizations, vacuum,
optimize progress); `QbeastTable` (`use.table`) builds on it too, so the two cannot drift apart. The
objects only hold the path and session; each call reads the latest snapshot. Every method
delegates: reading to `use.qbeast.reader` (as `QbeastTable.read`), optimization to `use.optimize.loop`, properties to `use.optimize.properties`, history
and vacuum to `use.delta`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.pandas.types import to_arrow_schema

from use.delta import DeltaLog
from use.delta.actions import remove_actions
from use.delta.manifest import generate_table
from use.delta.restore import restore
from use.delta.schema import as_nullable, check_append_schema, check_partition_types, schema_to_json
from use.delta.transaction import check_app_transaction
from use.delta.vacuum import vacuum
from use.errors import InvalidArgumentError, TableAlreadyExistsError, TableNotFoundError
from use.optimize.auto_compact import compacting_after
from use.optimize.executor import delete_written
from use.optimize.loop import optimizations, optimize_path
from use.optimize.properties import alter_properties, check_configuration, property_text, table_properties
from use.optimize.report import format_iteration
from use.qbeast.reader import read
from use.runtime.conf import statement_table_defaults
from use.runtime.conform import conform_to_table
from use.runtime.files import write_dataframe_files

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from use.delta.manifest import ManifestResult
    from use.delta.restore import RestoreResult
    from use.delta.snapshot import Snapshot
    from use.delta.vacuum import VacuumResult
    from use.optimize.loop_core import OptimizeResult, StopLike
    from use.optimize.task_metrics import IterationMetrics

#: `progress=` of `optimize()`: True prints one line per iteration (as `use optimize` does), False
#: prints nothing, a callable receives each iteration's metrics.
Progress = bool | Callable[["IterationMetrics"], None]

#: DESCRIBE HISTORY's columns, as Delta's (`DeltaHistory`) and as `history()` returns them.
HISTORY_DDL = (
    "version long, timestamp timestamp, userId string, userName string, operation string, "
    "operationParameters map<string,string>, job struct<jobId:string,jobName:string,jobRunId:string,runId:string,"
    "jobOwnerId:string,triggerType:string>, notebook struct<notebookId:string>, clusterId string, readVersion long, "
    "isolationLevel string, isBlindAppend boolean, operationMetrics map<string,string>, userMetadata string, engineInfo string"
)

_JOB_FIELDS = ("jobId", "jobName", "jobRunId", "runId", "jobOwnerId", "triggerType")

#: `DeltaTable.write` modes, as Spark's DataFrameWriter names them.
WRITE_MODES = ("append", "overwrite", "error", "errorifexists", "ignore")


def progress_callback(progress: Progress) -> Callable[[IterationMetrics], None] | None:
    """The `on_iteration` hook for `optimize(progress=...)`."""
    if progress is True:
        return lambda m: print(format_iteration(m), flush=True)
    if progress is False or progress is None:
        return None
    if callable(progress):
        return progress
    raise InvalidArgumentError(
        f"progress must be True (print one line per iteration), False (silent) or a callable, got {progress!r}"
    )


def _text_map(values: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): v if isinstance(v, str) else json.dumps(v, sort_keys=True) for k, v in values.items()}


class TableSurface:
    """What every USE table offers, whatever its format: history, properties, events, vacuum."""

    _spark: SparkSession
    _path: str

    @property
    def path(self) -> str:
        return self._path

    @property
    def log(self) -> DeltaLog:
        return DeltaLog.for_path(self._path)

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

    def optimizations(self) -> DataFrame:
        """One row per committed optimization (OptimizationEvent fields), oldest first; `started_at`
        and `finished_at` are timestamps."""
        return optimizations(self._spark, self._path)

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


@dataclass(frozen=True)
class DeltaWriteResult:
    """What `DeltaTable.write` committed (version None: nothing was written, mode='ignore')."""

    version: int | None
    num_files: int
    num_rows: int


class DeltaTable(TableSurface):
    """A plain Delta table at a path: write, read, optimize, optimizations, history, properties, vacuum."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self._spark = spark
        self._path = os.path.abspath(path)

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
    ) -> DeltaWriteResult:
        """Write `df` to the plain Delta table at `path` in one commit (the table is created if missing).

        Modes as Spark's: `append` (the default, as `QbeastTable.write`), `overwrite` (replaces the
        data and the schema with the DataFrame's, and the partitioning when `partition_by` is given),
        `error`/`errorifexists` (fail if the table exists) and `ignore` (write nothing if it exists).
        `partition_by` names the partition columns; on append it must match the table's.
        `properties` are the table properties of a new table. Files are written by the Spark tasks,
        with Delta stats from their parquet footers; readable by every Delta reader.
        `txn_app_id`/`txn_version` make the write idempotent (Delta's `txn` action, as a streaming
        `foreachBatch` uses its query id and batch id): a version the table has already committed
        for that app id writes nothing. A table with Delta's auto compaction on
        (`delta.autoOptimize.autoCompact`) is compacted after the write (`use.optimize.auto_compact`).
        """
        with compacting_after(df.sparkSession), statement_table_defaults(df.sparkSession):
            return DeltaTable._write(
                df, path, mode, partition_by, properties=properties, txn_app_id=txn_app_id, txn_version=txn_version
            )

    @staticmethod
    def _write(
        df: DataFrame,
        path: str,
        mode: str,
        partition_by: Sequence[str] | str | None,
        *,
        properties: Mapping[str, Any] | None,
        txn_app_id: str | None,
        txn_version: int | None,
    ) -> DeltaWriteResult:
        mode_key = mode.lower() if isinstance(mode, str) else mode
        if mode_key not in WRITE_MODES:
            raise InvalidArgumentError(f"mode must be one of {', '.join(WRITE_MODES)}, got {mode!r}")
        if not isinstance(path, str) or not path:
            raise InvalidArgumentError(f"a table path must be a non-empty string, got {path!r}")
        check_app_transaction(txn_app_id, txn_version)
        parts = _partition_list(partition_by)
        root = os.path.abspath(path)
        log = DeltaLog.for_path(root)
        snap = log.snapshot() if log.exists() else None
        if snap is not None and snap.has_app_transaction(txn_app_id, txn_version):
            return DeltaWriteResult(None, 0, 0)  # this write already happened
        if snap is not None:
            if mode_key in ("error", "errorifexists"):
                raise TableAlreadyExistsError(
                    f"a Delta table already exists at {root} (mode={mode!r}); write with mode='append' or "
                    "'overwrite', or choose another path"
                )
            if mode_key == "ignore":
                return DeltaWriteResult(None, 0, 0)
            if any(k.startswith("qbeast.") for k in snap.metadata.configuration):
                raise InvalidArgumentError(
                    f"the table at {root} is a Qbeast table; write to it with QbeastTable.write(df, path, "
                    "columns_to_index) so its rows are indexed"
                )
            if properties:
                raise InvalidArgumentError(
                    f"properties= applies to a new table only, and {root} exists; change its properties with "
                    "DeltaTable.for_path(spark, path).set_properties(...)"
                )
        data_schema = to_arrow_schema(df.schema, prefers_large_types=False)
        if snap is not None and mode_key == "append":
            check_append_schema(data_schema, snap.schema, root)
            df = conform_to_table(df, snap.metadata.schema_string)  # a type widened without loss: the table's
            table_parts = list(snap.metadata.partition_columns)
            if partition_by is not None and parts != table_parts:
                raise InvalidArgumentError(
                    f"partition_by={parts} differs from the partitioning {table_parts} of {root}; append without "
                    "partition_by (or with the same columns), or overwrite the table to repartition it"
                )
            parts, schema = table_parts, snap.schema
            configuration = dict(snap.metadata.configuration)
        else:
            # a new (or replaced) table's columns are nullable, as Delta stores them: a column the first
            # rows happened to fill must not refuse NULLs in later writes (`as_nullable`)
            schema = as_nullable(data_schema)
            if snap is not None and partition_by is None:  # an overwrite keeps the partitioning unless told
                parts = list(snap.metadata.partition_columns)
            check_partition_types(schema, parts, "the DataFrame")
            if snap is None:
                configuration = {str(k): property_text(v) for k, v in (properties or {}).items()}
                check_configuration(configuration)
            else:
                configuration = dict(snap.metadata.configuration)

        # Everything (schema, partitions, properties) is checked before any file is written.
        if snap is None:
            txn = log.create_transaction(schema, parts, configuration)
        else:
            txn = log.start_transaction()
            if mode_key == "overwrite":
                new_meta = replace(snap.metadata, schema_string=schema_to_json(schema), partition_columns=tuple(parts))
                if new_meta != snap.metadata:
                    txn.add(new_meta)
                txn.read_whole_table()
                txn.add(*remove_actions(txn.snapshot.files, data_change=True))
        created_root = not os.path.isdir(root)
        os.makedirs(root, exist_ok=True)
        adds: tuple[Any, ...] = ()
        try:
            adds = write_dataframe_files(df, root, schema, partition_columns=parts, configuration=configuration)
            txn.add(*adds)
            if txn_app_id is not None:
                txn.set_app_transaction(txn_app_id, int(txn_version))  # type: ignore[arg-type]
            rows = _rows_of(adds)
            spark_mode = {"append": "Append", "overwrite": "Overwrite", "ignore": "Ignore"}.get(mode_key, "ErrorIfExists")
            version = txn.commit(
                "WRITE",
                {"mode": spark_mode, "partitionBy": json.dumps(parts)},
                {"numFiles": str(len(adds)), "numOutputRows": str(rows)},
            )
        except BaseException:
            delete_written(root, list(adds))
            if created_root:
                _remove_empty_dirs(root)
            raise
        return DeltaWriteResult(version, len(adds), rows)

    def snapshot(self) -> Snapshot:
        """The latest snapshot (read now, never cached)."""
        return self.log.snapshot()

    def read(self, filter: Any = None) -> DataFrame:
        """The table's rows (logical column names, also under column mapping), optionally filtered:
        files are pruned by Delta stats and partition values before Spark's parquet reader runs."""
        return read(self._spark, self._path, filter=filter)

    def optimize(
        self,
        files: Sequence[str] | None = None,
        strategy: str | Sequence[str] | None = None,
        bytes_per_iter: int | str | None = None,
        dry_run: bool = False,
        max_iterations: int | None = None,
        stop: StopLike = None,
        all_tasks: bool = False,
        zorder_by: str | Sequence[str] | None = None,
        progress: Progress = True,
        where: str | None = None,
        **config_overrides: Any,
    ) -> OptimizeResult:
        """Optimize until nothing is selected (see `use.optimize.loop.optimize_path`); prints one line
        per iteration unless `progress=False`, and `print(result)` shows the metrics table.

        `zorder_by` (columns, or "a,b") is Delta's OPTIMIZE ... ZORDER BY: the `ZOrder` strategy, or
        the key of `strategy="Hilbert"`; `where` (e.g. `"date >= '2024-01-01'"`, on partition columns)
        is Delta's OPTIMIZE ... WHERE: only the partitions it selects are rewritten. `config_overrides` are `use.optimization.*` keys given as
        keyword arguments (field names such as `max_file_size=...`, or a mapping passed as
        `overrides=`); they win over table properties.
        """
        overrides: dict[str, Any] = dict(config_overrides.pop("overrides", None) or {})
        overrides.update(config_overrides)
        return optimize_path(
            self._spark, self._path, files=files, strategy=strategy, bytes_per_iter=bytes_per_iter, zorder_by=zorder_by,
            dry_run=dry_run, max_iterations=max_iterations, stop=stop, all_tasks=all_tasks, overrides=overrides,
            on_iteration=progress_callback(progress), where=where,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"DeltaTable({self._path!r})"


def _partition_list(partition_by: Sequence[str] | str | None) -> list[str]:
    if partition_by is None:
        return []
    items = [partition_by] if isinstance(partition_by, str) else list(partition_by)
    if not all(isinstance(c, str) and c for c in items):
        raise InvalidArgumentError(f"partition_by must be a column name or a list of column names, got {partition_by!r}")
    if len(set(items)) != len(items):
        raise InvalidArgumentError(f"partition_by {items} names a column twice")
    return items


def _remove_empty_dirs(root: str) -> None:
    """Remove `root` and the directories under it that are empty (a failed first write leaves
    partition directories behind); anything holding a file stays."""
    for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass


def _rows_of(adds: Sequence[Any]) -> int:
    total = 0
    for a in adds:
        try:
            total += int(json.loads(a.stats or "{}").get("numRecords", 0))
        except ValueError:
            pass
    return total
