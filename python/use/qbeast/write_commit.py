"""Committing an OTree write (qbeast-format spec §7): the Delta actions a write's files and
revision become, in one commit. Pure: no Spark; the files are already written.

On an existing table a `metaData` action is written only when the revision changes or on
overwrite (plain appends that keep the revision write none, as qbeast-spark), and an overwrite
removes every live file of the snapshot the write was planned on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from use.delta.actions import AddFile, Metadata
from use.qbeast.revision import COLUMN_STATS_KEY, Revision, adds_revisions_only, configuration_with_revision

if TYPE_CHECKING:
    from use.qbeast.snapshot import QbeastSnapshot

__all__ = ["MODES", "commit_write", "metadata_with_configuration"]

MODES = {"append": "Append", "overwrite": "Overwrite"}
"""The write modes and their names in `commitInfo.operationParameters.mode`."""


def commit_write(
    log: Any,
    snapshot: Any,
    revision: Revision,
    is_new: bool,
    mode: str,
    adds: list[AddFile],
    num_rows: int,
    data_schema: pa.Schema,
    *,
    column_stats: Mapping[str, Any] | str | None,
    columns_to_index: Sequence[str] | str,
    txn_app_id: str | None,
    txn_version: int | None,
    configuration: Mapping[str, str] | None = None,
) -> int:
    """One Delta commit for the write; returns the table version after it.

    A new table (`snapshot` None) is created by this very commit: version 0 holds the protocol,
    the `metaData` with the revision (only the staging revision when nothing was written) and the
    files, as Delta and qbeast-spark write a new table, so no reader ever sees it empty. On an
    existing table a `metaData` action is written only when the revision changes or on overwrite,
    and an overwrite removes every live file of the snapshot the write was planned on (and declares
    it read the whole table, so a concurrent append makes it fail rather than be silently dropped).
    A new table's schema, and an overwrite's, is stored nullable as Delta stores a written schema.
    `configuration` is a new table's properties, and an overwrite's new ones (None keeps them): an
    overwrite by no rows then still commits them, with only the staging revision.
    """
    from use.delta.actions import SetTransaction, remove_actions
    from use.delta.schema import as_nullable, schema_to_json
    from use.delta.transaction import Transaction
    from use.qbeast.revision import staging_revision

    extra = {COLUMN_STATS_KEY: column_stats_text(column_stats)}
    wrote = bool(num_rows) and bool(revision.transformations)
    parameters = {"mode": MODES[mode], "partitionBy": json.dumps([])}
    if snapshot is None:
        declared = revision if wrote else staging_revision(
            revision.table_id, revision.columns, revision.desired_cube_size, int(time.time() * 1000)
        )
        conf = configuration_with_revision(
            dict(configuration or {}), declared, add_staging=True, overwrite=True, extra=extra,
            columns_to_index=columns_to_index,
        )  # fmt: skip
        txns = []
        if txn_app_id is not None:
            txns.append(SetTransaction(txn_app_id, int(txn_version), int(time.time() * 1000)))  # type: ignore[arg-type]
        created = log.create(
            as_nullable(data_schema),
            configuration=conf,
            actions=[*adds, *txns],
            operation="WRITE",
            operation_parameters=parameters,
            operation_metrics={"numFiles": str(len(adds)), "numOutputRows": str(num_rows)},
        )
        return int(created.version)
    metadata_action: Metadata | None = None
    removes: list[Any] = []
    overwrite = mode == "overwrite"
    base = configuration if overwrite and configuration is not None else snapshot.metadata.configuration
    if overwrite and configuration is not None and not wrote:
        revision = staging_revision(revision.table_id, revision.columns, revision.desired_cube_size, int(time.time() * 1000))
    if (wrote and (is_new or overwrite)) or (overwrite and configuration is not None):
        conf = configuration_with_revision(
            base,
            revision,
            add_staging=True,
            overwrite=overwrite,
            extra=extra,
            columns_to_index=columns_to_index,
        )
        schema_string = schema_to_json(as_nullable(data_schema)) if overwrite else snapshot.metadata.schema_string
        metadata_action = replace(snapshot.metadata, configuration=conf, schema_string=schema_string)
    if mode == "overwrite":
        removes = remove_actions(snapshot.files, data_change=True)
    if not (adds or removes or metadata_action is not None or txn_app_id is not None):
        return int(snapshot.version)
    # The transaction is based on the snapshot the write was planned on, so every commit since then
    # goes through the conflict checks.
    txn = Transaction(log, snapshot)
    # an index revision added meanwhile (the service indexing staged rows) leaves this write's files valid
    txn.tolerate_metadata_change(adds_revisions_only)
    if metadata_action is not None:
        txn.add(metadata_action)
    if mode == "overwrite":
        txn.read_whole_table()
    if removes:
        txn.add(*removes)
    if adds:
        txn.add(*adds)
    if txn_app_id is not None:
        txn.set_app_transaction(txn_app_id, int(txn_version))  # type: ignore[arg-type]
    return txn.commit(
        "WRITE",
        parameters,
        {"numFiles": str(len(adds)), "numOutputRows": str(num_rows), "numRemovedFiles": str(len(removes))},
    )


def column_stats_text(column_stats: Mapping[str, Any] | str | None) -> str:
    """The `columnStats` option as the table property keeps it (JSON text, `""` when absent)."""
    if column_stats is None:
        return ""
    if isinstance(column_stats, str):
        return column_stats
    return json.dumps(dict(column_stats), separators=(",", ":"))


def metadata_with_configuration(qsnap: QbeastSnapshot, conf: dict[str, str]) -> Metadata:
    """The table's `metaData` at the snapshot's version with new table properties."""
    from use.delta.log import DeltaLog

    current = DeltaLog.for_path(qsnap.table_root).snapshot(version=qsnap.version).metadata
    return replace(current, configuration=conf)

