"""Committing an OTree write (qbeast-format spec §7): the Delta actions a write's files and
revision become, in one commit. Pure: no Spark; the files are already written.

On an existing table a `metaData` action is written only when the revision changes or on
overwrite (plain appends that keep the revision write none, as qbeast-spark), and an overwrite
removes every live file of the snapshot the write was planned on.

An append that opens a revision can lose to a concurrent commit that opened one too (the service
indexing staged rows, another drifting append): both define the next revision id, so the append's
cannot land beside it. Rather than fail a user's append over the optimizer's bookkeeping, its files
are committed as staging files (revision 0, no index tags: every read scans them, samples stay
exact) without the revision, and the optimizer indexes them into the table's latest revision.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from use.delta.actions import AddFile, Metadata, SetTransaction, remove_actions
from use.delta.commit_options import NO_COMMIT_OPTIONS, CommitOptions
from use.delta.log import DeltaLog
from use.delta.schema import as_nullable, schema_to_json
from use.delta.transaction import Transaction
from use.errors import MetadataChangedError
from use.qbeast.revision import (
    COLUMN_STATS_KEY,
    LAST_REVISION_KEY,
    REVISION_PREFIX,
    STAGING_ID,
    Revision,
    adds_revisions_only,
    configuration_with_revision,
    latest_revision_id,
    revisions_from_configuration,
    staging_revision,
)

if TYPE_CHECKING:
    from use.qbeast.snapshot import QbeastSnapshot

__all__ = ["MODES", "Committed", "commit_write", "metadata_with_configuration"]

MODES = {"append": "Append", "overwrite": "Overwrite"}
"""The write modes and their names in `commitInfo.operationParameters.mode`."""


@dataclass(frozen=True)
class Committed:
    """A write's commit: the table version after it, and the revision its files joined (the
    write's own, or `STAGING_ID` when its new revision lost to a concurrent one)."""

    version: int
    revision_id: int


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
    commit_options: CommitOptions = NO_COMMIT_OPTIONS,
) -> Committed:
    """One Delta commit for the write.

    A new table (`snapshot` None) is created by this very commit: version 0 holds the protocol,
    the `metaData` with the revision (only the staging revision when nothing was written) and the
    files, as Delta and qbeast-spark write a new table, so no reader ever sees it empty. On an
    existing table a `metaData` action is written only when the revision changes or on overwrite,
    and an overwrite removes every live file of the snapshot the write was planned on (and declares
    it read the whole table, so a concurrent append makes it fail rather than be silently dropped).
    A new table's schema, and an overwrite's, is stored nullable as Delta stores a written schema.
    `configuration` is a new table's properties, and an overwrite's new ones (None keeps them): an
    overwrite by no rows then still commits them, with only the staging revision. `commit_options`:
    the writing statement's (`use.delta.commit_options`).
    """
    extra = {COLUMN_STATS_KEY: column_stats_text(column_stats)}
    wrote = bool(num_rows) and bool(revision.transformations)
    parameters = {"mode": MODES[mode], "partitionBy": json.dumps([])}
    if snapshot is None:
        declared = (
            revision
            if wrote
            else staging_revision(revision.table_id, revision.columns, revision.desired_cube_size, int(time.time() * 1000))
        )
        conf = configuration_with_revision(
            dict(configuration or {}), declared, add_staging=True, overwrite=True, extra=extra,
            columns_to_index=columns_to_index,
        )  # fmt: skip
        txns = []
        if txn_app_id is not None and txn_version is not None:
            txns.append(SetTransaction(txn_app_id, txn_version, int(time.time() * 1000)))
        created = log.create(
            as_nullable(data_schema),
            configuration=conf,
            actions=[*adds, *txns],
            operation="WRITE",
            operation_parameters=parameters,
            operation_metrics={"numFiles": str(len(adds)), "numOutputRows": str(num_rows)},
            commit_options=commit_options,
        )
        return Committed(int(created.version), revision.revision_id)
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
        return Committed(int(snapshot.version), revision.revision_id)

    def attempt(metadata: Metadata | None, files: list[AddFile]) -> int:
        # The transaction is based on the snapshot the write was planned on, so every commit since
        # then goes through the conflict checks.
        txn = Transaction(log, snapshot, commit_options=commit_options)
        # an index revision added meanwhile (the service indexing staged rows) leaves this write's files valid
        txn.tolerate_metadata_change(adds_revisions_only)
        if metadata is not None:
            txn.add(metadata)
        if mode == "overwrite":
            txn.read_whole_table()
        if removes:
            txn.add(*removes)
        if files:
            txn.add(*files)
        if txn_app_id is not None and txn_version is not None:
            txn.set_app_transaction(txn_app_id, txn_version)
        metrics = {"numFiles": str(len(files)), "numOutputRows": str(num_rows), "numRemovedFiles": str(len(removes))}
        return txn.commit("WRITE", parameters, metrics)

    try:
        return Committed(attempt(metadata_action, adds), revision.revision_id)
    except MetadataChangedError:
        if metadata_action is None or mode != "append" or not _opens_revision_only(snapshot, metadata_action, revision):
            raise
    # Another commit opened a revision meanwhile: these files join the staging revision instead
    # (the second attempt checks every commit since the snapshot again, so any other change still fails it).
    return Committed(attempt(None, [replace(a, tags=None) for a in adds]), STAGING_ID)


def _opens_revision_only(snapshot: Any, metadata: Metadata, revision: Revision) -> bool:
    """Whether the write's `metadata` differs from the snapshot's by `revision` alone, a revision
    opened because the rows left the latest one's ranges: same indexed columns and cube size (a
    changed cube size, or new columnStats, is the user's request and must not be dropped)."""
    read = dict(snapshot.metadata.configuration)
    latest = revisions_from_configuration(read).get(latest_revision_id(read))
    if (
        latest is None
        or latest.is_staging
        or (latest.columns, latest.desired_cube_size)
        != (
            revision.columns,
            revision.desired_cube_size,
        )
    ):
        return False
    mine = {f"{REVISION_PREFIX}{revision.revision_id}", LAST_REVISION_KEY}
    new = dict(metadata.configuration)
    return all(new.get(k) == read.get(k) for k in (set(read) | set(new)) - mine) and adds_revisions_only(
        snapshot.metadata, metadata
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
    current = DeltaLog.for_path(qsnap.table_root).snapshot(version=qsnap.version).metadata
    return replace(current, configuration=conf)
