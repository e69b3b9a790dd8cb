"""Rows into a plain Delta table for SQL writes: parquet files with Delta stats, one commit.

Internal to the SQL surface until the Python API's own Delta write lands (then SQL calls that one
instead; this module is the only thing to switch). Each Spark task streams its rows into one file
per partition value it sees (`use.delta.datafile.DataFileWriter`: stats from the parquet footer,
NaN-aware), returns the `AddFile`s, and the driver commits them once with the removes the write
mode asks for. File names carry the write's id, so the files of a write that does not commit
(failed task, failed commit) are found and deleted: no stray file.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import json
import os
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from use.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from use.delta.actions import AddFile
    from use.delta.snapshot import Snapshot

FILE_PREFIX = "part-usesql-"


def partition_value_text(value: Any, type_: pa.DataType, column: str) -> str | None:
    """A partition value as Delta writes it in `partitionValues` (timestamps in UTC, as the
    session's time zone is set by `use.session`)."""
    if value is None:
        return None
    if pa.types.is_boolean(type_):
        return "true" if value else "false"
    if pa.types.is_timestamp(type_):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S") + (f".{value.microsecond:06d}" if value.microsecond else "")
    if pa.types.is_date(type_):
        return value.isoformat()
    if isinstance(value, _decimal.Decimal):
        return format(value, "f")
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_) or pa.types.is_nested(type_):
        raise InvalidArgumentError(f"partition column {column!r} has type {type_}; partition by a primitive column")
    return str(value)


def _split(table: pa.Table, parts: Sequence[str]) -> Iterator[tuple[tuple[str | None, ...], pa.Table]]:
    """The rows of `table` per partition value (as Delta strings)."""
    keys = table.select(list(parts)).group_by(list(parts), use_threads=False).aggregate([])
    for row in keys.to_pylist():
        mask = None
        for c in parts:
            cond = pc.is_null(table.column(c)) if row[c] is None else pc.equal(table.column(c), pa.scalar(row[c], table.schema.field(c).type))
            cond = pc.fill_null(cond, False)
            mask = cond if mask is None else pc.and_(mask, cond)
        key = tuple(partition_value_text(row[c], table.schema.field(c).type, c) for c in parts)
        yield key, table.filter(mask)


def write_files(
    spark: SparkSession, df: DataFrame, root: str, schema: pa.Schema, partition_columns: Sequence[str], configuration: Mapping[str, str]
) -> tuple[list[AddFile], str]:
    """Write `df` (columns named as `schema`) as data files under `root`; the AddFiles and the
    file-name prefix of this write (for cleanup)."""
    from use.delta.datafile import DataFileWriter, parquet_compression, partition_directory
    from use.delta.stats import StatsConfig
    from use.optimize.executor import _add_from_json
    from use.session import parquet_codec

    codec = parquet_codec(spark)
    suffix = ".parquet" if parquet_compression(codec) == "none" else f".{codec}.parquet"
    stats = StatsConfig.from_configuration(configuration)
    prefix = f"{FILE_PREFIX}{uuid.uuid4().hex}-"
    parts = list(partition_columns)
    os.makedirs(root, exist_ok=True)
    # While this marker exists the write may still commit. Spark reports a failed job while other
    # tasks of it still run (a Python worker finishes a file for up to its kill timeout): a task
    # publishes a file and then checks the marker, the driver removes the marker and then the
    # files, so in any order a file of an abandoned write is removed by one of the two.
    alive = os.path.join(root, f".{prefix}alive")
    open(alive, "w").close()

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid, attempt = (ctx.partitionId(), ctx.attemptNumber()) if ctx else (0, 0)
        writers: dict[tuple[str | None, ...], DataFileWriter] = {}
        try:
            for batch in batches:
                if not batch.num_rows:
                    continue
                table = pa.Table.from_batches([batch])
                pieces = _split(table, parts) if parts else iter([((), table)])
                for key, piece in pieces:
                    writer = writers.get(key)
                    if writer is None:
                        values = dict(zip(parts, key))
                        name = f"{prefix}{pid:05d}-{attempt}-{len(writers):04d}{suffix}"
                        writer = writers[key] = DataFileWriter(
                            root,
                            schema=schema,
                            file_name=f"{partition_directory(values)}/{name}" if parts else name,
                            partition_values=values or None,
                            stats_columns=stats.num_indexed_cols,
                            stats_column_names=stats.columns,
                            compression=codec,
                        )
                    writer.write(piece)
            adds = [w.close() for w in writers.values()]
        except BaseException:
            for w in writers.values():
                w.abort()
            raise
        if not os.path.exists(alive):  # the write was abandoned meanwhile: take the files back
            for a in adds:
                os.unlink(os.path.join(root, *urllib.parse.unquote(a.path).split("/")))
            raise RuntimeError(f"the write to {root} was abandoned while this task ran")
        if adds:
            yield pa.RecordBatch.from_pydict({"add": [json.dumps(a.to_action()["add"]) for a in adds]})

    sc = spark.sparkContext
    tag = f"use-sql-write-{prefix[len(FILE_PREFIX):-1]}"
    sc.addJobTag(tag)
    try:
        rows = df.select(*schema.names).mapInArrow(task, "add string").collect()
    except BaseException:
        _await_tasks(sc, tag)
        delete_files(root, prefix)
        raise
    finally:
        sc.removeJobTag(tag)
    return [_add_from_json(json.loads(r["add"])) for r in rows], prefix


def finish(root: str, prefix: str) -> None:
    """The write committed: its files stay, its marker goes."""
    try:
        os.unlink(os.path.join(root, f".{prefix}alive"))
    except FileNotFoundError:
        pass


def _await_tasks(sc: Any, tag: str, timeout_s: float = 120.0) -> None:
    """Wait until no task of the (failed) jobs tagged `tag` runs any more: Spark reports a job's
    failure while its other tasks are still being killed, and one of them could still publish a file
    after the cleanup."""
    import time

    tracker = sc._jsc.sc().statusTracker()  # type: ignore[attr-defined]
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


def delete_files(root: str, prefix: str) -> None:
    """Remove every file of a write that did not commit (its marker first, then the published files
    and the temporary files of tasks that were killed while writing)."""
    import glob

    finish(root, prefix)
    for name in (prefix, "." + prefix):
        for path in glob.glob(os.path.join(glob.escape(root), "**", glob.escape(name) + "*"), recursive=True):
            try:
                os.unlink(path)
            except OSError:
                pass


def _typed(value: Any, type_: pa.DataType) -> Any:
    """A partition filter's JSON value as the column's Python value."""
    if value is None:
        return None
    if pa.types.is_date(type_):
        return _dt.date.fromisoformat(str(value)[:10])
    if pa.types.is_timestamp(type_):
        parsed = _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return parsed if parsed.tzinfo or type_.tz is None else parsed.replace(tzinfo=_dt.timezone.utc)
    if pa.types.is_decimal(type_):
        return _decimal.Decimal(str(value))
    if pa.types.is_integer(type_):
        return int(value)
    if pa.types.is_floating(type_):
        return float(value)
    if pa.types.is_boolean(type_):
        return value if isinstance(value, bool) else str(value).lower() == "true"
    return str(value)


def partition_predicate(filters: Sequence[Mapping[str, Any]], schema: pa.Schema) -> Any:
    """The shim's partition filters (INSERT OVERWRITE ... PARTITION) as a typed predicate."""
    from use.delta import predicates as P

    def one(f: Mapping[str, Any]) -> Any:
        op = f["op"]
        if op == "and":
            return P.And(one(f["left"]), one(f["right"]))
        column = f["column"]
        type_ = schema.field(column).type
        if op == "isnull":
            return P.IsNull(column)
        if op == "isnotnull":
            return P.IsNotNull(column)
        if op == "in":
            return P.InList(column, tuple(v for v in (_typed(x.get("value"), type_) for x in f["values"]) if v is not None))
        value = _typed(f.get("value"), type_)
        if value is None:
            return P.IsNull(column) if op == "<=>" else P.InList(column, ())
        return P.Comparison(column, "=", value)

    out = None
    for f in filters:
        p = one(f)
        out = p if out is None else P.And(out, p)
    return out


def files_to_replace(snapshot: Snapshot, mode: str, adds: Sequence[AddFile], filters: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The live files a write removes: all of them (overwrite), those of the partitions it writes
    (dynamic), those matching the static partition filters (partitions), none (append)."""
    files = snapshot.files
    parts = list(snapshot.partition_columns)
    if mode == "append" or not files.num_rows:
        return files.slice(0, 0)
    if mode == "overwrite" or (mode == "dynamic" and not parts):
        return files
    if mode == "dynamic":
        written = {tuple(a.partition_values.get(c) for c in parts) for a in adds}
        keys = [tuple((dict(m or ()).get(c) or None) for c in parts) for m in files.column("partition_values").to_pylist()]
        return files.filter(pa.array([k in written for k in keys], pa.bool_()))
    if mode == "partitions":
        from use.delta.skipping import files_matching

        return files.filter(files_matching(files, partition_predicate(filters, snapshot.schema), snapshot.schema))
    raise InvalidArgumentError(f"unknown write mode {mode!r}")
