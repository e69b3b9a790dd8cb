"""DeltaLog: the entry point to one table's transaction log (create, snapshots, history, transactions,
checkpoints and expired-log cleanup).

A `DeltaLog` caches the newest snapshot it built and moves it forward by replaying only the commits
that appeared since, so the usual read-commit-read cycle does not re-read checkpoints.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from use.delta.actions import (
    AddFile,
    CommitInfo,
    Metadata,
    Protocol,
    SetTransaction,
    action_json_line,
    empty_files,
    empty_tombstones,
)
from use.delta.checkpoint import checkpoint_name, write_checkpoint
from use.delta.commit_options import NO_COMMIT_OPTIONS, CommitOptions
from use.delta.commits import CommitActions, read_commits
from use.delta.listing import LOG_DIR_NAME, LogListing, commit_name, list_log
from use.delta.replay import advance, replay
from use.delta.schema import is_primitive, schema_to_json, uses_timestamp_ntz
from use.delta.snapshot import Snapshot, TableConfig, check_read_support, protocol_with_change_data_feed, validate_configuration
from use.delta.state import LogState
from use.delta.storage import LocalLogStore, resolve_table_root
from use.delta.transaction import Transaction, _string_map, after_commit, engine_info
from use.errors import (
    CLI,
    PYTHON,
    SQL,
    CorruptLogError,
    InvalidArgumentError,
    TableAlreadyExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)

_log = logging.getLogger(__name__)

DAY_MS = 86_400_000
ADVANCE_LIMIT = 50
"""Beyond this many new commits, a newer checkpoint is read instead of replaying them onto the cache."""

#: Operations that never change a table's rows (`DeltaLog.last_data_change_ms`).
MAINTENANCE_OPERATIONS = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES"})


@dataclass(frozen=True)
class HistoryEntry:
    """One commit as `DESCRIBE HISTORY` shows it."""

    version: int
    timestamp: int
    operation: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    commit_info: Mapping[str, Any] = field(default_factory=dict)


def _to_ms(timestamp: int | _dt.datetime | _dt.date | str) -> int:
    if isinstance(timestamp, bool):
        raise InvalidArgumentError(f"timestamp must be ms since epoch, a datetime or an ISO string, got {timestamp!r}")
    if isinstance(timestamp, int):
        return timestamp
    if isinstance(timestamp, str):
        try:
            parsed = _dt.datetime.fromisoformat(timestamp.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidArgumentError(
                f"timestamp {timestamp!r} is not ISO 8601 (e.g. '2024-05-01T12:00:00Z' or '2024-05-01')"
            ) from exc
        return _to_ms(parsed)
    if isinstance(timestamp, _dt.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=_dt.UTC)  # naive times are read as UTC
        return int(timestamp.timestamp() * 1000)
    if isinstance(timestamp, _dt.date):
        return _to_ms(_dt.datetime(timestamp.year, timestamp.month, timestamp.day, tzinfo=_dt.UTC))
    raise InvalidArgumentError(f"timestamp must be ms since epoch, a datetime or an ISO string, got {timestamp!r}")


def _fmt_ms(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).isoformat(timespec="milliseconds")


class DeltaLog:
    """The transaction log of the table at `table_root` (which may not exist yet)."""

    def __init__(self, table_root: str, store: LocalLogStore | None = None) -> None:
        self.table_root = table_root
        self.log_dir = os.path.join(table_root, LOG_DIR_NAME)
        self.store = store or LocalLogStore()
        self._lock = threading.Lock()
        self._cached: Snapshot | None = None
        self._cached_sig: tuple[int, int] | None = None

    @classmethod
    def for_path(cls, path: str | os.PathLike[str]) -> DeltaLog:
        return cls(resolve_table_root(path))

    def __repr__(self) -> str:
        return f"DeltaLog({self.table_root!r})"

    # --- existence and listing ------------------------------------------------------------------------

    def _listing(self) -> LogListing:
        return list_log(self.store, self.log_dir)

    def exists(self) -> bool:
        return not self._listing().is_empty

    def _not_found(self) -> TableNotFoundError:
        return TableNotFoundError(
            f"no Delta table at {self.table_root}: {self.log_dir} holds no commits",
            hints={
                PYTHON: "check the path, or create the table with DeltaTable.write(df, path) or "
                "DeltaLog.for_path(path).create(schema)",
                CLI: "check --table-location: it must name the directory of an existing Delta table",
                SQL: "check the table's path or name",
            },
        )

    # --- create --------------------------------------------------------------------------------------

    def create(
        self,
        schema: pa.Schema,
        partition_columns: tuple[str, ...] | list[str] = (),
        configuration: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        actions: Sequence[AddFile | SetTransaction] = (),
        operation: str = "CREATE TABLE",
        operation_parameters: Mapping[str, Any] | None = None,
        operation_metrics: Mapping[str, Any] | None = None,
        managed: bool = False,
        commit_options: CommitOptions = NO_COMMIT_OPTIONS,
    ) -> Snapshot:
        """Create the table (version 0: protocol, metaData, commitInfo 'CREATE TABLE').

        With `actions` the table is created together with its first files (and application
        transactions) in that one commit, as Delta writes a new table or converts a parquet
        directory: no reader ever sees the table without them. `operation` and its parameters and
        metrics then name what made it (e.g. `WRITE`, `CONVERT`). `managed`: the table's directory
        belongs to a metastore entry (Delta's `isManaged` in the commit). `commit_options`: the creating
        statement's (its default table properties under `configuration`, its user metadata, the
        recorder of its commits).
        """
        protocol, metadata, conf = self._new_table(schema, partition_columns, configuration, name, description, commit_options)
        parts = tuple(metadata.partition_columns)
        listing = self._listing()
        if not listing.is_empty:
            raise TableAlreadyExistsError(
                f"a Delta table already exists at {self.table_root} (latest version {listing.latest_version}); "
                "open it with DeltaLog.for_path(path).snapshot() or choose another path"
            )
        first = _first_actions(actions, parts)
        if operation_parameters is None:
            operation_parameters = {
                "isManaged": "true" if managed else "false",
                **({"description": description} if description is not None else {}),
                "partitionBy": json.dumps(list(parts)),
                "properties": json.dumps(conf),
            }
        info = CommitInfo(
            timestamp=int(time.time() * 1000),
            operation=operation,
            operation_parameters=_string_map(operation_parameters, "operation parameters", scalars_ok=False),
            operation_metrics=_string_map(operation_metrics, "operation metrics", scalars_ok=True),
            engine_info=engine_info(),
            is_blind_append=True,
            read_version=None,
            txn_id=metadata.id,
            isolation_level="Serializable",
            tags={},
            user_metadata=commit_options.user_metadata,
            user_name=commit_options.user_name,
        )
        data = ("\n".join(action_json_line(a) for a in (info, protocol, metadata, *first)) + "\n").encode()
        path = os.path.join(self.log_dir, commit_name(0))
        if not self.store.put_if_absent(path, data):
            raise TableAlreadyExistsError(f"a Delta table was created concurrently at {self.table_root}")
        with self._lock:  # a cached snapshot is of no table; the manifests below read the new one
            self._cached, self._cached_sig = None, None
        after_commit(self, 0, operation, [a for a in first if isinstance(a, AddFile)], [], conf, commit_options.recorder)
        if first:
            return self.snapshot(version=0)
        state = LogState(0, protocol, metadata, _empty_files(), _empty_tombstones(), {}, {}, None, info.to_action()["commitInfo"])
        st = os.stat(path)
        snap = Snapshot(self.table_root, 0, st.st_mtime_ns // 1_000_000, state)
        with self._lock:
            self._cached, self._cached_sig = snap, (st.st_size, st.st_mtime_ns // 1_000_000)
        return snap

    def create_transaction(
        self,
        schema: pa.Schema,
        partition_columns: tuple[str, ...] | list[str] = (),
        configuration: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        commit_options: CommitOptions = NO_COMMIT_OPTIONS,
    ) -> Transaction:
        """A transaction that creates the table: its commit is version 0, holding the protocol, the
        metaData and whatever the caller adds (data files), so a table and its first data appear in
        one commit, as Spark's `df.write.format("delta").save(path)` makes them. Arguments are checked
        as in `create`; a table that exists already (or is created concurrently, which the commit's
        put-if-absent detects) makes it fail with a typed error and nothing written."""
        protocol, metadata, _ = self._new_table(schema, partition_columns, configuration, name, description, commit_options)
        listing = self._listing()
        if not listing.is_empty:
            raise TableAlreadyExistsError(
                f"a Delta table already exists at {self.table_root} (latest version {listing.latest_version}); "
                "append to it or choose another path"
            )
        state = LogState(-1, protocol, metadata, _empty_files(), _empty_tombstones(), {}, {}, None, None)
        txn = Transaction(self, Snapshot(self.table_root, -1, 0, state), commit_options=commit_options)
        txn.add(protocol, metadata)
        return txn

    def _new_table(
        self,
        schema: pa.Schema,
        partition_columns: tuple[str, ...] | list[str],
        configuration: Mapping[str, str] | None,
        name: str | None,
        description: str | None,
        commit_options: CommitOptions,
    ) -> tuple[Protocol, Metadata, dict[str, str]]:
        """The protocol and metaData of a new table, every argument checked; its properties are
        `configuration` over the statement's defaults for new tables (`commit_options.table_defaults`:
        Delta's `spark.databricks.delta.properties.defaults.*`, `use.delta.snapshot.property_defaults`)."""
        if not isinstance(schema, pa.Schema):
            raise InvalidArgumentError(f"create needs a pyarrow.Schema, got {type(schema).__name__}")
        if len(schema) == 0:
            raise InvalidArgumentError("a table needs at least one column")
        if isinstance(partition_columns, str):
            raise InvalidArgumentError(
                f"partition_columns must be a sequence of column names, got the string {partition_columns!r}"
            )
        parts = tuple(partition_columns)
        if len(set(parts)) != len(parts):
            raise InvalidArgumentError(f"partition columns {list(parts)} contain duplicates")
        for c in parts:
            if c not in schema.names:
                raise InvalidArgumentError(f"partition column {c!r} is not in the schema (columns: {schema.names})")
            if not is_primitive(schema.field(c).type):
                raise InvalidArgumentError(
                    f"partition column {c!r} has nested type {schema.field(c).type}; partition by a primitive column"
                )
        if len(parts) == len(schema):
            raise InvalidArgumentError("at least one column must not be a partition column")
        conf = validate_configuration({**commit_options.table_defaults, **dict(configuration or {})})
        schema_string = schema_to_json(schema)
        for label, value in (("name", name), ("description", description)):
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError(f"table {label} must be a string")
        metadata = Metadata.new(schema_string, parts, conf, name=name, description=description)
        return self._protocol_for(schema, conf), metadata, conf

    @staticmethod
    def _protocol_for(schema: pa.Schema, conf: Mapping[str, str]) -> Protocol:
        if uses_timestamp_ntz(schema):
            protocol = Protocol(3, 7, ("timestampNtz",), ("appendOnly", "invariants", "timestampNtz"))
        else:
            protocol = Protocol(1, 2)
        if conf.get("delta.enableChangeDataFeed", "false").lower() == "true":
            protocol = protocol_with_change_data_feed(protocol) or protocol
        return protocol

    # --- snapshots --------------------------------------------------------------------------------------

    def snapshot(
        self,
        version: int | None = None,
        timestamp: int | _dt.datetime | _dt.date | str | None = None,
        *,
        after_latest: bool = True,
    ) -> Snapshot:
        """The latest snapshot, or the one at `version`, or the latest one committed at or before `timestamp`.

        Commit times are the commit files' modification times made strictly increasing (as Delta
        does), or a commit's `inCommitTimestamp` where it records one (`_commit_times`); a
        timestamp after the last commit gives the latest version (as delta-rs does and Delta's
        RESTORE takes it), or with `after_latest=False` is a VersionNotFoundError naming the last
        commit's time (as Delta's time travel refuses it: a read "as of" a time not yet reached
        would change as commits arrive); one before the earliest reconstructable commit is a
        VersionNotFoundError. Naive datetimes and ISO
        strings without an offset are read as UTC. Resolving a timestamp stats every commit file;
        loading by version (or the latest) lists names only and stats just the commits from the
        snapshot's checkpoint on (see `LogListing.commit_timestamp` for its `timestamp`).
        """
        if version is not None and timestamp is not None:
            raise InvalidArgumentError("give either version or timestamp, not both")
        listing = self._listing()
        if listing.is_empty:
            raise self._not_found()
        latest = listing.latest_version
        stamps: dict[int, int] | None = None
        if timestamp is not None:
            stamps = self._commit_times(listing)
            ts = _to_ms(timestamp)
            target = self._version_at(listing, stamps, ts)
            if not after_latest and target == latest and latest in stamps and stamps[latest] < ts:
                raise VersionNotFoundError(
                    f"the timestamp {_fmt_ms(ts)} is after the latest version of {self.table_root} (version {latest}, "
                    f"committed at {_fmt_ms(stamps[latest])}); use a timestamp at or before {_fmt_ms(stamps[latest])}, "
                    "or read without a timestamp for the latest version"
                )
        elif version is not None:
            if isinstance(version, bool) or not isinstance(version, int):
                raise InvalidArgumentError(f"version must be an int, got {version!r}")
            if version < 0 or version > latest:
                raise VersionNotFoundError(
                    f"version {version} of {self.table_root} does not exist; {listing.available_versions_text()}"
                )
            target = version
        else:
            target = latest
        return self._snapshot_at(listing, target, stamps)

    @staticmethod
    def _signature(listing: LogListing, version: int) -> tuple[int, int] | None:
        cf = listing.commits.get(version)
        info = None if cf is None else cf.info()
        return None if info is None else (info.size, info.modification_time)

    def _snapshot_at(self, listing: LogListing, target: int, stamps: Mapping[int, int] | None = None) -> Snapshot:
        """`stamps` are the whole-log commit times when the caller has them (time travel by
        timestamp), so the snapshot's time is the one the version was found by; otherwise only the
        commits from the checkpoint on are stat'ed (`LogListing.commit_timestamp`)."""
        with self._lock:
            cached, sig = self._cached, self._cached_sig
        if cached is not None and sig != self._signature(listing, cached.version):
            cached = None  # the table was deleted and re-created under us: the cache is someone else's
        if cached is not None and cached.version == target:
            if stamps is None or stamps.get(target, cached.timestamp) == cached.timestamp:
                return cached
            return Snapshot(self.table_root, target, stamps[target], cached.state)  # the time it was found by
        state: LogState | None = None
        if (
            cached is not None
            and cached.version < target
            and all(v in listing.commits for v in range(cached.version + 1, target + 1))
            and not (
                target - cached.version > ADVANCE_LIMIT
                and any(cached.version < v <= target and c.complete for v, c in listing.checkpoints.items())
            )
        ):
            # Moving forward from the cache only needs the new commits (unless there are many of
            # them and a newer checkpoint makes a fresh replay cheaper).
            state = advance(self.store, listing, cached.state, target)
        if state is None:
            state = replay(self.store, listing, target)
        check_read_support(state.protocol, state.metadata, self.table_root)
        ts = stamps.get(target) if stamps is not None else _in_commit_timestamp(state.latest_commit_info)
        if ts is None:
            ts = listing.commit_timestamp(target)
        if ts is None:
            cp = listing.checkpoints.get(target)
            ts = self.store.modification_time(cp.paths[0]) if cp else 0
        snap = Snapshot(self.table_root, target, ts, state)
        with self._lock:
            if (
                self._cached is None
                or self._cached.version <= target
                or self._cached_sig != self._signature(listing, self._cached.version)
            ):
                self._cached, self._cached_sig = snap, self._signature(listing, target)
        return snap

    def _commit_times(self, listing: LogListing) -> dict[int, int]:
        """Every commit's time, for time travel by timestamp: its `inCommitTimestamp` where it has one,
        else its file's modification time (made increasing).

        With the writer feature inCommitTimestamp, a commit records the time it succeeded; readers
        should use it (the protocol's recommendation, which Delta follows), because file times
        change when a log is copied or restored. Writers record it in every commit from the one
        that enables the feature on, so the commits carrying one are a suffix of the log: they are
        read newest first (their first line) until one has none, which on other tables is the
        latest commit alone.
        """
        stamps = listing.commit_timestamps()
        for v in sorted(stamps, reverse=True):
            try:
                ict = _in_commit_timestamp(_read_commit_info(listing.commits[v].path))
            except FileNotFoundError:
                del stamps[v]  # cleaned up since the listing
                continue
            except CorruptLogError:
                break  # a replay of that version reports it; its time is the file's
            if ict is None:
                break
            stamps[v] = ict
        return stamps

    def _version_at(self, listing: LogListing, stamps: Mapping[int, int], ts: int) -> int:
        if not stamps:
            raise VersionNotFoundError(f"{self.table_root} has no commit files to resolve a timestamp against")
        earliest_v = min(stamps)
        try:
            reconstructable = listing.earliest_reconstructable_version()
        except CorruptLogError:
            reconstructable = earliest_v
        candidates = [v for v, t in stamps.items() if t <= ts and v >= reconstructable]
        if not candidates:
            first = max(reconstructable, earliest_v)
            raise VersionNotFoundError(
                f"no version of {self.table_root} was committed at or before {_fmt_ms(ts)}; the earliest available is "
                f"version {first} committed at {_fmt_ms(stamps.get(first, stamps[earliest_v]))} "
                f"({listing.available_versions_text()})"
            )
        return max(candidates)

    def latest_version(self) -> int:
        """The newest version, from the log's listing (no snapshot is read)."""
        listing = self._listing()
        if listing.is_empty:
            raise self._not_found()
        return listing.latest_version

    def commits(self, start: int, end: int, partition_keys: Sequence[str] = ()) -> list[CommitActions]:
        """The actions of commits `start`..`end` (inclusive), in order, file actions as Arrow tables
        (partition values by `partition_keys`); CorruptLogError if one is missing (cleaned up)."""
        return read_commits(self.store, self._listing(), start, end, partition_keys)

    def first_version_since(self, timestamp: int | _dt.datetime | _dt.date | str) -> int | None:
        """The first version committed at or after `timestamp` (a stream's `startingTimestamp`:
        the changes from then on), None when every commit is older. Commit times as `snapshot`
        takes them."""
        listing = self._listing()
        if listing.is_empty:
            raise self._not_found()
        ts = _to_ms(timestamp)
        later = [v for v, t in self._commit_times(listing).items() if t >= ts]
        return min(later) if later else None

    # --- history -----------------------------------------------------------------------------------------

    def history(self, limit: int | None = None) -> list[HistoryEntry]:
        """Commits, newest first (only those whose commit files are still in the log)."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidArgumentError(f"limit must be a non-negative int or None, got {limit!r}")
        listing = self._listing()
        if listing.is_empty:
            raise self._not_found()
        entries = _history_entries(listing, listing.commit_timestamps())
        return list(entries if limit is None else itertools.islice(entries, limit))

    def last_data_change_ms(self, scan: int = 100) -> int | None:
        """When a commit last changed the table's rows (ms since epoch): the newest commit that is not
        maintenance (`MAINTENANCE_OPERATIONS`: OPTIMIZE rewrites with dataChange=false, VACUUM and
        property changes touch no rows). Only the newest `scan` commits are looked at, newest first
        until one changed rows; when all of them are maintenance the oldest one's time is returned (the
        rows changed before it: a lower bound on how long the table has been quiet). None for a table
        without commits. The service asks this of every table each interval, so it stats the scanned
        commits only (their times made increasing over that range, as Delta does for the range it
        reads), not every commit the log keeps as `history` does."""
        if isinstance(scan, bool) or not isinstance(scan, int) or scan < 1:
            raise InvalidArgumentError(f"scan must be a positive int, got {scan!r}")
        listing = self._listing()
        newest = sorted(listing.commits)[-scan:]
        if not newest:
            return None
        last: int | None = None
        for entry in itertools.islice(_history_entries(listing, listing.commit_timestamps(start=newest[0])), scan):
            if entry.operation not in MAINTENANCE_OPERATIONS:
                return int(entry.timestamp)
            last = int(entry.timestamp)
        return last

    # --- transactions ------------------------------------------------------------------------------------

    def start_transaction(
        self, *, max_retries: int | None = None, commit_options: CommitOptions = NO_COMMIT_OPTIONS
    ) -> Transaction:
        """A transaction reading the latest snapshot (the table must exist: use `create` first),
        committed with the statement's `commit_options`."""
        snap = self.snapshot()
        if max_retries is None:
            return Transaction(self, snap, commit_options=commit_options)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidArgumentError(f"max_retries must be a non-negative int, got {max_retries!r}")
        return Transaction(self, snap, max_retries=max_retries, commit_options=commit_options)

    def _post_commit(self, version: int, read_snapshot: Snapshot) -> None:
        """Checkpoint every `delta.checkpointInterval` commits, then clean up expired log files.

        The commit is already durable; a failure here must not look like a failed commit, so it is
        logged and the next interval tries again.
        """
        try:
            config = TableConfig.from_configuration(read_snapshot.metadata.configuration)
            if version > 0 and version % config.checkpoint_interval == 0:
                snap = self.snapshot(version=version)
                self.checkpoint(snap)
                if snap.config.enable_expired_log_cleanup:
                    self.cleanup_expired_logs(snap.config.log_retention_ms)
        except Exception as exc:  # noqa: BLE001 - see docstring
            _log.warning("post-commit checkpoint/cleanup of %s at version %d failed: %s", self.table_root, version, exc)

    # --- checkpoints and cleanup ----------------------------------------------------------------------------

    def checkpoint(self, snapshot: Snapshot | None = None) -> int:
        """Write a classic checkpoint for `snapshot` (default: latest) and point `_last_checkpoint` at it."""
        snap = snapshot or self.snapshot()
        write_checkpoint(self.store, self.log_dir, snap.state, snap.tombstones)
        return snap.version

    def cleanup_expired_logs(self, retention_ms: int | None = None, *, now_ms: int | None = None) -> list[str]:
        """Delete commits and checkpoints older than the newest checkpoint at or before the cutoff.

        The cutoff is midnight UTC of (now - retention), as the protocol's Metadata Cleanup says;
        everything from the cutoff checkpoint on is kept, so every version newer than the cutoff
        (and the latest checkpoint's chain) stays reconstructable. Returns the deleted file names.
        """
        if retention_ms is None:
            retention_ms = self.snapshot().config.log_retention_ms
        now = int(time.time() * 1000) if now_ms is None else now_ms
        cutoff_ts = ((now - retention_ms) // DAY_MS) * DAY_MS
        listing = self._listing()
        stamps = listing.commit_timestamps()
        old = [v for v, t in stamps.items() if t <= cutoff_ts]
        if not old:
            return []
        cutoff_commit = max(old)
        cps = [v for v, c in listing.checkpoints.items() if c.complete and v <= cutoff_commit]
        if not cps:
            return []
        keep_from = max(cps)
        deleted: list[str] = []
        for v, cf in listing.commits.items():
            if v < keep_from:
                self.store.delete(cf.path)
                deleted.append(os.path.basename(cf.path))
        for v, cp in listing.checkpoints.items():
            if v < keep_from:
                for p in cp.paths:
                    if p not in cp.missing:
                        self.store.delete(p)
                        deleted.append(os.path.basename(p))
        for name in self.store.list_names(self.log_dir):
            if name.endswith(".crc") and name[:20].isdigit() and int(name[:20]) < keep_from:
                self.store.delete(os.path.join(self.log_dir, name))
                deleted.append(name)
        return sorted(deleted)


def _history_entries(listing: LogListing, stamps: Mapping[int, int]) -> Iterator[HistoryEntry]:
    """The listed commits with a time in `stamps`, newest first, each commit file read when reached
    (a commit cleaned up since the listing is left out)."""
    for v in sorted(listing.commits, reverse=True):
        if v not in stamps:
            continue  # cleaned up while we were listing, or outside the stamped range
        try:
            info = _read_commit_info(listing.commits[v].path)
        except FileNotFoundError:
            continue  # cleaned up while we were listing
        ict = _in_commit_timestamp(info)
        yield HistoryEntry(
            version=v,
            timestamp=stamps[v] if ict is None else ict,
            operation=str(info.get("operation", "UNKNOWN")),
            parameters=dict(info.get("operationParameters") or {}),
            metrics=dict(info.get("operationMetrics") or {}),
            commit_info=info,
        )


def _in_commit_timestamp(commit_info: Mapping[str, Any] | None) -> int | None:
    """The commit time a commitInfo records under the writer feature inCommitTimestamp, if any."""
    value = (commit_info or {}).get("inCommitTimestamp")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _first_actions(actions: Sequence[Any], partition_columns: tuple[str, ...]) -> list[AddFile | SetTransaction]:
    """The file and transaction actions of a table's first commit, checked as a transaction checks
    its own (`Transaction._validate`): known kinds, each path once, partition values for exactly
    the partition columns."""
    out: list[AddFile | SetTransaction] = []
    paths: set[str] = set()
    apps: set[str] = set()
    for a in actions:
        if isinstance(a, AddFile):
            if a.path in paths:
                raise InvalidArgumentError(f"file {a.path} is added twice in one commit")
            if set(a.partition_values) != set(partition_columns):
                raise InvalidArgumentError(
                    f"file {a.path} has partition values for {sorted(a.partition_values)} but the table is partitioned "
                    f"by {sorted(partition_columns)}"
                )
            paths.add(a.path)
        elif isinstance(a, SetTransaction):
            if a.app_id in apps:
                raise InvalidArgumentError(f"application transaction {a.app_id!r} set twice in one transaction")
            apps.add(a.app_id)
        else:
            raise InvalidArgumentError(f"a table's first commit takes AddFile and SetTransaction actions, got {type(a).__name__}")
        out.append(a)
    return out


def _read_commit_info(path: str) -> dict[str, Any]:
    """The commitInfo of one commit, reading only up to it (writers put it first; big commits are skipped)."""
    fallback: list[tuple[int, bytes]] = []
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            head = raw.lstrip()[:24]
            if head.startswith(b'{"commitInfo"'):
                return _commit_info_line(raw, path, lineno)
            if not head.startswith(b'{"add"') and not head.startswith(b'{"remove"') and b'"commitInfo"' in raw:
                fallback.append((lineno, raw))  # oddly formatted: parse it exactly below
    for lineno, raw in fallback:
        info = _commit_info_line(raw, path, lineno)
        if info:
            return info
    return {}


def _commit_info_line(raw: bytes, path: str, lineno: int) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise CorruptLogError(f"{path} line {lineno} is not valid JSON ({exc}); the commit file is corrupted") from exc
    info = obj.get("commitInfo") if isinstance(obj, dict) else None
    return info if isinstance(info, dict) else {}


def _empty_files() -> pa.Table:
    return empty_files()


def _empty_tombstones() -> pa.Table:
    return empty_tombstones()


__all__ = ["DeltaLog", "HistoryEntry", "checkpoint_name"]
