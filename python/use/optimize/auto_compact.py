"""Delta's auto compaction: a write that added data to a table with auto compaction on is followed,
in the writer's own session and before the statement returns, by a compaction of the partitions it
wrote to that hold enough small files (Delta's `AutoCompact` post-commit hook).

Who decides, as in Delta (`AutoCompactBase.getAutoCompactType`): the session's
`spark.databricks.delta.autoCompact.enabled` (true/false) when set, else the table's
`delta.autoOptimize.autoCompact` (or the legacy `delta.autoOptimize=true`), else off. When: the
statement's commits added data files (a write, a streaming batch, DELETE/UPDATE/MERGE rewriting
files, a CTAS); an optimization's own commits never trigger it. Where: each partition the statement
added data to (the whole table when it has no partition columns) that holds at least
`spark.databricks.delta.autoCompact.minNumFiles` (50) files smaller than
`spark.databricks.delta.autoCompact.minFileSize` (maxFileSize / 2); other partitions are left alone.
What: on a plain Delta table Delta's compaction, bin-packing those partitions' small files into
files of up to `spark.databricks.delta.autoCompact.maxFileSize` (128 MiB), the `SmallFiles`
strategy; on a Qbeast table the table's own optimization (its `use.optimization.*` chain: merging
files of the same cubes keeps the index, a bin-packing across cubes would not), on the same
partitions. Its commits are OPTIMIZE commits with `auto: true`, events in `.optimizations` like any.

The write has committed before the compaction starts, so a compaction that fails (a conflict it
cannot resolve, a Spark failure) is logged and the statement still succeeds, as Delta's post-commit
hooks do; a bad setting, though, refuses the statement before it writes anything
(`compacting_after`), since it would otherwise be found only after the commit.

The decision (`compaction_targets`) is pure: commits and snapshots in, partitions out; `after_writes`
runs it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta import DeltaLog
from use.delta.commit_options import CommitRecorder, CommittedWrite
from use.delta.skipping import partition_text_table
from use.delta.snapshot import TableConfig, auto_compact_value
from use.errors import ConfigError
from use.optimize.loop import optimize_path
from use.optimize.partition_filter import PartitionFilter
from use.optimize.request import OptimizeRequest
from use.qbeast.revision import is_qbeast

__all__ = ["AutoCompactSettings", "after_writes", "compacting_after", "compaction_targets", "enabled", "statement_ended"]

_log = logging.getLogger(__name__)

ENABLED_CONF = "spark.databricks.delta.autoCompact.enabled"
MIN_NUM_FILES_CONF = "spark.databricks.delta.autoCompact.minNumFiles"
MAX_FILE_SIZE_CONF = "spark.databricks.delta.autoCompact.maxFileSize"
MIN_FILE_SIZE_CONF = "spark.databricks.delta.autoCompact.minFileSize"
DEFAULT_MIN_NUM_FILES = 50
DEFAULT_MAX_FILE_SIZE = 128 * 1024**2
#: operations whose commits are compactions themselves (never followed by another)
_NOT_WRITES = frozenset({"OPTIMIZE"})


@dataclass(frozen=True)
class AutoCompactSettings:
    """The session's auto compaction settings (Delta's `spark.databricks.delta.autoCompact.*`)."""

    enabled: bool | None = None
    min_num_files: int = DEFAULT_MIN_NUM_FILES
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    min_file_size: int | None = None

    @property
    def small_below(self) -> int:
        """Files smaller than this are small (Delta: minFileSize, default maxFileSize / 2)."""
        return self.min_file_size if self.min_file_size is not None else self.max_file_size // 2

    @classmethod
    def from_conf(cls, conf: Mapping[str, str | None]) -> AutoCompactSettings:
        """Parse the settings; ConfigError naming the setting and its accepted values."""

        def count(key: str, default: int, least: int) -> int:
            raw = conf.get(key)
            if raw is None:
                return default
            try:
                n = int(str(raw).strip())
            except ValueError:
                n = least - 1
            if n < least:
                raise ConfigError(f"Spark setting {key}={raw!r} must be an integer >= {least}; SET it to one, or RESET it")
            return n

        raw = conf.get(ENABLED_CONF)
        try:
            enabled = None if raw is None else auto_compact_value(f"Spark setting {ENABLED_CONF}", str(raw))
        except ConfigError as exc:
            raise ConfigError(f"{exc}; SET it to true or false, or RESET it") from None
        max_size = count(MAX_FILE_SIZE_CONF, DEFAULT_MAX_FILE_SIZE, 1)
        min_size = count(MIN_FILE_SIZE_CONF, -1, 0)
        return cls(enabled, count(MIN_NUM_FILES_CONF, DEFAULT_MIN_NUM_FILES, 0), max_size, None if min_size < 0 else min_size)


def session_settings(spark: Any) -> AutoCompactSettings:
    """The settings of a session (the writing statement's: a JDBC client's SET applies to its writes)."""
    keys = (ENABLED_CONF, MIN_NUM_FILES_CONF, MAX_FILE_SIZE_CONF, MIN_FILE_SIZE_CONF)
    return AutoCompactSettings.from_conf({k: spark.conf.get(k, None) for k in keys})


_deferred_lock = threading.Lock()
_deferred: dict[str, list[tuple[Any, list[CommittedWrite], AutoCompactSettings]]] = {}


@contextlib.contextmanager
def compacting_after(spark: Any, *, until_statement_ends: bool = False) -> Iterator[CommitRecorder]:
    """A write (the block) followed by auto compaction of what it committed, in `spark`, the writing
    statement's session: the block's commits are those made with the recorder it yields (in the
    statement's `CommitOptions`). The session's settings are checked first, so a bad one refuses
    the statement with nothing written rather than after its commit; a block that raises is not
    followed by a compaction.

    `until_statement_ends`: the block is one step of a row-level statement (DELETE, UPDATE, MERGE),
    during which this process's optimizations of the table yield to it (`use.optimize.yielding`),
    so a compaction started inside would wait for its own statement: it is kept until the
    statement ends (`statement_ended`)."""
    settings = session_settings(spark)
    recorder = CommitRecorder()
    yield recorder
    commits = recorder.commits
    if not until_statement_ends:
        after_writes(spark, commits, settings)
        return
    with _deferred_lock:
        for root in dict.fromkeys(c.table_root for c in commits):
            _deferred.setdefault(root, []).append((spark, [c for c in commits if c.table_root == root], settings))


def statement_ended(root: str) -> None:
    """A row-level statement on the table at `root` ended: the compactions its steps left run now."""
    with _deferred_lock:
        waiting = _deferred.pop(root, [])
    for spark, commits, settings in waiting:
        after_writes(spark, commits, settings)


def enabled(settings: AutoCompactSettings, configuration: Mapping[str, str]) -> bool:
    """Delta's precedence: the session's setting, else the table's properties, else off."""
    if settings.enabled is not None:
        return settings.enabled
    return bool(TableConfig.from_configuration(configuration).auto_compact)


def compaction_targets(
    snapshot: Any, commits: Iterable[CommittedWrite], settings: AutoCompactSettings
) -> list[dict[str, str | None]] | None:
    """The partitions of `snapshot` (a `use.delta.Snapshot` taken after the commits) to compact, each
    as its partition values (`[{}]`: the whole of an unpartitioned table); None when nothing
    qualifies. Pure; one columnar pass over the snapshot's files."""
    columns = list(snapshot.metadata.partition_columns)
    added: set[tuple[tuple[str, str | None], ...]] = set()
    for c in commits:
        if c.table_root == snapshot.table_root and c.operation not in _NOT_WRITES:
            added.update(c.added_partitions)
    if not added:
        return None
    files = snapshot.files
    small = np.asarray(files.column("size").to_numpy(zero_copy_only=False)) < settings.small_below
    least = max(1, settings.min_num_files)
    if not columns:
        return [{}] if int(small.sum()) >= least else None
    rows = partition_text_table(files.filter(pa.array(small)), columns)
    counts = rows.group_by(columns, use_threads=False).aggregate([([], "count_all")])
    full = counts.filter(pc.greater_equal(counts.column("count_all"), least)).select(columns).to_pylist()
    enough = {tuple(r[c] for c in columns) for r in full}  # few: partitions with that many small files
    picked = [dict(p) for p in sorted(added, key=repr)]
    picked = [{c: p.get(c) for c in columns} for p in picked if tuple(p.get(c) for c in columns) in enough]
    return picked or None


def after_writes(spark: Any, commits: Sequence[CommittedWrite], settings: AutoCompactSettings | None = None) -> None:
    """Run Delta's auto compaction after a statement's `commits` (module docstring), table by table.
    Never raises: the statement has committed; a failure is logged."""
    if not commits:
        return
    try:
        settings = settings or session_settings(spark)
    except ConfigError as exc:  # checked before the write by the callers; a change since is only logged
        _log.warning("auto compaction skipped: %s", exc)
        return
    if settings.enabled is False:
        return
    for root in dict.fromkeys(c.table_root for c in commits if c.operation not in _NOT_WRITES):
        try:
            snap = DeltaLog.for_path(root).snapshot()
            if not enabled(settings, snap.metadata.configuration):
                continue
            targets = compaction_targets(snap, commits, settings)
            if targets is None:
                continue
            _compact(spark, root, snap, targets, settings)
        except Exception as exc:  # noqa: BLE001 - the write committed; Delta's post-commit hooks only log
            _log.warning("auto compaction of %s after the write failed (the write itself committed): %s", root, exc)


def _compact(spark: Any, root: str, snap: Any, partitions: list[dict[str, str | None]], settings: AutoCompactSettings) -> None:
    columns = list(snap.metadata.partition_columns)
    scope = None
    if columns:
        table = pa.Table.from_pylist(partitions, schema=pa.schema([(c, pa.string()) for c in columns]))
        scope = PartitionFilter("the partitions the write added data to", table)
    if is_qbeast(snap.metadata.configuration):
        optimize_path(spark, OptimizeRequest(root, scope=scope, auto=True))
        return
    small = str(settings.small_below)
    request = OptimizeRequest(
        root, strategy="SmallFiles", scope=scope, auto=True,
        overrides={
            "max-file-size": str(settings.max_file_size), "min-file-size": small, "small-files.max-size": small,
            "small-files.count-threshold": str(max(2, settings.min_num_files)), "task-max-bytes": str(settings.max_file_size),
        },
    )  # fmt: skip
    optimize_path(spark, request)
