"""SQL `DELETE FROM`: the commit of the shim's `UseDeleteCommand` (copy-on-write, as Delta deletes
without deletion vectors).

The shim has planned the files the condition can match from one snapshot and sends them with the
rows of those files that stay (none when whole files go: a condition on partition columns only, or
none). Here the staying rows are written as new files (`use.spark_files.write_dataframe_files`, the
write path of every Delta write) and committed with the removes in one `DELETE` commit on that
snapshot; the commit declares the removed files read, so a concurrent commit that removed one of
them (an optimization, another DELETE) fails it with a conflict and the shim runs the DELETE again.
A delete that matches nothing commits nothing.

A Qbeast table's staying rows are written without index metadata: they join the staging revision
(0), which every read scans in full (a sample filters them by weight, so results stay exact) and
which the optimizer's `UnindexedFilesSelection` indexes again, as qbeast-spark's deletes through
Delta leave them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from use.errors import TableConstraintError
from use.sql.bridge import dataframe
from use.sql.scan import file_uris
from use.sql.tables import log_for, snapshot_of, table_root
from use.sql.write import rows_written

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["delete"]


def delete(spark: SparkSession, req: dict[str, Any], args: list[Any]) -> dict[str, Any]:
    """`{"deletedRows": n}` after the DELETE's commit (or none, when nothing matched)."""
    from use.delta.actions import remove_actions
    from use.delta.snapshot import check_write_support
    from use.delta.transaction import Transaction
    from use.optimize.executor import delete_written, num_records
    from use.spark_files import write_dataframe_files

    started = time.time()
    root = table_root(req["table"]["location"])
    snap = snapshot_of(root, req["version"])
    check_write_support(snap.protocol, snap.metadata, root)
    if snap.config.append_only:
        raise TableConstraintError(
            f"cannot DELETE from {root}: the table is append-only (delta.appendOnly=true); unset delta.appendOnly "
            "(ALTER TABLE ... UNSET TBLPROPERTIES ('delta.appendOnly')) to allow deletes"
        )
    files = snap.files
    uris = pa.array(file_uris(Path(root).as_uri(), files.column("path").to_pylist()), pa.string())
    removed = files.filter(pc.is_in(uris, value_set=pa.array(req.get("remove") or [], pa.string())))
    if not removed.num_rows:
        return {"deletedRows": 0}
    whole = bool(req.get("wholeFiles"))
    deleted = (num_records(removed, snap.schema) if whole else int(req["deletedRows"]))
    if deleted is None:
        deleted = -1  # whole files without row counts in their stats: Delta reports -1 too
    adds: tuple[Any, ...] = ()
    if not whole:
        adds = write_dataframe_files(
            dataframe(spark, args[0]), root, snap.schema, partition_columns=snap.partition_columns,
            configuration=snap.configuration,
        )  # fmt: skip
    try:
        txn = Transaction(log_for(root), snap)
        txn.read_files(removed.column("path"))
        txn.add(*remove_actions(removed, data_change=True), *adds)
        added_bytes = sum(int(a.size) for a in adds)
        metrics = {
            "numRemovedFiles": removed.num_rows,
            "numAddedFiles": len(adds),
            "numDeletedRows": deleted,
            "numCopiedRows": rows_written(adds),
            "numRemovedBytes": int(pc.sum(removed.column("size")).as_py() or 0),
            "numAddedBytes": added_bytes,
            "numAddedChangeFiles": 0,
            "numDeletionVectorsAdded": 0,
            "numDeletionVectorsRemoved": 0,
            "executionTimeMs": int((time.time() - started) * 1000),
        }
        # strings, as Delta writes a commit's metrics
        txn.commit("DELETE", {"predicate": json.dumps([req.get("predicate") or "true"])}, {k: str(v) for k, v in metrics.items()})
    except BaseException:
        delete_written(root, list(adds))
        raise
    return {"deletedRows": deleted}
