"""Running one MergeTask on Spark: read exactly its files, rewrite them, commit once.

A merge task is the unit of optimization work (Relyt's MERGE task, Delta's bin). Its whole life is:
read the task's input files with Spark's own parquet reader, rewrite the rows (index them into the
latest revision, compact them with the revision's existing weights, or bin-pack them as plain Delta
files), then commit `remove`s of the inputs and `add`s of the outputs, all `dataChange=false`, in ONE
Delta transaction started from the snapshot the task was planned on. The OptimizationEvent goes into
that same commit's `commitInfo.tags`, so an event exists if and only if the rewrite does.

Failure discipline: files written by a task are deleted again whenever the task does not commit
(conflict, error, interrupted run), so an abandoned task leaves no stray files. A conflict (a file
being rewritten was removed concurrently, or the table's metadata changed under it) abandons the
task; the loop then re-plans from a fresh snapshot. Concurrent blind appends never conflict with the
rewrite, because `dataChange=false` actions are rebased over them by the transaction. Before
committing, the row count of the outputs is checked against the inputs' Delta stats: a rewrite that
would lose or duplicate rows is never committed.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta.actions import AddFile, Metadata, add_files_table, remove_actions
from use.delta.storage import absolute_path
from use.delta.transaction import Transaction
from use.errors import ConcurrentModificationError, InvalidArgumentError, RowCountMismatchError
from use.optimize import clustering, events, yielding
from use.optimize.clustering import commit_parameters
from use.optimize.plan import KIND_INDEX, KIND_RELABEL, REVISION_REWRITE_TAG
from use.optimize.strategies._common import output_files
from use.optimize.task_metrics import (
    ABANDONED,
    COMMITTED,
    IterationMetrics,
    blocks_of_rows,
    cubes_and_blocks,
    file_sizes,
    num_records,
    operation_metrics,
    reindexed_blocks,
    size_stats,
    task_file_rows,
)
from use.qbeast import writer
from use.qbeast.blocks import block_table, revision_ids
from use.qbeast.index_status import InputBlocks
from use.qbeast.reader import scan
from use.qbeast.relabel import alignment, relabelled_adds
from use.qbeast.revision import revisions_from_configuration
from use.qbeast.weight_records import record_weights, split_empty
from use.runtime.files import delete_written, write_dataframe_files
from use.runtime.jobs import job_group as spark_job_group

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from use.delta.log import DeltaLog
    from use.delta.snapshot import Snapshot
    from use.optimize.config import OptimizationConfig
    from use.optimize.plan import MergeTask
    from use.qbeast.snapshot import QbeastSnapshot

_log = logging.getLogger(__name__)

#: Delta's operation name for rewrites that do not change data.
OPERATION = "OPTIMIZE"
#: Prefix of the files a bin-packing task writes, so an interrupted task's files can be found again.
BINPACK_PREFIX = "part-useopt-"


# --- helpers over metadata (Arrow, no per-file Python objects beyond one commit's worth) ----------------


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- the three rewrites --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rewrite:
    """What a rewrite produced before it is committed."""

    adds: tuple[AddFile, ...]
    metadata: Metadata | None
    revision_id: int


def _binpack(spark: SparkSession, df: DataFrame, qsnap: QbeastSnapshot, task: MergeTask, config: OptimizationConfig) -> Rewrite:
    """Delta bin packing: repartition to the number of files the bin needs and write each partition
    as one plain Delta file (`use.runtime.files`, partition values kept). With `sort_columns`
    (cluster-key overlap) the rows are range-partitioned and sorted by the key, so the output files
    do not overlap on it. A "cluster" task takes its row order from
    `use.optimize.clustering` (ZOrder/Hilbert key ranges) and tags its files as one ZCube."""
    part = task.partition_dict
    if part:
        df = df.drop(*part)  # not stored in the files; the AddFile carries them
    n = min(output_files(task.bytes, config.max_file_size), task.num_files)
    if task.kind == "cluster":
        rows = num_records(qsnap.files.take(pa.array(task_file_rows(qsnap, task), pa.int64())), qsnap.schema)
        # Not capped by the input file count: one large unclustered file becomes several ranges.
        out = clustering.clustered(df, task, output_files(task.bytes, config.max_file_size), rows)
    elif n == 1:
        out = df.coalesce(1)
    elif task.sort_columns:
        # Clustering rewrite: each output file gets its own key range, or the outputs would overlap again.
        out = df.repartitionByRange(n, *task.sort_columns)
    else:
        out = df.repartition(n)
    if task.sort_columns and task.kind != "cluster":
        out = out.sortWithinPartitions(*task.sort_columns)
    # No tags: plain Delta files and the staging files of a Qbeast table stay what they were.
    adds = write_dataframe_files(
        out,
        qsnap.table_root,
        qsnap.schema,
        fixed_partition_values=part,
        configuration=qsnap.configuration,
        data_change=False,
        prefix=BINPACK_PREFIX,
    )
    if task.kind == "cluster":
        adds = clustering.tagged(adds, task)
    return Rewrite(adds, None, task.revision_id)


def _rewrite(
    spark: SparkSession,
    df: DataFrame,
    qsnap: QbeastSnapshot,
    task: MergeTask,
    config: OptimizationConfig,
    input_blocks: InputBlocks | None = None,
) -> Rewrite:
    if task.kind in ("binpack", "cluster"):
        return _binpack(spark, df, qsnap, task, config)

    if task.kind == "index":
        res = writer.index_into_revision(spark, df, qsnap, data_change=False, input_bytes=task.bytes)
        return Rewrite(tuple(res.adds), res.metadata, int(res.revision_id))
    if task.kind == "compact":
        # A configured sampling fraction keeps every compaction sample-friendly (sampled and
        # non-sampled cubes in separate files), so no strategy re-mixes what another separated.
        adds = writer.rewrite_with_existing_weights(
            spark,
            df,
            qsnap,
            task.revision_id,
            data_change=False,
            sampling_fraction=config.sampling_fraction,
            input_bytes=task.bytes,
            # The input's blocks often say how many rows each cube gets: then the task reads its
            # files once, to write them (no counting pass).
            input_blocks=input_blocks,
            sample_files=_files_holding_columns(qsnap, task),
        )
        return Rewrite(tuple(adds), None, task.revision_id)
    raise InvalidArgumentError(f"unknown merge task kind {task.kind!r}")  # MergeTask validates; defensive


def _relabel(qsnap: QbeastSnapshot, in_files: pa.Table, in_blocks: pa.Table) -> Rewrite:
    """A relabel task's output: its files re-added into the latest revision (`use.qbeast.relabel`).
    The plan was made on this snapshot, so every file's revision still aligns; a task naming any
    other file is refused before anything is committed."""
    latest = qsnap.revisions[qsnap.latest_revision_id]
    alignments = {}
    for rid in pc.unique(revision_ids(in_files)).to_pylist():
        al = alignment(qsnap.revisions[int(rid)], latest) if rid in qsnap.revisions else None
        if al is None:
            raise InvalidArgumentError(
                f"revision {rid} of {qsnap.table_root} does not grow into revision {latest.revision_id} by powers of "
                "two, so its files cannot move by their tags; re-index them (SupersededRevisionsSelection plans that)"
            )
        alignments[int(rid)] = al
    return Rewrite(tuple(relabelled_adds(in_files, in_blocks, alignments)), None, latest.revision_id)


def _files_holding_columns(qsnap: QbeastSnapshot, task: MergeTask) -> tuple[str, ...]:
    """The task's files as local paths when they hold the table's data columns under their own
    names (no column mapping, no partition columns), so their first rows can be read directly;
    else none."""
    mapping = qsnap.column_mapping
    if qsnap.partition_columns or (mapping is not None and mapping.active):
        return ()
    return tuple(absolute_path(qsnap.table_root, p) for p in task.paths)


def _with_weight_records(qsnap: QbeastSnapshot, result: Rewrite, in_files: pa.Table) -> tuple[Rewrite, list[AddFile]]:
    """The rewrite's adds with the empty blocks that keep every cube's status below the rows under
    it once its input files are gone, and the files that stay re-added to carry those the adds
    cannot (`use.qbeast.weight_records`: a compaction that moves a cube's rows down and drops the
    block holding its lowest maxWeight, a partial re-index of a superseded revision)."""
    revisions = revisions_from_configuration(result.metadata.configuration) if result.metadata is not None else qsnap.revisions
    adds, readds = record_weights(qsnap, result.adds, in_files.column("path"), revisions=revisions)
    return replace(result, adds=tuple(adds)), readds


def _mark_revision_rewrite(result: Rewrite, planned_version: int) -> Rewrite:
    """Tag every output of a revision-rewrite task, so the planner can tell from the log that the
    revision needs no rewrite until something else adds a file to it (`REVISION_REWRITE_TAG`)."""
    adds = tuple(replace(a, tags={**(a.tags or {}), REVISION_REWRITE_TAG: str(planned_version)}) for a in result.adds)
    return replace(result, adds=adds)


# --- one task, one commit ---------------------------------------------------------------------------------


def _output_blocks(qsnap: QbeastSnapshot, out_files: pa.Table, metadata: Metadata | None) -> pa.Table:
    """The block table of the new adds, as the next snapshot will see them (a new revision included)."""
    revisions = revisions_from_configuration(metadata.configuration) if metadata is not None else qsnap.revisions
    # empty blocks record weights (`use.qbeast.weight_records`): no block of the rewrite's output
    return split_empty(block_table(out_files, revisions))[0]


class _StopDuringRewrite(Exception):
    """A stop was requested while a task's rewrite ran: the task is abandoned, never committed."""


class _StopWatcher:
    """Cancels the task's Spark jobs when a stop is requested while they run.

    The task's jobs run in their own job group; a daemon thread waits on the stop event and cancels
    that group, so a long rewrite does not hold up a service that is shutting down. The rewrite then
    fails, its written files are deleted, and the task counts as abandoned (nothing committed).
    """

    def __init__(self, sc: Any, group: str, stop: Any) -> None:
        self._sc = sc
        self._group = group
        self._event: threading.Event | None = stop if isinstance(stop, threading.Event) else getattr(stop, "event", None)
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        if self._event is not None:
            self._thread = threading.Thread(target=self._watch, name=f"use-optimize-stop-{group}", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        assert self._event is not None
        while not self._done.is_set():
            if self._event.wait(timeout=0.1):
                break
        # Cancelling reaches only the group's running jobs, so keep cancelling until the task ends; a
        # quick job that still runs between two cancels is caught before the commit (`requested`).
        # Only a group with an active job is cancelled: Spark logs a warning for every cancel that
        # finds none, which filled the server's log while tasks ended between jobs.
        tracker = self._sc.statusTracker()
        while not self._done.is_set():
            if set(tracker.getJobIdsForGroup(self._group)) & set(tracker.getActiveJobsIds()):
                self._sc.cancelJobGroup(self._group)
            self._done.wait(timeout=0.05)

    def requested(self) -> bool:
        """Has a stop been requested (whether or not a cancel reached a job yet)?"""
        return self._event is not None and self._event.is_set()

    def close(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()


def run_task(
    spark: SparkSession,
    log: DeltaLog,
    snapshot: Snapshot,
    qsnap: QbeastSnapshot,
    task: MergeTask,
    config: OptimizationConfig,
    *,
    optimization_name: str | None = None,
    stop: Any = None,
    job_group: str | None = None,
    job_description: str | None = None,
    auto: bool = False,
) -> IterationMetrics:
    """Run one merge task planned on `snapshot` and commit it; ABANDONED metrics on a lost conflict.

    Any exception other than a concurrent-modification conflict propagates after the task's written
    files are deleted; the table is then exactly as before. `stop` (a `threading.Event` or a
    `StopToken`) set while the task's Spark jobs run cancels them: the task is abandoned cleanly
    (error "StopRequested"), also when its jobs ended between two cancels; a stop arriving after the
    rewrite lets the task commit.

    The task's Spark jobs run in job group `job_group` (default: a fresh group per task), which is
    what a stop cancels, so a caller running tasks one after another on one thread (the service's
    runs) may give all of them its own group; `job_description` prefixes their description so
    operators see whose work it is in the Spark UI. `auto`: nobody asked for this task, a table's
    properties did (the service's scheduled runs); the commit says so as Delta's auto compaction does
    (`auto` in its operationParameters).
    """
    started = _now_ms()
    t0 = time.monotonic()
    idx = task_file_rows(qsnap, task)
    in_files = qsnap.files.take(pa.array(idx, pa.int64()))
    in_blocks = blocks_of_rows(qsnap, idx)
    in_sizes = file_sizes(in_files)
    rows_in = num_records(in_files, qsnap.schema)
    cubes_in, blocks_in = cubes_and_blocks(in_blocks)
    in_stats_blocks = reindexed_blocks(in_blocks, idx)
    root = qsnap.table_root
    written: tuple[AddFile, ...] = ()
    # The revision the task's output belongs to: an index task's rows go into the revision the
    # write chose (staging files' or older revisions' rows into the latest), every other kind stays
    # in its input's. The iteration's metrics and the OptimizationEvent both report it; until the
    # rewrite has run (an abandoned task wrote nothing) it is the input's revision, as planned.
    into = task.revision_id
    relabel = task.kind == KIND_RELABEL

    def metrics(status: str, *, version: int | None, out_files: pa.Table | None, out_blocks: pa.Table | None,
                rows: int | None, error: str | None = None) -> IterationMetrics:  # fmt: skip
        out_sizes = file_sizes(out_files) if out_files is not None else np.zeros(0, np.int64)
        cubes_out, blocks_out = cubes_and_blocks(out_blocks) if out_blocks is not None else (0, 0)
        mn_in, mx_in, avg_in = size_stats(in_sizes)
        mn_out, mx_out, avg_out = size_stats(out_sizes)
        return IterationMetrics(
            strategy=task.strategy, kind=task.kind, reason=task.reason, revision_id=into,
            status=status, read_version=snapshot.version, version=version,
            # a relabel reads and writes no data: its bytes are 0, its files those it moved
            files_in=int(in_sizes.size), bytes_in=0 if relabel else int(in_sizes.sum()), min_file_size_in=mn_in,
            max_file_size_in=mx_in, avg_file_size_in=avg_in,
            files_out=int(out_sizes.size), bytes_out=0 if relabel else int(out_sizes.sum()), min_file_size_out=mn_out,
            max_file_size_out=mx_out, avg_file_size_out=avg_out,
            cubes_in=cubes_in, cubes_out=cubes_out, blocks_in=blocks_in, blocks_out=blocks_out,
            rows=int(rows if rows is not None else (rows_in or 0)),
            time_ms=int((time.monotonic() - t0) * 1000), score=float(task.score), error=error,
        )  # fmt: skip

    sc = spark.sparkContext
    group = job_group or f"use-optimize-{uuid.uuid4().hex}"
    what = f"{task.kind} {task.num_files} files of {root} ({task.strategy})"
    with spark_job_group(spark, group, f"{job_description}: {what}" if job_description else f"USE optimize: {what}"):
        watcher = _StopWatcher(sc, group, stop)
        try:
            if relabel:
                # metadata only: the same files re-added with the latest revision's tags (never
                # `written`: on failure nothing is deleted, they are the table's live files)
                result = _relabel(qsnap, in_files, in_stats_blocks)
                into = int(result.revision_id)
            else:
                df = scan(spark, qsnap, in_files)
                result = _rewrite(spark, df, qsnap, task, config, InputBlocks(in_stats_blocks, int(idx.size), rows_in))
                written, into = result.adds, int(result.revision_id)
            if watcher.requested():
                # the stop came while the rewrite ran, but its jobs ended between two cancels (a small
                # task's job can take less than the watcher's period): abandon it all the same
                raise _StopDuringRewrite()
            if task.revision_rewrite and task.kind != KIND_INDEX:
                result = _mark_revision_rewrite(result, snapshot.version)
            result, readds = _with_weight_records(qsnap, result, in_files)
            out_files = add_files_table(list(result.adds))
            rows_out = num_records(out_files, qsnap.schema)
            if rows_in is not None and rows_out is not None and rows_in != rows_out:
                raise RowCountMismatchError(
                    f"the {task.kind} rewrite of {task.num_files} files of {root} produced {rows_out} rows from {rows_in}; "
                    "nothing was committed and the written files were deleted"
                )
            out_blocks = _output_blocks(qsnap, out_files, result.metadata)
            finished = _now_ms()
            event = events.OptimizationEvent(
                optimization_name=optimization_name or task.strategy,
                write_id=str(uuid.uuid4()),
                table_id=root,
                revision_id=into,
                started_at=started,
                finished_at=finished,
                process_time_ms=finished - started,
                input_files_stats=events.FileStats.from_blocks(in_files, in_stats_blocks),
                output_files_stats=events.FileStats.from_blocks(out_files, out_blocks),
            )
            if yielding.in_progress(root):
                raise ConcurrentModificationError(
                    f"a DELETE, UPDATE or MERGE of {root} started during this task; the optimization yields to it"
                )
            txn = Transaction(log, snapshot)
            if relabel:
                # a re-added path replaces its add (the protocol's reconciliation); a concurrent
                # remove of one of them must abort this commit, or it would bring the file back
                txn.read_files(in_files.column("path")).add(*result.adds)
            else:
                txn.add(*remove_actions(in_files, data_change=False), *result.adds)
            if readds:  # files that stay, re-added to carry a weight record: the same rule
                txn.read_files([a.path for a in readds]).add(*readds)
            if result.metadata is not None:
                txn.add(result.metadata)
            parameters = {
                "predicate": "[]",
                "zOrderBy": "[]",
                "auto": "true" if auto else "false",
                "strategy": task.strategy,
                "kind": task.kind,
                "revisionId": str(task.revision_id),
                "reason": task.reason,
                # the run's configuration, so history shows which settings a run used (a property
                # changed during a run applies to the next one)
                "bytesPerIter": str(config.bytes_per_iter),
            }
            if task.kind == "cluster":
                parameters.update(commit_parameters(task))
            version = txn.commit(
                OPERATION,
                parameters,
                operation_metrics(np.zeros(0, np.int64) if relabel else in_sizes, file_sizes(out_files), rows_out),
                tags={events.EVENT_TAG: event.to_json()},
            )
        except ConcurrentModificationError as exc:
            delete_written(root, written)
            _log.info("merge task on %s abandoned: %s", root, exc)
            return metrics(ABANDONED, version=None, out_files=None, out_blocks=None, rows=0, error=type(exc).__name__)
        except BaseException:
            delete_written(root, written)
            watcher.close()
            if watcher.requested():
                _log.info("merge task on %s abandoned: a stop was requested while it ran", root)
                return metrics(ABANDONED, version=None, out_files=None, out_blocks=None, rows=0, error="StopRequested")
            raise
        finally:
            watcher.close()
        return metrics(COMMITTED, version=version, out_files=out_files, out_blocks=out_blocks, rows=rows_out)
