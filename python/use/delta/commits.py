"""Delta commit files -> actions held in Arrow.

File actions (add/remove), millions of them in a large log, go through pyarrow's JSON reader (the
fast path) and never become a Python object each; the few table actions (metaData, protocol, txn,
commitInfo, domainMetadata) are parsed line by line. Invalid UTF-8 or JSON is a `CorruptLogError`
naming the file and line.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

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
from use.delta.columnmapping import partition_value_keys
from use.delta.listing import LogListing, commit_name
from use.delta.storage import LocalLogStore
from use.errors import CorruptLogError

# --- parsed actions --------------------------------------------------------------------------------


@dataclass
class CommitActions:
    """The actions of one commit (or a run of commits), file actions as Arrow tables."""

    version: int
    adds: pa.Table  # FILES_SCHEMA
    removes: pa.Table  # TOMBSTONES_SCHEMA
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    domains: dict[str, dict[str, Any]] = field(default_factory=dict)
    commit_info: dict[str, Any] | None = None
    other_actions: set[str] = field(default_factory=set)
    metadata_error: CorruptLogError | None = None
    """Why this commit's metaData action could not be read (then `metadata` is None): an error only
    if no later commit replaces it (`_fold_table_actions`)."""

    @property
    def changes_metadata(self) -> bool:
        """Does this commit hold a metaData action (well-formed or not)?"""
        return self.metadata is not None or self.metadata_error is not None


_KNOWN_ACTIONS = {"add", "remove", "metaData", "protocol", "txn", "commitInfo", "cdc", "domainMetadata"}


def _str_map_value(v: Any, what: str, where: str, *, keep_nulls: bool) -> list[tuple[str, str | None]] | None:
    if v is None:
        return None
    if not isinstance(v, dict):
        raise CorruptLogError(f"{where}: {what} must be a JSON object, got {v!r}")
    return [(str(k), None if x is None else str(x)) for k, x in v.items() if keep_nulls or x is not None]


def _rows_to_files(rows: list[dict[str, Any]], where: str) -> pa.Table:
    try:
        return pa.table(
            {
                "path": pa.array([r["path"] for r in rows], pa.string()),
                "size": pa.array([r.get("size") for r in rows], pa.int64()),
                "modification_time": pa.array([r.get("modificationTime") for r in rows], pa.int64()),
                "data_change": pa.array([r.get("dataChange", True) for r in rows], pa.bool_()),
                "stats": pa.array([r.get("stats") for r in rows], pa.string()),
                "tags": pa.array([_str_map_value(r.get("tags"), "tags", where, keep_nulls=False) for r in rows], STRING_MAP),
                "partition_values": pa.array(
                    [_str_map_value(r.get("partitionValues"), "partitionValues", where, keep_nulls=True) or [] for r in rows],
                    STRING_MAP,
                ),
                "deletion_vector": pa.array([r.get("deletionVector") for r in rows], DELETION_VECTOR_TYPE),
            },
            schema=FILES_SCHEMA,
        )
    except (KeyError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise CorruptLogError(f"{where}: malformed add action ({exc!r})") from exc


def _rows_to_tombstones(rows: list[dict[str, Any]], where: str) -> pa.Table:
    try:
        return pa.table(
            {
                "path": pa.array([r["path"] for r in rows], pa.string()),
                "deletion_timestamp": pa.array([r.get("deletionTimestamp") for r in rows], pa.int64()),
                "size": pa.array([r.get("size") for r in rows], pa.int64()),
                "data_change": pa.array([r.get("dataChange", True) for r in rows], pa.bool_()),
                "partition_values": pa.array(
                    [_str_map_value(r.get("partitionValues"), "partitionValues", where, keep_nulls=True) for r in rows],
                    STRING_MAP,
                ),
                "extended_file_metadata": pa.array([r.get("extendedFileMetadata") for r in rows], pa.bool_()),
                "tags": pa.array([_str_map_value(r.get("tags"), "tags", where, keep_nulls=False) for r in rows], STRING_MAP),
                "deletion_vector": pa.array([r.get("deletionVector") for r in rows], DELETION_VECTOR_TYPE),
            },
            schema=TOMBSTONES_SCHEMA,
        )
    except (KeyError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise CorruptLogError(f"{where}: malformed remove action ({exc!r})") from exc


def _parse_line(out: CommitActions, raw: bytes, where: str, adds: list[dict[str, Any]], removes: list[dict[str, Any]]) -> None:
    """Parse one non-blank line into `out` (file actions are collected into `adds`/`removes`)."""
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptLogError(f"{where} is not valid JSON ({exc}); the commit file is corrupted") from exc
    if not isinstance(obj, dict):
        raise CorruptLogError(f"{where} must be a JSON object holding one action, got {raw[:200]!r}")
    if len(obj) == 1:
        ((kind, body),) = obj.items()
    else:
        # Keys a later protocol adds beside an action are ignored, as delta-spark and delta-rs do;
        # two actions on one line (or none) is not a log any writer produces.
        known = [k for k in obj if k in _KNOWN_ACTIONS]
        if len(known) != 1:
            raise CorruptLogError(
                f"{where} must hold exactly one action, got {'none' if not obj else 'the keys ' + ', '.join(map(repr, obj))}; "
                "the commit file is corrupted"
            )
        kind, body = known[0], obj[known[0]]
    if not isinstance(body, dict):
        raise CorruptLogError(f"{where}: action {kind!r} must be a JSON object")
    if kind == "add":
        if not isinstance(body.get("path"), str):
            raise CorruptLogError(f"{where}: add action without a string path")
        adds.append(body)
    elif kind == "remove":
        if not isinstance(body.get("path"), str):
            raise CorruptLogError(f"{where}: remove action without a string path")
        removes.append(body)
    elif kind == "metaData":
        try:
            out.metadata, out.metadata_error = Metadata.from_dict(body), None
        except CorruptLogError as exc:
            out.metadata, out.metadata_error = None, CorruptLogError(f"{where}: {exc}")
    elif kind == "protocol":
        try:
            out.protocol = Protocol.from_dict(body)
        except CorruptLogError as exc:
            raise CorruptLogError(f"{where}: {exc}") from exc
    elif kind == "txn":
        try:
            out.txns[str(body["appId"])] = (int(body["version"]), body.get("lastUpdated"))
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptLogError(f"{where}: malformed txn action ({exc!r})") from exc
    elif kind == "commitInfo":
        out.commit_info = body
    elif kind == "domainMetadata":
        if "domain" not in body:
            raise CorruptLogError(f"{where}: domainMetadata action without a domain")
        out.domains[str(body["domain"])] = body
    else:
        out.other_actions.add(kind)


def parse_commit(version: int, path: str, data: bytes) -> CommitActions:
    """Parse one commit file line by line; CorruptLogError names the file and line of anything malformed.

    This is the exact reference path; `parse_commits` is the fast one and falls back to this.
    """
    adds: list[dict[str, Any]] = []
    removes: list[dict[str, Any]] = []
    out = CommitActions(version, empty_files(), empty_tombstones())
    if not data.strip():
        raise CorruptLogError(f"commit file {path} is empty; a commit must hold at least one action")
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        if raw.strip():
            _parse_line(out, raw, f"{path} line {lineno}", adds, removes)
    if adds:
        out.adds = _rows_to_files(adds, path)
    if removes:
        out.removes = _rows_to_tombstones(removes, path)
    return out


# --- fast path: file actions through pyarrow.json -----------------------------------------------------

_ADD_PREFIX = b'{"add":'
_REMOVE_PREFIX = b'{"remove":'
_JSON_BLOCK = 1 << 20


class _FastPathUnavailable(Exception):
    """The batch has something the columnar reader cannot type safely; use the exact path."""


def _is_stringish(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_null(t) or pa.types.is_large_string(t))


def _struct_to_map(arr: pa.Array, *, keep_nulls: bool, null_as_empty: bool) -> pa.Array:
    """A JSON object inferred as a struct (one child per key) -> map<string,string>, vectorized.

    Keys of null values are dropped unless `keep_nulls` (partition values keep them: null is a
    legal partition value). Rows whose object was null become null maps, or empty maps when
    `null_as_empty`.
    """
    n = len(arr)
    if pa.types.is_null(arr.type):
        if null_as_empty:
            return pa.MapArray.from_arrays(
                pa.array(np.zeros(n + 1, dtype=np.int32)), pa.array([], pa.string()), pa.array([], pa.string()), type=STRING_MAP
            )
        return pa.nulls(n, STRING_MAP)
    if not pa.types.is_struct(arr.type) or not all(_is_stringish(arr.type.field(i).type) for i in range(arr.type.num_fields)):
        raise _FastPathUnavailable(f"object inferred as {arr.type}")
    k = arr.type.num_fields
    row_valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if k == 0:
        keys = pa.array([], pa.string())
        values = pa.array([], pa.string())
        counts = np.zeros(n, dtype=np.int64)
    else:
        children = [arr.field(i).cast(pa.string()) for i in range(k)]
        flat = pa.concat_arrays(children)  # field-major
        order = (np.arange(n, dtype=np.int64)[:, None] + np.arange(k, dtype=np.int64)[None, :] * n).ravel()
        values = flat.take(pa.array(order))
        keys = pa.array([arr.type.field(i).name for i in range(k)], pa.string()).take(
            pa.array(np.tile(np.arange(k, dtype=np.int64), n))
        )
        entry_ok = np.repeat(row_valid, k)
        if not keep_nulls:
            entry_ok &= np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        if not entry_ok.all():
            mask = pa.array(entry_ok)
            values = values.filter(mask)
            keys = keys.filter(mask)
        counts = entry_ok.reshape(n, k).sum(axis=1)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    mask = None if (null_as_empty or row_valid.all()) else pa.array(~row_valid)
    return pa.MapArray.from_arrays(pa.array(offsets), keys, values, type=STRING_MAP, mask=mask)


def _get(col: pa.StructArray, name: str, typ: pa.DataType) -> pa.Array:
    t = col.type
    for i in range(t.num_fields):
        if t.field(i).name == name:
            child = col.field(i)
            if pa.types.is_null(child.type):
                return pa.nulls(len(col), typ)
            if child.type != typ:
                if pa.types.is_struct(typ) and not pa.types.is_struct(child.type):
                    raise _FastPathUnavailable(f"{name} inferred as {child.type}")
                try:
                    child = child.cast(typ)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                    raise _FastPathUnavailable(str(exc)) from exc
            return child
    return pa.nulls(len(col), typ)


def _fast_files(col: pa.StructArray) -> pa.Table:
    n = len(col)
    if _get(col, "path", pa.string()).null_count:
        raise _FastPathUnavailable("add without path")
    data_change = _get(col, "dataChange", pa.bool_()).fill_null(True)
    return pa.table(
        {
            "path": _get(col, "path", pa.string()),
            "size": _get(col, "size", pa.int64()),
            "modification_time": _get(col, "modificationTime", pa.int64()),
            "data_change": data_change,
            "stats": _get(col, "stats", pa.string()),
            "tags": _struct_to_map(_get_raw(col, "tags", n), keep_nulls=False, null_as_empty=False),
            "partition_values": _struct_to_map(_get_raw(col, "partitionValues", n), keep_nulls=True, null_as_empty=True),
            "deletion_vector": _get(col, "deletionVector", DELETION_VECTOR_TYPE),
        },
        schema=FILES_SCHEMA,
    )


def _fast_tombstones(col: pa.StructArray) -> pa.Table:
    n = len(col)
    if _get(col, "path", pa.string()).null_count:
        raise _FastPathUnavailable("remove without path")
    pv = _get_raw(col, "partitionValues", n)
    pv_valid = pv.is_valid() if not pa.types.is_null(pv.type) else None
    pmap = _struct_to_map(pv, keep_nulls=True, null_as_empty=True)
    if pv_valid is not None and pv_valid.false_count:
        pmap = pc.if_else(pv_valid, pmap, pa.nulls(n, STRING_MAP))
    elif pv_valid is None:
        pmap = pa.nulls(n, STRING_MAP)
    return pa.table(
        {
            "path": _get(col, "path", pa.string()),
            "deletion_timestamp": _get(col, "deletionTimestamp", pa.int64()),
            "size": _get(col, "size", pa.int64()),
            "data_change": _get(col, "dataChange", pa.bool_()).fill_null(True),
            "partition_values": pmap,
            "extended_file_metadata": _get(col, "extendedFileMetadata", pa.bool_()),
            "tags": _struct_to_map(_get_raw(col, "tags", n), keep_nulls=False, null_as_empty=False),
            "deletion_vector": _get(col, "deletionVector", DELETION_VECTOR_TYPE),
        },
        schema=TOMBSTONES_SCHEMA,
    )


def _get_raw(col: pa.StructArray, name: str, n: int) -> pa.Array:
    t = col.type
    for i in range(t.num_fields):
        if t.field(i).name == name:
            return col.field(i)
    return pa.nulls(n, pa.null())


def _file_action_schema(partition_columns: Sequence[str]) -> pa.Schema:
    """Explicit types for the fields whose JSON strings pyarrow would otherwise guess (timestamps)."""
    pv = pa.struct([pa.field(c, pa.string()) for c in partition_columns])
    common = [
        pa.field("path", pa.string()),
        pa.field("partitionValues", pv),
        pa.field("size", pa.int64()),
        pa.field("dataChange", pa.bool_()),
        pa.field("deletionVector", DELETION_VECTOR_TYPE),
    ]
    add = pa.struct(common + [pa.field("modificationTime", pa.int64()), pa.field("stats", pa.string())])
    remove = pa.struct(common + [pa.field("deletionTimestamp", pa.int64()), pa.field("extendedFileMetadata", pa.bool_())])
    return pa.schema([pa.field("add", add), pa.field("remove", remove)])


def parse_commits(items: Sequence[tuple[int, str, bytes]], partition_columns: Sequence[str] = ()) -> list[CommitActions]:
    """Parse a run of commit files (version order) with few columnar JSON reads for all add/remove lines.

    Only lines that start exactly like `{"add":` / `{"remove":` go through pyarrow.json (with the
    partition-value and other guessable fields typed explicitly); everything else, and any commit the
    columnar reader cannot type safely or that is malformed, goes through the exact line parser,
    which names the file and line of the problem.

    `partition_columns` are those in force before the first commit. Each commit's file actions are
    read with the partition columns in force *for that commit* (its own metaData, else the last
    one before it): JSON objects read as structs give every row every key of the schema, so reading
    commits of two partitionings together would give each add a null value for the other one's
    columns, keys its line does not have. Commits sharing partition columns share one read.
    """
    outs: list[CommitActions] = []
    chunks: list[list[bytes | memoryview]] = []
    counts: list[int] = []
    slow_files: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
    groups: dict[tuple[str, ...], list[int]] = {}
    cols = tuple(dict.fromkeys(partition_columns))
    for version, path, data in items:
        if not data.strip():
            raise CorruptLogError(f"commit file {path} is empty; a commit must hold at least one action")
        out = CommitActions(version, empty_files(), empty_tombstones())
        adds: list[dict[str, Any]] = []
        removes: list[dict[str, Any]] = []
        fast: list[bytes | memoryview] = []
        n_fast = 0
        # Writers put commitInfo/protocol/metaData/txn first: parse those lines one by one ...
        pos, lineno, size = 0, 0, len(data)
        while pos < size and not (data.startswith(_ADD_PREFIX, pos) or data.startswith(_REMOVE_PREFIX, pos)):
            end = data.find(b"\n", pos)
            end = size if end < 0 else end
            lineno += 1
            raw = data[pos:end]
            if raw.strip():
                _parse_line(out, raw, f"{path} line {lineno}", adds, removes)
            pos = end + 1
        end = size
        while end > pos and data[end - 1] in (10, 13):  # trailing newlines
            end -= 1
        if end > pos:
            # ... and when every remaining line is a file action (counted in C, no per-line
            # Python, no copy), hand the rest of the file to the columnar reader as it is.
            n_lines = data.count(b"\n", pos, end) + 1
            if data.count(b'\n{"add":', pos, end) + data.count(b'\n{"remove":', pos, end) + 1 == n_lines:
                fast.append(memoryview(data)[pos:end])
                n_fast = n_lines
            else:
                for i, raw in enumerate(data[pos:end].split(b"\n"), lineno + 1):
                    if raw.startswith(_ADD_PREFIX) or raw.startswith(_REMOVE_PREFIX):
                        fast.append(raw)
                        n_fast += 1
                    elif raw.strip():
                        _parse_line(out, raw, f"{path} line {i}", adds, removes)
        if out.metadata is not None:  # wherever its line was: it governs this commit's files
            cols = tuple(dict.fromkeys(partition_value_keys(out.metadata)))
        if n_fast:
            groups.setdefault(cols, []).append(len(outs))
        outs.append(out)
        chunks.append(fast)
        counts.append(n_fast)
        slow_files.append((adds, removes))
    for group_cols, members in groups.items():
        try:
            _fill_fast(
                [outs[i] for i in members], [counts[i] for i in members], [c for i in members for c in chunks[i]], group_cols
            )
        except (_FastPathUnavailable, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            for i in members:
                exact = parse_commit(*items[i])
                outs[i] = exact
                slow_files[i] = ([], [])
    for out, (adds, removes), (_, path, _) in zip(outs, slow_files, items, strict=False):
        if adds:
            out.adds = pa.concat_tables([out.adds, _rows_to_files(adds, path)])
        if removes:
            out.removes = pa.concat_tables([out.removes, _rows_to_tombstones(removes, path)])
    return outs


def _valid_utf8(buf: bytes) -> bool:
    """Is `buf` valid UTF-8? pyarrow.json does not check (it would hand invalid text on to Python,
    which fails later, untyped); Arrow's full validation of one string value does, at GB/s."""
    arr = pa.Array.from_buffers(
        pa.large_string(), 1, [None, pa.py_buffer(np.array([0, len(buf)], dtype=np.int64)), pa.py_buffer(buf)]
    )
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _fill_fast(outs: list[CommitActions], counts: list[int], chunks: list[bytes | memoryview], part_cols: Sequence[str]) -> None:
    buf = b"\n".join(chunks)
    if not _valid_utf8(buf):
        raise _FastPathUnavailable("invalid UTF-8")  # the exact parser names the file and line
    parse = pa_json.ParseOptions(explicit_schema=_file_action_schema(part_cols), unexpected_field_behavior="infer")
    try:
        # 1 MiB blocks are parsed in parallel ...
        table = pa_json.read_json(io.BytesIO(buf), read_options=pa_json.ReadOptions(block_size=_JSON_BLOCK), parse_options=parse)
    except pa.ArrowInvalid:
        # ... unless a line is longer than a block (huge stats): then one block holds everything.
        table = pa_json.read_json(io.BytesIO(buf), read_options=pa_json.ReadOptions(block_size=len(buf) + 1), parse_options=parse)
    if table.num_rows != sum(counts):
        raise _FastPathUnavailable("row count mismatch")
    kinds = [k for k in ("add", "remove") if k in table.column_names]
    for kind in kinds:
        pv = table.schema.field(kind).type.field("partitionValues").type
        if [pv.field(i).name for i in range(pv.num_fields)] != list(part_cols):
            # A partition key outside the columns in force (e.g. a remove of a file written under an
            # earlier partitioning): as a struct field it would appear, null, in every other row.
            raise _FastPathUnavailable("partition values with other keys than the partition columns")
    if len(kinds) == 2 and pc.any(pc.and_(table.column("add").is_valid(), table.column("remove").is_valid())).as_py():
        raise _FastPathUnavailable("a line with both an add and a remove")  # the exact parser refuses it
    row_version = np.repeat(np.arange(len(outs)), counts)
    for kind in kinds:
        col = table.column(kind).combine_chunks()
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        if not valid.any():
            continue
        if not valid.all():
            col = col.filter(pa.array(valid))
        built = _fast_files(col) if kind == "add" else _fast_tombstones(col)
        owner = row_version[valid]
        bounds = np.searchsorted(owner, np.arange(len(outs) + 1), side="left")
        for i, out in enumerate(outs):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            if hi > lo:
                if kind == "add":
                    out.adds = built.slice(lo, hi - lo)
                else:
                    out.removes = built.slice(lo, hi - lo)


def read_commits(
    store: LocalLogStore, listing: LogListing, start: int, end: int, partition_columns: Sequence[str] = ()
) -> list[CommitActions]:
    """Parse commits start..end inclusive; CorruptLogError if one is missing."""
    items: list[tuple[int, str, bytes]] = []
    for v in range(start, end + 1):
        cf = listing.commits.get(v)
        if cf is None:
            raise CorruptLogError(
                f"commit file {os.path.join(listing.log_dir, commit_name(v))} is missing; the log has a gap "
                f"and version {end} cannot be reconstructed ({listing.available_versions_text()})"
            )
        try:
            items.append((v, cf.path, store.read(cf.path)))
        except FileNotFoundError as exc:
            raise CorruptLogError(f"commit file {cf.path} disappeared while reading (log cleanup running?)") from exc
    return parse_commits(items, partition_columns) if items else []
