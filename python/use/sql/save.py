"""`df.write.format("delta"|"qbeast").save(path)` and the streaming sink (the shim's path provider):
what Spark's save mode means for the path, as Delta's writer says, and the writes that cannot go
through the catalog's write (`use.sql.write`): a new table, `mergeSchema` with new columns,
`txnAppId`/`txnVersion`, and qbeast-spark's options on `format("qbeast")`. The DataFrame arrives
as the user gave it, so these writes check the schema themselves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from use.delta.commit_options import CommitOptions
from use.delta.log_cache import shared_log
from use.delta.schema import check_append_schema, check_no_void, nullable_type, write_type_problem
from use.delta.transaction import check_app_transaction
from use.errors import IndexColumnError, InvalidArgumentError, NotAQbeastTableError, SchemaMismatchError, TableAlreadyExistsError
from use.qbeast.revision import cube_size_option, is_qbeast
from use.qbeast.writer import write as otree_write
from use.runtime.conform import conform_to_table
from use.runtime.delta_write import write_delta_table
from use.sql.protocol import SaveReply, SaveRequest
from use.sql.sessions import dataframe
from use.sql.tables import check_properties, check_schema_change, spark_schema_to_arrow, table_root
from use.sql.write import cube_size_of, dynamic_overwrite, indexed_columns, write_delta, write_replacing_where

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from use.delta.snapshot import Snapshot


#: Spark's SaveMode names, as the V1 write passes them, to `write_delta_table`'s modes.
_SAVE_MODES = {"Append": "append", "Overwrite": "overwrite", "ErrorIfExists": "errorifexists", "Ignore": "ignore"}


def save_path(spark: SparkSession, req: SaveRequest, args: list[Any], commit_options: CommitOptions) -> SaveReply:
    """`df.write.format("delta").save(path)` in any save mode, with Delta's semantics (the shim's
    `DeltaPathProvider.createRelation`). A path without a table gets one, created by this write in
    one commit (`use.runtime.delta_write.write_delta_table`, as `DeltaTable.write`: partitioned by
    `partitionBy`, `delta.*` writer options as its properties) whatever the mode; on an existing
    table `errorifexists` fails and `ignore` writes nothing, and `append` / `overwrite` are answered
    `SaveReply(write=mode)` (`dynamic` for
    Delta's `partitionOverwriteMode=dynamic`): the shim then writes through the catalog as
    `INSERT INTO` / `INSERT OVERWRITE delta.`root`` do, so rows are matched to the table's columns
    by name and a Qbeast table's rows are indexed. `format("qbeast")` saves are `_save_qbeast`'s. Written here
    instead, in one commit each: an overwrite with `overwriteSchema` (`_write_replacing_schema`) or
    `replaceWhere` (`use.sql.write.write_replacing_where`),
    `mergeSchema` with new columns (`_write_merged`: the widened
    schema and the rows) and a write with `txnAppId`/`txnVersion` (`_write_idempotent`: the rows
    and the `txn` action; a version already committed for the app id writes nothing), which the
    streaming sink uses for every micro-batch."""
    mode = _SAVE_MODES.get(req.mode)
    if mode is None:
        raise InvalidArgumentError(f"unknown save mode {req.mode!r}; use append, overwrite, errorifexists or ignore")
    options = dict(req.options)
    merge_schema, overwrite_schema = _option_on(options, "mergeSchema"), _option_on(options, "overwriteSchema")
    app_id, app_version = _txn_options(options)
    parts = list(req.partition_columns) if req.partition_columns is not None else None
    root = table_root(req.path)
    log = shared_log(root)
    if req.format == "qbeast":
        return _save_qbeast(spark, dataframe(spark, args[0]), root, mode, options, parts, (app_id, app_version), commit_options)
    if not log.exists():
        df = dataframe(spark, args[0])
        properties = check_properties({k: v for k, v in options.items() if k.lower().startswith("delta.")})
        write_delta_table(
            df, root, mode=mode, partition_by=parts, configuration=properties, txn_app_id=app_id, txn_version=app_version,
            commit_options=commit_options,
        )  # fmt: skip
        return SaveReply(created=True, root=root)
    if mode == "errorifexists":
        raise TableAlreadyExistsError(
            f"a Delta table already exists at {root} (save mode errorifexists, Spark's default): write with "
            '.mode("append") to add rows or .mode("overwrite") to replace them, or save to another path'
        )
    if mode == "ignore":
        return SaveReply(created=False, root=root)
    snap = log.snapshot()
    if snap.has_app_transaction(app_id, app_version):
        return SaveReply(created=False, root=root)  # this batch was written already
    df = dataframe(spark, args[0])
    # a stream's complete mode replaces the table whatever the session's overwrite mode
    dynamic = mode == "overwrite" and dynamic_overwrite(None if req.stream else spark, options)
    replace_where = next((v for k, v in options.items() if k.lower() == "replacewhere"), None) if mode == "overwrite" else None
    if replace_where is not None and (dynamic or overwrite_schema or app_id is not None):
        raise InvalidArgumentError(
            "replaceWhere replaces the rows matching its condition and cannot be combined with "
            "partitionOverwriteMode=dynamic, overwriteSchema or txnAppId; drop one of them"
        )
    if overwrite_schema and mode == "overwrite":
        if dynamic:
            raise InvalidArgumentError(
                "overwriteSchema=true replaces the whole table (rows, schema, partitioning) and cannot be combined with a "
                "dynamic partition overwrite (partitionOverwriteMode=dynamic), as in Delta: drop one of the two options"
            )
        _write_replacing_schema(spark, df, snap, parts, (app_id, app_version), commit_options)
        return SaveReply(created=False, root=root)
    # every other write keeps the table's schema, so the data must fit it (new columns only with mergeSchema)
    added = _columns_to_add(snap, df, merge_schema)
    if replace_where is not None:
        if added:
            raise InvalidArgumentError(
                f"replaceWhere with new columns ({', '.join(f['name'] for f in added)}, mergeSchema) is not supported "
                "yet; add the columns first (ALTER TABLE ... ADD COLUMNS), then replace the rows"
            )
        write_replacing_where(spark, df, snap, replace_where, commit_options)
        return SaveReply(created=False, root=root)
    if parts is not None:
        current = list(snap.partition_columns)
        if [str(p) for p in parts] != current:
            raise InvalidArgumentError(
                f"partitionBy({', '.join(map(repr, parts))}) differs from the partitioning of the table at {root} "
                f"({', '.join(current) or 'none'}); leave partitionBy out to write into the table as it is partitioned"
            )
    if added:
        _refuse_dynamic(dynamic, "mergeSchema with new columns")
        _write_merged(spark, df, snap, mode, added, (app_id, app_version), commit_options)
        return SaveReply(created=False, root=root)
    if app_id is not None:
        _refuse_dynamic(dynamic, "txnAppId/txnVersion")
        _write_idempotent(spark, df, snap, mode, app_id, int(app_version), commit_options)  # type: ignore[arg-type]
        return SaveReply(created=False, root=root)
    return SaveReply(created=False, root=root, write="dynamic" if dynamic else mode)


def _option_on(options: Mapping[str, str], name: str) -> bool:
    """A boolean writer option (`mergeSchema`, `overwriteSchema`) given as true, in any case."""
    return any(k.lower() == name.lower() and str(v).strip().lower() == "true" for k, v in options.items())


def _write_replacing_schema(
    spark: SparkSession,
    df: DataFrame,
    snap: Snapshot,
    parts: Sequence[str] | None,
    app: tuple[str | None, int | None],
    commit_options: CommitOptions,
) -> None:
    """Delta's `overwriteSchema=true` with an overwrite: the table's rows and schema become the
    DataFrame's, and its partitioning `partitionBy`'s columns (none without it, as Delta's writer
    does); its properties, id and history stay. A Qbeast table's rows are indexed again on the
    columns it indexes, which the new schema must have. One commit."""
    root = snap.table_root
    if is_qbeast(snap.configuration):
        if parts:
            raise InvalidArgumentError(
                f"partitionBy({', '.join(map(repr, parts))}) with overwriteSchema: the Qbeast table at {root} is not "
                "partitioned (the index clusters the rows instead); leave partitionBy out"
            )
        otree_write(
            spark, df, root, indexed_columns(snap), cube_size=cube_size_of(snap), mode="overwrite",
            txn_app_id=app[0], txn_version=app[1], commit_options=commit_options,
        )  # fmt: skip
    else:
        write_delta_table(
            df, root, mode="overwrite", partition_by=list(parts or []), txn_app_id=app[0], txn_version=app[1],
            commit_options=commit_options,
        )  # fmt: skip


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
    commit_options: CommitOptions,
) -> SaveReply:
    """`df.write.format("qbeast").save(path)` with qbeast-spark's writer options: a new table is
    indexed on `columnsToIndex` (required; `cubeSize`, `columnStats` optional), an append extends
    the table's index (a different `cubeSize` starts a revision, as `QbeastTable.write`), an
    overwrite re-indexes the rows (on `columnsToIndex`, else the table's columns); the save modes
    mean what they mean for `format("delta")`. All through the OTree write, in one commit."""
    lowered = {k.lower(): v for k, v in options.items()}
    columns, cube, stats = lowered.get("columnstoindex"), lowered.get("cubesize"), lowered.get("columnstats")
    if parts:
        raise InvalidArgumentError(
            f"partitionBy({', '.join(map(repr, parts))}): Qbeast tables are not partitioned (the index clusters the "
            'rows instead); leave partitionBy out, or write a partitioned Delta table with format("delta")'
        )
    cube_size = cube_size_option(cube, None)
    log = shared_log(root)
    snap = log.snapshot() if log.exists() else None
    if snap is None:
        if not columns:
            raise IndexColumnError(
                f'format("qbeast") creates the table at {root} and needs its index columns: add '
                '.option("columnsToIndex", "x,y") (and optionally .option("cubeSize", "5000000"))'
            )
    elif mode in ("errorifexists", "ignore"):
        if mode == "ignore":
            return SaveReply(created=False, root=root)
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
        return SaveReply(created=False, root=root)
    elif mode == "overwrite" and "replacewhere" in lowered:  # the rows matching it, not the whole table
        write_replacing_where(spark, df, snap, lowered["replacewhere"], commit_options)
        return SaveReply(created=False, root=root)
    else:
        columns = columns or indexed_columns(snap)
        if cube_size is None and mode == "overwrite":
            cube_size = cube_size_of(snap)
    write_mode = "append" if snap is None or mode != "overwrite" else "overwrite"
    otree_write(
        spark, df, root, columns, cube_size=cube_size, mode=write_mode, column_stats=stats or None,
        txn_app_id=app[0], txn_version=app[1], commit_options=commit_options,
    )  # fmt: skip
    return SaveReply(created=snap is None, root=root)


def _txn_options(options: Mapping[str, str]) -> tuple[str | None, int | None]:
    """Delta's writer options for an idempotent write, `txnAppId` and `txnVersion` (a streaming
    `foreachBatch` passes its query id and batch id), checked as `DeltaTable.write` checks them."""
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


def _write_idempotent(
    spark: SparkSession, df: DataFrame, snap: Snapshot, mode: str, app_id: str, version: int, commit_options: CommitOptions
) -> None:
    """An append or overwrite with `txnAppId`/`txnVersion` into an existing table: written here, so
    that its commit holds the `txn` action with the rows (the catalog's write has no place for it).
    The data's columns must be the table's (an overwrite keeps the table's schema, as Delta's does)."""
    check_append_schema(to_arrow_schema(df.schema, prefers_large_types=False), snap.schema, snap.table_root)
    df = conform_to_table(df, snap.metadata.schema_string)
    if is_qbeast(snap.configuration):
        otree_write(
            spark, df, snap.table_root, indexed_columns(snap), mode=mode, txn_app_id=app_id, txn_version=version,
            commit_options=commit_options,
        )  # fmt: skip
    else:
        write_delta_table(df, snap.table_root, mode=mode, txn_app_id=app_id, txn_version=version, commit_options=commit_options)


def _columns_to_add(snap: Snapshot, df: DataFrame, merge_schema: bool) -> list[dict[str, Any]]:
    """The data's columns the table does not have (schemaString fields, in the data's order), which
    `mergeSchema` adds; checked first, as Delta's DataFrame writer checks them, so that a write that
    cannot go in is refused before anything is written, with or without mergeSchema alike:
    - a column the table has takes data of its type or of one it holds without loss
      (`use.delta.schema.write_type_problem`; NULLs aside: a NOT NULL column is checked as the rows
      are written); narrowing (bigint into int, double into float) or converting is refused, not
      cast, since a cast could change the values;
    - a column the table lacks needs `mergeSchema` (Delta's advice in its schema-mismatch error),
      must have a type (not all-NULL `void`, `check_no_void`), and a Qbeast table takes none yet."""
    table = {f["name"].lower(): f for f in json.loads(snap.metadata.schema_string)["fields"]}
    data = df.schema.jsonValue()["fields"]
    added = [f for f in data if f["name"].lower() not in table]
    problems = [
        p
        for f in data
        if f["name"].lower() in table and (p := write_type_problem(f["type"], table[f["name"].lower()]["type"], f["name"]))
    ]
    root = snap.table_root
    if problems:
        raise SchemaMismatchError(
            f"the data does not fit the columns of the table at {root}: {'; '.join(problems)}. A write keeps the table's "
            "column types and nested fields (mergeSchema adds top-level columns; it does not change a column's type, and "
            "a nested field is added with ALTER TABLE ... ADD COLUMNS (s.x <type>) first) and takes only data it holds "
            "without a cast that could change values: cast the data to the table's type (e.g. "
            'df.withColumn("c", col("c").cast("int"))), or replace the table with mode("overwrite") and '
            'option("overwriteSchema", "true")'
        )
    if added and not merge_schema:
        names = ", ".join(f["name"] for f in added)
        raise SchemaMismatchError(
            f"the data has column(s) {names} that the table at {root} does not have (its columns: "
            f"{', '.join(f['name'] for f in table.values())}); to add them to the table, write with "
            '.option("mergeSchema", "true") (as Delta asks), or select only the table\'s columns'
        )
    if added:
        check_no_void(added, f"the table at {root}")
        if is_qbeast(snap.configuration):
            raise InvalidArgumentError(
                f"mergeSchema into the Qbeast table at {root} is not supported yet; add the columns first "
                f"(ALTER TABLE qbeast.`{root}` ADD COLUMNS (...)), then append"
            )
    return added


def _write_merged(
    spark: SparkSession,
    df: DataFrame,
    snap: Snapshot,
    mode: str,
    added: Sequence[dict[str, Any]],
    app: tuple[str | None, int | None],
    commit_options: CommitOptions,
) -> None:
    """`mergeSchema` with new columns: one commit holding the widened schema (the new columns at the
    end, nullable to the last nested field, as Delta adds them: `nullable_type`) and the rows (plus
    every old file removed, on overwrite). Columns the data lacks are NULL; the table's columns keep
    their types (`conform_to_table` casts the data to them)."""
    root = snap.table_root
    current = json.loads(snap.metadata.schema_string)
    new_fields = [{**f, "type": nullable_type(f["type"]), "nullable": True} for f in added]
    merged = {**current, "fields": current["fields"] + new_fields}
    schema_string = json.dumps(merged, separators=(",", ":"))
    check_schema_change(snap, spark_schema_to_arrow(schema_string), f"mergeSchema into {root}")
    given = {c.lower() for c in df.columns}
    required = [f["name"] for f in merged["fields"] if not f.get("nullable", True)]
    missing = [name for name in required if name.lower() not in given]
    if missing:
        raise SchemaMismatchError(
            f"the data has no column {', '.join(missing)}, which the table at {root} declares NOT NULL; add the column "
            "to the data"
        )
    rows = conform_to_table(df, schema_string)
    # as Spark's inserts check a NOT NULL column: a clean error on the first NULL
    rows = rows.select(*[
        F.coalesce(F.col(f"`{c}`"), F.raise_error(F.lit(f"NULL in column {c}, which the table at {root} declares NOT NULL"))).alias(c)
        if c in required else F.col(f"`{c}`")
        for c in rows.columns
    ])  # fmt: skip
    write_delta(spark, rows, snap, mode, [], commit_options=commit_options, schema_string=schema_string, app=app)
