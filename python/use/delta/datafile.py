"""Writing one parquet data file of a Delta table and describing it as an `AddFile`.

This runs inside Spark executors (from `mapInArrow` tasks) as well as on the driver, so it imports
nothing but pyarrow and this package's lowest modules, and it never re-reads data: stats come from
the footer the writer just produced. The file is written under a hidden temporary name in its final
directory and then linked/renamed into place, so a reader listing the table never sees a partial
file and an existing file is never overwritten.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import decimal
import os
import urllib.parse
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from use.delta.actions import AddFile
from use.delta.skipping import utc_timestamp_texts
from use.delta.stats import DEFAULT_NUM_INDEXED_COLS, file_stats_json, iter_leaf_arrays, leaf_columns, stats_leaves
from use.errors import ConfigError, InvalidArgumentError, SchemaMismatchError, StorageError

__all__ = [
    "DataFileWriter",
    "dictionary_columns",
    "escape_partition_value",
    "local_root",
    "parquet_compression",
    "partition_directory",
    "partition_value_text",
    "timestamp_partition_columns",
    "write_data_file",
]

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# The characters Spark/Hive escape in partition directory names (ExternalCatalogUtils).
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(0x20)}
# Characters kept as they are when a relative path is written into the log as a URI path.
_URI_SAFE = "/=:@!$&'()*+,;-._~"


def escape_partition_value(value: str | None) -> str:
    """A partition value as a directory-name fragment (Hive escaping; null -> default partition)."""
    if value is None or value == "":
        return HIVE_DEFAULT_PARTITION
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def partition_value_text(value: Any) -> str | None:
    """A partition value as the Delta protocol serializes it in `partitionValues` (None stays null):
    booleans `true`/`false`, dates `2024-05-01`, timestamps in Delta's UTC ISO form
    `2024-05-01T12:00:00.000000Z` (as newer Delta writes them: the zone-less form is read in the
    reader's session time zone by Delta on Spark and as UTC by delta-rs, so only this one means the
    same instant to every reader), timestamp_ntz as the wall clock `2024-05-01 12:00:00[.ffffff]`."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            utc = value.astimezone(_dt.UTC).replace(tzinfo=None)
            return utc.isoformat(timespec="microseconds") + "Z"
        return value.isoformat(sep=" ", timespec="microseconds" if value.microsecond else "seconds")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return str(value)


def partition_directory(partition_values: Mapping[str, str | None], timestamp_columns: Collection[str] = ()) -> str:
    """`a=1/b=x%3Ay`: the relative directory Spark would use for these partition values (log texts).

    `timestamp_columns`, the partition columns of type timestamp (with time zone), are named in
    Hive's form in UTC (`ts=2024-03-10 09%3A30%3A00`) whichever way the log spells them: Hive readers
    of symlink manifests parse the names, and one instant gets one directory (`use.delta.skipping.utc_timestamp_texts`)."""
    if timestamp_columns:
        partition_values = {
            k: utc_timestamp_texts(pa.array([v], pa.string()), hive=True)[0].as_py() if k in timestamp_columns else v
            for k, v in partition_values.items()
        }
    return "/".join(f"{escape_partition_value(k)}={escape_partition_value(v)}" for k, v in partition_values.items())


def timestamp_partition_columns(schema: pa.Schema, columns: Iterable[str]) -> frozenset[str]:
    """The `columns` of `schema` of type timestamp with a time zone (whose partition values name an instant)."""
    return frozenset(
        c
        for c in columns
        if c in schema.names and pa.types.is_timestamp(schema.field(c).type) and schema.field(c).type.tz is not None
    )


def local_root(table_root: str) -> str:
    """The table root as a local directory path (`file:` URIs accepted)."""
    if table_root.startswith("file:"):
        parsed = urllib.parse.urlparse(table_root)
        return urllib.parse.unquote(parsed.path)
    if "://" in table_root:
        raise InvalidArgumentError(
            f"table root {table_root!r} is not a local path; write_data_file writes to local (or mounted) file systems"
        )
    return table_root


# Spark's parquet codec names (`spark.sql.parquet.compression.codec`) -> pyarrow's. pyarrow's "lz4"
# is the LZ4_RAW codec of the parquet format, which Spark 3.4+ reads as "lz4_raw"; Spark's own
# "lz4" writes Hadoop's framed LZ4, which pyarrow reads but does not write, so both become LZ4_RAW.
_CODECS: Mapping[str, str] = {
    "none": "none",
    "uncompressed": "none",
    "snappy": "snappy",
    "gzip": "gzip",
    "brotli": "brotli",
    "lz4": "lz4",
    "lz4_raw": "lz4",
    "zstd": "zstd",
}


def parquet_compression(codec: Any, source: str = "compression") -> str:
    """The pyarrow codec for a Spark parquet codec name (case-insensitive); `source` names where
    the value came from, for the error."""
    name = codec.strip().lower() if isinstance(codec, str) else None
    if name is None or name not in _CODECS:
        hint = " (LZO has no writer here)" if name == "lzo" else ""
        raise ConfigError(
            f"{source} = {codec!r} is not a parquet codec USE can write{hint}; use one of {', '.join(sorted(_CODECS))}"
        )
    return _CODECS[name]


def _check_relative(name: str) -> str:
    rel = name.replace("\\", "/")
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or any(p.startswith(("_", ".")) for p in parts):
        raise InvalidArgumentError(
            f"file_name {name!r} must be a relative path inside the table root with no '..', empty, "
            "hidden ('.') or underscore-prefixed parts (those are reserved for the log and temporary files)"
        )
    return rel


def _batches(
    data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch], schema: pa.Schema | None
) -> tuple[pa.Schema, Iterable[pa.RecordBatch | pa.Table]]:
    if isinstance(data, pa.Table):
        # Written whole: the writer cuts row groups of `row_group_size` rows across the table's
        # chunks, so many small batches need no concatenation first.
        return data.schema, [data]
    if isinstance(data, pa.RecordBatch):
        return data.schema, [data]
    it = iter(data)
    first: pa.RecordBatch | None = None
    for b in it:
        first = b
        break
    if first is None:
        if schema is None:
            raise InvalidArgumentError("write_data_file got no batches and no schema; pass schema= to write an empty file")
        return schema, []

    def chain() -> Iterable[pa.RecordBatch]:
        assert first is not None
        yield first
        yield from it

    if isinstance(first, pa.Table):
        raise InvalidArgumentError("write_data_file takes a pyarrow.Table or an iterable of RecordBatches, not of Tables")
    return first.schema, chain()


def _conform(batch: pa.RecordBatch | pa.Table, target: pa.Schema, partition_columns: Iterable[str] = ()) -> Any:
    """Select and cast the batch's columns to the target schema (by name), or say what differs."""
    if batch.schema.equals(target, check_metadata=False):
        return batch
    missing = [f.name for f in target if batch.schema.get_field_index(f.name) < 0]
    if missing:
        raise SchemaMismatchError(
            f"data has no column(s) {missing} of the table schema {target.names}; data columns: {batch.schema.names}"
        )
    extra = [n for n in batch.schema.names if target.get_field_index(n) < 0 and n not in set(partition_columns)]
    if extra:
        raise SchemaMismatchError(
            f"data has column(s) {extra} that are not in the table schema {target.names}; drop them or evolve the schema first"
        )
    cols = []
    for f in target:
        col = batch.column(batch.schema.get_field_index(f.name))
        if col.type != f.type:
            try:
                col = col.cast(f.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise SchemaMismatchError(
                    f"column {f.name!r} has type {col.type} in the data but {f.type} in the table schema and does not "
                    f"convert safely ({e}); cast the data to the table schema first"
                ) from e
        cols.append(col)
    return type(batch).from_arrays(cols, schema=target)


# Dictionary encoding is chosen per column and file from a sample of the first batch: a column whose
# sampled values are nearly all distinct gets plain encoding from the start.
DICTIONARY_SAMPLE_ROWS = 2_000
_DICTIONARY_MAX_DISTINCT_RATIO = 0.9


def dictionary_columns(batch: pa.RecordBatch | pa.Table) -> list[str] | Literal[True]:
    """The columns worth dictionary-encoding in a file that starts with `batch`.

    Parquet writers start every column in dictionary encoding and fall back to plain encoding only
    once the dictionary outgrows its page limit (1 MB). In a file of a few tens of thousands of rows
    a column of distinct values (ids, measurements, timestamps, hashes) never gets there: it pays
    for a hash table of every value and stores a dictionary as large as the data (measured: 73
    files of 14k rows each encoded 35% slower and 7% larger than with plain encoding for such
    columns). A strided sample of the first batch tells which columns repeat their values; those
    keep the dictionary. `True` (the writer's default, every column) when the schema has nested
    columns, whose leaves this does not judge.
    """
    if any(pa.types.is_nested(f.type) for f in batch.schema):
        return True
    n = batch.num_rows
    if n == 0:
        return True
    step = max(1, n // DICTIONARY_SAMPLE_ROWS)
    sample = batch.take(pa.array(range(0, n, step))) if step > 1 else batch
    keep = []
    for name, column in zip(sample.schema.names, sample.columns, strict=False):
        if pa.types.is_boolean(column.type) or pa.types.is_null(column.type):
            continue
        distinct = pc.count_distinct(column, mode="all").as_py()
        if distinct <= _DICTIONARY_MAX_DISTINCT_RATIO * len(column):
            keep.append(name)
    return keep


class DataFileWriter:
    """One parquet data file of a Delta table, written in pieces and described as an `AddFile`.

    For writers that fill several files at once from rows arriving in any order (the OTree write
    tasks): each `write` appends row groups, `close` publishes the file and returns its `AddFile`,
    `abort` (or leaving a `with` block on an exception) removes the partial file. The parquet
    writer opens with the first piece, which decides the dictionary-encoded columns. Arguments as
    `write_data_file`; `schema` is required here.
    """

    def __init__(
        self,
        table_root: str,
        *,
        schema: pa.Schema,
        file_name: str | None = None,
        data_change: bool = True,
        tags: Mapping[str, str] | None = None,
        partition_values: Mapping[str, str | None] | None = None,
        stats_columns: int = DEFAULT_NUM_INDEXED_COLS,
        stats_column_names: Sequence[str] | None = None,
        compression: str = "snappy",
    ) -> None:
        root = local_root(table_root)
        self._compression = parquet_compression(compression)
        if not os.path.isdir(root):
            raise InvalidArgumentError(f"table root {table_root!r} is not an existing directory; create the table first")
        if isinstance(stats_columns, bool) or not isinstance(stats_columns, int) or stats_columns < -1:
            raise InvalidArgumentError(f"stats_columns must be -1 (all) or a non-negative int, got {stats_columns!r}")
        self._table_root = table_root
        self._pvals = dict(partition_values or {})
        target = schema
        if self._pvals:
            target = pa.schema([f for f in target if f.name not in self._pvals], metadata=target.metadata)
        if target.metadata:
            target = target.remove_metadata()
        if len(target) == 0:
            raise InvalidArgumentError("write_data_file needs at least one data column besides the partition columns")
        self._target = target
        self._stats_columns = stats_columns
        self._stats_column_names = stats_column_names
        stats_leaves(target, num_indexed_cols=stats_columns, columns=stats_column_names)  # bad names refused now
        # every float leaf, not only the stats columns: a footer's min/max of any of them is read
        self._float_leaves = [leaf for leaf in leaf_columns(target) if pa.types.is_floating(leaf.type)]
        if file_name is None:
            rel = f"{uuid.uuid4()}.parquet"
            if self._pvals:
                rel = f"{partition_directory(self._pvals)}/{rel}"
        else:
            rel = _check_relative(file_name)
        self._rel = rel
        self._final = os.path.join(root, *rel.split("/"))
        if os.path.lexists(self._final):
            raise InvalidArgumentError(f"data file {rel!r} already exists under {table_root!r}; choose another file_name")
        self._tmp = os.path.join(os.path.dirname(self._final), f".{os.path.basename(self._final)}.{uuid.uuid4().hex}.tmp")
        self._data_change = data_change
        self._tags = dict(tags) if tags is not None else None
        self._writer: pq.ParquetWriter | None = None
        self._use_dictionary: list[str] | bool = True
        self._nan_columns: set[str] = set()
        self._closed = False

    @property
    def path(self) -> str:
        """The file's path relative to the table root (not URL-encoded)."""
        return self._rel

    def _open(self, use_dictionary: list[str] | bool) -> pq.ParquetWriter:
        os.makedirs(os.path.dirname(self._final), exist_ok=True)
        self._use_dictionary = use_dictionary
        self._writer = self._parquet_writer(self._tmp, True)
        return self._writer

    def _parquet_writer(self, path: str, write_statistics: bool | list[str]) -> pq.ParquetWriter:
        return pq.ParquetWriter(
            path,
            self._target,
            compression=self._compression,
            use_dictionary=self._use_dictionary,
            write_statistics=write_statistics,
            use_compliant_nested_type=True,
            coerce_timestamps="us",
            allow_truncated_timestamps=False,
        )

    def _drop_nan_footer_stats(self, metadata: pq.FileMetaData) -> None:
        """Rewrite the finished file without footer min/max of the float columns that hold NaN.

        The parquet spec has writers leave NaN out of min/max (pyarrow does); parquet-mr readers
        (Spark, Delta Spark, Trino's Hive connector reading USE's tables) take such bounds as
        covering every value and skip the row groups holding the NaN for `d > 1` or `d = NaN`.
        parquet-mr's own writer writes no min/max for a chunk with NaN; this does the same, once
        the file is written (only files holding NaN pay the second write). The Delta stats come
        from the first footer (the log's max of such a column is left out anyway)."""
        paths = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
        keep = [p for p in paths if p not in self._nan_columns]
        again = f"{self._tmp}.nan"
        source = pq.ParquetFile(self._tmp)
        try:
            with self._parquet_writer(again, keep) as writer:
                for i in range(source.num_row_groups):
                    writer.write_table(source.read_row_group(i))
            os.replace(again, self._tmp)
        finally:
            if os.path.lexists(again):
                os.unlink(again)

    def write(self, data: pa.RecordBatch | pa.Table, row_group_size: int | None = None) -> None:
        """Append rows (a batch, or a table whose chunks the writer cuts into row groups of
        `row_group_size` rows without concatenating them)."""
        if self._closed:
            raise InvalidArgumentError(f"data file {self._rel!r} is already closed")
        data = _conform(data, self._target, self._pvals)
        if data.num_rows == 0:
            return
        writer = self._writer if self._writer is not None else self._open(dictionary_columns(data))
        for leaf, values in iter_leaf_arrays(data, self._float_leaves):
            if leaf.name not in self._nan_columns and pc.any(pc.is_nan(values)).as_py():
                self._nan_columns.add(leaf.name)
        try:
            if isinstance(data, pa.Table):
                writer.write_table(data, row_group_size=row_group_size)
            else:
                writer.write_batch(data, row_group_size=row_group_size)
        except pa.ArrowInvalid as e:
            self.abort()
            raise SchemaMismatchError(
                f"data for {self._rel!r} cannot be stored as Delta parquet ({e}); e.g. round nanosecond "
                "timestamps to microseconds first"
            ) from e

    def close(self) -> AddFile:
        """Finish the file, move it into place and describe it (stats from the footer just written)."""
        if self._closed:
            raise InvalidArgumentError(f"data file {self._rel!r} is already closed")
        try:
            writer = self._writer if self._writer is not None else self._open(True)
            writer.close()
            self._closed = True
            metadata = pq.read_metadata(self._tmp)
            if self._nan_columns:
                self._drop_nan_footer_stats(metadata)
            _publish(self._tmp, self._final, self._rel, self._table_root)
        except BaseException:
            self.abort()
            raise
        st = os.stat(self._final)
        stats = file_stats_json(
            metadata,
            self._target,
            num_indexed_cols=self._stats_columns,
            columns=self._stats_column_names,
            nan_columns=self._nan_columns,
        )
        return AddFile(
            path=urllib.parse.quote(self._rel, safe=_URI_SAFE),
            size=int(st.st_size),
            modification_time=int(st.st_mtime_ns // 1_000_000),
            data_change=self._data_change,
            partition_values=self._pvals,
            stats=stats,
            tags=self._tags,
        )

    def abort(self) -> None:
        """Drop the partial file (nothing was published)."""
        self._closed = True
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        if os.path.lexists(self._tmp):
            os.unlink(self._tmp)

    def __enter__(self) -> DataFileWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()


def write_data_file(
    table_root: str,
    data: pa.Table | Iterable[pa.RecordBatch],
    *,
    schema: pa.Schema | None = None,
    file_name: str | None = None,
    data_change: bool = True,
    tags: Mapping[str, str] | None = None,
    partition_values: Mapping[str, str | None] | None = None,
    stats_columns: int = DEFAULT_NUM_INDEXED_COLS,
    stats_column_names: Sequence[str] | None = None,
    row_group_size: int | None = None,
    compression: str = "snappy",
) -> AddFile:
    """Write `data` as one parquet file under `table_root` and return its `AddFile`.

    `schema` is the file's schema (data columns only; columns are selected and safely cast to it);
    partition columns named in `partition_values` are dropped from the data and the file goes to
    the Hive-style partition directory. `stats_columns` / `stats_column_names` are
    `delta.dataSkippingNumIndexedCols` / `delta.dataSkippingStatsColumns`. `compression` is a Spark
    parquet codec name (`parquet_compression`); writers on Spark pass the session's
    `spark.sql.parquet.compression.codec` (`use.runtime.conf.parquet_codec`). The returned path is
    relative to the table root and URL-encoded as the log stores it.
    """
    data_schema, batches = _batches(data, schema)
    with DataFileWriter(
        table_root,
        schema=schema if schema is not None else data_schema,
        file_name=file_name,
        data_change=data_change,
        tags=tags,
        partition_values=partition_values,
        stats_columns=stats_columns,
        stats_column_names=stats_column_names,
        compression=compression,
    ) as writer:
        for batch in batches:
            writer.write(batch, row_group_size=row_group_size)
        return writer.close()


def _publish(tmp: str, final: str, rel: str, table_root: str) -> None:
    """Move the finished file into place without ever replacing an existing one."""
    try:
        os.link(tmp, final)
    except FileExistsError as e:
        raise InvalidArgumentError(f"data file {rel!r} already exists under {table_root!r}; choose another file_name") from e
    except OSError:
        # File systems without hard links: the existence check above is the best we can do.
        if os.path.lexists(final):
            raise InvalidArgumentError(
                f"data file {rel!r} already exists under {table_root!r}; choose another file_name"
            ) from None
        try:
            os.rename(tmp, final)
        except OSError as e:
            raise StorageError(f"could not move the new data file into place at {final}: {e}") from e
        return
    os.unlink(tmp)


def add_file_row(add: AddFile) -> dict[str, Any]:
    """An AddFile as a dict in the `Snapshot.files` column layout (handy for tests and tools)."""
    return {
        "path": add.path,
        "size": add.size,
        "modification_time": add.modification_time,
        "data_change": add.data_change,
        "stats": add.stats,
        "tags": None if add.tags is None else list(add.tags.items()),
        "partition_values": list(add.partition_values.items()),
    }
