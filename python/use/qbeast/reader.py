"""Reading a Qbeast (or plain Delta) table on Spark with file pruning (qbeast-format spec §2.4, §5).

The driver does all the planning on metadata: the filter is translated into the typed predicate
language (`use.delta.predicates`), Delta min/max statistics prune every file, and for indexed
files the OTree prunes by the filter's cube space and the sample's weight range (`use.qbeast.query`).
Only the surviving files reach Spark's own parquet reader; the filter and, for a sample, the
row-level weight filter `hash(indexed columns) < Weight(f)` are then applied to their rows, so a
pruned read returns exactly what the same filter over a full read returns.

The filter is translated from the *analyzed* Catalyst expression (resolved against the table schema)
rather than the raw parsed one: the analyzer has already attached types and inserted the casts
Spark itself will evaluate (`d >= '2024-01-01'` on a date column becomes a date literal), so the
literals we prune with are the ones Spark compares with. Anything we do not understand becomes
`Unknown`, which prunes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import decimal as _decimal
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import ArrayType, MapType, StructField, StructType

from use.delta import DeltaLog
from use.delta.datafile import timestamp_partition_columns
from use.delta.deletion_vectors import deleted_rows
from use.delta.predicates import (
    And,
    Comparison,
    ComparisonOp,
    InList,
    IsNotNull,
    IsNull,
    Not,
    Or,
    Predicate,
    Unknown,
)
from use.delta.skipping import utc_timestamp_texts
from use.delta.storage import absolute_path
from use.errors import InvalidArgumentError, NotAQbeastTableError, TableNotFoundError
from use.qbeast.query import select_files
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.weight import MIN_WEIGHT, weight_from_fraction
from use.runtime.conf import int_conf, session_conf
from use.runtime.deleted_rows import without_deleted_rows
from use.runtime.query_errors import quiet_query_errors
from use.runtime.shim import shim_loaded

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


FilterArg = Union["Column", str, None]

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_TS = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_EPOCH_NTZ = _dt.datetime(1970, 1, 1)
# Casts of a column that keep its order and every value (so a bound on the cast is a bound on the column).
_WIDENING: dict[str, frozenset[str]] = {
    "tinyint": frozenset({"tinyint", "smallint", "int", "bigint", "double", "float"}),
    "smallint": frozenset({"smallint", "int", "bigint", "double", "float"}),
    "int": frozenset({"int", "bigint", "double"}),
    "bigint": frozenset({"bigint"}),
    "float": frozenset({"float", "double"}),
    "double": frozenset({"double"}),
    "date": frozenset({"date"}),
    "string": frozenset({"string"}),
}
_COMPARISONS: dict[str, ComparisonOp] = {
    "EqualTo": "=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
}


# --- arguments and snapshots ------------------------------------------------------------------


def check_sample(sample: Any) -> float | None:
    """The sample fraction as a float in [0, 1], or None; anything else is a typed error.

    As in qbeast-spark (whose `SampleRule` turns `sample(f)` into `hash < Weight(f)`), 0 is a valid
    fraction that selects nothing, and 1.0 selects every row but those whose hash is exactly
    `Weight(1.0)` = 2^31-1."""
    if sample is None:
        return None
    if isinstance(sample, bool) or not isinstance(sample, (int, float)):
        raise InvalidArgumentError(f"sample must be a fraction in [0, 1] (e.g. 0.1), got {sample!r}")
    f = float(sample)
    if not (0.0 <= f <= 1.0):
        raise InvalidArgumentError(f"sample must be a fraction in [0, 1] (e.g. 0.1), got {sample!r}")
    return f


def load_snapshot(path: str) -> QbeastSnapshot:
    """The latest snapshot of the table at `path`, seen as Qbeast (which may have no revisions)."""
    if not isinstance(path, str) or not path:
        raise InvalidArgumentError(f"a table path must be a non-empty string, got {path!r}")
    log = DeltaLog.for_path(path)
    if not log.exists():
        what = "does not exist" if not os.path.exists(path) else "has no Delta log (_delta_log with commits)"
        raise TableNotFoundError(
            f"no table at {path!r}: the path {what}; write one with QbeastTable.write(df, path, columns_to_index) "
            f"or convert an existing parquet/Delta table with QbeastTable.convert(...)"
        )
    return QbeastSnapshot.from_delta(log.snapshot())


def spark_schema(qsnap: QbeastSnapshot) -> StructType:
    return from_arrow_schema(qsnap.schema, prefer_timestamp_ntz=True)


def indexed_columns(qsnap: QbeastSnapshot) -> list[str]:
    """The columns a sample hashes: the latest revision's (§2.4), staging included for converted tables."""
    if not qsnap.revisions:
        raise NotAQbeastTableError(
            f"the table at {qsnap.table_root!r} is a Delta table without Qbeast metadata, so it has no indexed "
            f"columns to sample on; convert it with QbeastTable.convert(spark, path, columns_to_index)"
        )
    latest = max(qsnap.revisions)
    return list(qsnap.revisions[latest].columns)


# --- Catalyst expression -> typed predicate ----------------------------------------------------


def _seq(jseq: Any) -> list[Any]:
    return [jseq.apply(i) for i in range(jseq.size())]


class _NoValue(Exception):
    """The expression is not a constant we can bring to Python."""


def _python_value(value: Any, type_name: str) -> Any:
    if value is None:
        return None
    if type_name in ("int", "bigint", "smallint", "tinyint"):
        return int(value)
    if type_name in ("double", "float"):
        return float(value)
    if type_name == "boolean":
        return bool(value)
    if type_name == "string":
        return str(value.toString())
    try:
        # Python's datetime ends where Spark's range does (years 1-9999, in UTC): a literal past it
        # (`timestamp'9999-12-31 23:00:00'` in a zone west of UTC is in year 10000 UTC) has no
        # Python value, so that predicate part prunes nothing (Spark still evaluates it exactly)
        if type_name == "date":
            return _EPOCH_DATE + _dt.timedelta(days=int(value))
        if type_name == "timestamp":
            return _EPOCH_TS + _dt.timedelta(microseconds=int(value))
        if type_name == "timestamp_ntz":
            return _EPOCH_NTZ + _dt.timedelta(microseconds=int(value))
    except OverflowError:
        raise _NoValue(f"{type_name} {int(value)} is outside years 1-9999") from None
    if type_name.startswith("decimal"):
        big = value.toJavaBigDecimal()  # py4j hands java.math.BigDecimal over as decimal.Decimal
        return big if isinstance(big, _decimal.Decimal) else _decimal.Decimal(str(big.toPlainString()))
    if type_name == "binary":
        return bytes(value)
    raise _NoValue(type_name)


def _constant(expr: Any) -> Any:
    if not expr.foldable():
        raise _NoValue(expr.toString())
    try:
        value = expr.eval(None)
    except Exception as exc:  # e.g. a cast that fails at run time: Spark will raise, we just do not prune
        raise _NoValue(expr.toString()) from exc
    return _python_value(value, expr.dataType().simpleString())


def _column(expr: Any, refs: Mapping[int, Any] | None = None) -> str | None:
    name = expr.getClass().getSimpleName()
    if name == "CommonExpressionRef" and refs:
        target = refs.get(int(expr.id().id()))
        return None if target is None else _column(target, refs)
    if name == "AttributeReference":
        return str(expr.name())
    if name == "Cast":
        child = expr.child()
        if child.getClass().getSimpleName() == "AttributeReference":
            source = child.dataType().simpleString()
            target = expr.dataType().simpleString()
            if target in _WIDENING.get(source, frozenset()):
                return str(child.name())
    return None


def expression_to_predicate(expr: Any, refs: Mapping[int, Any] | None = None) -> Predicate:
    """Translate a resolved Catalyst expression (a py4j object) into the typed predicate language.

    `x BETWEEN a AND b` stays a `Between` after analysis; its replacement, which Spark evaluates and
    whose bounds the analyzer has cast, is `x >= a AND x <= b` over a common-expression reference
    to `x` (a `With`): `refs` maps the ids of such references to the expressions they stand for.
    """
    name = expr.getClass().getSimpleName()
    try:
        if name == "Between":
            return expression_to_predicate(expr.replacement(), refs)
        if name == "With":
            defs = {int(d.id().id()): d.child() for d in _seq(expr.defs())}
            return expression_to_predicate(expr.child(), {**(refs or {}), **defs})
        if name == "And":
            return And(expression_to_predicate(expr.left(), refs), expression_to_predicate(expr.right(), refs))
        if name == "Or":
            return Or(expression_to_predicate(expr.left(), refs), expression_to_predicate(expr.right(), refs))
        if name == "Not":
            return Not(expression_to_predicate(expr.child(), refs))
        if name in ("IsNull", "IsNotNull"):
            col = _column(expr.child(), refs)
            if col is not None:
                return IsNull(col) if name == "IsNull" else IsNotNull(col)
        if name in _COMPARISONS or name == "EqualNullSafe":
            op: ComparisonOp = _COMPARISONS.get(name, "=")
            left, right = expr.left(), expr.right()
            col, other, flipped = _column(left, refs), right, False
            if col is None:
                col, other, flipped = _column(right, refs), left, True
            if col is not None:
                value = _constant(other)
                if value is None:
                    return IsNull(col) if name == "EqualNullSafe" else Unknown(str(expr.toString()))
                return Comparison.flipped(value, op, col) if flipped else Comparison(col, op, value)
        if name == "In":
            col = _column(expr.value(), refs)
            if col is not None:
                values = tuple(v for v in (_constant(e) for e in _seq(expr.list())) if v is not None)
                return InList(col, values)
    except _NoValue:
        pass
    return Unknown(str(expr.toString()))


def filter_column(filter: FilterArg) -> Column | None:
    """The filter as a pyspark Column (SQL strings are parsed by Spark)."""
    if filter is None:
        return None
    if isinstance(filter, str):
        if not filter.strip():
            raise InvalidArgumentError("filter must be a non-empty SQL boolean expression or a pyspark Column")

        try:
            with quiet_query_errors():
                return F.expr(filter)
        except Exception as exc:  # noqa: BLE001 - Spark's parse error, of whichever class: the typed error below
            raise InvalidArgumentError(f"filter {filter!r} is not a valid SQL expression: {_first_line(exc)}") from None
    if isinstance(filter, Column):
        return filter
    raise InvalidArgumentError(f"filter must be a SQL string or a pyspark Column, got {type(filter).__name__}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def translate_filter(spark: SparkSession, schema: StructType, filter: FilterArg) -> Predicate | None:
    """Resolve a filter against the table schema and translate it; a bad filter is a typed error."""
    col = filter_column(filter)
    if col is None:
        return None

    empty = spark.createDataFrame([], schema)
    try:
        with quiet_query_errors():  # the typed error below is the whole report
            analyzed = empty.filter(col)._jdf.queryExecution().analyzed()
    except Exception as exc:  # noqa: BLE001 - Spark's analysis error, of whichever class: the typed error below
        raise InvalidArgumentError(
            f"filter {filter!r} cannot be applied to the table (columns: {', '.join(schema.fieldNames())}): {_first_line(exc)}"
        ) from None
    if analyzed.getClass().getSimpleName() != "Filter":
        return None
    return expression_to_predicate(analyzed.condition())


# --- planning ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadPlan:
    """What a read will scan: the surviving files and the filters Spark applies to their rows."""

    files: pa.Table  # the selected rows of `QbeastSnapshot.files`
    paths: tuple[str, ...]  # absolute local paths of `files`
    predicate: Predicate | None
    weight_range: tuple[int, int] | None
    indexed_columns: tuple[str, ...]  # hashed for the sample filter (empty without a sample)
    total_files: int
    total_bytes: int

    @property
    def num_files(self) -> int:
        return int(self.files.num_rows)

    @property
    def bytes(self) -> int:
        return int(pc.sum(self.files.column("size")).as_py() or 0) if self.files.num_rows else 0


def plan_read(
    spark: SparkSession | None,
    qsnap: QbeastSnapshot,
    sample: float | None = None,
    filter: FilterArg = None,
    predicate: Predicate | None = None,
) -> ReadPlan:
    """Prune the table's files for a filter and sample. `predicate` may be given instead of
    translating `filter` (then `spark` may be None)."""
    fraction = check_sample(sample)
    if predicate is None and filter is not None:
        if spark is None:
            raise InvalidArgumentError("translating a filter needs a SparkSession")
        predicate = translate_filter(spark, spark_schema(qsnap), filter)
    weight_range: tuple[int, int] | None = None
    columns: tuple[str, ...] = ()
    if fraction is not None:
        columns = tuple(indexed_columns(qsnap))
        weight_range = (MIN_WEIGHT, int(weight_from_fraction(fraction)))
    mask = select_files(qsnap, predicate, weight_range)
    files: pa.Table = qsnap.files
    selected = files.filter(mask)
    paths = tuple(absolute_path(qsnap.table_root, p) for p in selected.column("path").to_pylist())
    sizes = files.column("size").to_numpy() if files.num_rows else np.zeros(0)
    return ReadPlan(
        files=selected,
        paths=paths,
        predicate=predicate,
        weight_range=weight_range,
        indexed_columns=columns,
        total_files=files.num_rows,
        total_bytes=int(sizes.sum()),
    )


# --- the read ---------------------------------------------------------------------------------


def _glob_escape(path: str) -> str:
    """Spark globs its input paths; escape glob characters so a file name is taken literally."""
    out = []
    for ch in path:
        if ch in "\\[]{}*?":
            out.append("\\")
        out.append(ch)
    return "".join(out)


FIELD_ID_READ_CONF = "spark.sql.parquet.fieldId.read.enabled"
_SPARK_FIELD_ID_KEY = "parquet.field.id"


def _with_field_ids(spark_type: Any, arrow_type: pa.DataType) -> Any:
    """`spark_type` (converted from `arrow_type`) with each struct field's parquet field id from the
    Arrow field metadata in Spark's metadata key, so Spark's reader matches columns by id."""
    if isinstance(spark_type, StructType):
        fields = []
        for sf, af in zip(spark_type.fields, arrow_type, strict=False):
            meta = dict(sf.metadata or {})
            raw = (af.metadata or {}).get(b"PARQUET:field_id")
            if raw is not None:
                meta[_SPARK_FIELD_ID_KEY] = int(raw)
            fields.append(StructField(sf.name, _with_field_ids(sf.dataType, af.type), sf.nullable, meta))
        return StructType(fields)
    if isinstance(spark_type, ArrayType):
        return ArrayType(_with_field_ids(spark_type.elementType, arrow_type.value_type), spark_type.containsNull)
    if isinstance(spark_type, MapType):
        return MapType(
            _with_field_ids(spark_type.keyType, arrow_type.key_type),
            _with_field_ids(spark_type.valueType, arrow_type.item_type),
            spark_type.valueContainsNull,
        )
    return spark_type


def _col(name: str) -> Column:
    """A column by its exact name (dots, spaces and backticks taken literally)."""
    return F.col("`" + name.replace("`", "``") + "`")


def _stored_schema(spark: SparkSession, qsnap: QbeastSnapshot) -> tuple[StructType, dict[str, str]]:
    """The Spark schema to read the data files with, and logical name -> stored (physical) name.

    Without column mapping both are the table's own names. With it, files hold physical names (mode
    `name`), or are matched by parquet field id (mode `id`: Spark does that when the read schema
    carries `parquet.field.id` and `spark.sql.parquet.fieldId.read.enabled` is on, which a read of
    such a table turns on; Delta writers write the physical names too, and those are what is
    requested).
    """
    logical = spark_schema(qsnap)
    mapping = qsnap.column_mapping
    if mapping is None or not mapping.active:
        return logical, {n: n for n in logical.names}
    stored = stored_schema(mapping)
    if mapping.mode == "id" and str(spark.conf.get(FIELD_ID_READ_CONF, "false")).lower() != "true":
        spark.conf.set(FIELD_ID_READ_CONF, "true")
    return stored, dict(zip(logical.names, stored.names, strict=False))


def stored_schema(mapping: Any) -> StructType:
    """The Spark schema a column-mapped table's files are read with (`_stored_schema`): the
    physical names, in the logical schema's order, with parquet field ids in mode `id`; the SQL
    scans (`use.sql.tables.table_json`) read with it too."""
    physical_arrow = mapping.physical_schema
    stored = from_arrow_schema(physical_arrow, prefer_timestamp_ntz=True)
    return _with_field_ids(stored, physical_arrow) if mapping.mode == "id" else stored


_LISTING_THRESHOLD_CONF = "spark.sql.sources.parallelPartitionDiscovery.threshold"


def _listed_on_driver(spark: SparkSession, num_paths: int) -> Any:
    """The scan's files looked up on the driver, not by a Spark job.

    Spark lists the paths of a file source eagerly; past 32 of them
    (`spark.sql.sources.parallelPartitionDiscovery.threshold`) it runs a job with one task per path
    (up to 10,000) to do it. The paths here are files the log already names, on a local file system
    (`use.delta.storage`): a status lookup each. Measured for 100 files, the job took 0.35-0.7 s,
    the driver 0.03-0.1 s, which was a third of a small merge task."""
    if num_paths <= int_conf(spark, _LISTING_THRESHOLD_CONF, 32):
        return contextlib.nullcontext()
    return session_conf(spark, {_LISTING_THRESHOLD_CONF: str(num_paths)})


#: the shim's parquet format: Spark's reader without row-group filters on float/double columns
_PARQUET_FORMAT = "use.sql.UseParquetFormat"


def _parquet_format(spark: SparkSession) -> str:
    """The format the data files are read with: the shim's when the session has it, since Spark's
    own skips row groups on float/double filters by footers that leave NaN and -0.0 out of their
    reckoning and so drops rows (`UseParquetFormat` in the shim says how). A session without the
    shim (built outside `use.session`) reads with Spark's format."""
    return _PARQUET_FORMAT if shim_loaded(spark, _PARQUET_FORMAT) else "parquet"


def scan(spark: SparkSession, qsnap: QbeastSnapshot, files: pa.Table) -> DataFrame:
    """Spark's parquet reader over exactly these files (rows of `qsnap.files`), with the table schema.

    Partition columns are not stored in the data files: their values come from the log's
    `partitionValues` (as every Delta reader must take them; directory names are only a
    convention), added as typed literals to the scan of each partition's files. Under column
    mapping the files are read by their physical names (or field ids) and the columns come out
    under the logical names (nested struct fields too). Rows that deletion vectors delete are dropped
    (`use.runtime.deleted_rows`); a damaged vector raises CorruptDeletionVectorError before any read.
    """
    schema = spark_schema(qsnap)
    if not files.num_rows:
        return spark.createDataFrame([], schema)
    deleted = deleted_rows(qsnap.table_root, files, qsnap.table_root)

    def load(group: list[str]) -> DataFrame:
        df = spark.read.schema(data_schema).format(fmt).load(group)
        return without_deleted_rows(spark, df, deleted, qsnap.table_root)

    stored, names = _stored_schema(spark, qsnap)
    paths = [_glob_escape(absolute_path(qsnap.table_root, p)) for p in files.column("path").to_pylist()]
    parts = set(qsnap.partition_columns)
    data_fields = [(f, stored[names[f.name]]) for f in schema.fields if f.name not in parts]

    def logical(stored_field: Any, f: Any) -> Column:
        col = _col(stored_field.name)
        # A struct read under physical names is renamed by a cast (Spark casts structs by position).
        return (col.cast(f.dataType) if stored_field.dataType != f.dataType else col).alias(f.name)

    data_schema = StructType([sf for _, sf in data_fields])
    fmt = _parquet_format(spark)  # one lookup of the shim's class per scan, not per partition
    identity = all(sf.name == f.name and sf.dataType == f.dataType for f, sf in data_fields)
    if not parts:
        with _listed_on_driver(spark, len(paths)):
            df = load(paths)
        return df if identity else df.select(*[logical(sf, f) for f, sf in data_fields])
    keys = qsnap.partition_value_keys
    instants = timestamp_partition_columns(qsnap.schema, qsnap.partition_columns)
    by_partition: dict[tuple[str | None, ...], list[str]] = {}
    for path, values in zip(paths, files.column("partition_values").to_pylist(), strict=False):
        found = dict(values or ())
        key = tuple(found.get(k) or None for k in keys)  # "" is null, as in Delta
        by_partition.setdefault(key, []).append(path)
    if instants:
        # a timestamp's text with its zone, so the cast below takes it as UTC when the log has none
        # (as every USE reader does: `use.delta.skipping.typed_partition_values`), not in the session's zone
        at = [i for i, c in enumerate(qsnap.partition_columns) if c in instants]
        texts = {i: utc_timestamp_texts(pa.array([k[i] for k in by_partition], pa.string())).to_pylist() for i in at}
        merged: dict[tuple[str | None, ...], list[str]] = {}
        for j, (key, group) in enumerate(by_partition.items()):  # one instant may be spelled both ways
            merged.setdefault(tuple(texts[i][j] if i in texts else v for i, v in enumerate(key)), []).extend(group)
        by_partition = merged
    with _listed_on_driver(spark, max(len(g) for g in by_partition.values())):
        frames = [
            load(group)
            .select(
                *[logical(sf, f) for f, sf in data_fields],
                *[F.lit(v).cast(schema[c].dataType).alias(c) for c, v in zip(qsnap.partition_columns, key, strict=False)],
            )
            .select(*[_col(n) for n in schema.names])
            for key, group in by_partition.items()
        ]
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


def apply_filters(df: DataFrame, plan: ReadPlan, filter: FilterArg) -> DataFrame:
    col = filter_column(filter)
    if col is not None:
        df = df.filter(col)
    if plan.weight_range is not None:
        lo, hi = plan.weight_range
        weight = F.hash(*[F.col(c) for c in plan.indexed_columns])
        df = df.filter(weight < F.lit(hi)) if lo <= MIN_WEIGHT else df.filter((weight >= F.lit(lo)) & (weight < F.lit(hi)))
    return df


def read(
    spark: SparkSession,
    table: str | QbeastSnapshot,
    sample: float | None = None,
    filter: FilterArg = None,
) -> DataFrame:
    """Read a table, pruning files by Delta stats, cube space and sample weight range.

    `sample=f` returns exactly the rows with `hash(indexed columns) < Weight(f)` (qbeast's
    deterministic sample, as qbeast-spark's `df.sample(f)`: `f=0` returns nothing, `f=1.0` every
    row but those whose hash is 2^31-1). `filter` is a SQL string or a pyspark Column.
    """
    check_sample(sample)
    qsnap = load_snapshot(table) if isinstance(table, str) else table
    plan = plan_read(spark, qsnap, sample=sample, filter=filter)
    return apply_filters(scan(spark, qsnap, plan.files), plan, filter)
