"""`spark.readStream.format("delta"|"qbeast").load(path)` and `readStream.table(t)`: where a stream
reading a table is, and which files each micro-batch takes (the shim's `UseStreamSource` reads them
with Spark's parquet reader).

A stream's position (`StreamPosition`, its offset) is a table version and how many of that version's
files it has taken. Its first batches take the table as of the version the stream starts at (every
live file, oldest first: the *snapshot*), or with `startingVersion` (or `startingTimestamp`: the
first version committed at or after it) the rows committed from that version on; then the files
the later commits add as new data, in commit order, as Delta's streaming source does. A batch takes
at most `maxFilesPerTrigger` files (Delta's default: 1000) and about `maxBytesPerTrigger` bytes
(at least one file), so a large table streams in bounded batches; `Trigger.AvailableNow` reads in
such batches up to the version the table had when it started.

Only files added as new data count (`dataChange=true`): OPTIMIZE, the service's continuous
optimization and a Qbeast re-indexing rewrite rows that the stream has already seen, with
`dataChange=false`, so they never reach it. A commit that removes data (DELETE, UPDATE, MERGE, an
overwrite) cannot be streamed as appends: the stream fails naming the version, unless
`skipChangeCommits` (such commits skipped whole), `ignoreDeletes` (commits that only remove skipped)
or `ignoreChanges` (their added files streamed again, duplicates included) say otherwise, Delta's
options. A schema change stops the stream too: restart it to read the new schema.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from use.delta.actions import FILES_SCHEMA
from use.delta.columnmapping import partition_value_keys
from use.delta.log_cache import shared_log
from use.errors import InvalidArgumentError, TableConstraintError
from use.sql.protocol import (
    ScanPlan,
    StreamBatchRequest,
    StreamLatestReply,
    StreamLatestRequest,
    StreamPosition,
    StreamSource,
    StreamVersionReply,
    StreamVersionRequest,
)
from use.sql.scan import scan_plan
from use.sql.tables import snapshot_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Delta's options for commits that remove data, as their lower-cased names.
_CHANGE_OPTIONS = ("skipchangecommits", "ignoredeletes", "ignorechanges")


@dataclass(frozen=True)
class _Segment:
    """Files of one version in stream order, the first of them at `first` in that version."""

    version: int
    snapshot: bool
    first: int
    files: pa.Table


@dataclass(frozen=True)
class _Stream:
    """One request's view of the stream: the table, its options and the schema it reads."""

    root: str
    options: Mapping[str, str]
    schema_version: int
    starting: int | None

    @staticmethod
    def of(source: StreamSource) -> _Stream:
        root = source.table.root
        options = {str(k).lower(): str(v).strip().lower() for k, v in source.options.items()}
        for key in _CHANGE_OPTIONS:
            if options.get(key, "false") not in ("true", "false"):
                raise InvalidArgumentError(f"the read option {key} takes true or false, got {options[key]!r}")
        starting = _starting_version(options)
        if source.starting_timestamp_ms is not None:
            starting = _version_since(root, source.starting_timestamp_ms, starting)
        return _Stream(root, options, source.schema_version, starting)

    def initial(self, latest: int) -> StreamPosition:
        return StreamPosition(self.starting, 0, False) if self.starting is not None else StreamPosition(latest, 0, True)

    def segments(self, start: StreamPosition, last: int) -> Iterator[_Segment]:
        """The files from `start` on, through version `last`, in stream order."""
        version, index = start.version, start.index
        if start.snapshot:
            snap = snapshot_of(self.root, version)
            if version != self.schema_version:
                _check_schema(snap.metadata.schema_string, self.root, self.schema_version, version)
            files = snap.files
            order = pc.sort_indices(files, [("modification_time", "ascending"), ("path", "ascending")])
            yield _Segment(version, True, index, files.take(order).slice(index))
            version, index = version + 1, 0
        if version > last:
            return
        log = shared_log(self.root)
        metadata = snapshot_of(self.root, version - 1).metadata if version > 0 else None
        keys = partition_value_keys(metadata) if metadata is not None else ()
        for commit in log.commits(version, last, keys):
            if commit.metadata is not None and commit.version > self.schema_version:
                _check_schema(commit.metadata.schema_string, self.root, self.schema_version, commit.version)
            adds = commit.adds
            if adds.num_rows:
                adds = adds.filter(pc.equal(adds.column("data_change"), True))
            if self._skips(commit, adds.num_rows):
                adds = adds.slice(0, 0)
            first = index if commit.version == version else 0
            yield _Segment(commit.version, False, first, adds.slice(first))

    def _skips(self, commit: Any, adds: int) -> bool:
        """A commit that removes data: skipped, streamed, or the stream's end (an error)."""
        removes = commit.removes
        if not (removes.num_rows and pc.any(pc.equal(removes.column("data_change"), True)).as_py()):
            return False
        if self.options.get("skipchangecommits") == "true" or (self.options.get("ignoredeletes") == "true" and not adds):
            return True
        if self.options.get("ignorechanges") == "true":
            return False
        operation = (commit.commit_info or {}).get("operation", "a commit")
        raise TableConstraintError(
            f"the stream reading {self.root} found version {commit.version} ({operation}), which removes rows: a stream "
            'reads appends only. Restart it from a later version (.option("startingVersion", ...)), or read with '
            '.option("skipChangeCommits", "true") to skip such commits (ignoreDeletes: those that only delete; '
            "ignoreChanges: stream their rewritten files again)"
        )


def stream_version(spark: SparkSession, req: StreamVersionRequest, args: list[Any]) -> StreamVersionReply:
    """The table's latest version (where a `Trigger.AvailableNow` run stops); a listing only."""
    return StreamVersionReply(shared_log(req.source.table.root).latest_version())


def stream_latest(spark: SparkSession, req: StreamLatestRequest, args: list[Any]) -> StreamLatestReply:
    """Where the next batch from `start` (None: the stream's first) ends, within the read limits
    (`max_files`, `max_bytes`, None: none) and versions up to `last_version` (None: the latest); the
    start itself when there is nothing new."""
    stream = _Stream.of(req.source)
    latest = shared_log(stream.root).latest_version()
    if req.last_version is not None:  # Trigger.AvailableNow: what there was when it started
        latest = min(latest, req.last_version)
    start = req.start or stream.initial(latest)
    max_files = req.max_files
    max_bytes = req.max_bytes
    files, bytes_ = 0, 0
    end = start
    for seg in stream.segments(start, latest):
        n = seg.files.num_rows
        take = n
        if max_files is not None:
            take = min(take, int(max_files) - files)
        if max_bytes is not None and take:
            sizes = seg.files.column("size").slice(0, take).to_numpy(zero_copy_only=False)
            room = int(max_bytes) - bytes_
            cumulative = sizes.cumsum()
            fits = int((cumulative <= room).sum())
            take = max(fits, 1 if files == 0 else 0)  # a batch takes at least one file
            take = min(take, n)
            bytes_ += int(sizes[:take].sum())
        files += take
        if take < n:
            return StreamLatestReply(StreamPosition(seg.version, seg.first + take, seg.snapshot))
        # the whole segment: a change version is done (the next starts at its first file), the
        # snapshot stays the snapshot's last position until a later version has files
        end = StreamPosition(seg.version, seg.first + n, True) if seg.snapshot else StreamPosition(seg.version + 1, 0, False)
        if max_files is not None and files >= int(max_files):
            break
        if max_bytes is not None and bytes_ >= int(max_bytes):
            break
    return StreamLatestReply(end)


def stream_batch(spark: SparkSession, req: StreamBatchRequest, args: list[Any]) -> ScanPlan:
    """The files between `start` (None: the stream's first batch) and `end`, in the scan plan's form
    (`use.sql.scan`), so the shim reads them as any planned scan."""
    stream = _Stream.of(req.source)
    end = req.end
    given = req.start
    start = (
        given if given is not None else (StreamPosition(end.version, 0, True) if end.snapshot else stream.initial(end.version))
    )
    last = end.version if end.snapshot or end.index else end.version - 1
    taken: list[pa.Table] = []
    for seg in stream.segments(start, max(last, start.version)):
        if seg.snapshot and not end.snapshot:
            taken.append(seg.files)  # the snapshot, whole, before the end's change versions
            continue
        if seg.version < end.version:
            taken.append(seg.files)
            continue
        if seg.version == end.version:
            taken.append(seg.files.slice(0, max(end.index - seg.first, 0)))
        break
    files = pa.concat_tables(taken) if taken else FILES_SCHEMA.empty_table()
    version = max(last, 0)  # the newest version the batch reads from (the end may be the next one to come)
    keys = partition_value_keys(snapshot_of(stream.root, version).metadata)
    return scan_plan(stream.root, files, keys, version, files.num_rows, int(pc.sum(files.column("size")).as_py() or 0))


def _version_since(root: str, ms: int, starting_version: int | None) -> int:
    """`startingTimestamp`: the first version committed at or after it, as Delta's source starts."""
    if starting_version is not None:
        raise InvalidArgumentError("give the read option startingVersion or startingTimestamp, not both")
    version = shared_log(root).first_version_since(ms)
    if version is None:
        when = dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(sep=" ", timespec="milliseconds")
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
