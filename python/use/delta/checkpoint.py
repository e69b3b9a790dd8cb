"""Checkpoints: reading every kind (classic and multi-part V1 spec; V2 spec, UUID-named JSON or
parquet or classic-named, with sidecars), writing classic single-file V1-spec ones.

A checkpoint is read column-wise with pyarrow straight into the `FILES_SCHEMA`/`TOMBSTONES_SCHEMA`
tables, so loading a 100k-file table costs one parquet read and a few casts. The written layout
(top-level `add`/`remove`/`metaData`/`protocol`/`txn`/`domainMetadata` structs, their field names,
types and nullability) mirrors what delta-rs and Spark write, so both read our checkpoints.
"""

from __future__ import annotations

import io
import json
import os
import urllib.parse
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from use.delta.actions import (
    DELETION_VECTOR_TYPE,
    FILES_SCHEMA,
    STRING_MAP,
    TOMBSTONES_SCHEMA,
    Metadata,
    Protocol,
    empty_files,
    empty_tombstones,
)
from use.delta.commits import CommitActions, parse_commits
from use.delta.listing import CheckpointFiles
from use.delta.state import LogState
from use.delta.stats import stats_json_from_parsed
from use.delta.storage import LocalLogStore
from use.errors import CorruptLogError

LAST_CHECKPOINT = "_last_checkpoint"
SIDECAR_DIR = "_sidecars"


def checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


# --- reading ------------------------------------------------------------------------------------------


@dataclass
class CheckpointState:
    version: int
    protocol: Protocol | None
    metadata: Metadata | None
    txns: dict[str, tuple[int, int | None]]
    domains: dict[str, dict[str, Any]]
    files: pa.Table
    tombstones: pa.Table


def _maps_to_dicts(value: Any) -> Any:
    """Arrow map values come back from to_pylist as lists of (k, v) tuples; turn them into dicts."""
    if isinstance(value, list) and value and all(isinstance(x, tuple) and len(x) == 2 for x in value):
        return {k: _maps_to_dicts(v) for k, v in value}
    if isinstance(value, dict):
        return {k: _maps_to_dicts(v) for k, v in value.items()}
    return value


def _child(col: pa.ChunkedArray, name: str, typ: pa.DataType, n: int) -> pa.ChunkedArray | pa.Array:
    names = [col.type.field(i).name for i in range(col.type.num_fields)]
    if name not in names:
        return pa.nulls(n, typ)
    child = pc.struct_field(col, name)
    return child if child.type == typ else child.cast(typ)


_ACTION_COLUMNS = ("add", "remove", "metaData", "protocol", "txn", "domainMetadata", "sidecar")


def _read_part(path: str, columns: tuple[str, ...] = _ACTION_COLUMNS) -> pa.Table:
    """The action columns of one checkpoint parquet file (a part, a V2-spec checkpoint or a sidecar)."""
    try:
        pf = pq.ParquetFile(path)
        return pf.read(columns=[c for c in columns if c in pf.schema_arrow.names])
    except FileNotFoundError as exc:
        raise CorruptLogError(
            f"checkpoint file {path} is missing (it was listed, or named by its checkpoint, a moment ago)"
        ) from exc
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptLogError(f"checkpoint file {path} cannot be read as parquet ({exc})") from exc


def _non_null_rows(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """The rows of a top-level checkpoint column that hold an action.

    Our writer puts each action kind in one contiguous run of rows (`checkpoint_table`), and so
    does any writer that writes actions grouped by kind: then this is a zero-copy slice. Otherwise
    (rows interleaved) a filter copies the non-null rows, stats strings included.
    """
    n = len(col)
    k = n - col.null_count
    if k == n:
        return col
    if k == 0:
        return col.slice(0, 0)
    valid = pc.is_valid(col)
    first = pc.index(valid, True).as_py()
    run = col.slice(first, k)
    if run.null_count == 0:
        return run
    return col.filter(valid)


def _stats_of(add: pa.ChunkedArray, n: int) -> pa.ChunkedArray | pa.Array:
    """The adds' JSON stats; where a checkpoint kept only `stats_parsed`
    (`delta.checkpoint.writeStatsAsStruct`), those rendered as JSON, so skipping still has them."""
    stats = _child(add, "stats", pa.string(), n)
    if add.type.get_field_index("stats_parsed") < 0 or stats.null_count == 0:
        return stats
    parsed = pc.struct_field(add, "stats_parsed")
    if parsed.null_count == len(parsed):
        return stats
    return pc.coalesce(stats, stats_json_from_parsed(parsed))


def _files_from(add: pa.ChunkedArray) -> pa.Table:
    add = _non_null_rows(add)
    n = len(add)
    cols = {
        "path": _child(add, "path", pa.string(), n),
        "size": _child(add, "size", pa.int64(), n),
        "modification_time": _child(add, "modificationTime", pa.int64(), n),
        "data_change": _child(add, "dataChange", pa.bool_(), n),
        "stats": _stats_of(add, n),
        "tags": _child(add, "tags", STRING_MAP, n),
        "partition_values": _child(add, "partitionValues", STRING_MAP, n),
        "deletion_vector": _child(add, "deletionVector", DELETION_VECTOR_TYPE, n),
    }
    return pa.table(cols, schema=FILES_SCHEMA)


def _tombstones_from(rem: pa.ChunkedArray) -> pa.Table:
    rem = _non_null_rows(rem)
    n = len(rem)
    cols = {
        "path": _child(rem, "path", pa.string(), n),
        "deletion_timestamp": _child(rem, "deletionTimestamp", pa.int64(), n),
        "size": _child(rem, "size", pa.int64(), n),
        "data_change": _child(rem, "dataChange", pa.bool_(), n),
        "partition_values": _child(rem, "partitionValues", STRING_MAP, n),
        "extended_file_metadata": _child(rem, "extendedFileMetadata", pa.bool_(), n),
        "tags": _child(rem, "tags", STRING_MAP, n),
        "deletion_vector": _child(rem, "deletionVector", DELETION_VECTOR_TYPE, n),
    }
    return pa.table(cols, schema=TOMBSTONES_SCHEMA)


def _valid_rows(t: pa.Table, name: str) -> list[dict[str, Any]]:
    if name not in t.column_names:
        return []
    return [_maps_to_dicts(r) for r in _non_null_rows(t.column(name)).to_pylist()]


def read_checkpoint(cp: CheckpointFiles) -> CheckpointState:
    """Read a complete checkpoint into Arrow state: classic or multi-part (V1 spec), or V2 spec
    (UUID-named JSON or parquet, or classic-named with a `checkpointMetadata` row) with the file
    actions inline or in sidecar files under `_delta_log/_sidecars`."""
    if not cp.complete:
        raise CorruptLogError(f"checkpoint {cp.version} is missing part(s): {', '.join(cp.missing)}")
    files_parts, tomb_parts = [], []
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, tuple[int, int | None]] = {}
    domains: dict[str, dict[str, Any]] = {}
    sidecars: list[dict[str, Any]] = []
    for path in cp.paths:
        if path.endswith(".json"):
            part, part_sidecars = _read_json_checkpoint(cp.version, path)
            files_parts.append(part.adds)
            tomb_parts.append(part.removes)
            protocol = part.protocol or protocol
            metadata = part.metadata or metadata
            txns.update(part.txns)
            domains.update((d, body) for d, body in part.domains.items() if not body.get("removed"))
            sidecars.extend(part_sidecars)
            continue
        t = _read_part(path)
        if "add" in t.column_names:
            files_parts.append(_files_from(t.column("add")))
        if "remove" in t.column_names:
            tomb_parts.append(_tombstones_from(t.column("remove")))
        for row in _valid_rows(t, "protocol"):
            protocol = Protocol.from_dict(row)
        for row in _valid_rows(t, "metaData"):
            try:
                metadata = Metadata.from_dict(row)
            except CorruptLogError as exc:
                raise CorruptLogError(f"checkpoint file {path}: {exc}") from exc
        for row in _valid_rows(t, "txn"):
            txns[str(row["appId"])] = (int(row["version"]), row.get("lastUpdated"))
        for row in _valid_rows(t, "domainMetadata"):
            if not row.get("removed"):
                domains[str(row["domain"])] = row
        sidecars.extend(_valid_rows(t, "sidecar"))
    for sidecar in sidecars:
        t = _read_part(_sidecar_path(os.path.dirname(cp.paths[0]), sidecar, cp.paths[0]), ("add", "remove"))
        if "add" in t.column_names:
            files_parts.append(_files_from(t.column("add")))
        if "remove" in t.column_names:
            tomb_parts.append(_tombstones_from(t.column("remove")))
    files = pa.concat_tables(files_parts) if files_parts else empty_files()
    tombstones = pa.concat_tables(tomb_parts) if tomb_parts else empty_tombstones()
    if protocol is None or metadata is None:
        raise CorruptLogError(
            f"checkpoint {cp.version} ({os.path.basename(cp.paths[0])}) has no "
            f"{'protocol' if protocol is None else 'metaData'} action; the checkpoint is corrupted"
        )
    return CheckpointState(cp.version, protocol, metadata, txns, domains, files, tombstones)


def _read_json_checkpoint(version: int, path: str) -> tuple[CommitActions, list[dict[str, Any]]]:
    """A UUID-named JSON checkpoint: one action per line, like a commit, so the commit parser reads it
    (file actions columnar); its `sidecar` lines are no commit actions and are found by a byte
    search (a checkpoint without sidecars may hold every add of the table: those lines are not
    decoded twice)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError as exc:
        raise CorruptLogError(f"checkpoint file {path} is missing (it was listed a moment ago)") from exc
    try:
        actions = parse_commits([(version, path, data)])[0]
    except CorruptLogError as exc:
        raise CorruptLogError(f"V2 checkpoint {path} is malformed: {exc}") from exc
    sidecars: list[dict[str, Any]] = []
    pos = 0
    while (hit := data.find(b'"sidecar"', pos)) >= 0:
        start = data.rfind(b"\n", 0, hit) + 1
        end = data.find(b"\n", hit)
        end = len(data) if end < 0 else end
        obj = json.loads(data[start:end])  # the commit parser has already checked every line
        if isinstance(obj, dict) and isinstance(obj.get("sidecar"), dict):
            sidecars.append(obj["sidecar"])
        pos = end
    return actions, sidecars


def _sidecar_path(log_dir: str, sidecar: dict[str, Any], checkpoint: str) -> str:
    """Where a `sidecar` action's file is: a name (or relative path) under `_delta_log/_sidecars`,
    or an absolute path or `file:` URI (the protocol allows either; writers store the name)."""
    raw = sidecar.get("path")
    if not isinstance(raw, str) or not raw:
        raise CorruptLogError(f"checkpoint {checkpoint} has a sidecar action without a path: {sidecar!r}")
    if raw.startswith("file:"):
        return urllib.parse.unquote(urllib.parse.urlparse(raw).path)
    if "://" in raw:
        raise CorruptLogError(f"checkpoint {checkpoint} names sidecar {raw!r} on a storage USE cannot read (only local files)")
    local = urllib.parse.unquote(raw)
    return local if os.path.isabs(local) else os.path.join(log_dir, SIDECAR_DIR, local)


def read_last_checkpoint(store: LocalLogStore, log_dir: str) -> dict[str, Any] | None:
    """The `_last_checkpoint` hint, or None if absent or unreadable (it is only a hint)."""
    try:
        hint = json.loads(store.read(os.path.join(log_dir, LAST_CHECKPOINT)))
    except (FileNotFoundError, ValueError):
        return None
    return hint if isinstance(hint, dict) else None


# --- writing ------------------------------------------------------------------------------------------

_REQ_MAP = pa.map_(pa.string(), pa.field("value", pa.string(), nullable=False))

_PROTOCOL_T = pa.struct(
    [
        pa.field("minReaderVersion", pa.int32(), nullable=False),
        pa.field("minWriterVersion", pa.int32(), nullable=False),
        pa.field("readerFeatures", pa.list_(pa.field("element", pa.string(), nullable=False))),
        pa.field("writerFeatures", pa.list_(pa.field("element", pa.string(), nullable=False))),
    ]
)
_METADATA_T = pa.struct(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("description", pa.string()),
        pa.field(
            "format",
            pa.struct([pa.field("provider", pa.string(), nullable=False), pa.field("options", _REQ_MAP, nullable=False)]),
            nullable=False,
        ),
        pa.field("schemaString", pa.string(), nullable=False),
        pa.field("partitionColumns", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
        pa.field("createdTime", pa.int64()),
        pa.field("configuration", _REQ_MAP, nullable=False),
    ]
)
_TXN_T = pa.struct(
    [
        pa.field("appId", pa.string(), nullable=False),
        pa.field("version", pa.int64(), nullable=False),
        pa.field("lastUpdated", pa.int64()),
    ]
)
_DOMAIN_T = pa.struct(
    [
        pa.field("domain", pa.string(), nullable=False),
        pa.field("configuration", pa.string(), nullable=False),
        pa.field("removed", pa.bool_(), nullable=False),
    ]
)
_ADD_T = pa.struct(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("partitionValues", STRING_MAP, nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("modificationTime", pa.int64(), nullable=False),
        pa.field("dataChange", pa.bool_(), nullable=False),
        pa.field("stats", pa.string()),
        pa.field("tags", STRING_MAP),
        pa.field("deletionVector", DELETION_VECTOR_TYPE),
        pa.field("baseRowId", pa.int64()),
        pa.field("defaultRowCommitVersion", pa.int64()),
    ]
)
_REMOVE_T = pa.struct(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("deletionTimestamp", pa.int64()),
        pa.field("dataChange", pa.bool_(), nullable=False),
        pa.field("extendedFileMetadata", pa.bool_()),
        pa.field("partitionValues", STRING_MAP),
        pa.field("size", pa.int64()),
        pa.field("deletionVector", DELETION_VECTOR_TYPE),
    ]
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        pa.field("add", _ADD_T),
        pa.field("remove", _REMOVE_T),
        pa.field("metaData", _METADATA_T),
        pa.field("protocol", _PROTOCOL_T),
        pa.field("txn", _TXN_T),
        pa.field("domainMetadata", _DOMAIN_T),
    ]
)


def _padding(field: pa.Field, n: int) -> pa.Array:
    """`n` rows of a column that has no value for them: nulls, or fillers where it is not nullable."""
    return _filler(field.type, n) if not field.nullable else pa.nulls(n, field.type)


def _filler(typ: pa.DataType, n: int) -> pa.Array:
    """n placeholder values for a required child at rows where its parent struct is null."""
    if pa.types.is_string(typ):
        return pa.array([""] * n, typ) if n < 16 else pa.repeat("", n).cast(typ)
    if pa.types.is_integer(typ):
        return pa.array(np.zeros(n, dtype=typ.to_pandas_dtype()), typ)
    if pa.types.is_boolean(typ):
        return pa.array(np.zeros(n, dtype=bool), typ)
    if pa.types.is_map(typ) or pa.types.is_list(typ):
        return pa.array([[]], typ).take(pa.array(np.zeros(n, dtype=np.int64)))
    if pa.types.is_struct(typ):
        return pa.StructArray.from_arrays(
            [_padding(typ.field(i), n) for i in range(typ.num_fields)],
            fields=list(typ),
        )
    return pa.nulls(n, typ)


def _section(typ: pa.StructType, total: int, start: int, children: dict[str, pa.Array]) -> pa.StructArray:
    """A top-level checkpoint column: `children` fill rows [start, start+k); other rows are null."""
    k = len(next(iter(children.values()))) if children else 0
    before, after = start, total - start - k
    arrays = []
    for f in typ:
        body = children.get(f.name)
        if body is None:
            body = pa.nulls(k, f.type)
        elif isinstance(body, pa.ChunkedArray):
            body = body.combine_chunks()
        if body.type != f.type:
            body = body.cast(f.type)
        arrays.append(pa.concat_arrays([_padding(f, before), body, _padding(f, after)]))
    mask = np.ones(total, dtype=bool)
    mask[start : start + k] = False
    return pa.StructArray.from_arrays(arrays, fields=list(typ), mask=pa.array(mask))


def _write_stats_as_json(metadata: Metadata) -> bool:
    return metadata.configuration.get("delta.checkpoint.writeStatsAsJson", "true").strip().lower() != "false"


def checkpoint_table(state: LogState, tombstones: pa.Table) -> pa.Table:
    """The checkpoint rows for `state` (tombstones already filtered by retention).

    Each action kind fills one contiguous run of rows (protocol, metaData, txn, domainMetadata,
    add, remove, in that order), so the reader takes the adds and removes as zero-copy slices
    rather than filtering (copying) every add with its stats (`_non_null_rows`).
    """
    p, m = state.protocol, state.metadata
    files = state.files
    n_txn, n_dom = len(state.txns), len(state.domains)
    sizes = [1, 1, n_txn, n_dom, files.num_rows, tombstones.num_rows]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    total = int(sum(sizes))
    cols = {}
    cols["protocol"] = _section(
        _PROTOCOL_T,
        total,
        starts[0],
        {
            "minReaderVersion": pa.array([p.min_reader_version], pa.int32()),
            "minWriterVersion": pa.array([p.min_writer_version], pa.int32()),
            "readerFeatures": pa.array(
                [None if p.reader_features is None else list(p.reader_features)], _PROTOCOL_T.field("readerFeatures").type
            ),
            "writerFeatures": pa.array(
                [None if p.writer_features is None else list(p.writer_features)], _PROTOCOL_T.field("writerFeatures").type
            ),
        },
    )
    cols["metaData"] = _section(
        _METADATA_T,
        total,
        starts[1],
        {
            "id": pa.array([m.id]),
            "name": pa.array([m.name], pa.string()),
            "description": pa.array([m.description], pa.string()),
            "format": pa.array(
                [{"provider": m.format_provider, "options": list(m.format_options.items())}], _METADATA_T.field("format").type
            ),
            "schemaString": pa.array([m.schema_string]),
            "partitionColumns": pa.array([list(m.partition_columns)], _METADATA_T.field("partitionColumns").type),
            "createdTime": pa.array([m.created_time], pa.int64()),
            "configuration": pa.array([list(m.configuration.items())], _REQ_MAP),
        },
    )
    apps = sorted(state.txns)
    cols["txn"] = _section(
        _TXN_T,
        total,
        starts[2],
        {
            "appId": pa.array(apps, pa.string()),
            "version": pa.array([state.txns[a][0] for a in apps], pa.int64()),
            "lastUpdated": pa.array([state.txns[a][1] for a in apps], pa.int64()),
        },
    )
    doms = sorted(state.domains)
    cols["domainMetadata"] = _section(
        _DOMAIN_T,
        total,
        starts[3],
        {
            "domain": pa.array(doms, pa.string()),
            "configuration": pa.array([str(state.domains[d].get("configuration", "")) for d in doms], pa.string()),
            "removed": pa.array([False] * n_dom, pa.bool_()),
        },
    )
    cols["add"] = _section(
        _ADD_T,
        total,
        starts[4],
        {
            "path": files.column("path"),
            "partitionValues": files.column("partition_values").fill_null(pa.scalar([], STRING_MAP)),
            "size": files.column("size").fill_null(0),
            "modificationTime": files.column("modification_time").fill_null(0),
            # Checkpoints state what is, not what changed: Delta writes dataChange=false here.
            "dataChange": pa.array(np.zeros(files.num_rows, dtype=bool)),
            "stats": files.column("stats") if _write_stats_as_json(m) else pa.nulls(files.num_rows, pa.string()),
            "tags": files.column("tags"),
            "deletionVector": files.column("deletion_vector"),
        },
    )
    cols["remove"] = _section(
        _REMOVE_T,
        total,
        starts[5],
        {
            "path": tombstones.column("path"),
            "deletionTimestamp": tombstones.column("deletion_timestamp"),
            "dataChange": pa.array(np.zeros(tombstones.num_rows, dtype=bool)),
            "extendedFileMetadata": tombstones.column("extended_file_metadata"),
            "partitionValues": tombstones.column("partition_values"),
            "size": tombstones.column("size"),
            "deletionVector": tombstones.column("deletion_vector"),
        },
    )
    return pa.table([cols[f.name] for f in CHECKPOINT_SCHEMA], schema=CHECKPOINT_SCHEMA)


def write_checkpoint(store: LocalLogStore, log_dir: str, state: LogState, tombstones: pa.Table) -> dict[str, Any]:
    """Write `<version>.checkpoint.parquet` and then `_last_checkpoint`; returns the latter's content.

    The parquet file appears atomically (temp file + rename), and `_last_checkpoint` is only
    updated after it, so a crash leaves at worst an unused checkpoint, never a dangling pointer.
    """
    table = checkpoint_table(state, tombstones)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    data = buf.getvalue()
    store.write(os.path.join(log_dir, checkpoint_name(state.version)), data)
    last = {
        "version": state.version,
        "size": table.num_rows,
        "sizeInBytes": len(data),
        "numOfAddFiles": state.files.num_rows,
    }
    previous = read_last_checkpoint(store, log_dir)
    if previous is None or not isinstance(previous.get("version"), int) or previous["version"] <= state.version:
        store.write(os.path.join(log_dir, LAST_CHECKPOINT), json.dumps(last).encode())
    return last
