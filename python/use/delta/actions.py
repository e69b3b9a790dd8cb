"""Delta log actions as frozen dataclasses, their JSON forms, and the Arrow shapes of file state.

Dataclasses are for the few actions a writer builds by hand (one commit's worth); replayed state
lives in Arrow tables (`FILES_SCHEMA`, `TOMBSTONES_SCHEMA`) and never becomes Python objects per
file. Field names in `to_action()` are exactly the protocol's, so commits are readable by any Delta
reader.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.errors import CorruptLogError, InvalidArgumentError

# --- Arrow shapes ------------------------------------------------------------------------------

STRING_MAP = pa.map_(pa.string(), pa.string())

DELETION_VECTOR_TYPE = pa.struct(
    [
        pa.field("storageType", pa.string()),
        pa.field("pathOrInlineDv", pa.string()),
        pa.field("offset", pa.int32()),
        pa.field("sizeInBytes", pa.int32()),
        pa.field("cardinality", pa.int64()),
    ]
)

FILES_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("size", pa.int64()),
        pa.field("modification_time", pa.int64()),
        pa.field("data_change", pa.bool_()),
        pa.field("stats", pa.string()),
        pa.field("tags", STRING_MAP),
        pa.field("partition_values", STRING_MAP),
        pa.field("deletion_vector", DELETION_VECTOR_TYPE),
    ]
)
"""`Snapshot.files`: one row per live file (docs/architecture.md)."""

TOMBSTONES_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("deletion_timestamp", pa.int64()),
        pa.field("size", pa.int64()),
        pa.field("data_change", pa.bool_()),
        pa.field("partition_values", STRING_MAP),
        pa.field("extended_file_metadata", pa.bool_()),
        pa.field("tags", STRING_MAP),
        pa.field("deletion_vector", DELETION_VECTOR_TYPE),
    ]
)
"""`Snapshot.tombstones`: removes still inside the deleted-file retention."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _check_str_map(value: Mapping[str, Any] | None, what: str, *, allow_none_values: bool) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{what} must be a dict of str -> str, got {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or not (isinstance(v, str) or (v is None and allow_none_values)):
            raise InvalidArgumentError(f"{what} must map str -> str, got {k!r}: {v!r}")


# --- file actions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddFile:
    """A data file joining the table. `path` is relative to the table root and URL-encoded."""

    path: str
    size: int
    modification_time: int
    data_change: bool = True
    partition_values: Mapping[str, str | None] = field(default_factory=dict)
    stats: str | None = None
    tags: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise InvalidArgumentError(f"AddFile.path must be a non-empty string, got {self.path!r}")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise InvalidArgumentError(f"AddFile.size must be a non-negative int (bytes), got {self.size!r} for {self.path}")
        if isinstance(self.modification_time, bool) or not isinstance(self.modification_time, int):
            raise InvalidArgumentError(
                f"AddFile.modification_time must be an int (ms since epoch), got {self.modification_time!r} for {self.path}"
            )
        _check_str_map(self.partition_values, f"AddFile.partition_values of {self.path}", allow_none_values=True)
        _check_str_map(self.tags, f"AddFile.tags of {self.path}", allow_none_values=False)
        if self.stats is not None and not isinstance(self.stats, str):
            raise InvalidArgumentError(f"AddFile.stats must be a JSON string or None for {self.path}")

    def to_action(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "modificationTime": self.modification_time,
            "dataChange": self.data_change,
        }
        if self.stats is not None:
            body["stats"] = self.stats
        if self.tags is not None:
            body["tags"] = dict(self.tags)
        return {"add": body}

    def remove(self, deletion_timestamp: int | None = None, data_change: bool = True) -> RemoveFile:
        return RemoveFile(
            path=self.path,
            deletion_timestamp=_now_ms() if deletion_timestamp is None else deletion_timestamp,
            data_change=data_change,
            extended_file_metadata=True,
            partition_values=dict(self.partition_values),
            size=self.size,
            tags=None if self.tags is None else dict(self.tags),
        )


@dataclass(frozen=True)
class RemoveFile:
    """A tombstone: the file leaves the table at this version (kept for VACUUM until it expires)."""

    path: str
    deletion_timestamp: int
    data_change: bool = True
    extended_file_metadata: bool = True
    partition_values: Mapping[str, str | None] = field(default_factory=dict)
    size: int | None = None
    tags: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise InvalidArgumentError(f"RemoveFile.path must be a non-empty string, got {self.path!r}")
        if isinstance(self.deletion_timestamp, bool) or not isinstance(self.deletion_timestamp, int):
            raise InvalidArgumentError(
                f"RemoveFile.deletion_timestamp must be an int (ms since epoch), got {self.deletion_timestamp!r} for {self.path}"
            )
        _check_str_map(self.partition_values, f"RemoveFile.partition_values of {self.path}", allow_none_values=True)
        _check_str_map(self.tags, f"RemoveFile.tags of {self.path}", allow_none_values=False)

    def to_action(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "path": self.path,
            "deletionTimestamp": self.deletion_timestamp,
            "dataChange": self.data_change,
            "extendedFileMetadata": self.extended_file_metadata,
            "partitionValues": dict(self.partition_values),
        }
        if self.size is not None:
            body["size"] = self.size
        if self.tags is not None:
            body["tags"] = dict(self.tags)
        return {"remove": body}


# --- table-level actions ------------------------------------------------------------------------


_LEGACY_FEATURES = (
    ("appendOnly", 1, 2),
    ("invariants", 1, 2),
    ("checkConstraints", 1, 3),
    ("changeDataFeed", 1, 4),
    ("generatedColumns", 1, 4),
    ("columnMapping", 2, 5),
    ("identityColumns", 1, 6),
)
"""Features that protocol versions below (3, 7) imply: (name, min reader version, min writer version)."""


@dataclass(frozen=True)
class Protocol:
    """Reader/writer versions and, for (3, 7), the named table features."""

    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    @property
    def features(self) -> frozenset[str]:
        """Every table feature this protocol supports: the named ones, plus those its legacy versions
        imply (`Protocol(1, 2)` supports appendOnly and invariants), as Delta's
        `implicitlyAndExplicitlySupportedFeatures`. Comparing two protocols' features tells whether
        a protocol change adds or drops one."""
        named = set(self.reader_features or ()) | set(self.writer_features or ())
        reader_named, writer_named = self.min_reader_version >= 3, self.min_writer_version >= 7
        implied = {
            name
            for name, reader, writer in _LEGACY_FEATURES
            if not (reader_named or self.min_reader_version < reader) and not (writer_named or self.min_writer_version < writer)
        }
        return frozenset(named | implied)

    def to_action(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
        }
        if self.reader_features is not None:
            body["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            body["writerFeatures"] = list(self.writer_features)
        return {"protocol": body}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Protocol:
        rf = d.get("readerFeatures")
        wf = d.get("writerFeatures")
        try:
            return cls(
                min_reader_version=int(d["minReaderVersion"]),
                min_writer_version=int(d["minWriterVersion"]),
                reader_features=None if rf is None else tuple(rf),
                writer_features=None if wf is None else tuple(wf),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptLogError(f"protocol action is malformed ({exc}): {dict(d)!r}") from exc


@dataclass(frozen=True)
class Metadata:
    """The table's identity, schema, partitioning and properties (the `metaData` action)."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    format_provider: str = "parquet"
    format_options: Mapping[str, str] = field(default_factory=dict)
    created_time: int | None = None

    @classmethod
    def new(
        cls,
        schema_string: str,
        partition_columns: tuple[str, ...] = (),
        configuration: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Metadata:
        return cls(
            id=str(uuid.uuid4()),
            schema_string=schema_string,
            partition_columns=tuple(partition_columns),
            configuration=dict(configuration or {}),
            name=name,
            description=description,
            created_time=_now_ms(),
        )

    def to_action(self) -> dict[str, Any]:
        return {
            "metaData": {
                "id": self.id,
                "name": self.name,
                "description": self.description,
                "format": {"provider": self.format_provider, "options": dict(self.format_options)},
                "schemaString": self.schema_string,
                "partitionColumns": list(self.partition_columns),
                "configuration": dict(self.configuration),
                "createdTime": self.created_time,
            }
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Metadata:
        for key in ("id", "schemaString"):
            # A checkpoint holds a missing field as null: str(None) would make it the text "None".
            if key in d and not isinstance(d[key], str):
                raise CorruptLogError(f"metaData action is malformed ({key} must be a string, got {d[key]!r})")
        try:
            fmt = d.get("format") or {}
            return cls(
                id=str(d["id"]),
                schema_string=str(d["schemaString"]),
                partition_columns=tuple(d.get("partitionColumns") or ()),
                configuration={str(k): str(v) for k, v in (d.get("configuration") or {}).items() if v is not None},
                name=d.get("name"),
                description=d.get("description"),
                format_provider=str(fmt.get("provider", "parquet")),
                format_options=dict(fmt.get("options") or {}),
                created_time=None if d.get("createdTime") is None else int(d["createdTime"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptLogError(f"metaData action is malformed ({exc!r})") from exc


@dataclass(frozen=True)
class SetTransaction:
    """An application's idempotence marker: `app_id` has committed up to `version`."""

    app_id: str
    version: int
    last_updated: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.app_id, str) or not self.app_id:
            raise InvalidArgumentError(f"SetTransaction.app_id must be a non-empty string, got {self.app_id!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise InvalidArgumentError(f"SetTransaction.version must be a non-negative int, got {self.version!r}")

    def to_action(self) -> dict[str, Any]:
        body: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            body["lastUpdated"] = self.last_updated
        return {"txn": body}


@dataclass(frozen=True)
class CommitInfo:
    """Provenance of one commit; free-form in the protocol, written by us with these fields."""

    timestamp: int
    operation: str
    operation_parameters: Mapping[str, Any]
    operation_metrics: Mapping[str, Any]
    engine_info: str
    is_blind_append: bool
    read_version: int | None
    txn_id: str
    isolation_level: str
    tags: Mapping[str, str]
    user_metadata: str | None = None
    user_name: str | None = None

    def to_action(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "timestamp": self.timestamp,
            "operation": self.operation,
            "operationParameters": dict(self.operation_parameters),
            "operationMetrics": dict(self.operation_metrics),
            "engineInfo": self.engine_info,
            "isBlindAppend": self.is_blind_append,
            "txnId": self.txn_id,
            "isolationLevel": self.isolation_level,
            "tags": dict(self.tags),
        }
        if self.read_version is not None:
            body["readVersion"] = self.read_version
        if self.user_metadata is not None:
            body["userMetadata"] = self.user_metadata
        if self.user_name is not None:
            body["userName"] = self.user_name
        return {"commitInfo": body}


Action = AddFile | RemoveFile | Metadata | Protocol | SetTransaction


def action_json_line(action: Action | CommitInfo) -> str:
    return json.dumps(action.to_action(), separators=(",", ":"), ensure_ascii=False)


# --- vectorized helpers over file tables ------------------------------------------------------------


def _map_column_to_dicts(col: pa.ChunkedArray | pa.Array) -> list[dict[str, str | None] | None]:
    """A map<string, string> column as dicts. `to_pylist` of a map column makes a list of tuples per
    row (4.5 s for 656k files); this reads the keys and values once and slices them by offsets."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    n = len(arr)
    if n == 0:
        return []
    valid = np.ones(n, dtype=bool) if arr.null_count == 0 else np.asarray(arr.is_valid().to_numpy(zero_copy_only=False))
    offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    if start == end:  # no entries: unpartitioned tables, files without tags
        return [{} if v else None for v in valid.tolist()]
    keys = arr.keys.slice(start, end - start).to_pylist()
    values = arr.items.slice(start, end - start).to_pylist()
    bounds = (offsets - start).tolist()
    return [
        dict(zip(keys[bounds[i] : bounds[i + 1]], values[bounds[i] : bounds[i + 1]], strict=False)) if ok else None
        for i, ok in enumerate(valid.tolist())
    ]


def _tags_column(files: pa.Table) -> Sequence[Mapping[str, str] | None]:
    """The `tags` of rows of `Snapshot.files`, one per row (None where a file has none)."""
    if "tags" not in files.column_names:
        return [None] * files.num_rows
    # the protocol maps tags string to string (AddFile refuses a null value): no value is None
    return cast(list[Mapping[str, str] | None], _map_column_to_dicts(files.column("tags")))


def add_actions(files: pa.Table, data_change: bool, tags: Sequence[Mapping[str, str] | None] | None = None) -> list[AddFile]:
    """`AddFile`s re-adding rows of `Snapshot.files` as they are (RESTORE brings files back, a
    relabel re-tags them), column-wise as `remove_actions`; `tags`, one per row, replace theirs."""
    paths = files.column("path").to_pylist()
    sizes = files.column("size").to_pylist()
    mtimes = files.column("modification_time").to_pylist()
    stats = files.column("stats").to_pylist()
    pvs = _map_column_to_dicts(files.column("partition_values"))
    if tags is None:
        tags = _tags_column(files)
    return [
        AddFile(
            path=p,
            size=int(n),
            modification_time=int(m),
            data_change=data_change,
            partition_values=pv or {},
            stats=st,
            tags=None if t is None else dict(t),
        )
        for p, n, m, st, pv, t in zip(paths, sizes, mtimes, stats, pvs, tags, strict=False)
    ]


def remove_actions(files: pa.Table, data_change: bool, deletion_timestamp: int | None = None) -> list[RemoveFile]:
    """`RemoveFile`s for rows of `Snapshot.files` (e.g. a filtered slice of it).

    This is the one place a file table becomes per-file objects, because a commit has to name each
    removed file; it converts column-wise (one `to_pylist` per column), so thousands of rows stay cheap.
    """
    missing = {"path", "size", "partition_values"} - set(files.column_names)
    if missing:
        raise InvalidArgumentError(f"remove_actions needs rows of Snapshot.files; missing columns {sorted(missing)}")
    ts = _now_ms() if deletion_timestamp is None else int(deletion_timestamp)
    paths = files.column("path").to_pylist()
    sizes = files.column("size").to_pylist()
    pvs = _map_column_to_dicts(files.column("partition_values"))
    tags = _tags_column(files)
    return [
        RemoveFile(
            path=p,
            deletion_timestamp=ts,
            data_change=data_change,
            extended_file_metadata=True,
            partition_values=pv or {},
            size=s,
            tags=t,
        )
        for p, s, pv, t in zip(paths, sizes, pvs, tags, strict=False)
    ]


def add_files_table(adds: list[AddFile]) -> pa.Table:
    """A `FILES_SCHEMA` table for hand-built adds (one commit's worth)."""
    return pa.table(
        {
            "path": pa.array([a.path for a in adds], pa.string()),
            "size": pa.array([a.size for a in adds], pa.int64()),
            "modification_time": pa.array([a.modification_time for a in adds], pa.int64()),
            "data_change": pa.array([a.data_change for a in adds], pa.bool_()),
            "stats": pa.array([a.stats for a in adds], pa.string()),
            "tags": pa.array([None if a.tags is None else list(a.tags.items()) for a in adds], STRING_MAP),
            "partition_values": pa.array([list(a.partition_values.items()) for a in adds], STRING_MAP),
            "deletion_vector": pa.nulls(len(adds), DELETION_VECTOR_TYPE),
        },
        schema=FILES_SCHEMA,
    )


# Table.from_batches, not Schema.empty_table: that one imports pandas, which `import use.delta` (and
# so `use --help`) would pay for on every start.
_EMPTY_FILES = pa.Table.from_batches([], schema=FILES_SCHEMA)
_EMPTY_TOMBSTONES = pa.Table.from_batches([], schema=TOMBSTONES_SCHEMA)


def empty_files() -> pa.Table:
    """A files table with no rows; one shared instance (Arrow tables are immutable, and making one
    costs ~0.2 ms, paid twice per replayed commit otherwise)."""
    return _EMPTY_FILES


def empty_tombstones() -> pa.Table:
    """A tombstones table with no rows; shared, as `empty_files`."""
    return _EMPTY_TOMBSTONES


def paths_in(files: pa.Table, paths: pa.Array | pa.ChunkedArray | list[str]) -> pa.ChunkedArray:
    """Boolean mask: which rows of `files` have a path in `paths` (hash-based, O(n))."""
    if isinstance(paths, pa.ChunkedArray):
        values = paths.combine_chunks()
    elif isinstance(paths, pa.Array):
        values = paths
    else:
        values = pa.array(paths, pa.string())
    return pc.is_in(files.column("path"), value_set=values.cast(pa.string()))
