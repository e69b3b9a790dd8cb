"""VACUUM: delete data files the table no longer references, once they are older than the retention.

What is deleted follows Delta's VacuumCommand: every file under the table root that is not hidden
(`_`/`.`-prefixed names, except partition directories of `_`-named columns and `_change_data`),
not referenced by a live `add` of the latest snapshot, not referenced by a `remove` newer than the
retention (readers time-travelling inside the retention may still read it), and last modified
before the retention cutoff (a file written by an in-flight transaction is young). The `_delta_log`
directory and anything outside the table root are never touched.

A real run is recorded in the log as two commits that carry only `commitInfo` (no data change):
`VACUUM START` (parameters `retentionCheckEnabled`, `specifiedRetentionMillis`,
`defaultRetentionMillis`; metrics `numFilesToDelete`, `sizeOfDataToDelete`) and `VACUUM END`
(parameter `status`; metrics `numDeletedFiles`, `numVacuumedDirectories`), with values as strings
as Delta writes them. A dry run lists and measures, and neither deletes nor commits.
"""

from __future__ import annotations

import math
import os
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from use.delta.datafile import local_root
from use.delta.storage import absolute_path
from use.display import format_bytes_exact, plural
from use.errors import CLI, PYTHON, SQL, InvalidArgumentError, VacuumRetentionError, VersionNotFoundError

__all__ = ["VacuumResult", "check_version_files", "files_gone", "vacuum", "vacuum_candidates"]

_HOUR_MS = 3_600_000
_LOG_DIR = "_delta_log"


@dataclass(frozen=True)
class VacuumResult:
    """Files (relative to the table root, `/`-separated) deleted, or that a dry run would delete."""

    files: tuple[str, ...]
    bytes: int
    dry_run: bool
    #: The size of each file of `files`, in the same order (a SQL `CALL ... vacuum` row each).
    sizes: tuple[int, ...] = ()

    def __str__(self) -> str:
        """What was deleted (or would be), with its size, then one file per line (`use vacuum` prints this)."""
        verb = "would delete" if self.dry_run else "deleted"
        lines = [f"{verb} {plural(len(self.files), 'file')}, {format_bytes_exact(self.bytes)}"]
        lines += [f"  {path}" for path in self.files]
        return "\n".join(lines)


def _is_hidden(name: str, partition_columns: Sequence[str]) -> bool:
    """Delta's DeltaTableUtils.isHiddenDirectory, applied to every path component."""
    if not (name.startswith("_") or name.startswith(".")):
        return False
    if name.startswith("_delta_index") or name.startswith("_change_data"):
        return False
    return not any(name.startswith(f"{c}=") for c in partition_columns)


def _relative_log_path(path: str, root: str) -> str | None:
    """A path as written in the log -> `/`-separated path relative to the root (None: elsewhere)."""
    if "://" in path or path.startswith("file:"):
        parsed = urllib.parse.urlparse(path)
        if parsed.scheme not in ("file", ""):
            return None
        absolute = urllib.parse.unquote(parsed.path)
    elif path.startswith("/"):
        absolute = urllib.parse.unquote(path)
    else:
        return urllib.parse.unquote(path)
    root_norm = os.path.normpath(root)
    absolute = os.path.normpath(absolute)
    if absolute == root_norm or not absolute.startswith(root_norm + os.sep):
        return None
    return absolute[len(root_norm) + 1 :].replace(os.sep, "/")


def _normalized_paths(paths: pa.ChunkedArray | pa.Array, root: str) -> pa.Array:
    """Vectorized where it matters: only paths with escapes or a scheme go through Python."""
    arr = paths.combine_chunks() if isinstance(paths, pa.ChunkedArray) else paths
    arr = arr.cast(pa.string())
    if len(arr) == 0:
        return arr
    special = pc.or_(
        pc.match_substring(arr, "%"),
        pc.or_(pc.starts_with(arr, "/"), pc.match_substring(arr, ":")),
    )
    special = pc.fill_null(special, False)
    if not pc.any(special).as_py():
        return arr
    idx = pc.indices_nonzero(special).to_numpy()
    fixed = [_relative_log_path(p, root) for p in arr.take(pa.array(idx)).to_pylist()]
    plain = arr.filter(pc.invert(special))
    return pa.concat_arrays([plain, pa.array([f for f in fixed if f is not None], pa.string())])


@dataclass(frozen=True)
class _Listing:
    paths: list[str]
    sizes: list[int]
    mtimes: list[int]
    directories: int


def _list_files(root: str, partition_columns: Sequence[str]) -> _Listing:
    paths: list[str] = []
    sizes: list[int] = []
    mtimes: list[int] = []
    directories = 0
    stack = [("", root)]
    while stack:
        rel_dir, abs_dir = stack.pop()
        try:
            entries = list(os.scandir(abs_dir))
        except FileNotFoundError:
            continue  # removed concurrently
        for e in entries:
            if rel_dir == "" and e.name == _LOG_DIR:
                continue
            if _is_hidden(e.name, partition_columns):
                continue
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            if e.is_dir(follow_symlinks=False):
                directories += 1
                stack.append((rel, e.path))
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            paths.append(rel)
            sizes.append(int(st.st_size))
            mtimes.append(int(st.st_mtime_ns // 1_000_000))
    return _Listing(paths, sizes, mtimes, directories)


def _retention_ms(retention_hours: float | None, default_ms: int) -> int:
    if retention_hours is None:
        return default_ms
    if isinstance(retention_hours, bool) or not isinstance(retention_hours, (int, float)):
        raise InvalidArgumentError(f"retention_hours must be a number of hours, got {retention_hours!r}")
    if not math.isfinite(retention_hours) or retention_hours < 0:
        raise InvalidArgumentError(f"retention_hours must be a finite number >= 0, got {retention_hours!r}")
    return int(round(retention_hours * _HOUR_MS))


def vacuum_candidates(log: Any, retention_ms: int, *, now_ms: int | None = None) -> tuple[list[str], list[int], int, Any]:
    """(relative paths, sizes, directories scanned, snapshot) of files vacuum would delete."""
    snap = log.snapshot()
    root = local_root(str(log.table_root))
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - retention_ms
    parts = tuple(snap.partition_columns)
    listing = _list_files(root, parts)
    if not listing.paths:
        return [], [], listing.directories, snap
    live = _normalized_paths(snap.files.column("path"), root)
    tomb = snap.all_tombstones
    if tomb.num_rows:
        recent = pc.fill_null(pc.greater(tomb.column("deletion_timestamp"), cutoff), True)
        recent_paths = _normalized_paths(tomb.filter(recent).column("path"), root)
        valid = pa.concat_arrays([live, recent_paths])
    else:
        valid = live
    listed = pa.array(listing.paths, pa.string())
    referenced = pc.is_in(listed, value_set=valid)
    old = pc.less(pa.array(listing.mtimes, pa.int64()), cutoff)
    delete = pc.and_(pc.invert(referenced), old)
    idx = pc.indices_nonzero(delete).to_numpy()
    paths = [listing.paths[i] for i in idx]
    sizes = [listing.sizes[i] for i in idx]
    order = sorted(range(len(paths)), key=paths.__getitem__)
    return [paths[i] for i in order], [sizes[i] for i in order], listing.directories, snap


def vacuum(
    log: Any,
    retention_hours: float | None = None,
    *,
    dry_run: bool = False,
    enforce_retention_check: bool = True,
) -> VacuumResult:
    """Delete unreferenced data files older than the retention (default: the table's
    `delta.deletedFileRetentionDuration`, one week).

    A retention shorter than the table's is refused with VacuumRetentionError unless
    `enforce_retention_check=False`: readers of older versions (and writers that started before a
    remove) could still need those files.
    """
    snap = log.snapshot()
    default_ms = int(snap.config.deleted_file_retention_ms)
    retention_ms = _retention_ms(retention_hours, default_ms)
    if enforce_retention_check and retention_ms < default_ms:
        raise VacuumRetentionError(
            f"vacuum of {log.table_root} with a retention of {retention_ms / _HOUR_MS:g} hours is below the table's "
            f"delta.deletedFileRetentionDuration of {default_ms / _HOUR_MS:g} hours: files removed since then may still "
            "be read by time travel or by a concurrent reader or writer; nothing was deleted",
            hints={
                PYTHON: f"use retention_hours >= {default_ms / _HOUR_MS:g}, or pass enforce_retention_check=False "
                "if nothing reads older versions",
                CLI: f"use --retention-hours {default_ms / _HOUR_MS:g} or more, or add --force if nothing reads older versions",
                SQL: f"use retention_hours => {default_ms / _HOUR_MS:g} or more (VACUUM: RETAIN {default_ms / _HOUR_MS:g} "
                "HOURS), or add force => true (VACUUM: SET spark.databricks.delta.retentionDurationCheck.enabled = false) "
                "if nothing reads older versions",
            },
        )
    paths, sizes, directories, snap = vacuum_candidates(log, retention_ms)
    total = int(sum(sizes))
    if dry_run:
        return VacuumResult(tuple(paths), total, True, tuple(int(x) for x in sizes))
    root = local_root(str(log.table_root))
    start_params = {
        "retentionCheckEnabled": "true" if enforce_retention_check else "false",
        "defaultRetentionMillis": str(default_ms),
    }
    if retention_hours is not None:
        start_params["specifiedRetentionMillis"] = str(retention_ms)
    log.start_transaction().commit(
        "VACUUM START",
        parameters=start_params,
        metrics={"numFilesToDelete": str(len(paths)), "sizeOfDataToDelete": str(total)},
    )
    deleted: list[str] = []
    deleted_sizes: list[int] = []
    deleted_bytes = 0
    status = "FAILED"
    try:
        touched_dirs: set[str] = set()
        for rel, size in zip(paths, sizes, strict=False):
            full = os.path.join(root, *rel.split("/"))
            try:
                os.unlink(full)
            except FileNotFoundError:
                continue  # deleted concurrently: the goal is reached
            deleted.append(rel)
            deleted_sizes.append(int(size))
            deleted_bytes += size
            if "/" in rel:
                touched_dirs.add(rel.rsplit("/", 1)[0])
        _remove_empty_dirs(root, touched_dirs)
        status = "COMPLETED"
    finally:
        log.start_transaction().commit(
            "VACUUM END",
            parameters={"status": status},
            metrics={"numDeletedFiles": str(len(deleted)), "numVacuumedDirectories": str(directories + 1)},
        )
    return VacuumResult(tuple(deleted), deleted_bytes, False, tuple(deleted_sizes))


def _remove_empty_dirs(root: str, dirs: set[str]) -> None:
    """Remove directories this vacuum emptied (deepest first), never the root or the log."""
    candidates: set[str] = set()
    for d in dirs:
        parts = d.split("/")
        for i in range(len(parts), 0, -1):
            candidates.add("/".join(parts[:i]))
    for d in sorted(candidates, key=lambda p: -p.count("/")):
        if d.split("/")[0] == _LOG_DIR:
            continue
        try:
            os.rmdir(os.path.join(root, *d.split("/")))
        except OSError:
            pass  # not empty (or gone): leave it


def files_gone(root: str, paths: Sequence[str]) -> list[str]:
    """The data files among `paths` (log paths of the table at `root`) that are no longer on
    storage: a version older than the retention may name files VACUUM has since deleted. The one
    check of RESTORE and of time travel (`check_version_files`)."""
    return [p for p in paths if not os.path.exists(absolute_path(root, p))]


def check_version_files(log: Any, version: int, paths: Sequence[str]) -> None:
    """VersionNotFoundError when files a read of `version` needs (`paths`) are gone, naming the
    version, VACUUM, and the versions that can still be read, instead of the reader's
    FILE_NOT_EXIST halfway through the query. Checked where a query is planned, on the files it
    will read (a stat each; only for a read of an older version: the latest's files are kept)."""
    gone = files_gone(log.table_root, paths)
    if not gone:
        return
    latest = log.snapshot().version
    lo, hi = version + 1, latest  # the oldest version after it whose files are all there (the latest's are)
    while lo < hi:
        mid = (lo + hi) // 2
        if files_gone(log.table_root, log.snapshot(version=mid).files.column("path").to_pylist()):
            lo = mid + 1
        else:
            hi = mid
    raise VersionNotFoundError(
        f"version {version} of {log.table_root} cannot be read: {len(gone)} of the data files it needs are no longer on "
        f"storage (VACUUM deleted them once they were older than the table's retention, "
        f"delta.deletedFileRetentionDuration), e.g. {gone[0]}; versions {lo} to {latest} (the latest) can still be read"
    )
