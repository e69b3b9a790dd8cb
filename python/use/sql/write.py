"""SQL writes: INSERT INTO / INSERT OVERWRITE, `writeTo(...).append()/.overwritePartitions()`,
`saveAsTable`, CTAS and RTAS. Spark has already resolved and cast the query to the table's schema
(a mismatch is Spark's own analysis error); the DataFrame arrives here with the write's mode.
Also `df.write.format("delta").save(path)` and the streaming sink (`save_path`), whose DataFrame
arrives as the user gave it: it decides what the save mode means for the path, and the writes it
makes itself (mergeSchema, txnAppId/txnVersion) check the schema themselves.

Into a Qbeast table the rows go through the OTree write (`use.qbeast.writer.write`, the code
behind `QbeastTable.write`, JVM path included); into a Delta table through Spark's file write of
`DeltaTable.write` (`use.spark_files.write_dataframe_files`), committed here with the removes the
write mode asks for (whole table, static partitions, the partitions written). One commit per
statement, under Delta's conflict rules; a write that fails leaves no commit and no file behind.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from use.errors import InvalidArgumentError, SchemaMismatchError, TableAlreadyExistsError
from use.qbeast.revision import COLUMN_STATS_KEY, COLUMNS_TO_INDEX_KEY, CUBE_SIZE_KEY
from use.sql.bridge import dataframe
from use.sql.tables import (
    _cube_size,
    check_properties,
    check_schema_change,
    is_qbeast,
    log_for,
    new_configuration,
    replacement,
    snapshot_of,
    spark_schema_to_arrow,
    table_json,
    table_root,
    write_options,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from use.delta.actions import AddFile
    from use.delta.snapshot import Snapshot

_MODES = {"append": "Append", "overwrite": "Overwrite", "dynamic": "Overwrite", "partitions": "Overwrite"}


def write(spark: SparkSession, req: dict[str, Any], args: list[Any]) -> dict[str, Any]:
    df = dataframe(spark, args[0])
    staged = req.get("staged")
    if staged is not None:
        options = write_options(staged["provider"], staged.get("options") or {}, req.get("options") or {})
        return _write_staged(spark, df, {**staged, "options": options})
    table = req["table"]
    snap = snapshot_of(table["location"])
    mode = req["mode"]
    if is_qbeast(snap.configuration):
        _write_qbeast(spark, df, snap, mode)
    else:
        _write_delta(spark, df, snap, mode, req.get("partitionFilters") or [])
    return {"table": table_json(log_for(snap.table_root).snapshot(), table["provider"])}


# --- df.write.format("delta").save(path) -------------------------------------------------------------

#: Spark's SaveMode names, as the V1 write passes them, to `DeltaTable.write`'s modes.
_SAVE_MODES = {"Append": "append", "Overwrite": "overwrite", "ErrorIfExists": "errorifexists", "Ignore": "ignore"}

#: Delta writer options USE does not implement yet, each with what to do instead. Refused rather than
#: ignored: each changes which rows or which schema the table ends with.
_UNSUPPORTED_SAVE_OPTIONS = {
    "overwriteschema": "replace the table with DeltaTable.write(df, path, mode='overwrite'), which takes the DataFrame's schema",
    "replacewhere": "overwrite whole partitions (INSERT OVERWRITE ... PARTITION (p = v)), or the whole table",
}

#: The type changes `mergeSchema` takes (the data's type -> the table's wider one), as Spark's safe
#: casts on insert; any other difference is refused (mergeSchema adds columns, it does not retype).
_WIDENS = {
    ("byte", "short"), ("byte", "integer"), ("byte", "long"), ("short", "integer"), ("short", "long"),
    ("integer", "long"), ("float", "double"), ("byte", "double"), ("short", "double"), ("integer", "double"),
}


def save_path(spark: SparkSession, req: dict[str, Any], args: list[Any]) -> dict[str, Any]:
    """`df.write.format("delta").save(path)` in any save mode, with Delta's semantics (the shim's
    `DeltaPathProvider.createRelation`). A path without a table gets one, created by this write in
    one commit (`DeltaTable.write`: partitioned by `partitionBy`, `delta.*` writer options as its
    properties) whatever the mode; on an existing table `errorifexists` fails and `ignore` writes
    nothing, and `append` / `overwrite` are answered `{"write": mode, "root": ...}`: the shim then
    writes through the catalog as `INSERT INTO` / `INSERT OVERWRITE delta.`root`` do, so rows are
    matched to the table's columns by name and a Qbeast table's rows are indexed. Written here
    instead, in one commit each: `mergeSchema` with new columns (`_write_merged`: the widened
    schema and the rows) and a write with `txnAppId`/`txnVersion` (`_write_idempotent`: the rows
    and the `txn` action; a version already committed for the app id writes nothing), which the
    streaming sink uses for every micro-batch."""
    from use.optimize.delta_table import DeltaTable

    mode = _SAVE_MODES.get(str(req.get("mode")))
    if mode is None:
        raise InvalidArgumentError(f"unknown save mode {req.get('mode')!r}; use append, overwrite, errorifexists or ignore")
    options = {str(k): str(v) for k, v in (req.get("options") or {}).items()}
    for key, value in options.items():
        instead = _UNSUPPORTED_SAVE_OPTIONS.get(key.lower())
        if instead is not None and (key.lower() == "replacewhere" or value.strip().lower() == "true"):
            raise InvalidArgumentError(f"the Delta writer option {key}={value} is not supported yet; {instead}")
    merge_schema = any(k.lower() == "mergeschema" and v.strip().lower() == "true" for k, v in options.items())
    app_id, app_version = _txn_options(options)
    parts = req.get("partitionColumns")
    root = table_root(req["path"])
    log = log_for(root)
    if req.get("format") == "qbeast":
        return _save_qbeast(spark, dataframe(spark, args[0]), root, mode, options, parts, (app_id, app_version))
    if not log.exists():
        df = dataframe(spark, args[0])
        properties = {k: v for k, v in options.items() if k.lower().startswith("delta.")}
        DeltaTable.write(
            df, root, mode=mode, partition_by=parts, properties=properties or None, txn_app_id=app_id, txn_version=app_version
        )
        return {"created": True, "root": root}
    if mode == "errorifexists":
        raise TableAlreadyExistsError(
            f"a Delta table already exists at {root} (save mode errorifexists, Spark's default): write with "
            ".mode(\"append\") to add rows or .mode(\"overwrite\") to replace them, or save to another path"
        )
    if mode == "ignore":
        return {"created": False, "root": root}
    snap = log.snapshot()
    if snap.has_app_transaction(app_id, app_version):
        return {"created": False, "root": root}  # this batch was written already
    if parts is not None:
        current = list(snap.partition_columns)
        if [str(p) for p in parts] != current:
            raise InvalidArgumentError(
                f"partitionBy({', '.join(map(repr, parts))}) differs from the partitioning of the table at {root} "
                f"({', '.join(current) or 'none'}); leave partitionBy out to write into the table as it is partitioned"
            )
    dynamic = mode == "overwrite" and _dynamic_overwrite(spark, options, stream=bool(req.get("stream")))
    if merge_schema:
        df = dataframe(spark, args[0])
        added = _new_columns(snap, df)
        if added:
            _refuse_dynamic(dynamic, "mergeSchema with new columns")
            _write_merged(spark, df, snap, mode, added, (app_id, app_version))
            return {"created": False, "root": root}
    if app_id is not None:
        _refuse_dynamic(dynamic, "txnAppId/txnVersion")
        _write_idempotent(spark, dataframe(spark, args[0]), snap, mode, app_id, int(app_version))  # type: ignore[arg-type]
        return {"created": False, "root": root}
    return {"write": "dynamic" if dynamic else mode, "root": root}


#: Spark's session setting for the overwrite mode of partitioned tables, which Delta's writer honours.
_PARTITION_OVERWRITE_CONF = "spark.sql.sources.partitionOverwriteMode"


def _dynamic_overwrite(spark: SparkSession, options: Mapping[str, str], *, stream: bool) -> bool:
    """Delta's dynamic partition overwrite: the writer option `partitionOverwriteMode`, else the
    session's `spark.sql.sources.partitionOverwriteMode` (not for a stream's complete mode, which
    replaces the table), `dynamic` or `static`."""
    given = next((v for k, v in options.items() if k.lower() == "partitionoverwritemode"), None)
    if given is None and stream:
        return False
    value = given if given is not None else spark.conf.get(_PARTITION_OVERWRITE_CONF, "static")
    text = str(value).strip().lower()
    if text not in ("static", "dynamic"):
        where = "the writer option partitionOverwriteMode" if given is not None else _PARTITION_OVERWRITE_CONF
        raise InvalidArgumentError(f"{where} must be static or dynamic, got {value!r}")
    return text == "dynamic"


def _refuse_dynamic(dynamic: bool, what: str) -> None:
    if dynamic:
        raise InvalidArgumentError(
            f"a dynamic partition overwrite (partitionOverwriteMode=dynamic) with {what} is not supported yet; write "
            "the partitions with INSERT OVERWRITE, or overwrite statically"
        )


def _save_qbeast(
    spark: SparkSession,
    df: DataFrame,
    root: str,
    mode: str,
    options: Mapping[str, str],
    parts: Sequence[str] | None,
    app: tuple[str | None, int | None],
) -> dict[str, Any]:
    """`df.write.format("qbeast").save(path)` with qbeast-spark's writer options: a new table is
    indexed on `columnsToIndex` (required; `cubeSize`, `columnStats` optional), an append extends
    the table's index (a different `cubeSize` starts a revision, as `QbeastTable.write`), an
    overwrite re-indexes the rows (on `columnsToIndex`, else the table's columns); the save modes
    mean what they mean for `format("delta")`. All through the OTree write, in one commit."""
    from use.errors import IndexColumnError, NotAQbeastTableError
    from use.qbeast.writer import write as otree_write

    lowered = {k.lower(): v for k, v in options.items()}
    columns, cube, stats = lowered.get("columnstoindex"), lowered.get("cubesize"), lowered.get("columnstats")
    if parts:
        raise InvalidArgumentError(
            f"partitionBy({', '.join(map(repr, parts))}): Qbeast tables are not partitioned (the index clusters the "
            'rows instead); leave partitionBy out, or write a partitioned Delta table with format("delta")'
        )
    cube_size: int | None = None
    if cube not in (None, ""):
        try:
            cube_size = int(str(cube))
        except ValueError:
            cube_size = 0
        if cube_size < 1:
            raise InvalidArgumentError(f"option cubeSize must be a positive integer (rows per cube), got {cube!r}")
    log = log_for(root)
    snap = log.snapshot() if log.exists() else None
    if snap is None:
        if not columns:
            raise IndexColumnError(
                f'format("qbeast") creates the table at {root} and needs its index columns: add '
                '.option("columnsToIndex", "x,y") (and optionally .option("cubeSize", "5000000"))'
            )
    elif mode in ("errorifexists", "ignore"):
        if mode == "ignore":
            return {"created": False, "root": root}
        raise TableAlreadyExistsError(
            f"a table already exists at {root} (save mode errorifexists, Spark's default): write with "
            '.mode("append") to add rows or .mode("overwrite") to replace them, or save to another path'
        )
    elif not is_qbeast(snap.configuration):
        raise NotAQbeastTableError(
            f"{root} is a Delta table without Qbeast metadata; convert it with CALL use_catalog.system.convert_to_qbeast"
            f"('{root}', '<columns>') (or QbeastTable.convert) first, or write it with format(\"delta\")"
        )
    elif snap.has_app_transaction(*app):
        return {"created": False, "root": root}
    else:
        columns = columns or _indexed_columns(snap)
        if cube_size is None and mode == "overwrite":
            cube_size = _cube_size_of(snap)
    write_mode = "append" if snap is None or mode != "overwrite" else "overwrite"
    otree_write(
        spark, df, root, columns, cube_size=cube_size, mode=write_mode, column_stats=stats or None,
        txn_app_id=app[0], txn_version=app[1],
    )  # fmt: skip
    return {"created": snap is None, "root": root}


def _txn_options(options: Mapping[str, str]) -> tuple[str | None, int | None]:
    """Delta's writer options for an idempotent write, `txnAppId` and `txnVersion` (a streaming
    `foreachBatch` passes its query id and batch id), checked as `DeltaTable.write` checks them."""
    from use.delta.transaction import check_app_transaction

    lowered = {k.lower(): v for k, v in options.items()}
    app_id, text = lowered.get("txnappid"), lowered.get("txnversion")
    version: int | None = None
    if text is not None:
        try:
            version = int(text)
        except ValueError:
            raise InvalidArgumentError(f"txnVersion must be a non-negative integer (e.g. the batch id), got {text!r}") from None
    try:
        check_app_transaction(app_id, version)
    except InvalidArgumentError:
        raise InvalidArgumentError(
            f"the writer options txnAppId and txnVersion go together (an app id and a non-negative integer), got "
            f"txnAppId={app_id!r}, txnVersion={text!r}"
        ) from None
    return app_id, version


def _write_idempotent(spark: SparkSession, df: DataFrame, snap: Snapshot, mode: str, app_id: str, version: int) -> None:
    """An append or overwrite with `txnAppId`/`txnVersion` into an existing table: written here, so
    that its commit holds the `txn` action with the rows (the catalog's write has no place for it).
    The data's columns must be the table's (an overwrite keeps the table's schema, as Delta's does)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from use.delta.schema import check_append_schema
    from use.optimize.delta_table import DeltaTable

    check_append_schema(to_arrow_schema(df.schema, prefers_large_types=False), snap.schema, snap.table_root)
    df = df.select(*[df[c] for c in snap.schema.names])
    if is_qbeast(snap.configuration):
        from use.qbeast.writer import write as otree_write

        otree_write(spark, df, snap.table_root, _indexed_columns(snap), mode=mode, txn_app_id=app_id, txn_version=version)
    else:
        DeltaTable.write(df, snap.table_root, mode=mode, txn_app_id=app_id, txn_version=version)


def _new_columns(snap: Snapshot, df: DataFrame) -> list[Any]:
    """`mergeSchema`: the DataFrame's columns the table does not have (Spark fields, in the data's
    order), after checking that the columns both have agree on their type (or the table's is wider)."""
    from pyspark.sql.types import StructType

    if is_qbeast(snap.configuration):
        raise InvalidArgumentError(
            f"mergeSchema into the Qbeast table at {snap.table_root} is not supported yet; add the columns first "
            f"(ALTER TABLE qbeast.`{snap.table_root}` ADD COLUMNS (...)), then append"
        )
    table = {f.name.lower(): f for f in StructType.fromJson(json.loads(snap.metadata.schema_string)).fields}
    added = []
    for field in df.schema.fields:
        have = table.get(field.name.lower())
        if have is None:
            added.append(field)
        elif have.dataType != field.dataType and (field.dataType.typeName(), have.dataType.typeName()) not in _WIDENS:
            raise SchemaMismatchError(
                f"column {field.name} is {field.dataType.simpleString()} in the data and {have.dataType.simpleString()} in the "
                f"table at {snap.table_root}; mergeSchema adds columns, it does not change a column's type: cast the column "
                f"to {have.dataType.simpleString()}"
            )
    return added


def _write_merged(
    spark: SparkSession, df: DataFrame, snap: Snapshot, mode: str, added: Sequence[Any], app: tuple[str | None, int | None]
) -> None:
    """`mergeSchema` with new columns: one commit holding the widened schema (the new columns at the
    end, nullable, as Delta adds them) and the rows (plus every old file removed, on overwrite).
    Columns the data lacks are NULL; the table's columns keep their types."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    root = snap.table_root
    current = json.loads(snap.metadata.schema_string)
    merged = {**current, "fields": current["fields"] + [{**f.jsonValue(), "nullable": True} for f in added]}
    schema_string = json.dumps(merged, separators=(",", ":"))
    check_schema_change(snap, spark_schema_to_arrow(schema_string), f"mergeSchema into {root}")
    given = {c.lower(): c for c in df.columns}
    fields = StructType.fromJson(merged).fields
    missing = [f.name for f in fields if not f.nullable and f.name.lower() not in given]
    if missing:
        raise SchemaMismatchError(
            f"the data has no column {', '.join(missing)}, which the table at {root} declares NOT NULL; add the column "
            "to the data"
        )

    def column(f: Any) -> Any:
        if f.name.lower() not in given:
            return F.lit(None).cast(f.dataType).alias(f.name)
        value = F.col(f"`{given[f.name.lower()]}`").cast(f.dataType)
        if not f.nullable:  # as Spark's inserts check a NOT NULL column: a clean error on the first NULL
            value = F.coalesce(value, F.raise_error(F.lit(f"NULL in column {f.name}, which the table at {root} declares NOT NULL")))
        return value.alias(f.name)

    _write_delta(spark, df.select(*[column(f) for f in fields]), snap, mode, [], schema_string=schema_string, app=app)


# --- Qbeast ------------------------------------------------------------------------------------------


def _indexed_columns(snap: Snapshot) -> str:
    """The column specs a write into the table indexes: the ones its properties declare."""
    from use.qbeast.revision import latest_revision_id, revisions_from_configuration

    spec = snap.configuration.get(COLUMNS_TO_INDEX_KEY)
    if spec:
        return spec
    revision = revisions_from_configuration(snap.configuration)[latest_revision_id(snap.configuration)]
    return ",".join(revision.columns)


def _cube_size_of(snap: Snapshot) -> int:
    from use.qbeast.revision import latest_revision_id, revisions_from_configuration

    return revisions_from_configuration(snap.configuration)[latest_revision_id(snap.configuration)].desired_cube_size


def _write_qbeast(spark: SparkSession, df: DataFrame, snap: Snapshot, mode: str) -> None:
    from use.qbeast.writer import write as otree_write

    if mode == "partitions" or snap.partition_columns:
        raise InvalidArgumentError(
            f"the Qbeast table at {snap.table_root} has no partitions to overwrite; INSERT OVERWRITE the whole table"
        )
    if mode == "append":
        otree_write(spark, df, snap.table_root, _indexed_columns(snap), mode="append")
    else:  # overwrite, or a dynamic overwrite of an unpartitioned table: the whole table
        otree_write(spark, df, snap.table_root, _indexed_columns(snap), cube_size=_cube_size_of(snap), mode="overwrite")


# --- Delta -------------------------------------------------------------------------------------------


def _write_delta(
    spark: SparkSession,
    df: DataFrame,
    snap: Snapshot,
    mode: str,
    filters: list[Any],
    *,
    schema_string: str | None = None,
    app: tuple[str | None, int | None] = (None, None),
) -> None:
    """The rows of a write into a Delta table, and the files it replaces, in one commit.
    `schema_string`: a widened schema committed with them (mergeSchema); `app`: the `txn` action
    (txnAppId / txnVersion) the commit carries, when given."""
    from use.delta.actions import remove_actions
    from use.delta.transaction import Transaction
    from use.optimize.executor import delete_written
    from use.spark_files import write_dataframe_files

    root = snap.table_root
    schema = snap.schema if schema_string is None else spark_schema_to_arrow(schema_string)
    app_id, app_version = app
    adds = write_dataframe_files(df, root, schema, partition_columns=snap.partition_columns, configuration=snap.configuration)
    try:
        removed = files_to_replace(snap, mode, adds, filters)
        txn = Transaction(log_for(root), snap)
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
        if adds or removed.num_rows or schema_string is not None or app_id is not None:
            parameters = _parameters(mode, snap.partition_columns)
            if schema_string is not None:
                parameters["mergeSchema"] = "true"
            txn.commit("WRITE", parameters, _metrics(adds, removed.num_rows))
    except BaseException:
        delete_written(root, list(adds))
        raise


def _parameters(mode: str, partition_columns: Any) -> dict[str, Any]:
    return {"mode": _MODES[mode], "partitionBy": json.dumps(list(partition_columns))}


def rows_written(adds: Sequence[AddFile]) -> int:
    """The rows of new files, from the stats the write put in their adds."""
    return sum(int(json.loads(a.stats).get("numRecords", 0)) if a.stats else 0 for a in adds)


def _metrics(adds: Sequence[Any], removed: int) -> dict[str, Any]:
    return {"numFiles": str(len(adds)), "numOutputRows": str(rows_written(adds)), "numRemovedFiles": str(removed)}


# --- CTAS / RTAS -------------------------------------------------------------------------------------


def _write_staged(spark: SparkSession, df: DataFrame, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The one commit of a CTAS (a new table with its data) or an RTAS (the new metadata, every old
    file removed, the new data added)."""
    root, provider = spec["root"], spec["provider"]
    schema = spark_schema_to_arrow(spec["schema"])
    options = spec.get("options") or {}
    properties = spec.get("properties") or {}
    if provider == "qbeast":
        from use.qbeast.writer import write as otree_write

        new_configuration(provider, properties, options, schema, root)  # checks the index options
        configuration = check_properties(properties)
        if spec.get("comment") is not None:
            raise InvalidArgumentError("COMMENT on a Qbeast table written by a query is not supported yet; use COMMENT ON TABLE after")
        otree_write(
            spark,
            df,
            root,
            options[COLUMNS_TO_INDEX_KEY],
            cube_size=_cube_size(options.get(CUBE_SIZE_KEY)),
            mode="append" if spec["mode"] != "replace" else "overwrite",
            column_stats=options.get(COLUMN_STATS_KEY) or None,
            configuration=configuration,
        )
    else:
        _write_delta_staged(spark, df, spec, schema, new_configuration(provider, properties, options, schema, root))
    return {"table": table_json(log_for(root).snapshot(), provider)}


def _write_delta_staged(spark: SparkSession, df: DataFrame, spec: Mapping[str, Any], schema: pa.Schema, conf: dict[str, str]) -> None:
    from use.optimize.executor import delete_written
    from use.spark_files import write_dataframe_files

    root = spec["root"]
    parts = list(spec.get("partitionColumns") or [])
    created_dir = not os.path.exists(root)
    log = log_for(root)
    if spec["mode"] == "replace":
        current = log.snapshot()
        txn = replacement(log, current, spec, schema, conf)
        operation, removed = "CREATE OR REPLACE TABLE AS SELECT", current.num_files
    else:
        txn = log.create_transaction(schema, parts, conf, description=spec.get("comment"))
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
            import shutil

            shutil.rmtree(root, ignore_errors=True)
        raise


# --- which files an overwrite replaces -----------------------------------------------------------


def _typed(value: Any, type_: pa.DataType) -> Any:
    """A partition filter's JSON value as the column's Python value."""
    if value is None:
        return None
    if pa.types.is_date(type_):
        return _dt.date.fromisoformat(str(value)[:10])
    if pa.types.is_timestamp(type_):
        parsed = _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return parsed if parsed.tzinfo or type_.tz is None else parsed.replace(tzinfo=_dt.timezone.utc)
    if pa.types.is_decimal(type_):
        return _decimal.Decimal(str(value))
    if pa.types.is_integer(type_):
        return int(value)
    if pa.types.is_floating(type_):
        return float(value)
    if pa.types.is_boolean(type_):
        return value if isinstance(value, bool) else str(value).lower() == "true"
    return str(value)


def partition_predicate(filters: Sequence[Mapping[str, Any]], schema: pa.Schema) -> Any:
    """The shim's partition filters (INSERT OVERWRITE ... PARTITION) as a typed predicate."""
    from use.delta import predicates as P

    def one(f: Mapping[str, Any]) -> Any:
        op = f["op"]
        if op == "and":
            return P.And(one(f["left"]), one(f["right"]))
        column = f["column"]
        type_ = schema.field(column).type
        if op == "isnull":
            return P.IsNull(column)
        if op == "isnotnull":
            return P.IsNotNull(column)
        if op == "in":
            return P.InList(column, tuple(v for v in (_typed(x.get("value"), type_) for x in f["values"]) if v is not None))
        value = _typed(f.get("value"), type_)
        if value is None:
            return P.IsNull(column) if op == "<=>" else P.InList(column, ())
        return P.Comparison(column, "=", value)

    out = None
    for f in filters:
        p = one(f)
        out = p if out is None else P.And(out, p)
    return out


def files_to_replace(snapshot: Snapshot, mode: str, adds: Sequence[AddFile], filters: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The live files a write removes: all of them (overwrite), those of the partitions it writes
    (dynamic), those matching the static partition filters (partitions), none (append)."""
    files = snapshot.files
    parts = list(snapshot.partition_columns)
    if mode == "append" or not files.num_rows:
        return files.slice(0, 0)
    if mode == "overwrite" or (mode == "dynamic" and not parts):
        return files
    if mode == "dynamic":
        written = {tuple(a.partition_values.get(c) for c in parts) for a in adds}
        keys = [tuple((dict(m or ()).get(c) or None) for c in parts) for m in files.column("partition_values").to_pylist()]
        return files.filter(pa.array([k in written for k in keys], pa.bool_()))
    if mode == "partitions":
        from use.delta.skipping import files_matching

        return files.filter(files_matching(files, partition_predicate(filters, snapshot.schema), snapshot.schema))
    raise InvalidArgumentError(f"unknown write mode {mode!r}")
