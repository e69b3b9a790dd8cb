"""A DataFrame written to a plain Delta table with Spark's save modes, in one commit.

What `DeltaTable.write` (the Python facade) and `df.write.format("delta").save(path)` (the SQL
surface's path writes that create a table, replace its schema or carry a `txn` action) mean by
each mode: `append` (the default; creates the table when missing), `overwrite` (replaces the data
and the schema, and the partitioning when `partition_by` is given), `error`/`errorifexists` (fail
when the table exists) and `ignore` (write nothing when it exists). Everything is checked (mode,
partitioning, schema, the table's format) before any file is written; the files come from the Spark
tasks (`use.runtime.files`) and are committed through `use.delta`'s transaction; a write that fails
deletes what it wrote (and the directory it created).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.pandas.types import to_arrow_schema

from use.delta import DeltaLog
from use.delta.actions import remove_actions
from use.delta.commit_options import NO_COMMIT_OPTIONS, CommitOptions
from use.delta.schema import as_nullable, check_append_schema, check_partition_types, schema_to_json
from use.delta.transaction import check_app_transaction
from use.errors import InvalidArgumentError, TableAlreadyExistsError
from use.runtime.conform import conform_to_table
from use.runtime.files import delete_written, rows_written, write_dataframe_files

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["WRITE_MODES", "DeltaWriteResult", "write_delta_table"]

#: The write modes, as Spark's DataFrameWriter names them.
WRITE_MODES = ("append", "overwrite", "error", "errorifexists", "ignore")


@dataclass(frozen=True)
class DeltaWriteResult:
    """What a write committed (version None: nothing was written, mode='ignore' or a `txn` version
    the table has committed already)."""

    version: int | None
    num_files: int
    num_rows: int


def write_delta_table(
    df: DataFrame,
    path: str,
    mode: str = "append",
    partition_by: Sequence[str] | str | None = None,
    *,
    configuration: Mapping[str, str] | None = None,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    commit_options: CommitOptions = NO_COMMIT_OPTIONS,
) -> DeltaWriteResult:
    """Write `df` to the plain Delta table at `path` in `mode` (module docstring), in one commit.

    `partition_by` names the partition columns; on append it must match the table's.
    `configuration`: a new table's properties, already checked by the caller
    (`use.optimize.properties.check_configuration`, which this layer cannot reach); refused for a
    table that exists. `txn_app_id`/`txn_version` make the write idempotent (Delta's `txn` action):
    a version the table has already committed for that app id writes nothing. `commit_options`: the
    writing statement's (its user metadata, a new table's default properties, the recorder of its
    commits for auto compaction).
    """
    mode_key = mode.lower() if isinstance(mode, str) else mode
    if mode_key not in WRITE_MODES:
        raise InvalidArgumentError(f"mode must be one of {', '.join(WRITE_MODES)}, got {mode!r}")
    if not isinstance(path, str) or not path:
        raise InvalidArgumentError(f"a table path must be a non-empty string, got {path!r}")
    check_app_transaction(txn_app_id, txn_version)
    parts = _partition_list(partition_by)
    root = os.path.abspath(path)
    log = DeltaLog.for_path(root)
    snap = log.snapshot() if log.exists() else None
    if snap is not None and snap.has_app_transaction(txn_app_id, txn_version):
        return DeltaWriteResult(None, 0, 0)  # this write already happened
    if snap is not None:
        if mode_key in ("error", "errorifexists"):
            raise TableAlreadyExistsError(
                f"a Delta table already exists at {root} (mode={mode!r}); write with mode='append' or "
                "'overwrite', or choose another path"
            )
        if mode_key == "ignore":
            return DeltaWriteResult(None, 0, 0)
        if any(k.startswith("qbeast.") for k in snap.metadata.configuration):
            raise InvalidArgumentError(
                f"the table at {root} is a Qbeast table; write to it with QbeastTable.write(df, path, "
                "columns_to_index) so its rows are indexed"
            )
        if configuration:
            raise InvalidArgumentError(
                f"properties= applies to a new table only, and {root} exists; change its properties with "
                "DeltaTable.for_path(spark, path).set_properties(...)"
            )
    data_schema = to_arrow_schema(df.schema, prefers_large_types=False)
    if snap is not None and mode_key == "append":
        check_append_schema(data_schema, snap.schema, root)
        df = conform_to_table(df, snap.metadata.schema_string)  # a type widened without loss: the table's
        table_parts = list(snap.metadata.partition_columns)
        if partition_by is not None and parts != table_parts:
            raise InvalidArgumentError(
                f"partition_by={parts} differs from the partitioning {table_parts} of {root}; append without "
                "partition_by (or with the same columns), or overwrite the table to repartition it"
            )
        parts, schema = table_parts, snap.schema
        new_configuration = dict(snap.metadata.configuration)
    else:
        # a new (or replaced) table's columns are nullable, as Delta stores them: a column the first
        # rows happened to fill must not refuse NULLs in later writes (`as_nullable`)
        schema = as_nullable(data_schema)
        if snap is not None and partition_by is None:  # an overwrite keeps the partitioning unless told
            parts = list(snap.metadata.partition_columns)
        check_partition_types(schema, parts, "the DataFrame")
        new_configuration = dict(configuration or {}) if snap is None else dict(snap.metadata.configuration)

    # Everything (schema, partitions, properties) is checked before any file is written.
    if snap is None:
        txn = log.create_transaction(schema, parts, new_configuration, commit_options=commit_options)
    else:
        txn = log.start_transaction(commit_options=commit_options)
        if mode_key == "overwrite":
            new_meta = replace(snap.metadata, schema_string=schema_to_json(schema), partition_columns=tuple(parts))
            if new_meta != snap.metadata:
                txn.add(new_meta)
            txn.read_whole_table()
            txn.add(*remove_actions(txn.snapshot.files, data_change=True))
    created_root = not os.path.isdir(root)
    os.makedirs(root, exist_ok=True)
    adds: tuple[Any, ...] = ()
    try:
        adds = write_dataframe_files(df, root, schema, partition_columns=parts, configuration=new_configuration)
        txn.add(*adds)
        if txn_app_id is not None:
            txn.set_app_transaction(txn_app_id, int(txn_version))  # type: ignore[arg-type]
        rows = rows_written(adds)
        spark_mode = {"append": "Append", "overwrite": "Overwrite", "ignore": "Ignore"}.get(mode_key, "ErrorIfExists")
        version = txn.commit(
            "WRITE",
            {"mode": spark_mode, "partitionBy": json.dumps(parts)},
            {"numFiles": str(len(adds)), "numOutputRows": str(rows)},
        )
    except BaseException:
        delete_written(root, list(adds))
        if created_root:
            _remove_empty_dirs(root)
        raise
    return DeltaWriteResult(version, len(adds), rows)


def _partition_list(partition_by: Sequence[str] | str | None) -> list[str]:
    if partition_by is None:
        return []
    items = [partition_by] if isinstance(partition_by, str) else list(partition_by)
    if not all(isinstance(c, str) and c for c in items):
        raise InvalidArgumentError(f"partition_by must be a column name or a list of column names, got {partition_by!r}")
    if len(set(items)) != len(items):
        raise InvalidArgumentError(f"partition_by {items} names a column twice")
    return items


def _remove_empty_dirs(root: str) -> None:
    """Remove `root` and the directories under it that are empty (a failed first write leaves
    partition directories behind); anything holding a file stays."""
    for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass
