"""CONVERT TO DELTA: a directory of parquet files becomes a Delta table in place.

One `CONVERT` commit adds every data file as it is (no file is read beyond its footer, none is
rewritten), with its statistics from the footer unless asked not to (`NO STATISTICS`). A partitioned
directory (Hive's `col=value/` layout, as Spark writes it) needs its partition columns and their
types declared (Delta's `PARTITIONED BY (col type, ...)`): each file's values are read from its
directory names and checked against the declared types, and the table's schema is the files'
columns followed by the partition columns. Everything is checked before the commit, so a failed
conversion leaves the directory exactly as it was; a directory that is already a Delta table is left
as it is.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import urllib.parse
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from use.delta import DeltaLog
from use.delta.actions import AddFile
from use.delta.datafile import HIVE_DEFAULT_PARTITION, partition_value_text, timestamp_partition_columns
from use.delta.schema import as_nullable
from use.delta.skipping import typed_partition_values
from use.delta.stats import file_stats_json
from use.errors import InvalidArgumentError, SchemaMismatchError, TableNotFoundError, UnsupportedFeatureError


@dataclass(frozen=True)
class ConvertedTable:
    """What a conversion did: the table's version after it (unchanged when it was a Delta table)."""

    root: str
    version: int
    num_files: int
    partition_columns: tuple[str, ...]
    converted: bool


@dataclass(frozen=True)
class ParquetFile:
    """One data file of the directory: its path relative to the root and its partition values (as
    the directory names give them, unescaped; None for the default partition)."""

    path: str
    partition_values: tuple[tuple[str, str | None], ...]


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def list_parquet_files(root: str, partition_columns: Sequence[str]) -> list[ParquetFile]:
    """The data files under `root`: directly in it when `partition_columns` is empty, else exactly
    one directory level `col=value` per partition column, in the declared order. Hidden entries
    (`_`, `.`: `_SUCCESS`, checksums) are skipped; anything else out of place is refused, naming it."""
    out: list[ParquetFile] = []

    def walk(directory: str, depth: int, values: tuple[tuple[str, str | None], ...]) -> None:
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if _hidden(entry.name):
                continue
            rel = os.path.relpath(entry.path, root)
            if depth < len(partition_columns):
                column = partition_columns[depth]
                key, eq, raw = entry.name.partition("=")
                if not entry.is_dir() or not eq or key.lower() != column.lower():
                    raise InvalidArgumentError(
                        f"{os.path.join(root, rel)} is not a partition directory {column}=<value>: the partition columns "
                        f"declared are {', '.join(partition_columns)} (in this order); declare the directory's own "
                        "partitioning (PARTITIONED BY (col type, ...)), or move the entry out"
                    )
                value = None if raw == HIVE_DEFAULT_PARTITION else urllib.parse.unquote(raw)
                walk(entry.path, depth + 1, values + ((column, value),))
            elif entry.is_dir():
                what = "a partition directory" if "=" in entry.name else "a subdirectory"
                raise InvalidArgumentError(
                    f"{os.path.join(root, rel)} is {what} the declared partitioning "
                    f"({', '.join(partition_columns) or 'none'}) does not have: declare every partition column "
                    "(PARTITIONED BY (col type, ...)), or move the directory out"
                )
            elif entry.is_file():
                out.append(ParquetFile(rel, values))

    walk(root, 0, ())
    return out


def _partition_values_checked(files: Sequence[ParquetFile], partition_schema: pa.Schema, root: str) -> None:
    """Each directory's value must be of its column's declared type, as every Delta reader will type
    it from the log (`use.delta.skipping.typed_partition_values`, which makes unreadable text null)."""
    entries = [[(k, v) for k, v in f.partition_values] for f in files]
    table = pa.table({"partition_values": pa.array(entries, pa.map_(pa.string(), pa.string()))})
    for i, field in enumerate(partition_schema):
        raw = [f.partition_values[i][1] for f in files]
        typed = typed_partition_values(table, field.name, field.type).to_pylist()
        bad = next((j for j, (r, t) in enumerate(zip(raw, typed, strict=False)) if r not in (None, "") and t is None), None)
        if bad is not None:
            raise InvalidArgumentError(
                f"{os.path.join(root, os.path.dirname(files[bad].path))}: the value {raw[bad]!r} of partition column "
                f"{field.name} is not of type {field.type}; declare the column's type as the directories hold it"
            )


def _zone(name: str) -> _dt.tzinfo:
    """A time zone as Spark's session time zone names it: a region (`America/Los_Angeles`) or an offset (`+08:00`, `UTC+8`)."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        pass
    offset = name.upper().removeprefix("UTC").removeprefix("GMT") or "+00:00"
    m = re.fullmatch(r"([+-])(\d{1,2})(?::?(\d{2}))?", offset)
    if m is None:
        raise InvalidArgumentError(
            f"the session time zone {name!r} is neither a region (e.g. America/Los_Angeles) nor an offset (e.g. +08:00)"
        )
    minutes = int(m.group(2)) * 60 + int(m.group(3) or 0)
    return _dt.timezone(_dt.timedelta(minutes=-minutes if m.group(1) == "-" else minutes))


def _instants_in_utc(files: Sequence[ParquetFile], partition_schema: pa.Schema, time_zone: str) -> list[ParquetFile]:
    """The files with their timestamp (with time zone) partition values as instants in Delta's UTC ISO
    form: a directory name such as `ts=2024-03-10 01%3A30%3A00` is the wall clock of the session that
    wrote it (as Spark writes and reads such directories), here `time_zone`; the log must not keep
    it zone-less, as USE and delta-rs read a zone-less value as UTC (`use.delta.skipping.typed_partition_values`).
    Checked values only (`_partition_values_checked`)."""
    instants = timestamp_partition_columns(partition_schema, partition_schema.names)
    if not instants:
        return list(files)
    zone = _zone(time_zone)
    texts: dict[str, str | None] = {}

    def utc(text: str | None) -> str | None:
        if text in (None, ""):
            return text
        if text not in texts:
            when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            texts[text] = partition_value_text(when if when.tzinfo is not None else when.replace(tzinfo=zone))
        return texts[text]

    return [ParquetFile(f.path, tuple((k, utc(v) if k in instants else v) for k, v in f.partition_values)) for f in files]


#: the partition schema of an unpartitioned directory
_NO_PARTITIONS = pa.schema([])


def parquet_adds(
    root: str, files: Sequence[ParquetFile], partition_schema: pa.Schema = _NO_PARTITIONS, *, collect_stats: bool = True
) -> tuple[pa.Schema, list[Any]]:
    """The table schema (the files' columns unified, nullable, then the partition columns) and one
    `AddFile` per file (footer stats unless `collect_stats` is false)."""
    metas = []
    for f in files:
        full = os.path.join(root, f.path)
        try:
            metas.append((f, pq.read_metadata(full), os.stat(full)))
        except Exception as exc:  # noqa: BLE001 - pyarrow's or the OS's error, whichever: the file is named
            raise SchemaMismatchError(f"{full!r} is not a readable parquet file ({exc}); move it out of the directory") from None
    try:
        data = pa.unify_schemas([m.schema.to_arrow_schema() for _, m, _ in metas])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SchemaMismatchError(f"the parquet files in {root!r} have incompatible schemas: {exc}") from None
    data = as_nullable(data)  # Delta columns are nullable
    clash = [n for n in partition_schema.names if n.lower() in {d.lower() for d in data.names}]
    if clash:
        raise SchemaMismatchError(
            f"the parquet files in {root!r} hold the partition column(s) {', '.join(clash)} too: a partition column's value "
            "comes from the directory names only; declare the partitioning the directories have"
        )
    # Parquet min/max ignore NaN, while Spark orders NaN above everything: never claim a float max.
    floats = [f.name for f in data if pa.types.is_floating(f.type)]
    adds = []
    for f, meta, st in metas:
        adds.append(
            AddFile(
                path=urllib.parse.quote(f.path, safe="/=:@!$&'()*+,;-._~"),
                size=int(st.st_size),
                modification_time=int(st.st_mtime * 1000),
                data_change=True,
                partition_values={k: v for k, v in f.partition_values},
                stats=file_stats_json(meta, data, nan_columns=floats) if collect_stats else None,
            )
        )
    schema = pa.schema(list(data) + [pa.field(f.name, f.type, nullable=True) for f in partition_schema])
    return schema, adds


def convert_to_delta(
    root: str, partition_schema: pa.Schema | None = None, *, collect_stats: bool = True, time_zone: str = "UTC"
) -> ConvertedTable:
    """Convert the parquet directory at `root` into a Delta table (one `CONVERT` commit).
    `partition_schema`: the partition columns and their types, for a partitioned directory. A
    Delta table there is left as it is (`converted=False`) unless the partitioning given differs from
    its own (refused: converting cannot change it). `time_zone`: the zone in which the directory
    names of timestamp partition columns are wall clock (Spark's session time zone that wrote them;
    SQL passes the converting session's, as Spark reads such a directory in it)."""
    if not isinstance(root, str) or not root:
        raise InvalidArgumentError(f"a table path must be a non-empty string, got {root!r}")
    if not os.path.isdir(root):
        raise TableNotFoundError(f"cannot convert {root!r} to Delta: no such directory (expected a directory of parquet files)")
    root = os.path.abspath(root)
    parts = partition_schema if partition_schema is not None else pa.schema([])
    names = tuple(parts.names)
    if len({n.lower() for n in names}) != len(names):
        raise InvalidArgumentError(f"the partition columns {', '.join(names)} name a column twice")
    log = DeltaLog.for_path(root)
    if log.exists():
        snap = log.snapshot()
        if partition_schema is not None and [n.lower() for n in names] != [p.lower() for p in snap.partition_columns]:
            raise UnsupportedFeatureError(
                f"{root} is already a Delta table partitioned by ({', '.join(snap.partition_columns) or 'nothing'}), not by "
                f"({', '.join(names)}); converting cannot change its partitioning: leave PARTITIONED BY out"
            )
        return ConvertedTable(root, snap.version, snap.num_files, tuple(snap.partition_columns), False)
    files = list_parquet_files(root, names)
    if not files:
        raise TableNotFoundError(f"cannot convert {root!r} to Delta: it holds no data files; write the table instead")
    if names:
        _partition_values_checked(files, parts, root)
        files = _instants_in_utc(files, parts, time_zone)
    schema, adds = parquet_adds(root, files, parts, collect_stats=collect_stats)
    snap = log.create(
        schema,
        list(names),
        actions=adds,
        operation="CONVERT",
        operation_parameters={
            "numFiles": len(adds), "partitionedBy": list(names), "collectStats": collect_stats, "sourceFormat": "parquet",
        },
    )  # fmt: skip
    return ConvertedTable(root, snap.version, len(adds), names, True)
