"""RESTORE: bring a table back to an earlier version, as one new commit (Delta's RestoreTableCommand).

The table's history stays: the restore is a commit on top of it that adds back the files of the
target version the table no longer has and removes the files the target did not have, both with
`dataChange=true` (readers of the change see rows come and go, as they did), and puts back the
target's metadata (schema, partitioning, properties: for a Qbeast table its revisions, so the
re-added files' blocks name revisions the table holds). The protocol stays the current one: a
protocol never goes down. Operation `RESTORE`, parameters `version` or `timestamp`, metrics as
Delta writes them (`numRestoredFiles`, `restoredFilesSize`, `numRemovedFiles`, `removedFilesSize`,
`tableSizeAfterRestore`, `numOfFilesAfterRestore`).

A file of the target that is no longer on storage (deleted by VACUUM once its retention passed)
makes the restore fail before anything is written, naming how many and one of them: a table cannot
come back to data it no longer has. The commit declares it read the whole table, so a concurrent
write is a conflict (retry the restore) rather than silently undone.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from use.delta.actions import add_actions, remove_actions
from use.delta.log import DeltaLog
from use.delta.transaction import Transaction
from use.delta.vacuum import files_gone
from use.display import format_bytes_exact, plural
from use.errors import InvalidArgumentError

__all__ = ["RestoreResult", "restore"]


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did: the version restored to, the commit that did it (None when the table was
    already as the target left it: nothing committed), and the files and bytes it put back and took out."""

    restored_version: int
    version: int | None
    num_restored_files: int
    restored_files_size: int
    num_removed_files: int
    removed_files_size: int
    num_files: int
    size: int

    def __str__(self) -> str:
        if self.version is None:
            return f"nothing to restore: the table already holds the files and metadata of version {self.restored_version}"
        return (
            f"restored version {self.restored_version} as version {self.version}: "
            f"{plural(self.num_restored_files, 'file')} ({format_bytes_exact(self.restored_files_size)}) added back, "
            f"{plural(self.num_removed_files, 'file')} ({format_bytes_exact(self.removed_files_size)}) removed; "
            f"now {plural(self.num_files, 'file')}, {format_bytes_exact(self.size)}"
        )


def _bytes(files: pa.Table) -> int:
    return int(pc.sum(files.column("size")).as_py() or 0) if files.num_rows else 0


def restore(
    log: DeltaLog,
    version: int | None = None,
    timestamp: int | _dt.datetime | _dt.date | str | None = None,
) -> RestoreResult:
    """Restore the table of `log` to `version`, or to the version current at `timestamp` (one of
    the two), in one commit (module docstring). VersionNotFoundError for a version the log cannot
    rebuild; InvalidArgumentError when the target's files are gone from storage."""
    if (version is None) == (timestamp is None):
        raise InvalidArgumentError("restore needs exactly one of version (e.g. 3) and timestamp (e.g. '2025-01-01 00:00:00')")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise InvalidArgumentError(f"version must be a table version (an integer of 0 or more), got {version!r}")
    # the target first, so it is never newer than the state restored over (a version past the
    # latest is the log's VersionNotFoundError, a missing table its TableNotFoundError)
    target = log.snapshot(version=version) if version is not None else log.snapshot(timestamp=timestamp)
    current = log.snapshot()
    now, then = current.files, target.files
    back = then.filter(pc.invert(pc.is_in(then.column("path"), value_set=now.column("path"))))
    gone = now.filter(pc.invert(pc.is_in(now.column("path"), value_set=then.column("path"))))
    missing = files_gone(log.table_root, back.column("path").to_pylist())
    if missing:
        raise InvalidArgumentError(
            f"cannot restore {log.table_root} to version {target.version}: {len(missing)} of its data files are no longer "
            f"on storage (VACUUM deleted them once their retention passed), e.g. {missing[0]}; restore a later version "
            "whose files are still there"
        )
    metadata_changed = target.metadata != current.metadata
    result = RestoreResult(
        target.version, None, back.num_rows, _bytes(back), gone.num_rows, _bytes(gone), then.num_rows, _bytes(then)
    )
    if not back.num_rows and not gone.num_rows and not metadata_changed:
        return result
    txn = Transaction(log, current)
    txn.read_whole_table()
    txn.add(*add_actions(back, data_change=True), *remove_actions(gone, data_change=True))
    if metadata_changed:
        txn.add(target.metadata)
    parameters = {"version": str(target.version)} if version is not None else {"timestamp": str(timestamp)}
    metrics = {
        "numRestoredFiles": result.num_restored_files,
        "restoredFilesSize": result.restored_files_size,
        "numRemovedFiles": result.num_removed_files,
        "removedFilesSize": result.removed_files_size,
        "tableSizeAfterRestore": result.size,
        "numOfFilesAfterRestore": result.num_files,
    }
    committed = txn.commit("RESTORE", parameters, metrics)
    return replace(result, version=committed)
