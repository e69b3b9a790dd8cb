"""SQL writes: INSERT INTO / INSERT OVERWRITE, `writeTo(...).append()/.overwritePartitions()`,
`saveAsTable`, CTAS and RTAS. Spark has already resolved and cast the query to the table's schema
(a mismatch is Spark's own analysis error); the DataFrame arrives here with the write's mode.
`df.write.format(...).save(path)` and the streaming sink are `use.sql.save`'s, which writes
through these functions.

Into a Qbeast table the rows go through the OTree write (`use.qbeast.writer.write`, the code
behind `QbeastTable.write`, JVM path included); into a Delta table through Spark's file write of
`DeltaTable.write` (`use.runtime.files.write_dataframe_files`), committed here with the removes the
write mode asks for (whole table, static partitions, the partitions written). One commit per
statement, under Delta's conflict rules; a write that fails leaves no commit and no file behind.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from use.delta import predicates as P
from use.delta.actions import add_files_table, remove_actions
from use.delta.commit_options import CommitOptions
from use.delta.datafile import timestamp_partition_columns
from use.delta.log_cache import shared_log
from use.delta.schema import check_append_schema
from use.delta.skipping import files_matching, partition_text_table
from use.delta.transaction import Transaction
from use.errors import InvalidArgumentError
from use.qbeast.reader import plan_read, scan
from use.qbeast.revision import (
    COLUMN_STATS_KEY,
    COLUMNS_TO_INDEX_KEY,
    CUBE_SIZE_KEY,
    is_qbeast,
    latest_revision_id,
    revisions_from_configuration,
)
from use.qbeast.snapshot import QbeastSnapshot
from use.qbeast.writer import write as otree_write
from use.runtime.conform import conform_to_table
from use.runtime.files import delete_written, rows_written, write_dataframe_files
from use.sql.protocol import CreateSpec, PartitionFilter, TableReply, WriteRequest
from use.sql.sessions import dataframe
from use.sql.tables import (
    _cube_size,
    check_properties,
    latest,
    new_configuration,
    replacement,
    snapshot_of,
    spark_schema_to_arrow,
    staged_root,
    staged_schema,
    write_options,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from use.delta.actions import AddFile
    from use.delta.snapshot import Snapshot

_MODES = {"append": "Append", "overwrite": "Overwrite", "dynamic": "Overwrite", "partitions": "Overwrite"}


def write(spark: SparkSession, req: WriteRequest, args: list[Any], commit_options: CommitOptions) -> TableReply:
    """A write through the catalog (the rows are the DataFrame the shim hands over first)."""
    df = dataframe(spark, args[0])
    staged = req.staged
    if staged is not None:
        options = write_options(staged.provider, staged.options, req.options)
        return _write_staged(spark, df, replace(staged, options=options), commit_options)
    snap = snapshot_of(req.table.root)
    mode = req.mode
    if mode == "replaceWhere":  # INSERT INTO ... REPLACE WHERE, writeTo().overwrite(condition)
        if req.condition is None:
            raise InvalidArgumentError("internal: a replaceWhere write without its condition")
        write_replacing_where(spark, df, snap, req.condition, commit_options, sql=True)
    elif is_qbeast(snap.configuration):
        write_qbeast(spark, df, snap, mode, commit_options)
    else:
        write_delta(spark, df, snap, mode, req.partition_filters, commit_options=commit_options)
    return latest(snap.table_root, req.table.provider)


#: Spark's session setting for the overwrite mode of partitioned tables, which Delta's writer honours.
_PARTITION_OVERWRITE_CONF = "spark.sql.sources.partitionOverwriteMode"


def dynamic_overwrite(spark: SparkSession | None, options: Mapping[str, str]) -> bool:
    """Delta's dynamic partition overwrite: the writer option `partitionOverwriteMode`, else (with
    a `spark` session) the session's `spark.sql.sources.partitionOverwriteMode`; `dynamic` or
    `static`, anything else refused naming where it was given."""
    given = next((v for k, v in options.items() if k.lower() == "partitionoverwritemode"), None)
    if given is None and spark is None:
        return False
    value = given if given is not None else spark.conf.get(_PARTITION_OVERWRITE_CONF, "static")  # type: ignore[union-attr]
    text = str(value).strip().lower()
    if text not in ("static", "dynamic"):
        where = "the writer option partitionOverwriteMode" if given is not None else _PARTITION_OVERWRITE_CONF
        raise InvalidArgumentError(f"{where} must be static or dynamic, got {value!r}")
    return text == "dynamic"


# --- Qbeast ------------------------------------------------------------------------------------------


def indexed_columns(snap: Snapshot) -> str:
    """The column specs a write into the table indexes: the ones its properties declare."""
    spec = snap.configuration.get(COLUMNS_TO_INDEX_KEY)
    if spec:
        return spec
    revision = revisions_from_configuration(snap.configuration)[latest_revision_id(snap.configuration)]
    return ",".join(revision.columns)


def cube_size_of(snap: Snapshot) -> int:
    return revisions_from_configuration(snap.configuration)[latest_revision_id(snap.configuration)].desired_cube_size


def write_qbeast(spark: SparkSession, df: DataFrame, snap: Snapshot, mode: str, commit_options: CommitOptions) -> None:
    if mode == "partitions" or snap.partition_columns:
        raise InvalidArgumentError(
            f"the Qbeast table at {snap.table_root} has no partitions to overwrite; INSERT OVERWRITE the whole table"
        )
    if mode == "append":
        otree_write(spark, df, snap.table_root, indexed_columns(snap), mode="append", commit_options=commit_options)
    else:  # overwrite, or a dynamic overwrite of an unpartitioned table: the whole table
        otree_write(
            spark, df, snap.table_root, indexed_columns(snap), cube_size=cube_size_of(snap), mode="overwrite",
            commit_options=commit_options,
        )  # fmt: skip


# --- Delta -------------------------------------------------------------------------------------------


def write_delta(
    spark: SparkSession,
    df: DataFrame,
    snap: Snapshot,
    mode: str,
    filters: Sequence[PartitionFilter],
    *,
    commit_options: CommitOptions,
    schema_string: str | None = None,
    app: tuple[str | None, int | None] = (None, None),
    replacing: tuple[pa.Table, str] | None = None,
) -> None:
    """The rows of a write into a Delta table, and the files it replaces, in one commit (made with
    the writing statement's `commit_options`). `schema_string`: a widened schema committed with
    them (mergeSchema); `app`: the `txn` action (txnAppId / txnVersion) the commit carries, when
    given; `replacing`: the files an overwrite replaces and the condition that chose them
    (replaceWhere), instead of the mode's."""
    root = snap.table_root
    schema = snap.schema if schema_string is None else spark_schema_to_arrow(schema_string)
    app_id, app_version = app
    adds = write_dataframe_files(df, root, schema, partition_columns=snap.partition_columns, configuration=snap.configuration)
    try:
        if mode == "partitions":
            _check_rows_in_replaced_partitions(snap, adds, filters)
        removed = replacing[0] if replacing is not None else files_to_replace(snap, mode, adds, filters)
        txn = Transaction(shared_log(root), snap, commit_options=commit_options)
        if mode != "append":
            txn.read_whole_table()
        if schema_string is not None:
            txn.add(replace(snap.metadata, schema_string=schema_string))
        if removed.num_rows:
            txn.add(*remove_actions(removed, data_change=True))
        if adds:
            txn.add(*adds)
        if app_id is not None:
            txn.set_app_transaction(app_id, int(app_version))  # type: ignore[arg-type]
        if adds or removed.num_rows or schema_string is not None or app_id is not None or replacing is not None:
            parameters = _parameters(mode, snap.partition_columns)
            if schema_string is not None:
                parameters["mergeSchema"] = "true"
            if replacing is not None:
                parameters["predicate"] = json.dumps([replacing[1]])  # as Delta records a replaceWhere
            txn.commit("WRITE", parameters, _metrics(adds, removed.num_rows))
    except BaseException:
        delete_written(root, list(adds))
        raise


def _check_rows_in_replaced_partitions(snap: Snapshot, adds: Sequence[AddFile], filters: Sequence[PartitionFilter]) -> None:
    """An overwrite of the partitions a condition selects (`INSERT INTO t REPLACE WHERE p = ...`,
    `INSERT OVERWRITE ... PARTITION`) writes only rows of those partitions, as Delta checks: a row
    outside them would be added while the partition it belongs to keeps its old rows."""
    if not adds:
        return
    predicate = partition_predicate(filters, snap.schema)
    inside = files_matching(add_files_table(list(adds)), predicate, snap.schema, partition_columns=snap.partition_columns)
    outside = [a for a, ok in zip(adds, inside.to_pylist(), strict=False) if not ok]
    if outside:
        values = ", ".join(f"{k}={v}" for k, v in sorted(outside[0].partition_values.items()))
        raise InvalidArgumentError(
            f"the rows written do not all fall in the partitions the statement replaces: rows of partition {values} were "
            "written too (they would join that partition's old rows); write only rows that match the condition, or "
            "replace their partitions as well"
        )


def _parameters(mode: str, partition_columns: Any) -> dict[str, Any]:
    return {"mode": _MODES[mode], "partitionBy": json.dumps(list(partition_columns))}


def _metrics(adds: Sequence[Any], removed: int) -> dict[str, Any]:
    return {"numFiles": str(len(adds)), "numOutputRows": str(rows_written(adds)), "numRemovedFiles": str(removed)}


# --- CTAS / RTAS -------------------------------------------------------------------------------------


def _write_staged(spark: SparkSession, df: DataFrame, spec: CreateSpec, commit_options: CommitOptions) -> TableReply:
    """The one commit of a CTAS (a new table with its data) or an RTAS (the new metadata, every old
    file removed, the new data added)."""
    root, provider = staged_root(spec), spec.provider
    schema = spark_schema_to_arrow(staged_schema(spec))
    options = spec.options
    properties = spec.properties
    if provider == "qbeast":
        new_configuration(provider, properties, options, schema, root)  # checks the index options
        configuration = check_properties(properties)
        if spec.comment is not None:
            raise InvalidArgumentError(
                "COMMENT on a Qbeast table written by a query is not supported yet; use COMMENT ON TABLE after"
            )
        otree_write(
            spark,
            df,
            root,
            options[COLUMNS_TO_INDEX_KEY],
            cube_size=_cube_size(options.get(CUBE_SIZE_KEY)),
            mode="append" if spec.mode != "replace" else "overwrite",
            column_stats=options.get(COLUMN_STATS_KEY) or None,
            configuration=configuration,
            commit_options=commit_options,
        )
    else:
        conf = new_configuration(provider, properties, options, schema, root)
        _write_delta_staged(spark, df, spec, schema, conf, commit_options)
    return latest(root, provider)


def _write_delta_staged(
    spark: SparkSession, df: DataFrame, spec: CreateSpec, schema: pa.Schema, conf: dict[str, str], commit_options: CommitOptions
) -> None:
    root = staged_root(spec)
    parts = list(spec.partition_columns)
    created_dir = not os.path.exists(root)
    log = shared_log(root)
    if spec.mode == "replace":
        current = log.snapshot()
        txn = replacement(log, current, spec, schema, conf, commit_options)
        operation, removed = "CREATE OR REPLACE TABLE AS SELECT", current.num_files
    else:
        txn = log.create_transaction(schema, parts, conf, description=spec.comment, commit_options=commit_options)
        operation, removed = "CREATE TABLE AS SELECT", 0
    os.makedirs(root, exist_ok=True)
    adds: tuple[AddFile, ...] = ()
    try:
        adds = write_dataframe_files(df, root, schema, partition_columns=parts, configuration=conf)
        if adds:
            txn.add(*adds)
        txn.commit(operation, {"partitionBy": json.dumps(parts)}, _metrics(list(adds), removed))
    except BaseException:
        delete_written(root, list(adds))
        if created_dir and not log.exists():
            shutil.rmtree(root, ignore_errors=True)
        raise


def write_replacing_where(
    spark: SparkSession, df: DataFrame, snap: Snapshot, condition: str, commit_options: CommitOptions, sql: bool = False
) -> None:
    """Delta's `replaceWhere` with an overwrite (the writer option, or with `sql` SQL's `INSERT INTO ...
    REPLACE WHERE` and `writeTo().overwrite(condition)`, as the errors say): the rows matching `condition` (a SQL predicate on
    any columns) are replaced by the DataFrame's, in one commit. Every written row must match it
    (Delta's constraint check: a row outside would be added where nothing was replaced); the files
    the condition can match (partitions and statistics prune them) are removed and their rows that
    do not match it written again with the new ones. A Qbeast table's rewritten rows join its
    staging revision, as a DELETE's do."""
    root = snap.table_root
    qsnap = QbeastSnapshot.from_delta(snap)
    try:
        plan = plan_read(spark, qsnap, filter=condition)
    except InvalidArgumentError as exc:
        why = str(exc).partition(" cannot be applied to the table ")[2]
        given = (
            f"the condition of INSERT INTO ... REPLACE WHERE ({condition})"
            if sql
            else f"the writer option replaceWhere={condition!r}"
        )
        raise InvalidArgumentError(f"{given} cannot be applied to the table {why}") from None
    check_append_schema(to_arrow_schema(df.schema, prefers_large_types=False), snap.schema, root)
    data = conform_to_table(df, snap.metadata.schema_string)
    matches = F.coalesce(F.expr(condition), F.lit(False))
    outside = data.where(~matches).limit(1).collect()
    if outside:
        raise InvalidArgumentError(
            f"the rows written do not all match {f'the REPLACE WHERE condition ({condition})' if sql else f'replaceWhere={condition!r}'} "
            f"(e.g. {outside[0].asDict()}): they would be added "
            "where no row is replaced; write only rows that match the condition, or widen it"
        )
    kept = scan(spark, qsnap, plan.files).where(~matches) if plan.files.num_rows else None
    rows = data if kept is None else data.unionByName(kept)
    write_delta(spark, rows, snap, "overwrite", [], commit_options=commit_options, replacing=(plan.files, condition))


# --- which files an overwrite replaces -----------------------------------------------------------


def _typed(value: Any, type_: pa.DataType) -> Any:
    """A partition filter's value (a JSON scalar) as the column's Python value."""
    if value is None:
        return None
    if pa.types.is_date(type_):
        return _dt.date.fromisoformat(str(value)[:10])
    if pa.types.is_timestamp(type_):
        parsed = _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return parsed if parsed.tzinfo or type_.tz is None else parsed.replace(tzinfo=_dt.UTC)
    if pa.types.is_decimal(type_):
        return _decimal.Decimal(str(value))
    if pa.types.is_integer(type_):
        return int(value)
    if pa.types.is_floating(type_):
        return float(value)
    if pa.types.is_boolean(type_):
        return value if isinstance(value, bool) else str(value).lower() == "true"
    return str(value)


def partition_predicate(filters: Sequence[PartitionFilter], schema: pa.Schema) -> Any:
    """The shim's partition filters (INSERT OVERWRITE ... PARTITION) as a typed predicate."""

    def one(f: PartitionFilter) -> Any:
        op = f.op
        if op == "and":
            if f.left is None or f.right is None:
                raise InvalidArgumentError("internal: a partition filter `and` without both sides")
            return P.And(one(f.left), one(f.right))
        column = f.column
        if column is None:
            raise InvalidArgumentError(f"internal: a partition filter {op!r} without its column")
        type_ = schema.field(column).type
        if op == "isnull":
            return P.IsNull(column)
        if op == "isnotnull":
            return P.IsNotNull(column)
        if op == "in":
            return P.InList(column, tuple(v for v in (_typed(x, type_) for x in f.values) if v is not None))
        value = _typed(f.value, type_)
        if value is None:
            return P.IsNull(column) if op == "<=>" else P.InList(column, ())
        return P.Comparison(column, "=", value)

    out = None
    for f in filters:
        p = one(f)
        out = p if out is None else P.And(out, p)
    return out


def files_to_replace(snapshot: Snapshot, mode: str, adds: Sequence[AddFile], filters: Sequence[PartitionFilter]) -> pa.Table:
    """The live files a write removes: all of them (overwrite), those of the partitions it writes
    (dynamic), those matching the static partition filters (partitions), none (append)."""
    files = snapshot.files
    parts = list(snapshot.partition_columns)
    if mode == "append" or not files.num_rows:
        return files.slice(0, 0)
    if mode == "overwrite" or (mode == "dynamic" and not parts):
        return files
    if mode == "dynamic":
        # a partition is the same whichever way the log spells a timestamp in it (an older file's
        # `2024-03-10 09:30:00` is the new `2024-03-10T09:30:00.000000Z`): compared in one spelling
        instants = timestamp_partition_columns(snapshot.schema, parts)

        def keys(table: pa.Table) -> list[tuple[str | None, ...]]:
            texts = partition_text_table(table, parts, instants)
            cols = [texts.column(c).to_pylist() for c in parts]
            return [tuple(v or None for v in row) for row in zip(*cols, strict=False)]  # "" is null, as in Delta

        written = set(keys(add_files_table(list(adds)))) if adds else set()
        return files.filter(pa.array([k in written for k in keys(files)], pa.bool_()))
    if mode == "partitions":
        return files.filter(files_matching(files, partition_predicate(filters, snapshot.schema), snapshot.schema))
    raise InvalidArgumentError(f"unknown write mode {mode!r}")
