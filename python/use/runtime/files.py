"""Writing a Spark DataFrame as plain Delta data files: the one Spark write path for unindexed files.

Each Spark task streams its rows into `use.delta.datafile.DataFileWriter`s inside `mapInArrow`
(pyarrow parquet, stats from the footer just written) and sends back only the `add` actions as JSON;
the caller commits them. `DeltaTable.write` (plain Delta tables) and the optimizer's bin-packing
rewrites both write through here, so plain files look the same whoever wrote them: Spark's file
naming (`part-...-c000.<codec>.parquet`), Hive-style partition directories, Spark's parquet codec
(`spark.sql.parquet.compression.codec`), the table's stats settings.

Partitioned writes sort each task's rows by the partition columns (no shuffle, as Spark's own
writer does), so a task keeps one file open at a time and writes one file per partition value it
holds. A task attempt that is retried may leave a file of the failed attempt behind: every file of
one write shares a prefix, and the files no reported action names are deleted after the job (and all
of them when the job fails), so nothing uncommitted stays in the table directory. Spark reports a
failed job while its other tasks may still run (a Python worker finishes its file for up to its kill
timeout), so the write also keeps a marker file while it may still commit: a task publishes its
files and then checks the marker, the driver waits for the job's tasks, removes the marker and then
the files; in any order, a file of an abandoned write is removed by one of the two.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import functions as F

from use.delta.actions import AddFile
from use.delta.datafile import (
    DataFileWriter,
    parquet_compression,
    partition_directory,
    partition_value_text,
    timestamp_partition_columns,
)
from use.delta.snapshot import first_switch
from use.delta.stats import StatsConfig
from use.delta.storage import absolute_path
from use.errors import InvalidArgumentError
from use.runtime.conf import parquet_codec

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["write_dataframe_files", "optimized_write", "delete_with_prefix", "delete_written", "rows_written"]

_log = logging.getLogger(__name__)


def _runs(batch: pa.RecordBatch, columns: Sequence[str]) -> list[tuple[int, int]]:
    """[start, end) row ranges of equal partition values in a batch sorted by `columns`."""
    n = batch.num_rows
    change = np.zeros(max(0, n - 1), dtype=bool)
    for c in columns:
        col = batch.column(c)
        a, b = col.slice(1), col.slice(0, n - 1)
        differs = pc.fill_null(pc.not_equal(a, b), False).to_numpy(zero_copy_only=False)
        nulls = (pc.is_null(a).to_numpy(zero_copy_only=False)) != (pc.is_null(b).to_numpy(zero_copy_only=False))
        change |= differs.astype(bool) | nulls
    cuts = [0, *(np.flatnonzero(change) + 1).tolist(), n]
    return [(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1) if cuts[i + 1] > cuts[i]]


def add_from_json(text: str) -> AddFile:
    """An `AddFile` from the JSON of its `add` action (what the write tasks send back)."""
    d = json.loads(text)
    return AddFile(
        path=d["path"],
        size=int(d["size"]),
        modification_time=int(d["modificationTime"]),
        data_change=bool(d["dataChange"]),
        partition_values=dict(d.get("partitionValues") or {}),
        stats=d.get("stats"),
        tags=d.get("tags"),
    )


def delete_written(table_root: str, adds: Sequence[AddFile]) -> None:
    """Delete files a write wrote but did not commit (best effort; logs what it cannot delete)."""
    for a in adds:
        try:
            os.unlink(absolute_path(table_root, a.path))
        except FileNotFoundError:
            pass
        except OSError as exc:  # pragma: no cover - leave a trace, do not mask the original error
            _log.warning("could not delete uncommitted file %s of %s: %s", a.path, table_root, exc)


def rows_written(adds: Sequence[AddFile]) -> int:
    """The rows of new files, from the stats the write put in their adds."""
    return sum(int(json.loads(a.stats).get("numRecords", 0)) if a.stats else 0 for a in adds)


def delete_with_prefix(table_root: str, prefix: str, keep: set[str]) -> None:
    """Delete files named `prefix*` anywhere under the table root except `keep` (absolute paths)."""
    pattern = os.path.join(glob.escape(table_root), "**", glob.escape(prefix) + "*")
    for path in glob.glob(pattern, recursive=True):
        if os.path.abspath(path) not in keep:
            try:
                os.unlink(path)
            except OSError:  # pragma: no cover - best effort: an unreferenced file is harmless
                pass


#: Delta's session switch for optimized writes; it wins over the table property.
OPTIMIZE_WRITE_CONF = "spark.databricks.delta.optimizeWrite.enabled"
OPTIMIZE_WRITE_PROPERTY = "delta.autoOptimize.optimizeWrite"


def optimized_write(spark: SparkSession, configuration: Mapping[str, str] | None) -> bool:
    """Delta's optimized write for a plain Delta table: `spark.databricks.delta.optimizeWrite.enabled`
    when set, else the table property `delta.autoOptimize.optimizeWrite`, else off (Qbeast writes
    have their own rule, `use.qbeast.writer`). A value other than true/false is refused naming it."""
    return bool(first_switch([(OPTIMIZE_WRITE_CONF, spark.conf.get(OPTIMIZE_WRITE_CONF, None)),
                              (OPTIMIZE_WRITE_PROPERTY, (configuration or {}).get(OPTIMIZE_WRITE_PROPERTY))]))  # fmt: skip


def write_dataframe_files(
    df: DataFrame,
    table_root: str,
    schema: pa.Schema,
    *,
    partition_columns: Sequence[str] = (),
    fixed_partition_values: Mapping[str, str | None] | None = None,
    configuration: Mapping[str, str] | None = None,
    data_change: bool = True,
    prefix: str = "part-",
) -> tuple[AddFile, ...]:
    """Write every row of `df` as plain Delta data files under `table_root`; their `AddFile`s.

    `schema` is the table schema (partition columns included); the rows are cast to it. With
    `partition_columns` each task writes one file per partition value it holds, into the Hive-style
    directory; `fixed_partition_values` instead puts every row in that one partition (a rewrite of
    one partition's files, whose rows no longer carry the partition columns). `configuration` is the
    table's (stats settings). Nothing is committed here: the caller commits the returned actions,
    and deletes their files if it does not.
    """
    fixed = dict(fixed_partition_values or {})
    parts = tuple(partition_columns)
    if fixed and parts:
        raise InvalidArgumentError("give partition_columns or fixed_partition_values, not both")
    data_schema = pa.schema([f for f in schema if f.name not in parts and f.name not in fixed])
    instants = timestamp_partition_columns(schema, [*parts, *fixed])
    stats = StatsConfig.from_configuration(configuration)
    codec = parquet_codec(df.sparkSession)
    # Spark's file naming: the codec before the extension (none for uncompressed files).
    suffix = ".parquet" if parquet_compression(codec) == "none" else f".{codec}.parquet"
    write_prefix = f"{prefix}{uuid.uuid4().hex[:12]}-"
    root = table_root
    if data_change and optimized_write(df.sparkSession, configuration):
        # Delta's optimized write: rows shuffled by partition (AQE's rebalance: each task a partition's
        # rows, or a share of a large one, up to spark.sql.adaptive.advisoryPartitionSizeInBytes), so
        # a write of many tasks makes a few files per partition instead of one per task and partition
        df = df.hint("rebalance", *parts)
    if parts:
        df = df.sortWithinPartitions(*parts)
    os.makedirs(root, exist_ok=True)
    alive = os.path.join(root, f".{write_prefix}alive")
    open(alive, "w").close()

    def write_task(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        task = f"{ctx.partitionId() if ctx else 0:05d}-{ctx.attemptNumber() if ctx else 0}"
        writer: Any = None
        key: tuple[Any, ...] | None = None
        count = 0
        adds: list[str] = []

        def open_writer(values: Mapping[str, str | None]) -> Any:
            nonlocal count
            count += 1
            name = f"{write_prefix}{task}-{count:04d}-c000{suffix}"
            return DataFileWriter(
                root,
                schema=data_schema,
                file_name=f"{partition_directory(values, instants)}/{name}" if values else name,
                data_change=data_change,
                partition_values=dict(values) or None,
                stats_columns=stats.num_indexed_cols,
                stats_column_names=stats.columns,
                compression=codec,
            )

        def close() -> None:
            if writer is not None:
                adds.append(json.dumps(writer.close().to_action()["add"]))

        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                ranges = _runs(batch, parts) if parts else [(0, batch.num_rows)]
                for start, end in ranges:
                    piece = batch.slice(start, end - start)
                    values = tuple(piece.column(c)[0].as_py() for c in parts)
                    if writer is None or values != key:
                        close()
                        texts = {c: partition_value_text(v) for c, v in zip(parts, values, strict=False)} if parts else fixed
                        writer, key = open_writer(texts), values
                    writer.write(piece.select([f.name for f in data_schema]) if parts else piece)
            close()
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        if not os.path.exists(alive):  # the write was abandoned while this task ran: take its files back
            for add in adds:
                os.unlink(absolute_path(root, json.loads(add)["path"]))
            raise RuntimeError(f"the write to {root} was abandoned while this task ran")
        if adds:
            yield pa.RecordBatch.from_pydict({"add": adds})

    ordered = df.select(*[F.col(f"`{f.name}`") for f in schema if f.name not in fixed])
    sc = df.sparkSession.sparkContext
    tag = f"use-write-{write_prefix.rstrip('-')}"
    sc.addJobTag(tag)
    try:
        rows = ordered.mapInArrow(write_task, "add string").collect()
    except BaseException:
        _await_tasks(sc, tag)
        os.unlink(alive)
        delete_with_prefix(root, write_prefix, set())
        delete_with_prefix(root, "." + write_prefix, set())  # temporary files of killed tasks
        raise
    finally:
        sc.removeJobTag(tag)
    os.unlink(alive)
    adds = tuple(add_from_json(r["add"]) for r in rows)
    # Retried or speculative attempts may have left a second copy of a partition: keep only the reported ones.
    delete_with_prefix(root, write_prefix, {os.path.abspath(absolute_path(root, a.path)) for a in adds})
    return adds


def _await_tasks(sc: Any, tag: str, timeout_s: float = 120.0) -> None:
    """Wait until no task of the jobs tagged `tag` runs any more (a failed job's other tasks are
    being killed when Spark reports the failure)."""
    tracker = sc._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        active = 0
        for job_id in tracker.getJobIdsForTag(tag):
            job = tracker.getJobInfo(job_id)
            if job.isDefined():
                for stage_id in job.get().stageIds():
                    stage = tracker.getStageInfo(stage_id)
                    active += stage.get().numActiveTasks() if stage.isDefined() else 0
        if not active:
            return
        time.sleep(0.05)
