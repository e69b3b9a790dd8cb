"""SQL writes: INSERT INTO / INSERT OVERWRITE, `writeTo(...).append()/.overwritePartitions()`,
`saveAsTable`, CTAS and RTAS. Spark has already resolved and cast the query to the table's schema
(a mismatch is Spark's own analysis error); the DataFrame arrives here with the write's mode.

Into a Qbeast table the rows go through the OTree write (`use.qbeast.writer.write`, the code
behind `QbeastTable.write`, JVM path included); into a Delta table through `use.sql.delta_write`.
Either way one commit per statement, under Delta's conflict rules, and a write that fails leaves
no commit and no file behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from use.errors import InvalidArgumentError
from use.qbeast.revision import COLUMN_STATS_KEY, COLUMNS_TO_INDEX_KEY, CUBE_SIZE_KEY
from use.sql import delta_write
from use.sql.bridge import dataframe
from use.sql.tables import (
    _cube_size,
    check_properties,
    is_qbeast,
    log_for,
    new_configuration,
    replacement,
    snapshot_of,
    spark_schema_to_arrow,
    table_json,
    write_options,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

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


def _write_delta(spark: SparkSession, df: DataFrame, snap: Snapshot, mode: str, filters: list[Any]) -> None:
    from use.delta.actions import remove_actions
    from use.delta.transaction import Transaction

    root = snap.table_root
    adds, prefix = delta_write.write_files(spark, df, root, snap.schema, snap.partition_columns, snap.configuration)
    try:  # the files are written (a failed write removed its own); commit them or remove them
        removed = delta_write.files_to_replace(snap, mode, adds, filters)
        txn = Transaction(log_for(root), snap)
        if mode != "append":
            txn.read_whole_table()
        if removed.num_rows:
            txn.add(*remove_actions(removed, data_change=True))
        if adds:
            txn.add(*adds)
        if adds or removed.num_rows:
            txn.commit("WRITE", _parameters(mode, snap.partition_columns), _metrics(adds, removed.num_rows))
    except BaseException:
        delta_write.delete_files(root, prefix)
        raise
    delta_write.finish(root, prefix)


def _parameters(mode: str, partition_columns: Any) -> dict[str, Any]:
    return {"mode": _MODES[mode], "partitionBy": json.dumps(list(partition_columns))}


def _metrics(adds: list[Any], removed: int) -> dict[str, Any]:
    rows = 0
    for a in adds:
        rows += int(json.loads(a.stats).get("numRecords", 0)) if a.stats else 0
    return {"numFiles": str(len(adds)), "numOutputRows": str(rows), "numRemovedFiles": str(removed)}


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
        configuration = check_properties(properties, [], properties, None, qbeast=True)
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
    root = spec["root"]
    parts = list(spec.get("partitionColumns") or [])
    created_dir = not os.path.exists(root)
    log = log_for(root)
    prefix = None
    try:
        adds, prefix = delta_write.write_files(spark, df, root, schema, parts, conf)
        if spec["mode"] != "replace":
            log.create(
                schema, parts, configuration=conf, description=spec.get("comment"), adds=adds,
                operation="CREATE TABLE AS SELECT",
            )  # fmt: skip
            delta_write.finish(root, prefix)
            return
        current = log.snapshot()
        txn = replacement(log, current, spec, schema, conf)
        if adds:
            txn.add(*adds)
        txn.commit("CREATE OR REPLACE TABLE AS SELECT", {"partitionBy": json.dumps(parts)}, _metrics(adds, current.num_files))
        delta_write.finish(root, prefix)
    except BaseException:
        if prefix is not None:
            delta_write.delete_files(root, prefix)
        if created_dir and not log.exists():
            import shutil

            shutil.rmtree(root, ignore_errors=True)
        raise

