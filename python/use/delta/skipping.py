"""Data skipping: which files of a snapshot may hold a row matching a predicate.

Input is a snapshot's `files` table and a `use.delta.predicates` predicate; output is one boolean per
file, True where the file may contain a matching row. Pruning is conservative by construction: a
file is dropped only when its stats (or partition values) prove that no row can match; a file with
no stats, or a predicate part that cannot be used (`Unknown`, a literal of an unusable type), keeps
the file. Everything is vectorized over the parsed stats with pyarrow.compute (one kernel call per
predicate leaf, whatever the number of files).

Care points, each because a real writer produces such stats:
- strings: Delta truncates long min/max values (the max gets a tie-breaker suffix, other writers may
  simply cut it), so the max is only trusted as "every value is <= max, or starts with max";
- timestamps: Delta on Spark writes stats with millisecond precision, so the max is widened by 1 ms
  (as Delta's own reader does);
- floats: parquet footers ignore NaN and Spark orders NaN above every number, so `!=` never prunes
  a float file and a NaN literal prunes nothing; a missing max (our writer's way of saying "has NaN")
  keeps the file;
- numbers of mixed types compare as Spark compares them (an int column against a double literal in
  double, against a decimal literal exactly, rounding the literal to the column's grid);
- partition columns compare exactly against the typed `partition_values` (a zone-less timestamp
  partition value is UTC, as every USE reader takes it: `typed_partition_values`).
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta.predicates import (
    And,
    Comparison,
    InList,
    IsNotNull,
    IsNull,
    Not,
    Or,
    Predicate,
    Unknown,
    columns_of,
)
from use.delta.stats import STRING_PREFIX_LENGTH, leaf_columns, resolve_path
from use.delta.stats_parse import (
    _convert,  # the one string -> typed value conversion
    parse_stats,
    stat_column,
)
from use.errors import InvalidArgumentError

if TYPE_CHECKING:
    from use.delta.columnmapping import ColumnMapping

__all__ = [
    "files_matching",
    "partition_columns_of",
    "partition_text_table",
    "snapshot_files_matching",
    "typed_partition_values",
    "utc_timestamp_texts",
]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_TIMESTAMP_MAX_SLACK_US = 1000  # Delta writes timestamp stats truncated to milliseconds
_MAX_INLIST_ITEMS = 256  # beyond this an IN list is pruned by its [min, max] range
_MAX_PREFIX_CHECK = 256  # longest string max for which "literal starts with max" is checked


@dataclass(frozen=True)
class _Bounds:
    """What is known about one column in every file (arrays are nullable: null = unknown)."""

    type: pa.DataType
    lo: Any
    hi: Any
    any_null: Any
    all_null: Any
    exact: bool  # partition values: not truncated, not rounded


def _storage(t: pa.DataType) -> pa.DataType:
    if isinstance(t, pa.ExtensionType):
        return t.storage_type
    if pa.types.is_dictionary(t):
        return t.value_type
    return t


def _field_type(schema: pa.Schema, path: tuple[str, ...]) -> pa.DataType:
    t: Any = _storage(schema.field(path[0]).type)
    for part in path[1:]:
        t = _storage(t.field(part).type)
    return t


def partition_columns_of(files: pa.Table) -> list[str]:
    """Partition column names, read from the first file's `partition_values` (all files share them)."""
    if "partition_values" not in files.column_names or files.num_rows == 0:
        return []
    first = files.column("partition_values").slice(0, 1).to_pylist()[0]
    if not first:
        return []
    if isinstance(first, dict):
        return list(first)
    return [k for k, _ in first]


def _all(n: int, value: bool) -> pa.BooleanArray:
    return pa.array(np.full(n, value, dtype=bool), type=pa.bool_())


def _chunked_to_array(a: Any) -> Any:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def partition_text_table(files: pa.Table, columns: Sequence[str], instants: Collection[str] = ()) -> pa.Table:
    """The partition values of every file (a snapshot's `files`) as the log stores them: one string
    column per partition column, null where a file's map has no value. `instants`, timestamp (with
    time zone) columns, are taken in one spelling per instant (`utc_timestamp_texts`), so that
    files of one partition compare equal however the log spells its value."""
    values = files.column("partition_values")
    texts = {c: pc.map_lookup(values, pa.scalar(c, pa.string()), "first") for c in columns}
    return pa.table({c: utc_timestamp_texts(t) if c in instants else t for c, t in texts.items()})


def typed_partition_values(files: pa.Table, column: str, type_: pa.DataType) -> pa.Array:
    """One partition column of every file as typed values (null partitions and bad text -> null).

    An empty string is null for every type, strings included: the protocol writes a null partition
    value as "" or null, so a string partition can never hold the empty string. A timestamp (with
    time zone) value may be written in Delta's UTC ISO form (`2024-03-10T09:30:00.000000Z`, what USE
    and newer Delta write) or without a zone (`2024-03-10 09:30:00`): a zone-less one is UTC, as USE
    wrote them before it wrote the ISO form and as delta-rs writes and reads them; every USE reader
    (the shim's scan, the Python scan, pruning, OPTIMIZE WHERE) takes it so, so they all agree.
    """
    raw = pc.map_lookup(files.column("partition_values"), pa.scalar(column), "first")
    return _typed_texts(_chunked_to_array(raw), type_)


def _typed_texts(raw: pa.Array, type_: pa.DataType) -> pa.Array:
    raw = pc.if_else(pc.equal(raw, ""), pa.scalar(None, pa.string()), raw)
    t = _storage(type_)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return raw.cast(t)
    if pa.types.is_timestamp(t):
        raw = pc.replace_substring(raw, " ", "T", max_replacements=1)
    return _chunked_to_array(_convert(raw, t))


def utc_timestamp_texts(raw: pa.Array | pa.ChunkedArray, *, hive: bool = False) -> pa.Array:
    """Timestamp (with time zone) partition values, as the log may spell them, in one spelling per
    instant: Delta's UTC ISO form `2024-03-10T09:30:00.000000Z` (what USE writes: no reader can take
    it in another zone), or with `hive` Hive's `2024-03-10 09:30:00[.ffffff]` in UTC (directory
    names, which Hive readers parse and which USE wrote before). Zone-less values are UTC (see
    `typed_partition_values`); null and "" stay as they are, and so does text that is no timestamp."""
    raw = _chunked_to_array(raw)
    typed = _typed_texts(raw, pa.timestamp("us", "UTC"))
    if hive:
        text = pc.replace_substring_regex(pc.strftime(typed, "%Y-%m-%d %H:%M:%S"), r"\.000000$", "")
    else:
        text = pc.strftime(typed, "%Y-%m-%dT%H:%M:%SZ")  # %S of microseconds: `00.000000`
    return pc.if_else(typed.is_null(), raw, text)


class _Evaluator:
    def __init__(
        self,
        files: pa.Table,
        predicate: Predicate,
        schema: pa.Schema,
        partition_columns: Sequence[str],
        parsed: pa.Table | None = None,
        column_mapping: ColumnMapping | None = None,
    ):
        self.n = files.num_rows
        self.files = files
        self.schema = schema
        self.mapping = column_mapping if column_mapping is not None and column_mapping.active else None
        # logical name (lower-cased) -> the key of `partition_values` (the physical name under column mapping)
        self.partitions = {p.lower(): (self.mapping.physical_name(p) if self.mapping else p) for p in partition_columns}
        self.paths: dict[str, tuple[str, ...]] = {}
        data_cols: list[str] = []
        for name in sorted(columns_of(predicate)):
            path = resolve_path(schema, name)
            if path is None:
                raise InvalidArgumentError(
                    f"predicate column {name!r} is not in the table schema "
                    f"(columns: {', '.join(leaf.name for leaf in leaf_columns(schema))})"
                )
            self.paths[name] = path
            if not (len(path) == 1 and path[0].lower() in self.partitions):
                data_cols.append(".".join(path))
        self.parsed: pa.Table | None = None
        if data_cols and parsed is not None:
            if parsed.num_rows != files.num_rows:
                raise InvalidArgumentError(
                    f"parsed stats have {parsed.num_rows} rows but files has {files.num_rows}; pass "
                    "parse_stats(files, schema) of the same files table"
                )
            self.parsed = parsed
        elif data_cols and "stats" in files.column_names:
            self.parsed = parse_stats(files, schema, data_cols, column_mapping=self.mapping)
        self._bounds: dict[tuple[str, ...], _Bounds | None] = {}

    def num_records(self) -> Any:
        if self.parsed is None or "num_records" not in self.parsed.column_names:
            return None
        return _chunked_to_array(self.parsed.column("num_records"))

    def bounds(self, name: str) -> _Bounds | None:
        path = self.paths[name]
        if path not in self._bounds:
            self._bounds[path] = self._make_bounds(path)
        return self._bounds[path]

    def _make_bounds(self, path: tuple[str, ...]) -> _Bounds | None:
        t = _field_type(self.schema, path)
        if len(path) == 1 and path[0].lower() in self.partitions:
            if "partition_values" not in self.files.column_names:
                return None
            key = self.partitions[path[0].lower()]
            values = typed_partition_values(self.files, key, t)
            isnull = values.is_null()
            return _Bounds(t, values, values, isnull, isnull, exact=True)
        if self.parsed is None:
            return None
        names = set(self.parsed.column_names)
        lo_name, hi_name, nc_name = (stat_column(k, path) for k in ("min", "max", "null_count"))
        lo = _chunked_to_array(self.parsed.column(lo_name)) if lo_name in names else None
        hi = _chunked_to_array(self.parsed.column(hi_name)) if hi_name in names else None
        any_null = all_null = None
        if nc_name in names:
            nc = _chunked_to_array(self.parsed.column(nc_name))
            any_null = pc.greater(nc, 0)
            all_null = pc.equal(nc, self.num_records())
        return _Bounds(t, lo, hi, any_null, all_null, exact=False)

    # --- evaluation ------------------------------------------------------------------------------

    def eval(self, p: Predicate) -> pa.BooleanArray:
        if isinstance(p, And):
            return pc.and_(self.eval(p.left), self.eval(p.right))
        if isinstance(p, Or):
            return pc.or_(self.eval(p.left), self.eval(p.right))
        if isinstance(p, Not):
            return self.eval(_negate(p.child))
        if isinstance(p, Unknown):
            return _all(self.n, True)
        if isinstance(p, IsNull):
            b = self.bounds(p.column)
            return _keep(b.any_null if b is not None else None, self.n)
        if isinstance(p, IsNotNull):
            b = self.bounds(p.column)
            return _keep(pc.invert(b.all_null) if b is not None and b.all_null is not None else None, self.n)
        if isinstance(p, Comparison):
            return self.compare(p.column, p.op, p.value)
        if isinstance(p, InList):
            return self.in_list(p)
        raise InvalidArgumentError(f"{p!r} is not a predicate of use.delta.predicates")

    def in_list(self, p: InList) -> pa.BooleanArray:
        values = [v for v in p.values if v is not None]
        if not values:
            return _all(self.n, False)
        if len(values) > _MAX_INLIST_ITEMS:
            try:
                lo, hi = min(values), max(values)
            except TypeError:
                return _all(self.n, True)
            return pc.and_(self.compare(p.column, ">=", lo), self.compare(p.column, "<=", hi))
        out = self.compare(p.column, "=", values[0])
        for v in values[1:]:
            out = pc.or_(out, self.compare(p.column, "=", v))
        return out

    def compare(self, column: str, op: str, value: Any) -> pa.BooleanArray:
        if value is None:
            raise InvalidArgumentError(f"comparison {column} {op} NULL never matches in SQL; use IsNull/IsNotNull for null tests")
        b = self.bounds(column)
        if b is None:
            return _all(self.n, True)
        keep = _compare(b, op, value, self.n)
        if b.all_null is not None:
            # A file holding only nulls for the column matches no comparison.
            keep = pc.and_(keep, _keep(pc.invert(b.all_null), self.n))
        return keep


def _keep(cond: Any, n: int) -> pa.BooleanArray:
    if cond is None:
        return _all(n, True)
    return _chunked_to_array(pc.fill_null(cond, True))


def _negate(p: Predicate) -> Predicate:
    """NOT pushed down (SQL WHERE semantics: a NULL result selects nothing either way)."""
    if isinstance(p, Comparison):
        return p.negated()
    if isinstance(p, IsNull):
        return IsNotNull(p.column)
    if isinstance(p, IsNotNull):
        return IsNull(p.column)
    if isinstance(p, And):
        return Or(_negate(p.left), _negate(p.right))
    if isinstance(p, Or):
        return And(_negate(p.left), _negate(p.right))
    if isinstance(p, Not):
        return p.child
    if isinstance(p, InList):
        if not p.values:
            return Unknown("NOT IN ()")
        if any(v is None for v in p.values) or len(p.values) > _MAX_INLIST_ITEMS:
            return Unknown(f"NOT IN on {p.column}")
        out: Predicate = Comparison(p.column, "!=", p.values[0])
        for v in p.values[1:]:
            out = And(out, Comparison(p.column, "!=", v))
        return out
    return Unknown(repr(p))


# --- comparisons in the column's domain ----------------------------------------------------------


@dataclass(frozen=True)
class _Prepared:
    lo: Any
    hi: Any
    lit: pa.Scalar
    op: str
    kind: str  # "ord" (exact order), "float", "string"
    ne_prunes: bool = True


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float, _decimal.Decimal))) and not isinstance(v, bool)


def _cast(a: Any, t: pa.DataType) -> Any:
    if a is None:
        return None
    try:
        return pc.cast(a, t) if a.type != t else a
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _grid(op: str, value: _decimal.Decimal, step: _decimal.Decimal) -> tuple[str, _decimal.Decimal] | bool:
    """Rewrite `x op value` for x on a grid of `step`: (op, grid value), or a constant outcome.
    Exact whatever the digits: under a context as precise as the value on that grid needs (Python's
    default of 28 digits cannot hold a DECIMAL(38,18) value such as 12345678901.5 at scale 18, and
    `quantize` then fails instead of rounding). `step` is a power of ten (1 or 1E-scale), whose
    `adjusted()` is its exponent."""
    digits = max(value.adjusted(), 0) + 1 - min(step.adjusted(), 0) + 1
    ctx = _decimal.Context(prec=max(digits, 1), Emax=_decimal.MAX_EMAX, Emin=_decimal.MIN_EMIN)
    floor = value.quantize(step, rounding=_decimal.ROUND_FLOOR, context=ctx)
    if floor == value:
        return op, value.quantize(step, context=ctx)
    ceil = value.quantize(step, rounding=_decimal.ROUND_CEILING, context=ctx)
    if op == "=":
        return False
    if op == "!=":
        return True
    if op in ("<", "<="):
        return "<=", floor
    return ">=", ceil


def _prepare(b: _Bounds, op: str, value: Any) -> _Prepared | bool | None:
    """The comparison in the column's domain; a bool where its outcome is the same for every file
    (keep every file that is not all null, or none); None where stats cannot prune it."""
    t = b.type
    if pa.types.is_integer(t):
        if isinstance(value, float):
            if value != value:
                return None
            return _Prepared(
                _cast(b.lo, pa.float64()), _cast(b.hi, pa.float64()), pa.scalar(value, pa.float64()), op, "float", ne_prunes=False
            )
        if isinstance(value, _decimal.Decimal):
            if not value.is_finite():
                return None
            g = _grid(op, value, _decimal.Decimal(1))
            if isinstance(g, bool):
                return g
            op, value = g[0], int(g[1])
        if not _is_int(value):
            return None
        if value > _INT64_MAX or value < _INT64_MIN:
            above: bool = value > _INT64_MAX
            return {"<": above, "<=": above, ">": not above, ">=": not above, "=": False, "!=": True}[op]
        return _Prepared(_cast(b.lo, pa.int64()), _cast(b.hi, pa.int64()), pa.scalar(value, pa.int64()), op, "ord")
    if pa.types.is_floating(t):
        if not _is_number(value):
            return None
        f = float(value)
        if f != f:
            return None
        return _Prepared(
            _cast(b.lo, pa.float64()), _cast(b.hi, pa.float64()), pa.scalar(f, pa.float64()), op, "float", ne_prunes=b.exact
        )
    if pa.types.is_decimal(t):
        if isinstance(value, float):
            if value != value:
                return None
            return _Prepared(
                _cast(b.lo, pa.float64()), _cast(b.hi, pa.float64()), pa.scalar(value, pa.float64()), op, "float", ne_prunes=False
            )
        if not (_is_int(value) or isinstance(value, _decimal.Decimal)):
            return None
        d = _decimal.Decimal(value)
        if not d.is_finite():
            return None
        g = _grid(op, d, _decimal.Decimal(1).scaleb(-t.scale))
        if isinstance(g, bool):
            return g
        op, d = g
        wide = pa.decimal128(38, t.scale)
        try:
            lit = pa.scalar(d, wide)
        except (pa.ArrowInvalid, pa.ArrowException, ValueError):
            return None
        return _Prepared(_cast(b.lo, wide), _cast(b.hi, wide), lit, op, "ord")
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if not isinstance(value, str):
            return None
        # A stat that may be truncated cannot say "all values equal this" for long literals.
        ne = b.exact or len(value.encode("utf-8")) < STRING_PREFIX_LENGTH
        return _Prepared(
            _cast(b.lo, pa.string()),
            _cast(b.hi, pa.string()),
            pa.scalar(value, pa.string()),
            op,
            "ord" if b.exact else "string",
            ne_prunes=ne,
        )
    if pa.types.is_date(t):
        if isinstance(value, _dt.datetime):
            return None
        if isinstance(value, str):
            try:
                value = _dt.date.fromisoformat(value)
            except ValueError:
                return None
        if not isinstance(value, _dt.date):
            return None
        days = (value - _dt.date(1970, 1, 1)).days
        lo = _cast(_cast(b.lo, pa.date32()), pa.int32())
        hi = _cast(_cast(b.hi, pa.date32()), pa.int32())
        return _Prepared(lo, hi, pa.scalar(days, pa.int32()), op, "ord")
    if pa.types.is_timestamp(t):
        if not isinstance(value, _dt.datetime):
            return None
        if value.tzinfo is not None and t.tz is None:
            return None
        # by subtraction, not astimezone: 9999-12-31 23:00 in a zone west of UTC is a valid instant
        # whose UTC datetime Python cannot hold (year 10000)
        epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC if value.tzinfo is not None else None)
        micros = (value - epoch) // _dt.timedelta(microseconds=1)
        us = pa.timestamp("us", t.tz)
        lo = _cast(_cast(b.lo, us), pa.int64())
        hi = _cast(_cast(b.hi, us), pa.int64())
        if hi is not None and not b.exact:
            hi = pc.add(hi, _TIMESTAMP_MAX_SLACK_US)
        return _Prepared(lo, hi, pa.scalar(micros, pa.int64()), op, "ord", ne_prunes=b.exact)
    if pa.types.is_boolean(t):
        if not isinstance(value, bool):
            return None
        return _Prepared(b.lo, b.hi, pa.scalar(value, pa.bool_()), op, "ord")
    return None


def _starts_with_max(hi: Any, lit: str) -> Any:
    """Per file: does the literal start with the (possibly truncated) string max?"""
    lengths = pc.utf8_length(hi)
    prefixes = pa.array([lit[:i] for i in range(min(len(lit), _MAX_PREFIX_CHECK) + 1)], pa.string())
    usable = pc.less_equal(lengths, len(prefixes) - 1)
    idx = pc.if_else(usable, lengths, 0)
    candidate = prefixes.take(pc.fill_null(idx, 0))
    return pc.and_(usable, pc.equal(candidate, hi))


def _compare(b: _Bounds, op: str, value: Any, n: int) -> pa.BooleanArray:
    prep = _prepare(b, op, value)
    if prep is None:
        return _all(n, True)
    if isinstance(prep, bool):
        return _all(n, prep)
    lo, hi, lit, op = prep.lo, prep.hi, prep.lit, prep.op

    def lower_ok(strict: bool) -> pa.BooleanArray:  # some value <(=) lit is possible
        if lo is None:
            return _all(n, True)
        return _keep(pc.less(lo, lit) if strict else pc.less_equal(lo, lit), n)

    def upper_ok(strict: bool) -> pa.BooleanArray:  # some value >(=) lit is possible
        if hi is None:
            return _all(n, True)
        cond = pc.greater(hi, lit) if strict else pc.greater_equal(hi, lit)
        if prep.kind == "string":
            cond = pc.or_(cond, _starts_with_max(hi, lit.as_py()))
        return _keep(cond, n)

    if op == "=":
        return pc.and_(lower_ok(False), upper_ok(False))
    if op == "<":
        return lower_ok(True)
    if op == "<=":
        return lower_ok(False)
    if op == ">":
        return upper_ok(True)
    if op == ">=":
        return upper_ok(False)
    if op == "!=":
        if not prep.ne_prunes or lo is None or hi is None:
            return _all(n, True)
        same = pc.and_(pc.equal(lo, lit), pc.equal(hi, lit))
        return _keep(pc.invert(same), n)
    raise InvalidArgumentError(f"comparison operator {op!r} is not one of =, !=, <, <=, >, >=")


def snapshot_files_matching(snapshot: Any, files: pa.Table, predicate: Predicate) -> pa.BooleanArray:
    """`files_matching` for rows of a snapshot's files (or files added to it), with the snapshot's
    schema; under active column mapping the stats and partition values are keyed by physical names.
    `snapshot`: a `Snapshot` or a `use.qbeast.snapshot.QbeastSnapshot`."""
    mapping = getattr(snapshot, "column_mapping", None)
    if mapping is not None and mapping.active:
        return files_matching(
            files, predicate, snapshot.schema, partition_columns=snapshot.partition_columns, column_mapping=mapping
        )
    return files_matching(files, predicate, snapshot.schema)


def files_matching(
    files: pa.Table,
    predicate: Predicate,
    schema: pa.Schema,
    *,
    partition_columns: Sequence[str] | None = None,
    parsed_stats: pa.Table | None = None,
    column_mapping: ColumnMapping | None = None,
) -> pa.BooleanArray:
    """One boolean per row of `files`: True where the file may hold a row matching `predicate`.

    `schema` is the table schema (partition columns included). Partition columns are taken from the
    files' `partition_values` keys unless given. Files without stats are kept; files whose stats say
    they have no rows are dropped. A predicate naming a column missing from the schema is an error.
    `parsed_stats` (the output of `parse_stats(files, schema)`) saves re-parsing the stats JSON when
    several predicates are evaluated over one snapshot; columns it lacks count as "no stats".
    With an active `column_mapping` (`Snapshot.column_mapping`), predicates name logical columns
    while stats and partition values are read by physical names; `partition_columns` must then be
    given (the logical names of `metaData.partitionColumns`), since the files' keys are physical.
    """
    if not isinstance(files, pa.Table):
        raise InvalidArgumentError(f"files must be a pyarrow.Table (a snapshot's files), not {type(files).__name__}")
    n = files.num_rows
    if n == 0:
        return pa.array([], pa.bool_())
    if partition_columns is not None:
        parts = list(partition_columns)
    elif column_mapping is not None and column_mapping.active:
        raise InvalidArgumentError("files_matching with an active column mapping needs partition_columns (logical names)")
    else:
        parts = partition_columns_of(files)
    ev = _Evaluator(files, predicate, schema, parts, parsed_stats, column_mapping)
    keep = ev.eval(predicate)
    nr = ev.num_records()
    if nr is not None:
        keep = pc.and_(keep, _keep(pc.not_equal(nr, 0), n))
    return _chunked_to_array(keep)
