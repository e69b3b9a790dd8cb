"""`CALL use_catalog.system.<name>(...)` and the manual trigger: the Python side of the shim's
`UseProcedures`.

The shim knows no procedure by itself: it asks `describe_procedures` once for every procedure's
name, description and parameters (name, Spark SQL type, default as a SQL expression), declares
them to Spark, and hands each CALL's arguments (positional or named: Spark fills in the defaults)
to `call_procedure` as Spark gives them: one Arrow row, each value in the type it was given in
(Spark casts nothing), read into the parameter's type once, here (`typed_arguments`). A parameter
marked `table` is resolved by the shim as Spark resolves names (current catalog and database), or
taken as a path; it arrives here as a `TableRef`. The result is an Arrow table in the procedure's
output schema, sent back as an Arrow IPC stream that the shim turns into rows with Spark's own
Arrow converters and serves as a `LocalScan`. Each procedure is the code the Python API and the CLI
run (an `OptimizeRequest` run by `use.optimize.loop.optimize_path`, `use.delta.vacuum.vacuum`,
`use.qbeast.convert`, `use.delta.convert`), so the three surfaces cannot drift apart.

A procedure runs while Spark analyses the CALL, on the driver: a long optimize blocks the
statement until it ends, and its Spark jobs carry a job group and a description per iteration
("CALL use_catalog.system.optimize(<table>): compact 12 files of ...") for the Spark UI.

The manual trigger (`ALTER TABLE use_catalog.<catalog>.<db>.<t> SET TBLPROPERTIES
('use.optimization.type'=..., ...)`, the seeds' "Manual Trigger") runs one optimization with those
settings and changes no property. When an optimization service runs in this driver
(`use.service.active.current()`), the request is handed to it (it ignores it while a run of the
table is in progress or when the table is continuously optimized, and shows why in its status);
with no service it runs here, in the calling statement, unless the table has continuous
optimization configured (ignored, with a log line saying why).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from use.delta.convert import convert_to_delta
from use.delta.log_cache import shared_log
from use.delta.manifest import generate_table
from use.delta.restore import restore
from use.delta.vacuum import vacuum
from use.errors import SQL, ConfigError, InvalidArgumentError, TableNotFoundError
from use.optimize.config import OptimizationConfig, is_continuous
from use.optimize.config_values import BadValue, parse_bool, parse_float_text, parse_int_text
from use.optimize.keys import PREFIX as OPT_PREFIX
from use.optimize.loop import optimize_path
from use.optimize.loop_core import session_defaults
from use.optimize.plan import Plan
from use.optimize.request import OptimizeRequest
from use.optimize.task_metrics import ITERATION_METRICS_SCHEMA
from use.qbeast.convert import convert_to_qbeast
from use.service import active
from use.service.registry import CREATED, TableEvent
from use.sql.protocol import (
    CallProcedureReply,
    CallProcedureRequest,
    ManualTriggerReply,
    ManualTriggerRequest,
    ProcedureParameter,
    ProcedureSpec,
    ProceduresReply,
    ProceduresRequest,
    Registration,
    TableRef,
    arrow_stream,
    read_arrow_stream,
)
from use.sql.sessions import calling_session
from use.sql.tables import PROVIDERS, spark_schema_to_arrow

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from use.optimize.loop_core import OptimizeResult

__all__ = ["PROCEDURES", "Procedure", "call_procedure", "describe_procedures", "manual_trigger"]

_log = logging.getLogger(__name__)

#: How users name the procedures (messages, job descriptions).
PREFIX = "use_catalog.system."


@dataclass(frozen=True)
class Procedure:
    """A procedure: `run(spark, table, args)` gets the resolved table and the arguments by name
    (typed by their parameters), and returns the result rows, in `output` (a schema, or the schema
    for the call's arguments)."""

    name: str
    description: str
    parameters: tuple[ProcedureParameter, ...]
    run: Callable[[SparkSession, TableRef, Mapping[str, Any]], pa.Table]
    output: pa.Schema | Callable[[Mapping[str, Any]], pa.Schema]
    #: What a catalog table of parquet files becomes (its registration's provider, which the shim
    #: changes after the call): the converting procedures take such tables; None for the others.
    converts_to: str | None = None

    def spec(self) -> ProcedureSpec:
        return ProcedureSpec(self.name, self.description, self.parameters)

    def output_schema(self, args: Mapping[str, Any]) -> pa.Schema:
        return self.output if isinstance(self.output, pa.Schema) else self.output(args)


def _table_param(what: str) -> ProcedureParameter:
    return ProcedureParameter(
        "table", "string", None,
        f"the table to {what}: a name (table, db.table or catalog.db.table, resolved as Spark resolves names) or a path",
        table=True,
    )  # fmt: skip


def resolve_table(ref: TableRef | None, *, allow_parquet: bool = False) -> TableRef:
    """The table of a resolved `table` argument, checked; InvalidArgumentError for a table that is
    not a Delta/Qbeast table of the catalog, TableNotFoundError for a location without a Delta log
    (`allow_parquet`: a parquet directory by path, or a parquet table of the session catalog, is
    accepted, for the converting procedures)."""
    if ref is None or not ref.location:
        raise InvalidArgumentError("table must name a table (table, db.table or catalog.db.table) or give a table path")
    name = ref.name or ref.location
    provider = (ref.provider or "").lower()
    if not ref.by_path and provider not in PROVIDERS and not (allow_parquet and provider == "parquet"):
        raise InvalidArgumentError(
            f"{name} is a {provider or 'non-file'} table, not a Delta or Qbeast table: the procedures run on tables "
            "created USING delta or USING qbeast (convert a parquet directory by path with "
            f"CALL {PREFIX}convert_to_qbeast('<path>', '<columns>'))"
        )
    root = ref.root
    if not allow_parquet and not shared_log(root).exists():
        named = "" if name in (root, ref.location) else f" ({name})"
        raise TableNotFoundError(
            f"no Delta table at {root}{named}: there is no _delta_log with commits; check the table name or path"
        )
    return ref


# --- the procedures ---------------------------------------------------------------------------------


def _optimize(spark: SparkSession, table: TableRef, args: Mapping[str, Any]) -> pa.Table:
    request = OptimizeRequest(
        table.root, revision_id=args.get("revision_id"), files=args.get("files"), strategy=args.get("strategy"),
        bytes_per_iter=args.get("bytes_per_iter"), zorder_by=args.get("zorder_by"), where=args.get("where"),
        dry_run=_arg(args, "dry_run"), max_iterations=args.get("max_iterations"), surface=SQL,
    )  # fmt: skip
    result = optimize_path(
        spark, request, job_group=f"use-call-{uuid.uuid4().hex}", job_description=f"CALL {PREFIX}optimize({table.name})"
    )
    if request.dry_run:
        if result.plan is None or result.plan.is_empty:
            return _nothing_planned(result)
        return result.plan.to_table()
    if not result.iterations:
        return _nothing_selected(result)
    return result.to_table()


#: The result of `optimize` with `dry_run => true`: one row per planned task (`Plan.to_table`).
PLAN_SCHEMA = Plan.empty("", 0).to_table().schema

#: `kind` (and, for a run, `status`) of the one row a CALL that selected nothing returns.
NOTHING = "none"
NOTHING_SELECTED = "nothing_selected"


def _nothing_reason(result: OptimizeResult) -> str:
    return result.note or f"nothing to optimize ({result.outcome})"


def _nothing_planned(result: OptimizeResult) -> pa.Table:
    """A dry run that planned nothing: one row, no task, zero files and bytes, and why nothing was
    selected in `reason` (what the CLI and `print(result)` say), so a SQL client sees the reason."""
    plan = result.plan if result.plan is not None else Plan.empty("", 0)  # an empty Plan is falsy
    row: dict[str, Any] = {"task": None, "strategy": plan.strategy, "kind": NOTHING, "revision_id": None, "num_files": 0, "bytes": 0,
           "score": 0.0, "partition_values": [], "reason": _nothing_reason(result)}  # fmt: skip
    return pa.Table.from_pylist([row], schema=plan.to_table().schema)


def _nothing_selected(result: OptimizeResult) -> pa.Table:
    """A run that selected nothing: one row of zero metrics, `status` nothing_selected, the
    strategies tried in `strategy`, the table version planned on in `read_version`, and why
    nothing was selected in `reason` (what the CLI and `print(result)` say)."""
    zero = {f.name: (0.0 if pa.types.is_floating(f.type) else 0) for f in ITERATION_METRICS_SCHEMA}
    row = {
        **zero, "strategy": result.plan.strategy if result.plan is not None else "", "kind": NOTHING,
        "reason": _nothing_reason(result), "revision_id": None, "status": NOTHING_SELECTED,
        "read_version": result.plan.snapshot_version if result.plan is not None else None, "version": None,
        "error": None,
    }  # fmt: skip
    return pa.Table.from_pylist([row], schema=ITERATION_METRICS_SCHEMA)


#: Delta's session switch for VACUUM's retention check: `false` is `force => true`.
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"

#: The result columns of `vacuum`: one row per file deleted (or that a dry run would delete).
VACUUM_SCHEMA = pa.schema([("path", pa.string()), ("bytes", pa.int64()), ("deleted", pa.bool_())])


def _vacuum(spark: SparkSession, table: TableRef, args: Mapping[str, Any]) -> pa.Table:
    dry_run, force = _arg(args, "dry_run"), _arg(args, "force")
    for key, value in (("dry_run", dry_run), ("force", force)):
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"{key} must be true or false, got {value!r}")
    # Delta's switch for its VACUUM's check, as Delta users turn it off (also for the VACUUM statement)
    force = force or str(spark.conf.get(RETENTION_CHECK_CONF, "true")).strip().lower() == "false"
    result = vacuum(shared_log(table.root), args.get("retention_hours"), dry_run=dry_run, enforce_retention_check=not force)
    return pa.table(
        {
            "path": pa.array(result.files, pa.string()),
            "bytes": pa.array(result.sizes, pa.int64()),
            "deleted": pa.array([not result.dry_run] * len(result.files), pa.bool_()),
        },
        schema=VACUUM_SCHEMA,
    )


CONVERT_SCHEMA = pa.schema(
    [
        ("location", pa.string()),
        ("version", pa.int64()),
        ("source_format", pa.string()),
        ("num_files", pa.int64()),
        ("columns_to_index", pa.list_(pa.string())),
        ("converted", pa.bool_()),
    ]
)


def _convert(spark: SparkSession, table: TableRef, args: Mapping[str, Any]) -> pa.Table:
    columns = args.get("columns_to_index")
    if not isinstance(columns, str) or not columns.strip():
        raise InvalidArgumentError(f"columns_to_index must name the columns to index, e.g. 'x,y', got {columns!r}")
    r = convert_to_qbeast(table.root, columns, args.get("cube_size"))
    return pa.Table.from_pylist(
        [{"location": r.path, "version": r.version, "source_format": r.source_format, "num_files": r.num_files,
          "columns_to_index": list(r.columns_to_index), "converted": r.converted}],
        schema=CONVERT_SCHEMA,
    )  # fmt: skip


#: The result of `convert_to_delta` (Delta's CONVERT TO DELTA): one row.
CONVERT_DELTA_SCHEMA = pa.schema(
    [
        ("location", pa.string()),
        ("version", pa.int64()),
        ("num_files", pa.int64()),
        ("partition_columns", pa.list_(pa.string())),
        ("converted", pa.bool_()),
    ]
)


def _convert_delta(spark: SparkSession, table: TableRef, args: Mapping[str, Any]) -> pa.Table:
    text = args.get("partitioned_by")
    if text is not None and str(text).strip():
        partition_schema = spark_schema_to_arrow(_ddl_schema_json(str(text)))
    else:  # a catalog table's own partitioning, if it has one
        own = spark_schema_to_arrow(table.partition_schema) if table.partition_schema else None
        partition_schema = own if own is not None and own.names else None
    r = convert_to_delta(
        table.root, partition_schema, collect_stats=args.get("statistics") is not False,
        time_zone=spark.conf.get("spark.sql.session.timeZone") or "UTC",
    )  # fmt: skip
    return pa.Table.from_pylist(
        [{"location": r.root, "version": r.version, "num_files": r.num_files,
          "partition_columns": list(r.partition_columns), "converted": r.converted}],
        schema=CONVERT_DELTA_SCHEMA,
    )  # fmt: skip


#: Spark SQL type names a partition column may have, as Delta's schema names them.
_PARTITION_TYPES = {
    "boolean": "boolean", "tinyint": "byte", "byte": "byte", "smallint": "short", "short": "short",
    "int": "integer", "integer": "integer", "bigint": "long", "long": "long", "float": "float", "real": "float",
    "double": "double", "string": "string", "varchar": "string", "char": "string", "date": "date",
    "timestamp": "timestamp", "timestamp_ltz": "timestamp", "timestamp_ntz": "timestamp_ntz", "binary": "binary",
    "decimal": "decimal", "dec": "decimal", "numeric": "decimal",
}  # fmt: skip
_DDL_COLUMN = re.compile(r"\s*(`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)\s+([A-Za-z_]+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*")


def _ddl_schema_json(text: str) -> str:
    """`d DATE, k STRING` (PARTITIONED BY's columns, Spark SQL type names) as a schema JSON."""
    fields: list[dict[str, Any]] = []
    for part in re.split(r",(?![^()]*\))", text):
        m = _DDL_COLUMN.fullmatch(part)
        kind = _PARTITION_TYPES.get(m.group(2).lower()) if m else None
        if m is None or kind is None:
            raise InvalidArgumentError(
                f"partitioned_by takes the partition columns with their types, e.g. 'day DATE, kind STRING', got {text!r}"
            )
        name = m.group(1)[1:-1].replace("``", "`") if m.group(1).startswith("`") else m.group(1)
        if kind == "decimal":
            kind = f"decimal({m.group(3) or 10},{m.group(4) or 0})"
        fields.append({"name": name, "type": kind, "nullable": True, "metadata": {}})
    return json.dumps({"type": "struct", "fields": fields})


#: The result of `restore`: one row, Delta's RESTORE columns plus the versions.
RESTORE_SCHEMA = pa.schema(
    [
        ("restored_version", pa.int64()),
        ("version", pa.int64()),
        ("table_size_after_restore", pa.int64()),
        ("num_of_files_after_restore", pa.int64()),
        ("num_removed_files", pa.int64()),
        ("num_restored_files", pa.int64()),
        ("removed_files_size", pa.int64()),
        ("restored_files_size", pa.int64()),
    ]
)


def _restore(spark: SparkSession, table: TableRef, args: Mapping[str, Any]) -> pa.Table:
    r = restore(shared_log(table.root), args.get("version"), args.get("timestamp"))
    return pa.Table.from_pylist(
        [{"restored_version": r.restored_version, "version": r.version, "table_size_after_restore": r.size,
          "num_of_files_after_restore": r.num_files, "num_removed_files": r.num_removed_files,
          "num_restored_files": r.num_restored_files, "removed_files_size": r.removed_files_size,
          "restored_files_size": r.restored_files_size}],
        schema=RESTORE_SCHEMA,
    )  # fmt: skip


#: The result of `generate` (Delta's GENERATE symlink_format_manifest): one row.
GENERATE_SCHEMA = pa.schema([("manifests_written", pa.int64()), ("manifests_deleted", pa.int64())])


def _generate(spark: SparkSession, table: TableRef, args: Mapping[str, Any]) -> pa.Table:
    r = generate_table(shared_log(table.root), _arg(args, "mode"))
    return pa.Table.from_pylist(
        [{"manifests_written": len(r.written), "manifests_deleted": len(r.deleted)}], schema=GENERATE_SCHEMA
    )


PROCEDURES: Mapping[str, Procedure] = {
    p.name: p
    for p in (
        Procedure(
            "optimize",
            "Optimize a Delta/Qbeast table until nothing is selected (the optimizer loop of the Python API and "
            "`use optimize`): one row per iteration, or with dry_run => true one row per planned task; when "
            "nothing is selected, one row of zero metrics whose reason says why",
            (
                _table_param("optimize"),
                ProcedureParameter("strategy", "string", "NULL", "file-selection strategy (default: the table's chain)"),
                ProcedureParameter("revision_id", "bigint", "NULL", "revision to optimize (default: the table's setting, else the latest)"),
                ProcedureParameter("bytes_per_iter", "bigint", "NULL", "bytes rewritten per iteration (default: use.optimization.bytes-per-iter)"),
                ProcedureParameter("max_iterations", "int", "NULL", "stop after this many merge tasks (default: no limit)"),
                ProcedureParameter("dry_run", "boolean", "false", "plan only: one row per task, nothing written"),
                ProcedureParameter("files", "array<string>", "NULL", "rewrite exactly these data files (paths as in the log), once"),
                ProcedureParameter("zorder_by", "string", "NULL", "columns to cluster by, e.g. 'a,b' (Delta's OPTIMIZE ZORDER BY)"),
                ProcedureParameter("where", "string", "NULL", "only the partitions this predicate on partition columns selects (Delta's OPTIMIZE WHERE)"),
            ),
            _optimize,
            lambda args: PLAN_SCHEMA if args.get("dry_run") else ITERATION_METRICS_SCHEMA,
        ),
        Procedure(
            "vacuum",
            "Delete data files the table no longer references, older than the retention (Delta VACUUM): one row "
            "per file deleted, or that a dry run would delete",
            (
                _table_param("vacuum"),
                ProcedureParameter("retention_hours", "double", "NULL", "keep files removed less than this many hours ago (default: delta.deletedFileRetentionDuration, 168)"),
                ProcedureParameter("dry_run", "boolean", "false", "list what would be deleted, delete nothing"),
                ProcedureParameter("force", "boolean", "false", "allow a retention below the table's safety threshold"),
            ),
            _vacuum,
            VACUUM_SCHEMA,
        ),
        Procedure(
            "restore",
            "Bring a Delta/Qbeast table back to an earlier version in one new commit (Delta RESTORE): one row",
            (
                _table_param("restore"),
                ProcedureParameter("version", "bigint", "NULL", "the version to restore (or give timestamp)"),
                ProcedureParameter("timestamp", "string", "NULL", "restore the version current at this time, e.g. '2025-01-01 00:00:00' (UTC)"),
            ),
            _restore,
            RESTORE_SCHEMA,
        ),
        Procedure(
            "generate",
            "Write the table's symlink format manifests (Delta's GENERATE symlink_format_manifest, what Presto, Trino's "
            "Hive connector and Athena read a Delta table through) and delete stale ones: one row",
            (
                _table_param("generate"),
                ProcedureParameter("mode", "string", "'symlink_format_manifest'", "what to generate: symlink_format_manifest"),
            ),
            _generate,
            GENERATE_SCHEMA,
        ),
        Procedure(
            "convert_to_qbeast",
            "Make a parquet directory or a Delta table a Qbeast table (its files join the staging revision 0; "
            "optimize indexes them): one row",
            (
                _table_param("convert"),
                ProcedureParameter("columns_to_index", "string", None, "the columns to index, e.g. 'x,y' (as qbeast's columnsToIndex)"),
                ProcedureParameter("cube_size", "bigint", "NULL", "desired rows per cube (default 5000000; a Qbeast table keeps its own)"),
            ),
            _convert,
            CONVERT_SCHEMA,
            converts_to="qbeast",
        ),
        Procedure(
            "convert_to_delta",
            "Make a directory of parquet files (or a parquet table of the catalog) a Delta table in place, as Delta's "
            "CONVERT TO DELTA: one CONVERT commit adds every file as it is, statistics from the footers: one row",
            (
                _table_param("convert"),
                ProcedureParameter("partitioned_by", "string", "NULL", "the partition columns of a partitioned directory with their types, e.g. 'day DATE, kind STRING' (a catalog table: its own)"),
                ProcedureParameter("statistics", "boolean", "true", "collect each file's statistics from its footer (false: Delta's NO STATISTICS)"),
            ),
            _convert_delta,
            CONVERT_DELTA_SCHEMA,
            converts_to="delta",
        ),
    )
}  # fmt: skip


# --- the bridge methods -----------------------------------------------------------------------------


def describe_procedures(spark: SparkSession, req: ProceduresRequest, args: list[Any]) -> ProceduresReply:
    """Every procedure's name, description and parameters (the shim asks once and caches)."""
    return ProceduresReply(tuple(p.spec() for p in PROCEDURES.values()))


def procedure(name: str) -> Procedure:
    found = PROCEDURES.get(name.lower()) if isinstance(name, str) else None
    if found is None:
        valid = ", ".join(PREFIX + n for n in PROCEDURES)
        raise InvalidArgumentError(f"no procedure {name!r} in use_catalog; the procedures are {valid}")
    return found


def call_procedure(spark: SparkSession, req: CallProcedureRequest, args: list[Any]) -> CallProcedureReply:
    """Run one CALL: its arguments (one Arrow row, as Spark gives them) read into the parameters'
    types, its table parameters as the shim resolved them, `args` the calling session (its settings
    are the procedure's session defaults, as for the Python API); the answer is the result rows in
    the procedure's output schema."""
    proc = procedure(req.procedure)
    values = typed_arguments(proc, _argument_row(req.arguments))
    table = None
    for p in proc.parameters:
        if p.table:
            values.pop(p.name, None)
            table = resolve_table(req.tables.get(p.name), allow_parquet=proc.converts_to is not None)
    rows = result_rows(proc.run(calling_session(spark, args), table, values), proc.output_schema(values))  # type: ignore[arg-type]
    register = None
    if proc.converts_to and table is not None and table.ident and table.provider not in PROVIDERS:
        # a parquet table of the catalog: its registration names the format its files now have
        register = Registration(table.ident[0], table.ident[1], proc.converts_to)
    return CallProcedureReply(rows, register)


def _argument_row(arguments: bytes) -> dict[str, Any]:
    """A CALL's arguments by parameter name, as Spark gave them (one row of an Arrow stream)."""
    rows = read_arrow_stream(arguments).to_pylist()
    if len(rows) != 1:
        raise InvalidArgumentError(f"internal: a CALL's arguments are one row, the shim sent {len(rows)}")
    row: dict[str, Any] = rows[0]
    return row


def _arg(args: Mapping[str, Any], name: str) -> Any:
    """A CALL argument as Spark gave it (None when left out), untyped on purpose: the code it is
    passed to checks its type and says what is wrong in the CALL's terms."""
    return args.get(name)


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        return parse_int_text(value, "an integer")
    if isinstance(value, (int, float, decimal.Decimal)):
        return int(value)  # as Spark casts a number to an integer type (towards zero)
    raise BadValue("an integer")


def _as_float(value: Any) -> float:
    if isinstance(value, str):
        return parse_float_text(value, "a number")
    if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
        return float(value)
    raise BadValue("a number")


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return parse_bool(value)
    if isinstance(value, (bool, int, float, decimal.Decimal)):
        return bool(value)  # as Spark casts a number to a boolean
    raise BadValue("true or false")


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f") if value.tzinfo else value.isoformat(sep=" ")
    if isinstance(value, (str, int, float, decimal.Decimal, dt.date)):
        return str(value)
    raise BadValue("text")


def _as_texts(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise BadValue("an array of text, e.g. array('a', 'b')")
    return [None if v is None else _as_text(v) for v in value]  # type: ignore[misc]


#: How an argument given for a parameter of each Spark type is read (Spark passes it as it was given),
#: and an example of a good one. `bytes_per_iter` keeps its text, which the optimizer's config reads
#: with its own error (naming it, with the SQL to pass instead).
_ARGUMENT_TYPES: dict[str, tuple[Callable[[Any], Any], str]] = {
    "bigint": (_as_int, "3"),
    "int": (_as_int, "3"),
    "double": (_as_float, "24.5"),
    "boolean": (_as_bool, "true"),
    "string": (_as_text, "'text'"),
    "array<string>": (_as_texts, "array('a', 'b')"),
}
_SIZE_ARGUMENTS = frozenset({"bytes_per_iter"})


def typed_arguments(proc: Procedure, given: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments by parameter, each read into its parameter's type (text given for a
    number or a boolean read as one); InvalidArgumentError naming the argument, the procedure and
    the expected form when one is not."""
    values: dict[str, Any] = {}
    for p in proc.parameters:
        value = given.get(p.name)
        typed = _ARGUMENT_TYPES.get(p.type)
        if value is None or typed is None or (p.name in _SIZE_ARGUMENTS and isinstance(value, str)):
            values[p.name] = value
            continue
        read, example = typed
        try:
            values[p.name] = read(value)
        except BadValue as e:
            raise InvalidArgumentError(
                f"argument {p.name} of {PREFIX}{proc.name} must be {e}, got {value!r}; e.g. {p.name} => {example}"
            ) from None
    return values


def result_rows(table: pa.Table, schema: pa.Schema) -> bytes:
    """A procedure's result as the shim reads it: an Arrow stream in the procedure's output schema,
    non-finite doubles as null (as SQL clients have always got them)."""
    if not table.schema.equals(schema):
        raise TypeError(f"the procedure's result has the schema {table.schema}, not its output schema {schema}")
    for i, f in enumerate(table.schema):
        if pa.types.is_floating(f.type):
            column = table.column(i)
            table = table.set_column(i, f, pc.if_else(pc.is_finite(column), column, pa.scalar(None, f.type)))
    return arrow_stream(table)


def manual_trigger(spark: SparkSession, req: ManualTriggerRequest, args: list[Any]) -> ManualTriggerReply:
    """ALTER TABLE use_catalog.<catalog>.<db>.<t> SET TBLPROPERTIES (...): one optimization with
    those settings, the table's properties untouched.

    The settings are checked first (only `use.optimization.*` keys, each through the config parser):
    a bad one is a ConfigError and nothing happens. The answer says what happened (`ran`, `queued`,
    `reason`); the reason is logged too, since ALTER TABLE returns no rows."""
    spark = calling_session(spark, args)
    table = resolve_table(req.table)
    settings = dict(req.settings)
    others = sorted(k for k in settings if not k.startswith(OPT_PREFIX))
    if not settings or others:
        raise ConfigError(
            f"ALTER TABLE on use_catalog triggers one optimization of {table.name} with use.optimization.* settings "
            f"and changes no property; {'no setting was given' if not settings else 'it takes no ' + ', '.join(others)}: "
            f"to change the table's properties, ALTER TABLE the table in its own catalog (e.g. {table.name})"
        )
    properties = shared_log(table.root).snapshot().configuration
    defaults = session_defaults(spark)
    OptimizationConfig.from_properties(properties, settings, spark_conf=defaults)  # bad settings fail here
    service = active.current()
    if service is not None:
        if service.table(table.root) is None:
            # A table created since the service's last refresh: tell it now (as a catalog event
            # would), so the request is decided rather than refused as unknown.

            service.on_event(TableEvent(CREATED, table.root, table.name))
        decision = service.trigger(table.root, settings)
        _log.warning("manual optimization of %s handed to the optimization service: %s", table.name, decision.reason)
        return ManualTriggerReply(ran=False, queued=bool(decision.accepted), reason=decision.reason)
    if is_continuous(properties):
        reason = (
            f"manual optimization of {table.name} ignored: the table has continuous optimization configured "
            "(use.optimization.type or use.optimization.autoOptimize.enabled); its scheduled runs follow its properties"
        )
        _log.warning("%s", reason)
        return ManualTriggerReply(ran=False, queued=False, reason=reason)
    result = optimize_path(
        spark, OptimizeRequest(table.root, overrides=settings, surface=SQL), job_group=f"use-manual-{uuid.uuid4().hex}",
        job_description=f"manual optimization of {table.name}",
    )  # fmt: skip
    reason = f"manual optimization of {table.name}: {len(result.committed)} task(s) committed, {result.outcome}"
    _log.warning("%s", reason)
    return ManualTriggerReply(ran=True, queued=False, reason=reason, versions=tuple(result.versions))
