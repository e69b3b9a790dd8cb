"""Delta per-file statistics: written from parquet footers, parsed for whole snapshots at once.

Writing: a data file's stats are the `add.stats` JSON Delta readers use for data skipping
(`numRecords`, `minValues`, `maxValues`, `nullCount`, nested structs as nested objects). They are
taken from the parquet footer (row-group statistics merged), never by re-reading the data, so they
cost nothing on executors. Values are rendered the way Delta on Spark renders them, so that Spark,
delta-rs and this project skip the same files:

- only the first `delta.dataSkippingNumIndexedCols` leaf columns (default 32; a struct counts as
  its leaves, an array or map as one), or exactly `delta.dataSkippingStatsColumns` when set;
- min/max only for numbers, decimals, dates, timestamps and strings (Delta's skipping-eligible
  types); booleans, binary and nested collections get a null count only (or nothing);
- dates as `YYYY-MM-DD`; timestamps as ISO-8601 in UTC with millisecond precision and `Z` (the min
  rounded down, the max rounded up, so both stay true bounds; timestamp_ntz as microseconds without
  a zone);
- strings longer than 32 UTF-16 units (Java's `String.length`) truncated: the min to its prefix,
  the max to a prefix plus a tie-breaker character (U+007F or U+10FFFF) that keeps it an upper
  bound, exactly as Delta's `truncateMaxStringAgg`;
- a float column holding NaN gets no max: Spark orders NaN above every number, the parquet footer
  ignores NaN, and a missing max is the only value every reader treats as "no bound".

Parsing a whole snapshot's stats is `use.delta.stats_parse`.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from use.errors import ConfigError

__all__ = [
    "DEFAULT_NUM_INDEXED_COLS",
    "STRING_PREFIX_LENGTH",
    "StatsConfig",
    "LeafColumn",
    "leaf_columns",
    "select_leaves",
    "stats_leaves",
    "collect_stats",
    "stats_to_json",
    "file_stats_json",
    "truncate_min_string",
    "truncate_max_string",
    "parse_column_list",
    "is_skipping_eligible",
]

DEFAULT_NUM_INDEXED_COLS = 32
STRING_PREFIX_LENGTH = 32
NUM_INDEXED_COLS_KEY = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS_KEY = "delta.dataSkippingStatsColumns"

_ASCII_MAX = "\u007f"
_UTF8_MAX = chr(0x10FFFF)
_EPOCH_DATE = _dt.date(1970, 1, 1)


# --- configuration -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatsConfig:
    """Which columns get stats: `columns` (when set) wins over `num_indexed_cols` (-1 = all)."""

    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS
    columns: tuple[str, ...] | None = None

    @classmethod
    def from_configuration(cls, configuration: Mapping[str, str] | None) -> StatsConfig:
        """Read the two Delta table properties, with a clear error for a bad value."""
        conf = configuration or {}
        raw_n = conf.get(NUM_INDEXED_COLS_KEY)
        n = DEFAULT_NUM_INDEXED_COLS
        if raw_n is not None:
            try:
                n = int(str(raw_n).strip())
            except ValueError:
                n = -2
            if n < -1:
                raise ConfigError(
                    f"table property {NUM_INDEXED_COLS_KEY}={raw_n!r} is not valid: use -1 (all "
                    f"columns) or a non-negative number of leaf columns (default {DEFAULT_NUM_INDEXED_COLS})"
                )
        raw_cols = conf.get(STATS_COLUMNS_KEY)
        cols = parse_column_list(raw_cols, key=STATS_COLUMNS_KEY) if raw_cols is not None else None
        return cls(num_indexed_cols=n, columns=cols)


def parse_column_list(text: str, *, key: str = STATS_COLUMNS_KEY, drop_empty: bool = True) -> tuple[str, ...]:
    """`a, b.c, \\`odd.name\\`` -> ("a", "b.c", "odd.name") (backticks quote a name with dots).
    Empty names (`a,,b`, a trailing comma) are dropped, or kept with `drop_empty=False` for a
    caller that refuses them."""
    names: list[str] = []
    current: list[str] = []
    in_quote = False
    for ch in text:
        if ch == "`":
            in_quote = not in_quote
            continue
        if ch == "," and not in_quote:
            names.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if in_quote:
        raise ConfigError(f"table property {key}={text!r} has an unclosed backtick; quote names as `name`")
    names.append("".join(current).strip())
    return tuple(n for n in names if n or not drop_empty)


# --- schema walking ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeafColumn:
    """One leaf of a schema as Delta stats see it (structs expanded; arrays/maps are leaves)."""

    path: tuple[str, ...]
    type: pa.DataType

    @property
    def name(self) -> str:
        return ".".join(self.path)


def _storage_type(t: pa.DataType) -> pa.DataType:
    if isinstance(t, pa.ExtensionType):
        return t.storage_type
    if pa.types.is_dictionary(t):
        return t.value_type
    return t


def leaf_columns(schema: pa.Schema | pa.StructType | Sequence[pa.Field], prefix: tuple[str, ...] = ()) -> list[LeafColumn]:
    """The schema's leaves in order, expanding structs (Delta's order for `numIndexedCols`)."""
    out: list[LeafColumn] = []
    fields = list(schema) if not isinstance(schema, pa.StructType) else [schema.field(i) for i in range(schema.num_fields)]
    for f in fields:
        t = _storage_type(f.type)
        if pa.types.is_struct(t):
            out.extend(leaf_columns(t, prefix + (f.name,)))
        else:
            out.append(LeafColumn(prefix + (f.name,), t))
    return out


def is_skipping_eligible(t: pa.DataType) -> bool:
    """Delta collects min/max only for these types (not booleans, binary or collections)."""
    t = _storage_type(t)
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or (hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t))
    )


def select_leaves(schema: pa.Schema, names: Iterable[str], unknown: Callable[[str, str], Exception]) -> list[LeafColumn]:
    """Leaves selected by names (a struct name selects all its leaves), each once, in the order named.
    A name not in the schema raises `unknown(name, available columns)`: the writer's stats config
    and the reader's stats parsing report it with their own error types."""
    leaves = leaf_columns(schema)
    selected: list[LeafColumn] = []
    seen: set[tuple[str, ...]] = set()
    for name in names:
        path = resolve_path(schema, name)
        if path is None:
            raise unknown(name, ", ".join(leaf.name for leaf in leaves))
        for leaf in leaves:
            if leaf.path[: len(path)] == path and leaf.path not in seen:
                seen.add(leaf.path)
                selected.append(leaf)
    return selected


def _resolve_names(schema: pa.Schema, names: Iterable[str], what: str) -> list[LeafColumn]:
    return select_leaves(
        schema,
        names,
        lambda name, available: ConfigError(
            f"{what} names column {name!r}, which is not in the table schema (columns: {available})"
        ),
    )


def resolve_path(schema: pa.Schema | pa.StructType, name: str) -> tuple[str, ...] | None:
    """A column name (dotted for nested fields) -> its field path, exact first, then case-insensitive."""
    for exact in (True, False):
        path = _resolve(schema, name, exact)
        if path is not None:
            return path
    return None


def _resolve(struct: pa.Schema | pa.StructType, name: str, exact: bool) -> tuple[str, ...] | None:
    fields = list(struct) if isinstance(struct, pa.Schema) else [struct.field(i) for i in range(struct.num_fields)]
    # Longest matching field name first, so a top-level name containing a dot wins over nesting.
    for f in sorted(fields, key=lambda f: -len(f.name)):
        fname = f.name if exact else f.name.lower()
        key = name if exact else name.lower()
        if key == fname:
            return (f.name,)
        if key.startswith(fname + "."):
            t = _storage_type(f.type)
            if pa.types.is_struct(t):
                rest = _resolve(t, name[len(f.name) + 1 :], exact)
                if rest is not None:
                    return (f.name,) + rest
    return None


def stats_leaves(
    schema: pa.Schema,
    *,
    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
    columns: Sequence[str] | None = None,
    partition_columns: Sequence[str] = (),
) -> list[LeafColumn]:
    """The leaf columns that get stats, in schema order (partition columns never do)."""
    parts = set(partition_columns)
    data_schema = pa.schema([f for f in schema if f.name not in parts])
    if columns is not None:
        return _resolve_names(data_schema, columns, STATS_COLUMNS_KEY)
    leaves = leaf_columns(data_schema)
    if num_indexed_cols < 0:
        return leaves
    return leaves[:num_indexed_cols]


# --- string truncation (Delta's rules, in UTF-16 units like Java) --------------------------------


def _units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _utf16_len(s: str) -> int:
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def truncate_min_string(s: str, prefix_len: int = STRING_PREFIX_LENGTH) -> str | None:
    """A prefix of at most `prefix_len` UTF-16 units (one more to keep a surrogate pair whole)."""
    if _utf16_len(s) <= prefix_len:
        return s
    if prefix_len <= 0:
        return None
    units = 0
    end = 0
    for ch in s:
        if units >= prefix_len:
            break
        units += _units(ch)
        end += 1
    return s[:end]


def truncate_max_string(s: str, prefix_len: int = STRING_PREFIX_LENGTH) -> str | None:
    """A short string that is still >= `s` in UTF-8 order, or None when none exists within 2x the prefix."""
    if _utf16_len(s) <= prefix_len:
        return s
    if prefix_len <= 0:
        return None
    prefix = truncate_min_string(s, prefix_len) or ""
    pos = len(prefix)  # in code points
    units = _utf16_len(prefix)
    max_units = 2 * prefix_len
    while units <= max_units:
        if pos >= len(s):
            return s
        ch = s[pos]
        if ch == _UTF8_MAX:
            pos += 1
            units += 2
            continue
        if ch < _ASCII_MAX:
            return s[:pos] + _ASCII_MAX
        return s[:pos] + _UTF8_MAX
    return None


# --- writing stats from a parquet footer ---------------------------------------------------------


def _parquet_leaf_index(file_schema: pa.Schema) -> dict[tuple[str, ...], int]:
    """Map each struct-only path to its parquet leaf column index (lists/maps just advance it)."""
    index: dict[tuple[str, ...], int] = {}
    counter = 0

    def count_leaves(t: pa.DataType) -> int:
        t = _storage_type(t)
        if pa.types.is_struct(t):
            return sum(count_leaves(t.field(i).type) for i in range(t.num_fields))
        if pa.types.is_map(t):
            return count_leaves(t.key_type) + count_leaves(t.item_type)
        if (
            pa.types.is_list(t)
            or pa.types.is_large_list(t)
            or pa.types.is_fixed_size_list(t)
            or (hasattr(pa.types, "is_list_view") and (pa.types.is_list_view(t) or pa.types.is_large_list_view(t)))
        ):
            return count_leaves(t.value_type)
        return 1

    def walk(fields: Sequence[pa.Field], prefix: tuple[str, ...]) -> None:
        nonlocal counter
        for f in fields:
            t = _storage_type(f.type)
            if pa.types.is_struct(t):
                walk([t.field(i) for i in range(t.num_fields)], prefix + (f.name,))
            else:
                n = count_leaves(t)
                if n == 1 and not (pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t)):
                    index[prefix + (f.name,)] = counter
                counter += n

    walk(list(file_schema), ())
    return index


def _ts_unit_factor(t: pa.TimestampType) -> int:
    """Raw parquet/arrow ticks per microsecond (ns -> 1000) or the inverse as a negative number."""
    return {"s": -1_000_000, "ms": -1_000, "us": 1, "ns": 1_000}[t.unit]


def _raw_to_micros(raw: int, t: pa.TimestampType, *, round_up: bool) -> int:
    f = _ts_unit_factor(t)
    if f < 0:
        return raw * (-f)
    if f == 1:
        return raw
    return -((-raw) // f) if round_up else raw // f


_EPOCH_TS = _dt.datetime(1970, 1, 1)
# The range Spark and Delta hold a timestamp in (Python's too): 0001-01-01 to 9999-12-31T23:59:59.999999.
_MIN_TS_MICROS = (_dt.datetime.min - _EPOCH_TS) // _dt.timedelta(microseconds=1)
_MAX_TS_MICROS = (_dt.datetime.max - _EPOCH_TS) // _dt.timedelta(microseconds=1)


def _render_timestamp(micros: int, t: pa.TimestampType, *, is_max: bool) -> str | None:
    """A timestamp bound as Delta writes it (module docstring), or None when none can be written:
    a max rounded up past 9999-12-31T23:59:59.999 (a value in Delta's last millisecond) or a bound
    outside years 1-9999 has no text a reader could take; the stat is then left out, which every
    reader takes as "no bound" (a truncated max would be below the values, and a reader that does
    not widen it by Delta's millisecond would prune a matching file)."""
    if t.tz is None:
        if not _MIN_TS_MICROS <= micros <= _MAX_TS_MICROS:
            return None
        return (_EPOCH_TS + _dt.timedelta(microseconds=micros)).isoformat(timespec="microseconds")
    # Millisecond precision like Delta on Spark; rounding outwards keeps the bounds true bounds.
    millis = -((-micros) // 1000) if is_max else micros // 1000
    if not _MIN_TS_MICROS <= millis * 1000 <= _MAX_TS_MICROS:
        return None
    # isoformat, not strftime: `%Y` drops the leading zeros of years before 1000 (`1-01-01`)
    return (_EPOCH_TS + _dt.timedelta(milliseconds=millis)).isoformat(timespec="milliseconds") + "Z"


class _RawJson(str):
    """A value already rendered as a JSON token (decimals, so they keep every digit)."""


def _render_value(value: Any, t: pa.DataType, *, is_max: bool) -> Any:
    """Footer value -> JSON-ready value as Delta writes it, or None to leave the stat out."""
    if pa.types.is_integer(t):
        return int(value)
    if pa.types.is_floating(t):
        v = float(value)
        if math.isnan(v) or math.isinf(v):
            return None
        return v
    if pa.types.is_decimal(t):
        d = value if isinstance(value, _decimal.Decimal) else _decimal.Decimal(str(value))
        if not d.is_finite():
            return None
        return _RawJson(format(d, "f"))
    if pa.types.is_date(t):
        if isinstance(value, _dt.datetime):
            value = value.date()
        if isinstance(value, int):
            try:
                value = _EPOCH_DATE + _dt.timedelta(days=value)
            except OverflowError:  # outside years 1-9999: no text to write, so no bound
                return None
        return value.isoformat()
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or (hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t))
    ):
        s = value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)
        return truncate_max_string(s) if is_max else truncate_min_string(s)
    return None


def _merge(values: list[Any], is_max: bool) -> Any:
    return max(values) if is_max else min(values)


def collect_stats(
    metadata: pq.FileMetaData,
    schema: pa.Schema | None = None,
    *,
    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
    columns: Sequence[str] | None = None,
    partition_columns: Sequence[str] = (),
    nan_columns: Iterable[str] = (),
) -> dict[str, Any]:
    """The stats of one parquet file, from its footer, as a JSON-ready nested dict.

    `schema` is the table schema (its leaf order decides `num_indexed_cols`; defaults to the file's);
    `nan_columns` names float columns known to hold NaN (their max is left out, see module doc).
    """
    file_schema = metadata.schema.to_arrow_schema()
    table_schema = schema if schema is not None else file_schema
    leaves = stats_leaves(table_schema, num_indexed_cols=num_indexed_cols, columns=columns, partition_columns=partition_columns)
    leaf_index = _parquet_leaf_index(file_schema)
    file_types = {leaf.path: leaf.type for leaf in leaf_columns(file_schema)}
    nan_set = set(nan_columns)
    num_rows = int(metadata.num_rows)
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    row_groups = [metadata.row_group(i) for i in range(metadata.num_row_groups)]

    def put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
        node = target
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value

    for leaf in leaves:
        idx = leaf_index.get(leaf.path)
        t = file_types.get(leaf.path)
        if idx is None or t is None:
            continue
        eligible = is_skipping_eligible(t)
        null_total: int | None = 0
        lo: list[Any] = []
        hi: list[Any] = []
        minmax_ok = eligible
        for rg in row_groups:
            col = rg.column(idx)
            st = col.statistics
            if st is None or not st.has_null_count:
                null_total = None
                minmax_ok = False
                continue
            if null_total is not None:
                null_total += int(st.null_count)
            if not minmax_ok:
                continue
            if col.physical_type == "INT96":
                minmax_ok = False
                continue
            if st.has_min_max:
                if pa.types.is_timestamp(t):
                    lo.append(_raw_to_micros(int(st.min_raw), t, round_up=False))
                    hi.append(_raw_to_micros(int(st.max_raw), t, round_up=True))
                elif pa.types.is_decimal(t) and col.physical_type in ("INT32", "INT64"):
                    # Spark's writer stores a decimal of up to 18 digits as its unscaled INT32/INT64,
                    # whose statistics pyarrow cannot convert (ArrowNotImplementedError): decode them
                    lo.append(_decimal.Decimal(int(st.min_raw)).scaleb(-t.scale))
                    hi.append(_decimal.Decimal(int(st.max_raw)).scaleb(-t.scale))
                else:
                    lo.append(st.min)
                    hi.append(st.max)
            elif int(st.null_count) < int(rg.num_rows):
                minmax_ok = False  # values present but no min/max written (e.g. a too-long string)
        if null_total is not None:
            put(nulls, leaf.path, null_total)
        if not minmax_ok or not lo:
            continue
        if pa.types.is_floating(t):
            lo = [v for v in lo if not math.isnan(v)]
            hi = [v for v in hi if not math.isnan(v)]
            if not lo or not hi:
                continue
        low, high = _merge(lo, False), _merge(hi, True)
        if pa.types.is_timestamp(t):
            tlo, thi = _render_timestamp(low, t, is_max=False), _render_timestamp(high, t, is_max=True)
            if tlo is not None:
                put(mins, leaf.path, tlo)
            if thi is not None:
                put(maxs, leaf.path, thi)
            continue
        rlo = _render_value(low, t, is_max=False)
        rhi = _render_value(high, t, is_max=True)
        if rlo is not None:
            put(mins, leaf.path, rlo)
        if rhi is not None and not (pa.types.is_floating(t) and leaf.name in nan_set):
            put(maxs, leaf.path, rhi)
    return {"numRecords": num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


def _dump(obj: Any) -> str:
    if isinstance(obj, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_dump(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, _RawJson):
        return str(obj)
    if isinstance(obj, float):
        return repr(obj)
    return json.dumps(obj, ensure_ascii=False)


def stats_to_json(stats: Mapping[str, Any]) -> str:
    """Compact JSON (decimals keep every digit; non-ASCII written as UTF-8, like Spark)."""
    return _dump(dict(stats))


def file_stats_json(
    metadata: pq.FileMetaData,
    schema: pa.Schema | None = None,
    *,
    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
    columns: Sequence[str] | None = None,
    partition_columns: Sequence[str] = (),
    nan_columns: Iterable[str] = (),
) -> str:
    """`collect_stats` rendered as the `add.stats` string."""
    return stats_to_json(
        collect_stats(
            metadata,
            schema,
            num_indexed_cols=num_indexed_cols,
            columns=columns,
            partition_columns=partition_columns,
            nan_columns=nan_columns,
        )
    )


def _render_parsed(value: Any, t: pa.DataType, *, is_max: bool) -> Any:
    if pa.types.is_struct(t):
        out = {}
        for i in range(t.num_fields):
            f = t.field(i)
            rendered = _render_parsed(value.get(f.name), f.type, is_max=is_max) if value is not None else None
            if rendered is not None:
                out[f.name] = rendered
        return out or None
    if value is None:
        return None
    if pa.types.is_timestamp(t):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.UTC).replace(tzinfo=None)
        # Exact values, so exact microseconds; always with `Z`: a zoneless parquet timestamp here may be
        # Spark's INT96 of a UTC timestamp, and a reader that took zoneless text as local time could
        # prune wrongly, while `Z` on a timestamp_ntz bound at worst makes it unreadable (no pruning).
        return value.isoformat(timespec="microseconds") + "Z"  # not strftime: `%Y` of year 1 is `1`
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return str(value)  # already as the writer truncated it
    return _render_value(value, t, is_max=is_max)


def stats_json_from_parsed(parsed: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`add.stats_parsed` (a checkpoint written with `delta.checkpoint.writeStatsAsStruct=true`, and
    maybe without JSON stats) as `add.stats` text, null where a row has none.

    Only checkpoints that dropped the JSON stats need this, so it renders row by row in Python.
    """
    arr = parsed.combine_chunks() if isinstance(parsed, pa.ChunkedArray) else parsed
    t = arr.type
    out: list[str | None] = []
    for row in arr.to_pylist():
        if row is None:
            out.append(None)
            continue
        stats: dict[str, Any] = {}
        for i in range(t.num_fields):
            f = t.field(i)
            v = row.get(f.name)
            if v is None:
                continue
            if f.name in ("minValues", "maxValues") and pa.types.is_struct(f.type):
                rendered = _render_parsed(v, f.type, is_max=f.name == "maxValues")
            elif f.name == "nullCount" and pa.types.is_struct(f.type):
                rendered = _render_parsed(v, f.type, is_max=False)
            else:
                rendered = v if isinstance(v, (int, bool)) else None
            if rendered is not None:
                stats[f.name] = rendered
        out.append(stats_to_json(stats) if stats else None)
    return pa.array(out, pa.string())


def iter_leaf_arrays(batch: pa.RecordBatch | pa.Table, leaves: Iterable[LeafColumn]) -> Iterator[tuple[LeafColumn, Any]]:
    """(leaf, values) for struct-nested leaves of a batch; used to find NaN before writing."""
    for leaf in leaves:
        try:
            arr: Any = batch.column(leaf.path[0])
        except KeyError:
            continue
        for part in leaf.path[1:]:
            arr = pc.struct_field(arr, [arr.type.get_field_index(part)])
        yield leaf, arr
