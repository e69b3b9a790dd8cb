"""`spark.readStream.format("delta"|"qbeast").load(path)`: which files each micro-batch of a stream
reading a table takes (the shim's `UseStreamSource` reads them with Spark's parquet reader).

A stream's offset is a table version. Its first batch is the table as of the version the stream
starts at (every live file), or with `startingVersion` (or `startingTimestamp`: the first version
committed at or after it) the rows committed from that version on;
each later batch the files added by the commits after the previous offset, as Delta's streaming
source does. Only files added as new data count (`dataChange=true`): OPTIMIZE, the service's
continuous optimization and a Qbeast re-indexing rewrite rows that the stream has already seen,
with `dataChange=false`, so they never reach it. A commit that removes data (DELETE, UPDATE, MERGE,
an overwrite) cannot be streamed as appends: the stream fails naming the version, unless
`skipChangeCommits` (such commits skipped whole), `ignoreDeletes` (commits that only remove skipped)
or `ignoreChanges` (their added files streamed again, duplicates included) say otherwise, Delta's
options. A schema change stops the stream too: restart it to read the new schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from use.errors import InvalidArgumentError, TableConstraintError
from use.sql.scan import file_uris
from use.sql.tables import log_for, snapshot_of, table_root

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Delta's options for commits that remove data, as their lower-cased names.
_CHANGE_OPTIONS = ("skipchangecommits", "ignoredeletes", "ignorechanges")


def stream_offset(spark: SparkSession, req: dict[str, Any], args: list[Any]) -> dict[str, Any]:
    """The table's latest version (a stream's next end offset); a listing, not a snapshot."""
    log = log_for(table_root(req["location"]))
    return {"version": log._listing().latest_version}


def stream_batch(spark: SparkSession, req: dict[str, Any], args: list[Any]) -> dict[str, Any]:
    """The files of the batch ending at version `end`: after version `start` (exclusive), or for the
    first batch (`start` null) the snapshot at `end`, or from `startingVersion` (inclusive) on. In
    the scan plan's form (`use.sql.scan`), so the shim reads it as any planned scan."""
    root = table_root(req["location"])
    end = int(req["end"])
    options = {str(k).lower(): str(v).strip().lower() for k, v in (req.get("options") or {}).items()}
    for key in _CHANGE_OPTIONS:
        if options.get(key, "false") not in ("true", "false"):
            raise InvalidArgumentError(f"the read option {key} takes true or false, got {options[key]!r}")
    start = req.get("start")
    starting = _starting_version(options)
    if req.get("startingTimestampMs") is not None:
        starting = _version_since(root, int(req["startingTimestampMs"]), starting)
    schema_version = int(req["schemaVersion"])  # the version the stream took its schema from
    if start is None and starting is None:
        snap = snapshot_of(root, end)
        if end != schema_version:
            _check_schema(snap.metadata.schema_string, root, schema_version, end)
        return _plan(root, snap.files, snap.metadata, end, snap.num_files)
    first = int(start) + 1 if start is not None else int(starting)  # type: ignore[arg-type]
    log = log_for(root)
    base = snapshot_of(root, max(first - 1, 0)) if first > 0 else None
    metadata = base.metadata if base is not None else None
    from use.delta.columnmapping import partition_value_keys
    from use.delta.commits import read_commits

    listing = log._listing()
    if first > end:
        return _plan(root, None, metadata, end, 0)
    commits = read_commits(log.store, listing, first, end, partition_value_keys(metadata) if metadata else ())
    taken: list[pa.Table] = []
    for commit in commits:
        if commit.metadata is not None:
            if commit.version > schema_version:
                _check_schema(commit.metadata.schema_string, root, schema_version, commit.version)
            metadata = commit.metadata
        adds = commit.adds.filter(pc.equal(commit.adds.column("data_change"), True)) if commit.adds.num_rows else commit.adds
        removes = commit.removes
        removing = removes.num_rows and bool(pc.any(pc.equal(removes.column("data_change"), True)).as_py())
        if removing:
            if options.get("skipchangecommits") == "true":
                continue
            if options.get("ignoredeletes") == "true" and not adds.num_rows:
                continue
            if options.get("ignorechanges") != "true":
                operation = (commit.commit_info or {}).get("operation", "a commit")
                raise TableConstraintError(
                    f"the stream reading {root} found version {commit.version} ({operation}), which removes rows: a stream "
                    "reads appends only. Restart it from a later version (.option(\"startingVersion\", ...)), or read with "
                    ".option(\"skipChangeCommits\", \"true\") to skip such commits (ignoreDeletes: those that only delete; "
                    "ignoreChanges: stream their rewritten files again)"
                )
        if adds.num_rows:
            taken.append(adds)
    files = pa.concat_tables(taken) if taken else None
    if metadata is None:
        metadata = snapshot_of(root, end).metadata
    return _plan(root, files, metadata, end, files.num_rows if files is not None else 0)


def _version_since(root: str, ms: int, starting_version: int | None) -> int:
    """`startingTimestamp`: the first version committed at or after it, as Delta's source starts."""
    import datetime as dt

    if starting_version is not None:
        raise InvalidArgumentError("give the read option startingVersion or startingTimestamp, not both")
    version = log_for(root).first_version_since(ms)
    if version is None:
        when = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(sep=" ", timespec="milliseconds")
        raise InvalidArgumentError(
            f"startingTimestamp {when} UTC is after the latest commit of {root}: start the stream without it to read the "
            "table and then its changes, or give a time the table had commits at or after"
        )
    return version


def _starting_version(options: dict[str, str]) -> int | None:
    text = options.get("startingversion")
    if text is None or text == "latest":
        return None
    try:
        version = int(text)
    except ValueError:
        version = -1
    if version < 0:
        raise InvalidArgumentError(f"the read option startingVersion takes a table version (0 or more) or 'latest', got {text!r}")
    return version


def _check_schema(found: str, root: str, schema_version: int, version: int) -> None:
    """The stream reads the schema of `schema_version`; a commit that changed it stops the stream."""
    if json.loads(found) != json.loads(snapshot_of(root, schema_version).metadata.schema_string):
        raise TableConstraintError(
            f"the schema of {root} changed at version {version}, after the stream started reading it: restart the stream "
            "to read the table with its new schema"
        )


def _plan(root: str, files: pa.Table | None, metadata: Any, version: int, total: int) -> dict[str, Any]:
    from use.delta.columnmapping import partition_value_keys

    keys = partition_value_keys(metadata) if metadata is not None else ()
    n = files.num_rows if files is not None else 0
    partition_values: list[list[str | None]] = []
    if keys and n:
        for found in files.column("partition_values").to_pylist():  # type: ignore[union-attr]
            values = dict(found or ())
            partition_values.append([values.get(k) or None for k in keys])  # "" is null, as in Delta
    sizes = files.column("size").to_pylist() if n else []  # type: ignore[union-attr]
    return {
        "version": version,
        "paths": file_uris(Path(root).as_uri(), files.column("path").to_pylist()) if n else [],  # type: ignore[union-attr]
        "sizes": sizes,
        "mtimes": files.column("modification_time").to_pylist() if n else [],  # type: ignore[union-attr]
        "partitionValues": partition_values,
        "totalFiles": total,
        "totalBytes": sum(s or 0 for s in sizes),
        "sample": None,
    }
