"""Delta per-file statistics of a whole snapshot, parsed at once into Arrow.

The `stats` column of a snapshot is parsed in one `pyarrow.json` call with
an explicit schema derived from the table schema, so a million files never become a million Python
dicts. Only where that fast path fails (a writer put something odd in a few files' stats) does a
slow, per-file path run, on short runs of files around the odd ones, and it turns what it cannot
read into nulls (= "no stats": keep the file).
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from use.delta.stats import LeafColumn, leaf_columns, select_leaves
from use.delta.typewidening import inexact_stat_leaves
from use.errors import InvalidArgumentError

if TYPE_CHECKING:
    from use.delta.columnmapping import ColumnMapping

__all__ = ["parse_stats", "stat_column"]

# --- parsing the stats of a whole snapshot -------------------------------------------------------


def stat_column(kind: str, column: str | tuple[str, ...]) -> str:
    """Name of a `parse_stats` output column: kind is "min", "max" or "null_count"."""
    if kind not in ("min", "max", "null_count"):
        raise InvalidArgumentError(f"stat kind {kind!r} is not one of 'min', 'max', 'null_count'")
    name = column if isinstance(column, str) else ".".join(column)
    return f"{kind}.{name}"


def _json_type(t: pa.DataType) -> pa.DataType | None:
    """How a min/max value of this column type is read from JSON (None: not read)."""
    if pa.types.is_integer(t):
        return pa.int64() if pa.types.is_signed_integer(t) or t.bit_width < 64 else pa.uint64()
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_decimal(t):
        return t
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or (hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t))
    ):
        return pa.string()
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return pa.string()
    if pa.types.is_boolean(t):
        return pa.bool_()
    return None


def _nested_struct(entries: list[tuple[tuple[str, ...], pa.DataType]]) -> pa.StructType:
    tree: dict[str, Any] = {}
    for path, t in entries:
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = t

    def build(node: dict[str, Any]) -> pa.StructType:
        return pa.struct([pa.field(k, build(v) if isinstance(v, dict) else v) for k, v in node.items()])

    return build(tree)


def _wanted_leaves(schema: pa.Schema, columns: Iterable[str] | None) -> list[LeafColumn]:
    if columns is None:
        return leaf_columns(schema)
    return select_leaves(
        schema,
        columns,
        lambda name, available: InvalidArgumentError(f"column {name!r} is not in the table schema (columns: {available})"),
    )


def _stats_schema(leaves: list[LeafColumn]) -> pa.Schema:
    minmax = [(leaf.path, jt) for leaf in leaves if (jt := _json_type(leaf.type)) is not None]
    counts = [(leaf.path, pa.int64()) for leaf in leaves]
    fields = [pa.field("numRecords", pa.int64())]
    if minmax:
        fields.append(pa.field("minValues", _nested_struct(minmax)))
        fields.append(pa.field("maxValues", _nested_struct(minmax)))
    if counts:
        fields.append(pa.field("nullCount", _nested_struct(counts)))
    return pa.schema(fields)


def _newline_joined(stats: pa.ChunkedArray | pa.Array) -> tuple[pa.Buffer, int]:
    """All stats strings, one per line, as one buffer (no Python string per file), and the longest line."""
    arr = stats.combine_chunks() if isinstance(stats, pa.ChunkedArray) else stats
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.large_string())
    arr = pc.fill_null(arr, "{}")
    # Empty strings are not JSON objects; a stray newline inside a stats string would split a row.
    empty = pc.equal(pc.binary_length(arr), 0)
    if pc.any(empty).as_py():
        arr = pc.if_else(empty, pa.scalar("{}", arr.type), arr)
    # Rare cases are detected by one cheap byte scan each before any string kernel runs.
    data = _data_bytes(arr)
    if np.count_nonzero(data == ord("\n")):
        arr = pc.replace_substring(arr, "\n", " ")
    # Spark writes non-finite doubles as quoted strings; as "no bound" they are read as null.
    if _contains(data, b'"NaN"') or _contains(data, b'Infinity"'):
        for token in ('"NaN"', '"-Infinity"', '"Infinity"'):
            arr = pc.replace_substring(arr, token, "null")
    joined = pc.binary_join_element_wise(arr, pa.scalar("\n", arr.type), pa.scalar("", arr.type))
    width = np.int64 if pa.types.is_large_string(joined.type) else np.int32
    offsets = np.frombuffer(joined.buffers()[1], dtype=width)[joined.offset : joined.offset + len(joined) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    data_buf = joined.buffers()[2]
    longest = int(np.max(np.diff(offsets))) if len(offsets) > 1 else 0
    if data_buf is None or end == start:
        return pa.py_buffer(b""), 0
    return data_buf.slice(start, end - start), longest


def _contains(data: np.ndarray, token: bytes) -> bool:
    """Whether `token` occurs in `data`, anchored on its second (rarer) byte; vectorized."""
    if len(data) < len(token):
        return False
    cand = np.flatnonzero(data[1 : len(data) - len(token) + 2] == token[1])
    for j, byte in enumerate(token):
        if j == 1 or len(cand) == 0:
            continue
        cand = cand[data[cand + j] == byte]
    return len(cand) > 0


def _data_bytes(arr: pa.Array) -> np.ndarray:
    """The bytes of a string array's values, as a numpy view (no copy)."""
    buf = arr.buffers()[2]
    if buf is None or len(arr) == 0:
        return np.zeros(0, dtype=np.uint8)
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], dtype=width)[arr.offset : arr.offset + len(arr) + 1]
    return np.frombuffer(buf, dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])]


def _field_path(arr: pa.ChunkedArray | pa.Array, path: Sequence[str]) -> pa.ChunkedArray | pa.Array:
    out = arr
    for part in path:
        t = out.type
        out = pc.struct_field(out, [t.get_field_index(part)])
    return out


def _convert(values: pa.ChunkedArray | pa.Array, target: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """JSON-read stat values -> the column's type; values that do not convert become null."""
    if values.type == target:
        return values
    try:
        if pa.types.is_timestamp(target):
            return _to_timestamp(values, target)
        return pc.cast(values, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _convert_slow(values, target)


def _to_timestamp(values: pa.ChunkedArray | pa.Array, target: pa.TimestampType) -> pa.ChunkedArray | pa.Array:
    utc = pa.timestamp("us", "UTC")
    try:
        parsed = pc.cast(values, utc if target.tz is not None else pa.timestamp("us"))
    except pa.ArrowInvalid:
        # Delta writes timestamp_ntz without a zone, other writers may add one (or leave it out).
        parsed = pc.cast(values, pa.timestamp("us") if target.tz is not None else utc)
        parsed = pc.cast(parsed.cast(pa.int64()), pa.timestamp("us", target.tz))
    if target.tz is not None and parsed.type.tz != target.tz:
        parsed = parsed.cast(pa.timestamp("us", target.tz))
    return pc.cast(parsed, target) if parsed.type != target else parsed


def _parse_scalar(v: Any, target: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_timestamp(target):
        s = str(v).replace("Z", "+00:00")
        d = _dt.datetime.fromisoformat(s)
        if target.tz is not None and d.tzinfo is None:
            d = d.replace(tzinfo=_dt.UTC)
        if target.tz is None and d.tzinfo is not None:
            d = d.astimezone(_dt.UTC).replace(tzinfo=None)
        return d
    if pa.types.is_date(target):
        return _dt.date.fromisoformat(str(v)[:10])
    if pa.types.is_decimal(target):
        return _decimal.Decimal(str(v))
    return v


def _convert_slow(values: pa.ChunkedArray | pa.Array, target: pa.DataType) -> pa.Array:
    out: list[Any] = []
    for v in values.to_pylist():
        try:
            out.append(pa.scalar(_parse_scalar(v, target), type=target).as_py())
        except (ValueError, TypeError, ArithmeticError, pa.ArrowException):
            out.append(None)
    return pa.array(out, type=target)


def _read_json_fast(buf: pa.Buffer, longest: int, schema: pa.Schema, n: int) -> pa.Table | None:
    if n == 0:
        return pa.table({f.name: pa.array([], f.type) for f in schema})
    # A block must hold the longest line; beyond that ~1 MiB blocks parallelize well.
    block = max(1 << 20, 2 * longest + 16)
    try:
        table = pajson.read_json(
            pa.BufferReader(buf),
            read_options=pajson.ReadOptions(use_threads=True, block_size=int(block)),
            parse_options=pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows != n:
        return None
    return table


def _coerce_json_value(v: Any, t: pa.DataType) -> Any:
    """One value of a slow-path parse, checked against the explicit JSON type (bad -> None)."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        if not isinstance(v, dict):
            return None
        return {t.field(i).name: _coerce_json_value(v.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_boolean(t):
        return v if isinstance(v, bool) else None
    if pa.types.is_integer(t):
        if not isinstance(v, int) or isinstance(v, bool):
            return None
        low, high = (0, 2**64 - 1) if pa.types.is_unsigned_integer(t) else (-(2**63), 2**63 - 1)
        return v if low <= v <= high else None  # a bound outside the type is no bound
    if pa.types.is_floating(t):
        # floats arrive as Decimal (parse_float keeps decimals exact)
        if isinstance(v, (int, float, _decimal.Decimal)) and not isinstance(v, bool):
            return float(v)
        return None
    if pa.types.is_decimal(t):
        if isinstance(v, (int, float, _decimal.Decimal)) and not isinstance(v, bool):
            d = _decimal.Decimal(str(v))
            try:
                return pa.scalar(d, type=t).as_py()
            except (pa.ArrowException, ValueError, ArithmeticError):
                return None
        return None
    if pa.types.is_string(t):
        return v if isinstance(v, str) else None
    return None


#: a run of stats strings this short that the fast path rejects is parsed file by file
_SLOW_RUN = 64


def _read_json(stats: pa.ChunkedArray | pa.Array, schema: pa.Schema) -> pa.Table:
    """The stats strings parsed against `schema`. One Arrow pass when every string reads; when one
    does not (a writer put something odd in a few files' stats), the halves are retried, so only
    runs of `_SLOW_RUN` strings around the bad ones go through the per-file path and the other
    files keep the fast path's exact values."""
    n = len(stats)
    table = _read_json_fast(*_newline_joined(stats), schema, n) if n else None
    if table is not None or n == 0:
        return table if table is not None else pa.table({f.name: pa.array([], f.type) for f in schema})
    if n <= _SLOW_RUN:
        return _read_json_slow(stats, schema)
    mid = n // 2
    return pa.concat_tables([_read_json(stats.slice(0, mid), schema), _read_json(stats.slice(mid), schema)])


def _read_json_slow(stats: pa.ChunkedArray | pa.Array, schema: pa.Schema) -> pa.Table:
    """Per-file parse of stats the fast path rejected; bad parts become null."""
    struct_type = pa.struct(list(schema))
    rows: list[Any] = []
    for s in stats.to_pylist():
        try:
            obj = json.loads(s, parse_float=_decimal.Decimal, parse_constant=lambda _: None) if s else None
        except (ValueError, TypeError):
            obj = None
        rows.append(_coerce_json_value(obj, struct_type) if isinstance(obj, dict) else None)
    arr = pa.array(rows, type=struct_type)
    return pa.Table.from_arrays([pc.struct_field(arr, [i]) for i in range(struct_type.num_fields)], schema=schema)


def parse_stats(
    files: pa.Table,
    schema: pa.Schema,
    columns: Iterable[str] | None = None,
    *,
    column_mapping: ColumnMapping | None = None,
) -> pa.Table:
    """Parse the `stats` column of a snapshot's files into typed columns, one row per file.

    Output: `num_records` (int64) and, for every leaf column selected by `columns` (default: every
    leaf of `schema`; a struct name selects its leaves), `min.<col>` / `max.<col>` typed as the
    column (booleans included, binary and collections left out) and `null_count.<col>` (int64).
    Nested columns are named with dots (`min.s.x`); see `stat_column`. Null means "unknown".

    Output names are always the logical (schema) names; with an active `column_mapping` the stats
    JSON is read by the physical names the log keeps. Min/max of a column widened from float to
    double are left null (`use.delta.typewidening`: old files' bounds are not bounds of the widened
    values).
    """
    if "stats" not in files.column_names:
        raise InvalidArgumentError(f"files table has no 'stats' column (columns: {files.column_names})")
    leaves = _wanted_leaves(schema, columns)
    stored = (
        [LeafColumn(column_mapping.physical_path(leaf.path), leaf.type) for leaf in leaves]
        if column_mapping is not None and column_mapping.active
        else leaves
    )
    inexact = inexact_stat_leaves(schema)
    json_schema = _stats_schema(stored)
    stats = files.column("stats")
    n = files.num_rows
    table = _read_json(stats, json_schema)
    out_names: list[str] = ["num_records"]
    out_cols: list[Any] = [table.column("numRecords")]
    names = set(json_schema.names)
    for leaf, at in zip(leaves, stored, strict=False):
        jt = _json_type(leaf.type)
        if jt is not None and "minValues" in names:
            for kind, top in (("min", "minValues"), ("max", "maxValues")):
                out_names.append(stat_column(kind, leaf.path))
                if leaf.path in inexact:
                    out_cols.append(pa.nulls(n, leaf.type))
                else:
                    out_cols.append(_convert(_field_path(table.column(top), at.path), leaf.type))
        if "nullCount" in names:
            out_names.append(stat_column("null_count", leaf.path))
            out_cols.append(_field_path(table.column("nullCount"), at.path))
    return pa.table(dict(zip(out_names, out_cols, strict=False)))
