"""Optimistic transactions: validate, write `<version>.json` with put-if-absent, and on losing the race
check the winning commits against Delta's conflict rules (delta-io/delta `ConflictChecker`) before
retrying at the next version.

Isolation: a transaction made only of file actions that are all `dataChange=false` (compaction,
re-clustering) runs at SnapshotIsolation and is simply rebased on concurrent appends; any other
(including one that records an application transaction) runs at WriteSerializable. The checks, in
Delta's order, against each winning commit: a protocol change when we change it too, or one that
drops a feature we read the table with, or one we cannot write under -> ProtocolChangedError (a
winner's upgrade alone is rebased over); metadata change -> MetadataChangedError; data added by a
non-blind-append commit while we read the whole table -> ConcurrentAppendError; a file we read (or any
file, when we read the whole table) removed -> ConcurrentDeleteReadError; a file we remove removed ->
ConcurrentDeleteDeleteError; the same application transaction id committed -> ConcurrentTransactionError.
Our commit's actions never change on a rebase, so nothing needs rewriting.

A winner that log cleanup already removed cannot be checked, and a version number cleanup emptied
is not free: either is a StaleTransactionError, and no commit is ever left below the newest one.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from use.delta.actions import (
    AddFile,
    CommitInfo,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    action_json_line,
)
from use.delta.commit_options import NO_COMMIT_OPTIONS, CommitOptions, CommitRecorder, CommittedWrite
from use.delta.commits import CommitActions, parse_commits
from use.delta.listing import LogListing, commit_name, list_log
from use.delta.manifest import generate_incremental
from use.delta.predicates import Predicate
from use.delta.schema import schema_from_json, void_columns
from use.delta.skipping import snapshot_files_matching
from use.delta.snapshot import Snapshot, TableConfig, check_write_support, validate_configuration
from use.errors import (
    CommitRetriesExceededError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    InvalidArgumentError,
    MetadataChangedError,
    ProtocolChangedError,
    StaleTransactionError,
    TableConstraintError,
    UnsupportedFeatureError,
)

if TYPE_CHECKING:
    from use.delta.log import DeltaLog

DEFAULT_MAX_RETRIES = 100
_log = logging.getLogger(__name__)


def after_commit(
    log: DeltaLog,
    version: int,
    operation: str,
    adds: Sequence[AddFile],
    removes: Sequence[RemoveFile],
    configuration: Mapping[str, str],
    recorder: CommitRecorder | None,
) -> None:
    """What follows every commit USE makes (a transaction's, or a table's creation with its first
    files): it is recorded for the statement's hooks (`recorder`, of its `CommitOptions`), and Delta's
    symlink format manifests of the partitions it touched are rewritten when the table asks for
    them (`use.delta.manifest`). The commit is durable by then: a manifest failure is logged with
    the statement that repairs it, never raised (a caller would take the commit for failed and
    delete its files)."""
    if recorder is not None:
        added = {tuple(sorted(a.partition_values.items())) for a in adds if a.data_change}
        recorder.record(CommittedWrite(log.table_root, version, operation, tuple(sorted(added, key=repr))))
    try:
        if not TableConfig.from_configuration(configuration).symlink_manifest:
            return

        touched = [a.partition_values for a in adds] + [r.partition_values for r in removes]
        generate_incremental(log.store, log.snapshot(), touched)
    except Exception as exc:  # noqa: BLE001 - see docstring
        _log.warning(
            "version %d of %s committed, but its symlink format manifests were not updated (%s); run "
            "GENERATE symlink_format_manifest FOR TABLE delta.`%s` to rewrite them",
            version,
            log.table_root,
            exc,
            log.table_root,
        )


def engine_info() -> str:
    try:
        return f"USE/{version('use-engine')}"
    except Exception:  # noqa: BLE001 - not installed as a distribution (source checkout)
        return "USE/0.1.0"


def _jsonable(value: Any, what: str) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"{what} must be JSON-serializable ({exc})") from exc
    return value


def _string_map(values: Mapping[str, Any] | None, what: str, *, scalars_ok: bool) -> dict[str, Any]:
    """Spark reads `operationParameters`/`operationMetrics` as map<string,string>: non-string values are
    stored as their JSON text (`["a"]` -> `'["a"]'`, `True` -> `'true'`), as Spark and delta-rs do;
    numbers may stay numbers in metrics (every reader coerces scalars)."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise InvalidArgumentError(f"{what} must be a dict, got {type(values).__name__}")
    out: dict[str, Any] = {}
    for k, v in values.items():
        if not isinstance(k, str):
            raise InvalidArgumentError(f"{what} keys must be strings, got {k!r}")
        if isinstance(v, str) or (scalars_ok and isinstance(v, (int, float)) and not isinstance(v, bool)):
            out[k] = v
        else:
            out[k] = json.dumps(_jsonable(v, f"{what}[{k!r}]"), separators=(",", ":"))
    return out


class Transaction:
    """One optimistic transaction pinned to the snapshot it read (`snapshot`, `read_version`), made
    for a statement whose `commit_options` its commit carries (user metadata, the recorder of its commits)."""

    def __init__(
        self,
        log: DeltaLog,
        snapshot: Snapshot,
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        commit_options: CommitOptions = NO_COMMIT_OPTIONS,
    ) -> None:
        self._log = log
        self.commit_options = commit_options
        self.snapshot = snapshot
        self.read_version = snapshot.version
        self.txn_id = str(uuid.uuid4())
        self.max_retries = max_retries
        self._adds: list[AddFile] = []
        self._removes: list[RemoveFile] = []
        self._metadata: Metadata | None = None
        self._protocol: Protocol | None = None
        self._txns: dict[str, SetTransaction] = {}
        self._read_whole_table = False
        self._read_paths: set[str] = set()
        self._read_rows: Predicate | bool | None = None
        self._metadata_compatible: Callable[[Metadata, Metadata], bool] | None = None
        self._committed: int | None = None
        self.attempts = 0

    # --- building -----------------------------------------------------------------------------------

    def add(self, *actions: AddFile | RemoveFile | Metadata | Protocol | SetTransaction) -> Transaction:
        self._check_open()
        for a in actions:
            if isinstance(a, AddFile):
                self._adds.append(a)
            elif isinstance(a, RemoveFile):
                self._removes.append(a)
            elif isinstance(a, Metadata):
                if self._metadata is not None:
                    raise InvalidArgumentError("a transaction may change the metadata only once (one metaData action per commit)")
                self._metadata = a
            elif isinstance(a, Protocol):
                if self._protocol is not None:
                    raise InvalidArgumentError("a transaction may change the protocol only once (one protocol action per commit)")
                self._protocol = a
            elif isinstance(a, SetTransaction):
                if a.app_id in self._txns:
                    raise InvalidArgumentError(f"application transaction {a.app_id!r} set twice in one transaction")
                self._txns[a.app_id] = a
            else:
                raise InvalidArgumentError(
                    f"cannot add {type(a).__name__} to a transaction; expected AddFile, RemoveFile, Metadata, Protocol "
                    "or SetTransaction"
                )
        return self

    def set_app_transaction(self, app_id: str, version: int) -> Transaction:
        return self.add(SetTransaction(app_id, version, int(time.time() * 1000)))

    def read_whole_table(self) -> Transaction:
        """Declare that this transaction's outcome depends on all current data (overwrite, rewrite)."""
        self._check_open()
        self._read_whole_table = True
        return self

    def read_rows_matching(self, predicate: Predicate | None) -> Transaction:
        """Declare that this transaction read the table's rows matching `predicate` (None: every row)
        and wrote what it wrote from them (DELETE, UPDATE, MERGE): a concurrent commit adding data
        files that may hold such rows is a conflict (ConcurrentAppendError), as in Delta's conflict
        checker (a winner's blind appends excepted under WriteSerializable). Without it a DELETE
        missed the rows a concurrent UPDATE moved into its condition, and two insert-only MERGEs of
        the same keys both inserted them. Files are matched by their partition values and stats
        (`use.delta.skipping.files_matching`), so a winner's files the condition cannot match do
        not conflict."""
        self._check_open()
        self._read_rows = True if predicate is None else predicate
        return self

    def tolerate_metadata_change(self, compatible: Callable[[Metadata, Metadata], bool]) -> Transaction:
        """A concurrent metaData change for which `compatible(read, winner's)` holds is no conflict
        for this transaction, when it changes no metadata itself: the format above the log knows
        changes that leave what it read valid (a Qbeast index revision added beside the one its
        files were written for, `use.qbeast.revision.adds_revisions_only`). Any other change still
        raises MetadataChangedError, as Delta's rule says."""
        self._check_open()
        self._metadata_compatible = compatible
        return self

    def read_files(self, paths: list[str] | pa.Array | pa.ChunkedArray) -> Transaction:
        """Declare files this transaction read (a concurrent remove of one is a conflict)."""
        self._check_open()
        values = paths.to_pylist() if isinstance(paths, (pa.Array, pa.ChunkedArray)) else list(paths)
        self._read_paths.update(values)
        return self

    def _check_open(self) -> None:
        if self._committed is not None:
            raise InvalidArgumentError(f"this transaction already committed version {self._committed}; start a new one")

    # --- derived facts ------------------------------------------------------------------------------

    @property
    def is_blind_append(self) -> bool:
        return (
            not self._removes and all(a.data_change for a in self._adds) and not self._read_whole_table
            and not self._read_paths and self._read_rows is None
        )  # fmt: skip

    @property
    def isolation_level(self) -> str:
        # As Delta (`canDowngradeToSnapshotIsolation`): only a commit of file actions alone, none of
        # them changing data, may be rebased freely; any other action (metaData, protocol, an
        # application transaction) keeps the table's default level.
        file_actions: list[AddFile | RemoveFile] = [*self._adds, *self._removes]
        only_file_actions = self._metadata is None and self._protocol is None and not self._txns
        if file_actions and only_file_actions and not any(a.data_change for a in file_actions):
            return "SnapshotIsolation"
        # A table that names Serializable (`delta.isolationLevel`) gets it, as in delta-spark: blind
        # appends then conflict with what this transaction read too. Otherwise WriteSerializable.
        named = self.snapshot.metadata.configuration.get("delta.isolationLevel", "").strip().lower()
        return "Serializable" if named == "serializable" else "WriteSerializable"

    # --- validation ---------------------------------------------------------------------------------

    def _validate(self, operation: str) -> tuple[Protocol, Metadata]:
        snap = self.snapshot
        table = snap.table_root
        if not isinstance(operation, str) or not operation.strip():
            raise InvalidArgumentError("commit needs a non-empty operation name, e.g. 'WRITE' or 'OPTIMIZE'")
        protocol = self._protocol or snap.protocol
        metadata = self._metadata or snap.metadata
        if self._protocol is not None and (
            self._protocol.min_reader_version < snap.protocol.min_reader_version
            or self._protocol.min_writer_version < snap.protocol.min_writer_version
        ):
            raise InvalidArgumentError(
                f"protocol downgrade from ({snap.protocol.min_reader_version},{snap.protocol.min_writer_version}) to "
                f"({self._protocol.min_reader_version},{self._protocol.min_writer_version}) is not allowed"
            )
        check_write_support(snap.protocol, snap.metadata, table)
        if self._protocol is not None or self._metadata is not None:
            check_write_support(protocol, metadata, table)
        if self._metadata is not None:
            schema = schema_from_json(metadata.schema_string)
            missing = [c for c in metadata.partition_columns if c not in schema.names]
            if missing:
                raise InvalidArgumentError(f"partition columns {missing} are not in the new schema {schema.names}")
            validate_configuration(metadata.configuration, snap.metadata.configuration)
        if self._adds:
            _check_no_void_columns(metadata, table)
        config = TableConfig.from_configuration(metadata.configuration)
        add_paths = [a.path for a in self._adds]
        rem_paths = [r.path for r in self._removes]
        if len(set(add_paths)) != len(add_paths):
            dup = next(p for p in add_paths if add_paths.count(p) > 1)
            raise InvalidArgumentError(f"file {dup} is added twice in one commit")
        if len(set(rem_paths)) != len(rem_paths):
            dup = next(p for p in rem_paths if rem_paths.count(p) > 1)
            raise InvalidArgumentError(f"file {dup} is removed twice in one commit")
        both = set(add_paths) & set(rem_paths)
        if both:
            raise InvalidArgumentError(
                f"file {sorted(both)[0]} is both added and removed in one commit; the protocol forbids that"
            )
        part_cols = set(metadata.partition_columns)
        for a in self._adds:
            if set(a.partition_values) != part_cols:
                raise InvalidArgumentError(
                    f"file {a.path} has partition values for {sorted(a.partition_values)} but the table is partitioned "
                    f"by {sorted(part_cols)}"
                )
        if rem_paths:
            live = pc.is_in(pa.array(rem_paths, pa.string()), value_set=snap.files.column("path").combine_chunks())
            if not pc.all(live).as_py():
                gone = [p for p, ok in zip(rem_paths, live.to_pylist(), strict=False) if not ok]
                raise InvalidArgumentError(
                    f"cannot remove {gone[0]}{f' (and {len(gone) - 1} more)' if len(gone) > 1 else ''}: not a live file "
                    f"of {table} at version {snap.version}"
                )
        if config.append_only and any(r.data_change for r in self._removes):
            raise TableConstraintError(
                f"table {table} is append-only (delta.appendOnly=true): removing data (remove with dataChange=true) is "
                "not allowed; rewrite with dataChange=false or unset delta.appendOnly"
            )
        return protocol, metadata

    # --- commit ---------------------------------------------------------------------------------------

    def _commit_bytes(
        self,
        operation: str,
        parameters: Mapping[str, Any],
        metrics: Mapping[str, Any],
        tags: Mapping[str, str],
        user_metadata: str | None,
    ) -> bytes:
        info = CommitInfo(
            timestamp=int(time.time() * 1000),
            operation=operation,
            operation_parameters=parameters,
            operation_metrics=metrics,
            engine_info=engine_info(),
            is_blind_append=self.is_blind_append,
            read_version=self.read_version if self.read_version >= 0 else None,  # a creating commit read nothing
            txn_id=self.txn_id,
            isolation_level=self.isolation_level,
            tags=tags,
            user_metadata=user_metadata if user_metadata is not None else self.commit_options.user_metadata,
            user_name=self.commit_options.user_name,
        )
        lines = [action_json_line(info)]
        if self._protocol is not None:
            lines.append(action_json_line(self._protocol))
        if self._metadata is not None:
            lines.append(action_json_line(self._metadata))
        lines.extend(action_json_line(t) for t in self._txns.values())
        lines.extend(action_json_line(r) for r in self._removes)
        lines.extend(action_json_line(a) for a in self._adds)
        return ("\n".join(lines) + "\n").encode("utf-8")

    def commit(
        self,
        operation: str,
        parameters: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        user_metadata: str | None = None,
    ) -> int:
        """Commit and return the new version; typed ConcurrentModificationError subclasses on conflicts."""
        self._check_open()
        params = _string_map(parameters, "commit parameters", scalars_ok=False)
        mets = _string_map(metrics, "commit metrics", scalars_ok=True)
        tag_map = dict(tags or {})
        for k, v in tag_map.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidArgumentError(f"commit tags must map str -> str, got {k!r}: {v!r}")
        if user_metadata is not None and not isinstance(user_metadata, str):
            raise InvalidArgumentError("user_metadata must be a string")
        self._validate(operation)
        data = self._commit_bytes(operation, params, mets, tag_map, user_metadata)
        store = self._log.store
        version = self.read_version + 1
        checked = self.read_version
        attempts = 0
        while True:
            attempts += 1
            self.attempts = attempts
            path = f"{self._log.log_dir}/{commit_name(version)}"
            self._check_predecessor(version)
            if store.put_if_absent(path, data):
                try:
                    self._check_predecessor(version)
                except StaleTransactionError:
                    store.delete(path)  # our own file, at a version the table has left behind
                    raise
                break
            if attempts > self.max_retries:
                raise CommitRetriesExceededError(
                    f"commit to {self._log.table_root} gave up after {attempts} attempts (last tried version {version}); "
                    "the table is unchanged by this transaction; retry the operation"
                )
            listing = list_log(store, self._log.log_dir)
            latest = max(listing.latest_version, version)
            winners = [(v, *self._winner(listing, v)) for v in range(checked + 1, latest + 1)]
            for winner in parse_commits(winners, self.snapshot.metadata.partition_columns):
                self._check_conflicts(winner)
            checked = latest
            version = latest + 1
        self._committed = version
        self._log._post_commit(version, self.snapshot)
        configuration = (self._metadata or self.snapshot.metadata).configuration
        after_commit(self._log, version, operation, self._adds, self._removes, configuration, self.commit_options.recorder)
        return version

    def _stale(self, version: int) -> StaleTransactionError:
        return StaleTransactionError(
            f"version {version} of {self._log.table_root} is no longer in the log (log cleanup removed it after this "
            f"transaction read version {self.read_version}), so the commits since cannot be checked for conflicts; "
            "nothing was committed: re-read the table and retry the operation"
        )

    def _check_predecessor(self, version: int) -> None:
        """StaleTransactionError unless `version - 1` is still in the log.

        Put-if-absent alone cannot tell a free version from one that log cleanup emptied: a
        transaction that read a version older than the cleanup horizon would write its commit
        under a vacant old name, below the newest checkpoint, where no reader ever looks. Cleanup
        deletes oldest first, so while `version - 1` is there, `version` was never cleaned up.
        One stat per check; the listing only when the commit file is gone (a checkpoint may stand
        in for it).
        """
        if version == 0:
            return
        log_dir = self._log.log_dir
        if self._log.store.file_info(f"{log_dir}/{commit_name(version - 1)}") is not None:
            return
        cp = list_log(self._log.store, log_dir).checkpoints.get(version - 1)
        if cp is None or not cp.complete:
            raise self._stale(version - 1)

    def _winner(self, listing: LogListing, version: int) -> tuple[str, bytes]:
        """A winning commit's path and bytes; StaleTransactionError if cleanup removed it (a winner
        can never be skipped: its conflicts with us are unknown)."""
        cf = listing.commits.get(version)
        if cf is None:
            raise self._stale(version)
        try:
            return cf.path, self._log.store.read(cf.path)
        except FileNotFoundError:
            raise self._stale(version) from None

    def _check_protocol(self, winner: Protocol, who: str, advice: str) -> None:
        """Delta's rule (`ConflictChecker.checkProtocolCompatibility`): a winning protocol change fails
        this transaction only if it changes the protocol too, or if the winner drops a feature the
        transaction read the table with; otherwise the commit lands under the winner's protocol,
        provided USE can write under it."""
        table = self._log.table_root
        if self._protocol is not None:
            raise ProtocolChangedError(
                f"the protocol of {table} changed concurrently in {who}, and this transaction changes it too{advice}"
            )
        dropped = sorted(self.snapshot.protocol.features - winner.features)
        if dropped:
            raise ProtocolChangedError(
                f"the protocol of {table} changed concurrently in {who}, which removes the feature(s) "
                f"{', '.join(dropped)} this transaction read the table with{advice}"
            )
        try:
            check_write_support(winner, self._metadata or self.snapshot.metadata, table)
        except UnsupportedFeatureError as exc:
            raise ProtocolChangedError(
                f"the protocol of {table} changed concurrently in {who} to one this transaction cannot commit under: {exc}"
            ) from exc

    def _check_conflicts(self, winner: CommitActions) -> None:
        op = (winner.commit_info or {}).get("operation", "unknown operation")
        who = f"version {winner.version} ({op})"
        table = self._log.table_root
        advice = "; the table is unchanged by this transaction: re-read the table and retry"
        if winner.protocol is not None:
            self._check_protocol(winner.protocol, who, advice)
        tolerated = (
            self._metadata_compatible is not None and self._metadata is None and winner.metadata is not None
            and winner.metadata_error is None and self._metadata_compatible(self.snapshot.metadata, winner.metadata)
        )  # fmt: skip
        if winner.changes_metadata and not tolerated:
            raise MetadataChangedError(f"the metadata (schema or properties) of {table} changed concurrently in {who}{advice}")
        level = self.isolation_level
        snapshot_isolation = level == "SnapshotIsolation"
        if not snapshot_isolation and self._read_whole_table and winner.adds.num_rows:
            blind = bool((winner.commit_info or {}).get("isBlindAppend", False))
            if not blind or self._metadata is not None or level == "Serializable":
                changed = winner.adds.filter(pc.fill_null(winner.adds.column("data_change"), True))
                if changed.num_rows:
                    raise ConcurrentAppendError(
                        f"files were added to {table} concurrently by {who} (e.g. {changed.column('path')[0].as_py()}) "
                        f"that this transaction should have read{advice}"
                    )
        if not snapshot_isolation and self._read_rows is not None and winner.adds.num_rows:
            self._check_read_rows(winner, self._read_rows, who, advice)
        if winner.removes.num_rows:
            removed = winner.removes.column("path")
            if self._read_whole_table:
                raise ConcurrentDeleteReadError(
                    f"file {removed[0].as_py()} of {table}, read by this transaction, was removed concurrently by {who}{advice}"
                )
            if self._read_paths:
                hit = pc.is_in(removed, value_set=pa.array(sorted(self._read_paths), pa.string()))
                if pc.any(hit).as_py():
                    path = removed.filter(hit)[0].as_py()
                    raise ConcurrentDeleteReadError(
                        f"file {path} of {table}, read by this transaction, was removed concurrently by {who}{advice}"
                    )
            if self._removes:
                ours = pa.array([r.path for r in self._removes], pa.string())
                hit = pc.is_in(removed, value_set=ours)
                if pc.any(hit).as_py():
                    path = removed.filter(hit)[0].as_py()
                    raise ConcurrentDeleteDeleteError(
                        f"file {path} of {table}, removed by this transaction, was already removed concurrently by {who}{advice}"
                    )
        common = set(self._txns) & set(winner.txns)
        if common:
            app = sorted(common)[0]
            raise ConcurrentTransactionError(
                f"application transaction {app!r} was committed concurrently to {table} by {who}; check "
                f"Snapshot.app_transaction_version({app!r}) before retrying"
            )

    def _check_read_rows(self, winner: CommitActions, read_rows: Predicate | bool, who: str, advice: str) -> None:
        """A winner (not a blind append, unless the table is Serializable) added data files that may
        hold rows this transaction's `read_rows_matching` condition matches: ConcurrentAppendError."""
        blind = bool((winner.commit_info or {}).get("isBlindAppend", False))
        if blind and self.isolation_level != "Serializable":
            return
        changed = winner.adds.filter(pc.fill_null(winner.adds.column("data_change"), True))
        if changed.num_rows and not isinstance(read_rows, bool):
            changed = changed.filter(snapshot_files_matching(self.snapshot, changed, read_rows))
        if changed.num_rows:
            raise ConcurrentAppendError(
                f"files were added to {self._log.table_root} concurrently by {who} (e.g. "
                f"{changed.column('path')[0].as_py()}) that may hold rows this transaction's condition matches{advice}"
            )


def check_app_transaction(app_id: Any, version: Any) -> None:
    """The arguments of an idempotent write (Delta's `txn` action, a streaming query's id and batch):
    both or neither; a non-empty app id and a non-negative int version."""
    if (app_id is None) != (version is None):
        raise InvalidArgumentError("txn_app_id and txn_version go together: give both (idempotent write) or neither")
    if app_id is not None:
        if not isinstance(app_id, str) or not app_id:
            raise InvalidArgumentError(f"txn_app_id must be a non-empty string, got {app_id!r}")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidArgumentError(f"txn_version must be a non-negative int, got {version!r}")


__all__ = ["Transaction", "check_app_transaction", "engine_info"]


def _check_no_void_columns(metadata: Metadata, table: str) -> None:
    """Data files cannot be added to a table with a column of the protocol's `void` type (what
    delta-spark's mergeSchema makes of an all-NULL column): writers must leave such columns out of
    their files, which USE's writers do not do, so USE reads these tables (the column is NULL) but
    writes no data into them. Metadata-only commits stay allowed, and so does an overwrite whose
    new schema gives the column a type."""
    fields = json.loads(metadata.schema_string).get("fields", [])
    voids = void_columns(fields)
    if voids:
        first = voids[0].split(".")[0]
        raise UnsupportedFeatureError(
            f"table {table} has column(s) {', '.join(voids)} of type void (all NULL, e.g. added by delta-spark's "
            "mergeSchema from a lit(None) column): USE reads the table (the column reads as NULL) but writes no data into "
            "it, since writers must leave void columns out of their data files; give the column a type first, e.g. "
            f"overwrite the table with it cast (CAST({first} AS STRING) AS {first}) and "
            f'option("overwriteSchema", "true"), or write it with delta-spark'
        )
