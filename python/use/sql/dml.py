"""SQL `DELETE FROM`, `UPDATE` and `MERGE INTO`: the commits of the shim's `UseRowLevelCommand` and
`UseMergeCommand` (copy-on-write, as Delta's without deletion vectors).

The shim has planned the files the condition can match from one snapshot and found those holding a
matching row; it sends them with the rows that replace them: for a DELETE the rows of those files
that stay (none when whole files go: a DELETE whose condition names partition columns only, or has
none), for an UPDATE every row of those files, the matching ones with their new values, for a
MERGE the rows its clauses leave or make (an insert-only MERGE removes nothing). Here the
rows are written as new files (`use.runtime.files.write_dataframe_files`, the write path of every
Delta write; an UPDATE of a partition column moves a row to its new partition) and committed with
the removes in one `DELETE` / `UPDATE` / `MERGE` commit on that snapshot. The commit declares the removed
files read, so a concurrent commit that removed one of them (an optimization, another DELETE)
fails it with a conflict, and the rows its condition matches (the shim sends the condition), so a
concurrent commit that added files that may hold such rows (another UPDATE or MERGE; not a blind
append) fails it too, as Delta's conflict checker does; the shim then runs the statement again on
the new snapshot. A statement that matches nothing commits nothing.

A Qbeast table's rewritten rows are written without index metadata: they join the staging revision
(0), which every read scans in full (a sample filters it by weight, so results stay exact) and which
the optimizer's `UnindexedFilesSelection` indexes again, as qbeast-spark's deletes and updates
through Delta leave them (an UPDATE of an indexed column needs that re-indexing anyway).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from use.delta.actions import remove_actions
from use.delta.commit_options import CommitOptions
from use.delta.log_cache import shared_log
from use.delta.snapshot import change_data_feed_active, check_write_support
from use.delta.transaction import Transaction
from use.errors import InvalidArgumentError, TableConstraintError
from use.optimize import auto_compact, yielding
from use.optimize.task_metrics import num_records
from use.qbeast.reader import expression_to_predicate
from use.qbeast.revision import adds_revisions_only
from use.runtime.files import delete_written, rows_written, write_dataframe_files
from use.sql.protocol import Done, RewriteRowsReply, RewriteRowsRequest, RowLevelBeginRequest, RowLevelEndRequest, encode
from use.sql.scan import file_uris
from use.sql.sessions import dataframe
from use.sql.tables import snapshot_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["rewrite_rows", "writes_begin", "writes_end"]

DELETE, UPDATE, MERGE = "DELETE", "UPDATE", "MERGE"


def rewrite_rows(
    spark: SparkSession, req: RewriteRowsRequest, args: list[Any], commit_options: CommitOptions
) -> RewriteRowsReply:
    """The rows affected, after the statement's commit (none when nothing matched)."""
    started = time.time()
    # args: the rows that replace the removed files (none when whole files go), then the target's
    # read condition (None: the whole table)
    frame = args[0] if args else None
    condition = args[1] if len(args) > 1 else None
    operation = req.operation
    if operation not in (DELETE, UPDATE, MERGE):
        raise InvalidArgumentError(f"internal: unknown row-level operation {operation!r}")
    root = req.table.root
    snap = snapshot_of(root, req.version)
    check_write_support(snap.protocol, snap.metadata, root)
    if snap.config.append_only:
        raise TableConstraintError(
            f"cannot {operation} {root}: the table is append-only (delta.appendOnly=true); unset delta.appendOnly "
            f"(ALTER TABLE ... UNSET TBLPROPERTIES ('delta.appendOnly')) to allow {operation.lower()}s"
        )
    files = snap.files
    uris = pa.array(file_uris(Path(root).as_uri(), files.column("path").to_pylist()), pa.string())
    removed = files.filter(pc.is_in(uris, value_set=pa.array(req.remove, pa.string())))
    if not removed.num_rows and operation != MERGE:  # an insert-only MERGE removes nothing
        return RewriteRowsReply(0)
    whole = req.whole_files
    if not whole and removed.num_rows and change_data_feed_active(snap.protocol, snap.metadata):
        raise TableConstraintError(
            f"cannot {operation} {root}: the table records Delta's change data feed (delta.enableChangeDataFeed=true), "
            f"and this {operation} rewrites files whose row changes USE does not record yet (their change data would "
            "show every row of those files deleted and inserted); run it with Delta, or turn the feed off (ALTER TABLE "
            "... UNSET TBLPROPERTIES ('delta.enableChangeDataFeed')). Appends, overwrites and DELETEs of whole "
            "partitions are recorded exactly"
        )
    affected = num_records(removed, snap.schema) if whole else int(req.matched_rows or 0)
    if affected is None:
        affected = -1  # whole files without row counts in their stats: Delta reports -1 too
    adds: tuple[Any, ...] = ()
    if not whole:
        adds = write_dataframe_files(
            dataframe(spark, frame), root, snap.schema, partition_columns=snap.partition_columns,
            configuration=snap.configuration,
        )  # fmt: skip
    try:
        txn = Transaction(shared_log(root), snap, commit_options=commit_options)
        # the rewritten rows are staging files of a Qbeast table: an index revision added meanwhile
        # (the service's) leaves them valid
        txn.tolerate_metadata_change(adds_revisions_only)
        txn.read_files(removed.column("path"))
        # what the statement read: the rows its condition (a MERGE: the ON condition's target-only
        # part) matches; rows a concurrent commit adds there make it run again on the new snapshot
        txn.read_rows_matching(expression_to_predicate(condition) if condition is not None else None)
        txn.add(*remove_actions(removed, data_change=True), *adds)
        written = rows_written(adds)
        metrics = {
            "numRemovedFiles": removed.num_rows,
            "numAddedFiles": len(adds),
            **_row_metrics(operation, affected, written, req),
            "numRemovedBytes": int(pc.sum(removed.column("size")).as_py() or 0),
            "numAddedBytes": sum(int(a.size) for a in adds),
            "numAddedChangeFiles": 0,
            "numDeletionVectorsAdded": 0,
            "numDeletionVectorsRemoved": 0,
            "executionTimeMs": int((time.time() - started) * 1000),
        }  # fmt: skip
        # strings, as Delta writes a commit's metrics
        txn.commit(operation, {"predicate": json.dumps([req.predicate or "true"])}, {k: str(v) for k, v in metrics.items()})
    except BaseException:
        delete_written(root, list(adds))
        raise
    return RewriteRowsReply(affected)


def _row_metrics(operation: str, affected: int, written: int, req: RewriteRowsRequest) -> dict[str, Any]:
    """Delta's row counts of the operation (MERGE's come from the shim, which counted each outcome)."""
    if operation == DELETE:
        return {"numDeletedRows": affected, "numCopiedRows": written}
    if operation == UPDATE:
        return {"numUpdatedRows": affected, "numCopiedRows": written - affected}
    counted = encode(req.merge_metrics) if req.merge_metrics is not None else {}  # Delta's names, as on the wire
    return {**counted, "numOutputRows": written}


def writes_begin(spark: SparkSession, req: RowLevelBeginRequest, args: list[Any]) -> Done:
    """A row-level statement on the table starts: this process's optimizations of it yield until it
    ends (`use.optimize.yielding`); the shim calls `writes_end` whatever the outcome."""
    yielding.begin(req.table.root)
    return Done()


def writes_end(spark: SparkSession, req: RowLevelEndRequest, args: list[Any]) -> Done:
    """The statement ended: optimizations stop yielding to it, and the auto compaction its commits
    asked for runs (`use.optimize.auto_compact`), before the statement returns."""
    root = req.table.root
    yielding.end(root)
    auto_compact.statement_ended(root)
    return Done()
