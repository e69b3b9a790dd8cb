"""The OTree write on Spark (qbeast-format spec §3, §7): the only module, besides the optimizer's
executor, that turns rows into Qbeast data files.

Flow of `write` (every step a Spark job over the input, nothing collected but small metadata):
1. validate everything that can be checked without touching the data (columns, cube size, mode,
   settings, schema and indexed columns against the existing table) so a bad call changes nothing;
2. one aggregation for the revision statistics (min/max per linear column, count);
3. the row weight is Spark's own `hash()` of the indexed columns, so reads can recompute it;
4. `mapInArrow` estimates cube domains per partition (`use.qbeast.domains`) on a seeded sample of
   a large input, the driver merges them with the existing index and estimates cube weights
   (`use.qbeast.estimate`) and rolls the cubes up into files (`use.qbeast.rollup`);
5. the rows are assigned to cubes and files and written. Where it can (`use.qbeast.jvm_write`),
   this happens in the JVM: Spark expressions transform the indexed columns, the shim's
   `OTreeFileWriter` walks each row down the planned cubes and writes it with Spark's parquet
   writer, and only block statistics come back. Otherwise a second `mapInArrow` assigns each row
   its cube and file (`_RowSplitter`) and streams the
   rows into their files (`_TaskFiles`, one `use.delta.datafile.DataFileWriter` per file, memory
   bounded by `spark.qbeast.index.writeBufferBytes`), computing exact block statistics on the
   way and returning the `AddFile`s as rows. Full rows cross the JVM/Python boundary once and
   Spark never serializes them row by row. By default there is no shuffle: each task (the input
   coalesced to one per core) writes its own part of every planned file its rows fall into, as a
   Delta write makes one file per task and partition. With `optimize_write` the rows, packed per
   file as Arrow IPC blobs, are shuffled to one write task per core instead (files spread evenly by
   their estimated rows), so each planned file is written once; the optimizer's rewrites always
   do this (measured at 5M rows: the shuffle adds 0.6x-1.3x of a plain parquet write), or, when
   their input is small, write every file in one task without a shuffle;
6. the driver makes one Delta commit (after creating the table if it did not exist).

File names are chosen on the driver before any task runs, so if anything fails before the commit
every file this write could have produced is known and deleted: no stray files in the table root.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from use.delta.actions import AddFile, Metadata
from use.errors import IndexColumnError, InvalidArgumentError, SchemaMismatchError
from use.qbeast.domains import (
    DEFAULT_BUFFER_CAPACITY,
    CubeDomains,
    CubeLookup,
    ExistingInnerCubes,
    JointLookup,
    estimate_domains,
    estimation_fraction,
    group_cube_size,
)
from use.qbeast.estimate import assign_cubes, estimate
from use.qbeast.jvm_write import JvmFile, write_in_jvm
from use.qbeast.revision import (
    COLUMN_STATS_KEY,
    DEFAULT_CUBE_SIZE,
    Revision,
    compute_revision_change,
    configuration_with_revision,
    parse_column_specs,
    stats_aggregations,
)
from use.qbeast.rollup import RollupPlan, rollup
from use.qbeast.weight import MAX_WEIGHT
from use.session import parquet_codec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from use.qbeast.snapshot import QbeastSnapshot

__all__ = [
    "WriteResult",
    "IndexedWrite",
    "write",
    "index_into_revision",
    "rewrite_with_existing_weights",
    "WEIGHT_COLUMN",
    "CUBE_COLUMN",
    "FILE_COLUMN",
]

WEIGHT_COLUMN = "_qbeastWeight"
CUBE_COLUMN = "_qbeastCube"
FILE_COLUMN = "_qbeastFile"
_MODES = {"append": "Append", "overwrite": "Overwrite"}
_BUFFER_CAPACITY_CONF = "spark.qbeast.index.cubeDomainsBufferCapacity"
_WRITE_BUFFER_CONF = "spark.qbeast.index.writeBufferBytes"
_DEFAULT_WRITE_BUFFER_BYTES = 512 << 20
_MAX_OPEN_FILES_CONF = "spark.qbeast.index.maxOpenFilesPerTask"
_DEFAULT_MAX_OPEN_FILES = 256
# Row groups of ~8 MB of Arrow data (~40k rows of 200 bytes): big enough to compress and scan well,
# small enough that Spark can split one file over several tasks (a sample often reads one file).
_ROW_GROUP_BYTES = 8 << 20
_PACK_BYTES = 16 << 20
# An optimized write of at most this much input runs in one task instead of shuffling.
_SINGLE_TASK_BYTES = 256 << 20
_NARROW_BATCH_ROWS = 100_000
# Arrow batches of whole rows: up to _NARROW_BATCH_ROWS rows, but no more than this many bytes.
_FULL_BATCH_BYTES = 32 << 20
_OPTIMIZE_WRITE_CONF = "spark.qbeast.index.optimizeWrite"
_OPTIMIZE_WRITE_PROPERTY = "delta.autoOptimize.optimizeWrite"
# The domain-estimation sample is seeded, so writing the same rows twice plans the same tree.
_ESTIMATION_SEED = 20_240_611

_RESULT_DDL = "path string, size bigint, modification_time bigint, stats string, blocks string, num_rows bigint"
_RESULT_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("modification_time", pa.int64()),
        ("stats", pa.string()),
        ("blocks", pa.string()),
        ("num_rows", pa.int64()),
    ]
)


@dataclass(frozen=True)
class WriteResult:
    """What one `write` committed (`version` is the table version after it; `num_files == 0` for an
    empty input or a skipped idempotent repeat)."""

    version: int
    revision_id: int
    num_files: int
    num_rows: int


@dataclass(frozen=True)
class IndexedWrite:
    """Files written for rows indexed into a revision, not committed yet.

    `metadata` is the new `metaData` action when the rows needed a new revision (else `None`); the
    caller commits it together with `adds` (and its own removes).
    """

    adds: tuple[AddFile, ...]
    metadata: Metadata | None
    revision_id: int
    num_rows: int


# --- validation ------------------------------------------------------------------------------------


def _check_mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode.lower() not in _MODES:
        raise InvalidArgumentError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    return mode.lower()


def _check_cube_size(cube_size: Any) -> int:
    if isinstance(cube_size, bool) or not isinstance(cube_size, (int, np.integer)) or int(cube_size) <= 0:
        raise InvalidArgumentError(
            f"cube_size must be a positive integer (rows per cube, e.g. 5000000), got {cube_size!r}"
        )
    return int(cube_size)


def _arrow_schema(df: DataFrame) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema, prefers_large_types=False)


def _normalized(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    return t


def _check_schema_compatible(data: pa.Schema, table: pa.Schema, path: str) -> None:
    """Appends must bring exactly the table's columns with the same types (order may differ)."""
    extra = [n for n in data.names if n not in table.names]
    missing = [n for n in table.names if n not in data.names]
    differing = [
        f"{f.name} ({data.field(f.name).type} in the data, {f.type} in the table)"
        for f in table
        if f.name in data.names and _normalized(data.field(f.name).type) != _normalized(f.type)
    ]
    if extra or missing or differing:
        parts = []
        if extra:
            parts.append(f"columns not in the table: {', '.join(extra)}")
        if missing:
            parts.append(f"table columns missing from the data: {', '.join(missing)}")
        if differing:
            parts.append(f"columns with another type: {', '.join(differing)}")
        raise SchemaMismatchError(
            f"the data does not match the schema of {path} ({'; '.join(parts)}); select and cast the data to the "
            f"table's columns {table.names}, or write with mode='overwrite' to replace the table"
        )


def _check_txn(txn_app_id: Any, txn_version: Any) -> None:
    if (txn_app_id is None) != (txn_version is None):
        raise InvalidArgumentError("txn_app_id and txn_version go together: give both (idempotent write) or neither")
    if txn_app_id is not None:
        if not isinstance(txn_app_id, str) or not txn_app_id:
            raise InvalidArgumentError(f"txn_app_id must be a non-empty string, got {txn_app_id!r}")
        if isinstance(txn_version, bool) or not isinstance(txn_version, int) or txn_version < 0:
            raise InvalidArgumentError(f"txn_version must be a non-negative int, got {txn_version!r}")


# --- the Spark passes -------------------------------------------------------------------------------


def _with_weight(df: DataFrame, revision: Revision) -> DataFrame:
    """Add the row weight: Spark's own `hash()` of the indexed columns, in revision order."""
    from pyspark.sql import functions as F

    return df.withColumn(WEIGHT_COLUMN, F.hash(*[df[c] for c in revision.columns]))


def _buffer_capacity(spark: SparkSession) -> int:
    return _positive_int_conf(spark, _BUFFER_CAPACITY_CONF, DEFAULT_BUFFER_CAPACITY, "rows")


def _write_buffer_bytes(spark: SparkSession) -> int:
    """Bytes of rows a write task holds in memory before it writes (or spills) them."""
    return _positive_int_conf(spark, _WRITE_BUFFER_CONF, _DEFAULT_WRITE_BUFFER_BYTES, "bytes")


def _positive_int_conf(spark: SparkSession, key: str, default: int, unit: str) -> int:
    raw = spark.conf.get(key, str(default))
    try:
        value = int(str(raw))
    except ValueError:
        value = 0
    if value < 1:
        from use.errors import ConfigError

        raise ConfigError(f"{key} must be a positive integer ({unit}), got {raw!r}")
    return value


def _domains_task(
    revision: Revision, gcs: int, existing_weights: Mapping[str, int], buffer_capacity: int
) -> Any:
    """The per-partition domain estimation, as a `mapInArrow` function (runs on executors)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        existing = ExistingInnerCubes(existing_weights)
        results: list[CubeDomains] = []
        pending_points: list[np.ndarray] = []
        pending_weights: list[np.ndarray] = []
        pending = 0

        def flush(final: bool) -> None:
            nonlocal pending_points, pending_weights, pending
            if not pending:
                return
            points = np.concatenate(pending_points)
            weights = np.concatenate(pending_weights)
            full = (pending // buffer_capacity) * buffer_capacity if not final else pending
            results.append(
                estimate_domains(
                    points[:full], weights[:full], group_cube_size=gcs, existing=existing, buffer_capacity=buffer_capacity
                )
            )
            pending_points, pending_weights = [points[full:]], [weights[full:]]
            pending = pending - full

        for batch in batches:
            if not batch.num_rows:
                continue
            pending_points.append(revision.transform(batch))
            pending_weights.append(batch.column(WEIGHT_COLUMN).to_numpy(zero_copy_only=False).astype(np.int32))
            pending += batch.num_rows
            if pending >= buffer_capacity:
                flush(final=False)
        flush(final=True)
        merged = CubeDomains.concat(results).aggregate()
        if len(merged):
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([c.decode("ascii") for c in merged.cubes.tolist()], pa.string()),
                    pa.array(merged.domains, pa.float64()),
                ],
                names=["cube", "domain"],
            )

    return run


@contextlib.contextmanager
def _arrow_batches(spark: SparkSession, max_rows: int, max_bytes: int | None = None) -> Iterator[None]:
    """Larger Arrow batches for the writer's `mapInArrow` passes, capped in bytes for wide rows.

    At Spark's default of 10,000 rows per batch the per-batch cost of the JVM -> Python transfer
    dominates (measured on 5M rows: a no-op `mapInArrow` over 4 columns took ~4.6 CPU-s at 10,000
    rows per batch, ~3.3 at 100,000; over 8 columns of ~200 bytes a row, 9.1 CPU-s vs 6.1). The row
    limit is only ever raised and the byte limit only ever lowered, and both are restored after
    the action, since they are session settings.
    """
    changes: dict[str, str] = {}
    rows_key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    current_rows = _int_conf(spark, rows_key, 10_000)
    if 0 < current_rows < max_rows:
        changes[rows_key] = str(max_rows)
    if max_bytes is not None:
        bytes_key = "spark.sql.execution.arrow.maxBytesPerBatch"
        if _int_conf(spark, bytes_key, 2**31 - 1) > max_bytes:
            changes[bytes_key] = str(max_bytes)
    previous = {key: spark.conf.get(key, None) for key in changes}
    for key, value in changes.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _int_conf(spark: SparkSession, key: str, default: int) -> int:
    raw = spark.conf.get(key, None)
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def _one_task_per_core(df: DataFrame) -> tuple[DataFrame, int]:
    """`df` coalesced (no shuffle) to at most one partition per core for a `mapInArrow` pass, and
    its number of partitions.

    Each Python task has a fixed cost (worker, Arrow stream; measured ~0.1 s), which for a narrow
    or sampled pass is most of the work: over 8 cached partitions of 5M rows on 2 cores, a sampled
    pass took 0.83 s in 8 tasks and 0.40 s in 2.
    """
    num_partitions = df.rdd.getNumPartitions()
    num_tasks = max(1, min(num_partitions, df.sparkSession.sparkContext.defaultParallelism))
    return (df.coalesce(num_tasks) if num_tasks < num_partitions else df), num_tasks


def _input_domains(
    spark: SparkSession, weighted: DataFrame, revision: Revision, existing_weights: Mapping[str, int], num_rows: int
) -> dict[str, float]:
    """Cube domains of the input, estimated on a sample of it when it is large (`use.qbeast.domains.
    estimation_fraction`): the estimate needs about a thousand rows per cube, not every row, and the
    sample keeps this pass a small share of the write. Domains are scaled back to the whole input."""
    buffer_capacity = _buffer_capacity(spark)
    fraction = estimation_fraction(revision.desired_cube_size, num_rows)
    source, num_partitions = _one_task_per_core(weighted)
    if fraction < 1.0:
        source = source.sample(fraction=fraction, seed=_ESTIMATION_SEED)
    gcs = group_cube_size(
        max(1, int(round(revision.desired_cube_size * fraction))),
        num_partitions,
        max(1, int(round(num_rows * fraction))),
        buffer_capacity,
    )
    selected = source.select(*[source[c] for c in revision.columns], source[WEIGHT_COLUMN])
    task = _domains_task(revision, gcs, dict(existing_weights), buffer_capacity)
    with _arrow_batches(spark, _NARROW_BATCH_ROWS):
        table = selected.mapInArrow(task, "cube string, domain double").toArrow()
    domains = CubeDomains(
        np.array([c.encode("ascii") for c in table.column("cube").to_pylist()], dtype="S"),
        table.column("domain").to_numpy() / fraction,
    ) if table.num_rows else CubeDomains.empty()
    return domains.to_dict()


class _RowSplitter:
    """Row -> cube and file for batches of input rows, the rows then split by file.

    Shared by both write paths. Each piece holds the data columns plus the row's cube and weight
    (what the block statistics need); pieces of one call are slices of one batch sorted by file.
    """

    def __init__(
        self, revision: Revision, cube_weights: Mapping[str, int], plan: RollupPlan, data_names: Sequence[str]
    ) -> None:
        self._revision = revision
        self._table = JointLookup(CubeLookup(cube_weights), plan.file_lookup())
        self._data_names = list(data_names)

    def split(self, batch: pa.RecordBatch) -> list[tuple[int, pa.RecordBatch]]:
        weights = batch.column(WEIGHT_COLUMN).to_numpy(zero_copy_only=False).astype(np.int32)
        assigned = assign_cubes(self._revision.transform(batch), weights, self._table)
        files = assigned.files
        rows = pa.RecordBatch.from_arrays(
            [*[batch.column(c) for c in self._data_names], assigned.cubes, batch.column(WEIGHT_COLUMN)],
            names=[*self._data_names, CUBE_COLUMN, WEIGHT_COLUMN],
        )
        order = np.argsort(files, kind="stable")
        sorted_files = files[order]
        rows = rows.take(pa.array(order))
        cuts = [0, *(np.flatnonzero(sorted_files[1:] != sorted_files[:-1]) + 1).tolist(), len(files)]
        return [(int(sorted_files[a]), rows.slice(a, b - a)) for a, b in zip(cuts[:-1], cuts[1:])]


def _pack_task(splitter: _RowSplitter, part_keys: np.ndarray, flush_bytes: int) -> Any:
    """The rows split by file and packed as Arrow IPC blobs (a `mapInArrow` function, on the input's
    partitions), for the shuffle of the optimized-write path.

    The rows cross from the JVM into Python once, here, and stay Arrow until they are parquet: what
    the shuffle moves is a few large binary values per input batch (`part`, `file`, `rows`), not
    millions of rows that Spark would serialize one by one and convert back to Arrow for the write.
    Rows are buffered up to `flush_bytes` so each blob holds a useful share of a file.
    """
    import pyarrow.ipc as ipc

    def pack(pending: list[pa.RecordBatch]) -> pa.RecordBatch:
        batch = pending[0] if len(pending) == 1 else pa.concat_batches(pending)
        # All blobs go into one buffer, one IPC stream after another; the binary column is built
        # on it with the stream boundaries as offsets (no copy per blob).
        sink = pa.BufferOutputStream()
        offsets = [0]
        out_files = []
        for file_index, piece in splitter.split(batch):
            with ipc.new_stream(sink, piece.schema) as writer:
                writer.write_batch(piece)
            offsets.append(sink.tell())
            out_files.append(file_index)
        data = sink.getvalue()
        if offsets[-1] >= 1 << 31:
            raise InvalidArgumentError("a packed write batch exceeds 2 GiB; lower the input partition size")
        blobs = pa.Array.from_buffers(
            pa.binary(), len(out_files), [None, pa.py_buffer(np.array(offsets, dtype=np.int32).tobytes()), data]
        )
        file_ids = np.array(out_files, dtype=np.int32)
        return pa.RecordBatch.from_arrays(
            [pa.array(part_keys[file_ids], pa.int32()), pa.array(file_ids, pa.int32()), blobs],
            names=["part", "file", "rows"],
        )

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: list[pa.RecordBatch] = []
        size = 0
        for batch in batches:
            if not batch.num_rows:
                continue
            pending.append(batch)
            size += batch.nbytes
            if size >= flush_bytes:
                yield pack(pending)
                pending, size = [], 0
        if pending:
            yield pack(pending)

    return run


def _balanced_parts(file_rows: Sequence[int], num_tasks: int) -> np.ndarray:
    """Write task of each file: largest files first, each to the least loaded task (LPT), so the
    few write tasks (one per core) finish together."""
    import heapq

    part = np.zeros(len(file_rows), dtype=np.int64)
    heap = [(0, t) for t in range(num_tasks)]
    for f in sorted(range(len(file_rows)), key=lambda i: (-int(file_rows[i]), i)):
        load, t = heapq.heappop(heap)
        part[f] = t
        heapq.heappush(heap, (load + max(1, int(file_rows[f])), t))
    return part


def _partition_keys(num_tasks: int) -> np.ndarray:
    """For each task t, an int whose Spark hash lands in partition t of `repartition(num_tasks, key)`
    (`pmod(hash(key), n)`, Spark's HashPartitioning), so the shuffle puts each file where
    `_balanced_parts` planned it."""
    from use.qbeast.weight import spark_hash

    keys = np.full(num_tasks, -1, dtype=np.int64)
    k = 0
    while np.any(keys < 0):
        t = spark_hash([k], ["int"]) % num_tasks
        if keys[t] < 0:
            keys[t] = k
        k += 1
    return keys


def _block_partial(pieces: Sequence[pa.RecordBatch]) -> pa.Table:
    """Per cube of some rows of one file: the minimum row weight and the row count."""
    table = pa.table(
        {
            "cube": pa.chunked_array([p.column(CUBE_COLUMN) for p in pieces], pa.string()),
            "w": pa.chunked_array([p.column(WEIGHT_COLUMN) for p in pieces], pa.int32()),
        }
    )
    grouped = table.group_by("cube").aggregate([("w", "min"), ("w", "count")])
    return pa.table({"cube": grouped.column("cube"), "w_min": grouped.column("w_min"), "n": grouped.column("w_count")})


def _blocks_json(partials: Sequence[pa.Table], cube_weights: Mapping[str, int]) -> tuple[str, int]:
    """Exact block statistics of one file from the partials of all its rows: per cube, row count
    and minimum row weight; the block maxWeight is the cube's (estimated or existing) maxWeight,
    `MAX_WEIGHT` for a cube without one."""
    from use.qbeast.blocks import Block, blocks_json
    from use.qbeast.cube import cube_sort_key

    table = pa.concat_tables(partials)
    grouped = table.group_by("cube").aggregate([("w_min", "min"), ("n", "sum")])
    rows = sorted(
        zip(grouped.column("cube").to_pylist(), grouped.column("w_min_min").to_pylist(), grouped.column("n_sum").to_pylist()),
        key=lambda r: cube_sort_key(r[0]),
    )
    blocks = [Block(c, int(lo), int(cube_weights.get(c, MAX_WEIGHT)), int(n)) for c, lo, n in rows]
    return blocks_json(blocks), int(sum(int(r[2]) for r in rows))


class _FileGroups:
    """A write task's rows grouped by file, in memory up to `limit` bytes, spilled beyond.

    Replaces a Spark sort by file (the pieces arrive already split by file), and a task whose rows
    outgrow `limit` spills its groups to an Arrow IPC file in a local temporary directory (one file
    per spill, batches in file order), so memory stays bounded whatever the partition size.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pieces: dict[int, list[pa.RecordBatch]] = {}
        self._buffered = 0
        self._spill_dir: str | None = None
        self._spills: list[tuple[Any, dict[int, list[int]]]] = []

    def add(self, file_index: int, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        self._pieces.setdefault(file_index, []).append(batch)
        self._buffered += batch.nbytes
        if self._buffered > self._limit:
            self._spill()

    def _spill(self) -> None:
        import tempfile

        import pyarrow.ipc as ipc

        if self._spill_dir is None:
            self._spill_dir = tempfile.mkdtemp(prefix="qbeast-write-spill-")
        path = os.path.join(self._spill_dir, f"{len(self._spills)}.arrow")
        index: dict[int, list[int]] = {}
        i = 0
        schema = next(iter(self._pieces.values()))[0].schema
        with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, schema) as out:
            for f in sorted(self._pieces):
                for piece in self._pieces[f]:
                    out.write_batch(piece)
                    index.setdefault(f, []).append(i)
                    i += 1
        self._pieces.clear()
        self._buffered = 0
        self._spills.append((ipc.open_file(pa.memory_map(path, "r")), index))

    def files(self) -> list[int]:
        return sorted(set(self._pieces).union(*[set(index) for _, index in self._spills]))

    def take(self, file_index: int) -> list[pa.RecordBatch]:
        """The file's batches (spilled ones memory-mapped), released from the buffer."""
        out = [reader.get_batch(i) for reader, index in self._spills for i in index.get(file_index, [])]
        out.extend(self._pieces.pop(file_index, []))
        return out

    def close(self) -> None:
        self._spills.clear()
        self._pieces.clear()
        if self._spill_dir is not None:
            import shutil

            shutil.rmtree(self._spill_dir, ignore_errors=True)


@dataclass(frozen=True)
class _FileSettings:
    """What every write task needs to write and describe its files, decided on the driver."""

    table_root: str
    data_schema: pa.Schema
    cube_weights: Mapping[str, int]
    data_change: bool
    buffer_bytes: int  # spark.qbeast.index.writeBufferBytes
    max_open: int  # spark.qbeast.index.maxOpenFilesPerTask
    compression: str  # spark.sql.parquet.compression.codec


class _TaskFiles:
    """The data files one write task fills, from pieces of rows arriving in any order.

    The first `settings.max_open` files the task meets are written as their rows come: each file's
    pieces are held until they make a row group of `_ROW_GROUP_BYTES` (or, past
    `settings.buffer_bytes` held in all, the largest held group is written out early), so memory
    stays bounded and nothing is copied to local disk. Files past `max_open` (a plan of thousands
    of small files) are not kept open: their rows are grouped by `_FileGroups` (spilling past the
    same budget) and each written in one go at the end. Block statistics are kept per file as small per-cube partials.
    """

    def __init__(self, file_name: Callable[[int], str], settings: _FileSettings) -> None:
        self._file_name = file_name
        self._settings = settings
        self._writers: dict[int, Any] = {}
        self._pending: dict[int, list[pa.RecordBatch]] = {}
        self._pending_bytes: dict[int, int] = {}
        self._held = 0
        self._partials: dict[int, list[pa.Table]] = {}
        self._overflow = _FileGroups(settings.buffer_bytes)

    def add(self, file_index: int, piece: pa.RecordBatch) -> None:
        if not piece.num_rows:
            return
        if file_index not in self._writers:
            if len(self._writers) >= self._settings.max_open:
                self._overflow.add(file_index, piece)
                return
            self._writers[file_index] = self._open(file_index)
        self._pending.setdefault(file_index, []).append(piece)
        size = piece.nbytes
        self._pending_bytes[file_index] = self._pending_bytes.get(file_index, 0) + size
        self._held += size
        if self._pending_bytes[file_index] >= _ROW_GROUP_BYTES:
            self._flush(file_index)
        while self._held > self._settings.buffer_bytes and self._pending:
            self._flush(max(self._pending, key=self._pending_bytes.__getitem__))

    def _open(self, file_index: int) -> Any:
        from use.delta.datafile import DataFileWriter

        name = self._file_name(file_index)
        # A retry of a task that failed after publishing its file finds the file there; the driver
        # never saw that attempt's metadata, so the file is replaced (speculative execution must
        # stay off, Spark's default, for the same reason).
        _delete_files(self._settings.table_root, [name])
        return DataFileWriter(
            self._settings.table_root,
            schema=self._settings.data_schema,
            file_name=name,
            data_change=self._settings.data_change,
            compression=self._settings.compression,
        )

    def _data(self, pieces: Sequence[pa.RecordBatch]) -> pa.Table:
        """The data columns of pieces as one table over them (no copy)."""
        return pa.Table.from_batches([p.select(self._settings.data_schema.names) for p in pieces])

    def _flush(self, file_index: int) -> None:
        pieces = self._pending.pop(file_index)
        self._held -= self._pending_bytes.pop(file_index)
        self._partials.setdefault(file_index, []).append(_block_partial(pieces))
        # One row group over the pieces; the writer reads the chunks without concatenating them.
        table = self._data(pieces)
        self._writers[file_index].write(table, row_group_size=max(1, table.num_rows))

    def finish(self) -> Iterator[pa.RecordBatch]:
        """Write what is held, close every file and describe them as rows of `_RESULT_SCHEMA`."""
        out: dict[str, list[Any]] = {f.name: [] for f in _RESULT_SCHEMA}

        def describe(add: AddFile, partials: Sequence[pa.Table]) -> None:
            blocks, num_rows = _blocks_json(partials, self._settings.cube_weights)
            for key, value in zip(
                _RESULT_SCHEMA.names, (add.path, add.size, add.modification_time, add.stats, blocks, num_rows)
            ):
                out[key].append(value)

        for file_index in list(self._pending):
            self._flush(file_index)
        for file_index in sorted(self._writers):
            describe(self._writers.pop(file_index).close(), self._partials.pop(file_index))
        for file_index in self._overflow.files():
            pieces = self._overflow.take(file_index)
            self._writers[file_index] = self._open(file_index)
            table = self._data(pieces)
            # Cut into row groups of about _ROW_GROUP_BYTES by the writer, across the pieces.
            rows = max(1, int(_ROW_GROUP_BYTES * max(1, table.num_rows) / max(1, table.nbytes)))
            self._writers[file_index].write(table, row_group_size=rows)
            del table
            describe(self._writers.pop(file_index).close(), [_block_partial(pieces)])
        if out["path"]:
            yield pa.RecordBatch.from_pydict(out, schema=_RESULT_SCHEMA)

    def close(self) -> None:
        """Drop every unfinished file (after a failure) and the overflow's spill files."""
        for writer in self._writers.values():
            writer.abort()
        self._writers.clear()
        self._pending.clear()
        self._overflow.close()


def _shuffled_write_task(names: Sequence[str], settings: _FileSettings) -> Any:
    """One parquet file per file index of the partition, as a `mapInArrow` function over the
    `(part, file, rows)` blobs of `_pack_task` (`_TaskFiles`)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.ipc as ipc

        groups = _TaskFiles(names.__getitem__, settings)
        try:
            for batch in batches:
                files = batch.column("file").to_numpy(zero_copy_only=False)
                blobs = batch.column("rows")
                # Each blob read in place from the batch's data buffer (no copy per blob).
                width = np.int64 if pa.types.is_large_binary(blobs.type) else np.int32  # useLargeVarTypes
                offsets = np.frombuffer(blobs.buffers()[1], dtype=width)[blobs.offset : blobs.offset + len(blobs) + 1]
                data_buf = blobs.buffers()[2]
                for i in range(len(blobs)):
                    for piece in ipc.open_stream(data_buf.slice(int(offsets[i]), int(offsets[i + 1] - offsets[i]))):
                        groups.add(int(files[i]), piece)
            yield from groups.finish()
        finally:
            groups.close()

    return run


def _local_write_task(splitter: _RowSplitter, write_id: uuid.UUID, settings: _FileSettings) -> Any:
    """Assign, group by file and write, all in the task that reads the rows (a `mapInArrow`
    function): each task writes its own part of every file its rows fall into (`_TaskFiles`),
    named by `_task_file_name`."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        files = _TaskFiles(lambda f: _task_file_name(write_id, f, task), settings)
        try:
            for batch in batches:
                if batch.num_rows:
                    for file_index, piece in splitter.split(batch):
                        files.add(file_index, piece)
            yield from files.finish()
        finally:
            files.close()

    return run


def _task_file_name(write_id: uuid.UUID, file_index: int, task: int) -> str:
    """The name of task `task`'s part of file `file_index` of one write: `<uuid>.parquet` like every
    Qbeast data file, the UUID derived from the write's id, so the driver knows every name a task
    may use without shipping a list of them to the tasks. A name-based UUID of version 3 (MD5), as
    Java's `UUID.nameUUIDFromBytes` makes it, so the JVM path's tasks name their files the same way."""
    return f"{uuid.uuid3(write_id, f'{task}/{file_index}')}.parquet"


def _jvm_result(files: Sequence[JvmFile], settings: _FileSettings) -> pa.Table:
    """The JVM path's files as rows of `_RESULT_SCHEMA`: Delta stats from each footer (as
    `DataFileWriter.close` takes them), blocks as the Python path builds them."""
    import pyarrow.parquet as pq

    from use.delta.datafile import local_root
    from use.delta.stats import file_stats_json

    root = local_root(settings.table_root)
    out: dict[str, list[Any]] = {f.name: [] for f in _RESULT_SCHEMA}
    for f in files:
        stats = file_stats_json(
            pq.read_metadata(os.path.join(root, f.name)), settings.data_schema, nan_columns=f.nan_columns
        )
        blocks, num_rows = _blocks_json([f.blocks], settings.cube_weights)
        for key, value in zip(_RESULT_SCHEMA.names, (f.name, f.size, f.modification_time, stats, blocks, num_rows)):
            out[key].append(value)
    return pa.Table.from_pydict(out, schema=_RESULT_SCHEMA)


def _delete_files(table_root: str, names: Iterable[str]) -> None:
    for name in names:
        try:
            os.unlink(os.path.join(table_root, name))
        except FileNotFoundError:
            pass


def _optimize_write(spark: SparkSession, requested: bool | None, configuration: Mapping[str, str] | None) -> bool:
    """Whether a write shuffles its rows so each file of the plan is written once (see `write`).

    The argument wins, then the Spark conf `spark.qbeast.index.optimizeWrite`, then the table
    property `delta.autoOptimize.optimizeWrite`, then `False` (Delta's default as well)."""
    if requested is not None:
        if not isinstance(requested, bool):
            raise InvalidArgumentError(f"optimize_write must be True, False or None (the settings decide), got {requested!r}")
        return requested
    for source, raw in (
        (_OPTIMIZE_WRITE_CONF, spark.conf.get(_OPTIMIZE_WRITE_CONF, None)),
        (_OPTIMIZE_WRITE_PROPERTY, (configuration or {}).get(_OPTIMIZE_WRITE_PROPERTY)),
    ):
        if raw is None:
            continue
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            from use.errors import ConfigError

            raise ConfigError(f"{source} must be true or false, got {raw!r}")
        return text == "true"
    return False


def _write_files(
    spark: SparkSession,
    weighted: DataFrame,
    revision: Revision,
    cube_weights: Mapping[str, int],
    plan: RollupPlan,
    table_root: str,
    data_schema: pa.Schema,
    data_change: bool,
    sizes: Mapping[str, int],
    *,
    optimize_write: bool,
    written: list[str],
    input_bytes: int | None = None,
) -> tuple[list[AddFile], int]:
    """Assign rows to cubes and files and write the files; returns the AddFiles (tagged) and the
    rows written. Every name a task may write goes to `written` before any task runs, so the caller
    can delete them if anything fails before its commit.

    With `optimize_write` the rows are shuffled so each file of the plan is written once, by one
    write task per core (`sizes`, the rows expected per cube, spread the files evenly over them).
    Without it, no shuffle: every task writes its own part of each file its rows fall into, so a
    file of the plan becomes up to one file per task (the input is coalesced to one task per core
    first, so there are few parts). An optimized write of at most `_SINGLE_TASK_BYTES` of input
    (`input_bytes`, when the caller knows it, as the optimizer does) needs no shuffle either: one
    task writes every file once (measured on a 178-file, 2.4 MB compaction: the shuffle's two
    stages cost more than the rows).
    """
    splitter = _RowSplitter(revision, dict(cube_weights), plan, data_schema.names)
    settings = _FileSettings(
        table_root=table_root,
        data_schema=data_schema,
        cube_weights=dict(cube_weights),
        data_change=data_change,
        buffer_bytes=_write_buffer_bytes(spark),
        max_open=_positive_int_conf(spark, _MAX_OPEN_FILES_CONF, _DEFAULT_MAX_OPEN_FILES, "files"),
        compression=parquet_codec(spark),
    )
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    single_task = optimize_write and input_bytes is not None and 0 <= input_bytes <= _SINGLE_TASK_BYTES
    if optimize_write and not single_task:
        names = _file_names(plan.num_files)
        written.extend(names)
        num_tasks = max(1, min(plan.num_files, parallelism))
        file_rows = [0] * plan.num_files
        for cube, group in plan.group_of.items():
            file_rows[plan.file_of_group[group]] += int(sizes.get(cube, 0))
        part_keys = _partition_keys(num_tasks)[_balanced_parts(file_rows, num_tasks)].astype(np.int32)
        packed = weighted.mapInArrow(_pack_task(splitter, part_keys, _PACK_BYTES), "part int, file int, rows binary")
        shuffled = packed.repartition(num_tasks, packed["part"])
        task = _shuffled_write_task(names, settings)
        # Spark's own Arrow batch sizes here: with 100,000-row input batches, a pack task sending
        # its large blobs back and the JVM feeding it more rows stalled for good on a 20M-row
        # write (Spark 4.1.1, both sides waiting on their sockets).
        result = shuffled.mapInArrow(task, _RESULT_DDL).toArrow()
    else:
        source, num_tasks = (weighted.coalesce(1), 1) if single_task else _one_task_per_core(weighted)
        write_id = uuid.uuid4()
        written.extend(_task_file_name(write_id, f, t) for t in range(num_tasks) for f in range(plan.num_files))
        jvm_files = write_in_jvm(
            spark,
            source,
            revision,
            cube_weights,
            plan,
            table_root=table_root,
            data_schema=data_schema,
            weight_column=WEIGHT_COLUMN,
            write_id=write_id,
            codec=settings.compression,
        )
        if jvm_files is not None:
            result = _jvm_result(jvm_files, settings)
        else:
            task = _local_write_task(splitter, write_id, settings)
            with _arrow_batches(spark, _NARROW_BATCH_ROWS, _FULL_BATCH_BYTES):
                result = source.mapInArrow(task, _RESULT_DDL).toArrow()
    tags_revision = str(revision.revision_id)
    adds = [
        AddFile(
            path=p,
            size=int(s),
            modification_time=int(m),
            data_change=data_change,
            stats=st,
            tags={"revision": tags_revision, "blocks": b},
        )
        for p, s, m, st, b in zip(
            result.column("path").to_pylist(),
            result.column("size").to_pylist(),
            result.column("modification_time").to_pylist(),
            result.column("stats").to_pylist(),
            result.column("blocks").to_pylist(),
        )
    ]
    return adds, int(sum(result.column("num_rows").to_pylist()))


def _file_names(count: int) -> list[str]:
    return [f"{uuid.uuid4()}.parquet" for _ in range(count)]


def _index(
    spark: SparkSession,
    df: DataFrame,
    revision: Revision,
    num_rows: int,
    existing: QbeastSnapshot | None,
    table_root: str,
    data_schema: pa.Schema,
    data_change: bool,
    written: list[str],
    *,
    optimize_write: bool,
    input_bytes: int | None = None,
) -> tuple[list[AddFile], int]:
    """The full write algorithm (§3.2-3.6) for rows of one revision; file names go to `written`
    before any file exists, so the caller can clean up. `existing` is the snapshot whose index of
    this revision the rows extend (its cube weights respected), `None` to start the index afresh."""
    existing_weights: dict[str, int] | None = None
    existing_domains: dict[str, float] | None = None
    if existing is not None:
        existing_weights, existing_domains = _existing_index(existing, revision.revision_id)
    weighted = _with_weight(df, revision)
    d = revision.dimension_count
    input_domains = _input_domains(spark, weighted, revision, existing_weights or {}, num_rows)
    if not input_domains:
        return [], 0
    est = estimate(
        input_domains,
        revision.desired_cube_size,
        d,
        existing_weights=existing_weights,
        existing_domains=existing_domains,
    )
    plan = rollup(est.block_sizes, revision.desired_cube_size, d)
    return _write_files(
        spark,
        weighted,
        revision,
        est.cube_weights,
        plan,
        table_root,
        data_schema,
        data_change,
        est.block_sizes,
        optimize_write=optimize_write,
        written=written,
        input_bytes=input_bytes,
    )


def _existing_index(qsnap: QbeastSnapshot, revision_id: int) -> tuple[dict[str, int], dict[str, float]]:
    """Cube maxWeights and domains of one revision of the snapshot (empty when it has no files)."""
    from use.qbeast.index_status import IndexStatus

    status = IndexStatus.from_snapshot(qsnap, revision_id)
    return dict(status.cube_weights()), dict(status.cube_domains())


def _collect_stats(df: DataFrame, transformers: Sequence[Any]) -> dict[str, Any]:
    """The one aggregation over the input for the revision statistics (and the row count)."""
    from pyspark.sql import functions as F

    exprs = []
    for alias, func, column in stats_aggregations(transformers):
        col = F.lit(1) if column == "*" else df[column]
        exprs.append(getattr(F, func)(col).alias(alias))
    row = df.agg(*exprs).collect()[0]
    return row.asDict()


def _qbeast_snapshot(snapshot: Any) -> QbeastSnapshot:
    from use.qbeast.snapshot import QbeastSnapshot

    return QbeastSnapshot.from_delta(snapshot)


def _table_root(path: Any) -> str:
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise InvalidArgumentError(f"path must be a non-empty string naming the table directory, got {path!r}")
    from use.delta.storage import resolve_table_root

    return resolve_table_root(path)


# --- public API -------------------------------------------------------------------------------------


def write(
    spark: SparkSession,
    df: DataFrame,
    path: str,
    columns_to_index: Sequence[str] | str,
    cube_size: int | None = None,
    mode: str = "append",
    column_stats: Mapping[str, Any] | str | None = None,
    *,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    optimize_write: bool | None = None,
    configuration: Mapping[str, str] | None = None,
) -> WriteResult:
    """Index `df` into the Qbeast table at `path` (created when missing) and commit it.

    `mode='append'` extends the latest revision's index (or starts a new revision when the data
    leaves its space); `mode='overwrite'` replaces the table's data and revisions. `cube_size`
    `None` means the table's current desired cube size on append (as qbeast-spark 0.8 takes it from
    the table properties) and 5,000,000 otherwise; a different size starts a new revision. With
    `txn_app_id`/`txn_version` the write is idempotent: a version already committed for that
    application id is skipped.

    `optimize_write` (Delta's "optimized writes"): `True` shuffles the rows so each file of the
    rollup plan is written once, `False` lets every task write its own part of each file its rows
    fall into (no shuffle: the write costs little more than a plain parquet write, and the
    optimizer's compaction merges the parts later). `None` takes `spark.qbeast.index.optimizeWrite`,
    else the table property `delta.autoOptimize.optimizeWrite`, else `False`.

    `configuration` (checked table properties) is the table's properties when this write creates
    it, and replaces them on overwrite (SQL's CTAS/RTAS); None keeps an existing table's. A new
    table is one commit holding its metadata and its files.
    """
    from use.delta.log import DeltaLog

    mode = _check_mode(mode)
    size = None if cube_size is None else _check_cube_size(cube_size)
    _check_txn(txn_app_id, txn_version)
    root = _table_root(path)
    data_schema = _arrow_schema(df)
    log = DeltaLog.for_path(root)
    snapshot = log.snapshot() if log.exists() else None
    qsnap = _qbeast_snapshot(snapshot) if snapshot is not None else None
    shuffle = _optimize_write(spark, optimize_write, snapshot.metadata.configuration if snapshot is not None else None)

    if snapshot is not None and txn_app_id is not None:
        done = snapshot.app_transaction_version(txn_app_id)
        if done is not None and done >= int(txn_version):  # type: ignore[arg-type]
            return WriteResult(snapshot.version, qsnap.latest_revision_id if qsnap else 0, 0, 0)

    existing_rev: Revision | None = None
    if snapshot is not None and mode == "append":
        _check_schema_compatible(data_schema, snapshot.schema, root)
        df = df.select(*[df[c] for c in snapshot.schema.names])
        data_schema = _arrow_schema(df)
        if qsnap is not None and qsnap.revisions:
            existing_rev = qsnap.revisions[qsnap.latest_revision_id]
    transformers = parse_column_specs(columns_to_index, data_schema, existing=existing_rev)
    if existing_rev is not None and existing_rev.columns != tuple(t.column_name for t in transformers):
        raise IndexColumnError(
            f"columns_to_index {', '.join(t.column_name for t in transformers)} differ from the indexed columns "
            f"{', '.join(existing_rev.columns)} of {root}; append with the same columns, or overwrite the table to "
            f"index other columns"
        )
    from use.qbeast.revision import parse_column_stats

    parse_column_stats(column_stats, transformers)
    if size is None:
        size = existing_rev.desired_cube_size if existing_rev is not None else DEFAULT_CUBE_SIZE

    stats = _collect_stats(df, transformers)
    now_ms = int(time.time() * 1000)
    revision, is_new = compute_revision_change(existing_rev, transformers, stats, size, column_stats, root, now_ms)
    num_rows = int(stats.get("count") or 0)

    written: list[str] = []
    created_root = not os.path.isdir(root)
    try:
        adds: list[AddFile] = []
        rows_written = 0
        if num_rows:
            os.makedirs(root, exist_ok=True)
            adds, rows_written = _index(
                spark,
                df,
                revision,
                num_rows,
                qsnap if not is_new and mode == "append" else None,
                root,
                data_schema,
                True,
                written,
                optimize_write=shuffle,
            )
        version = _commit_write(
            log, snapshot, revision, is_new, mode, adds, rows_written, data_schema, column_stats, txn_app_id, txn_version,
            configuration,
        )  # fmt: skip
    except BaseException:
        _delete_files(root, written)
        if created_root:
            _remove_if_empty(root)
        raise
    if num_rows:
        rev_id = revision.revision_id
    else:
        rev_id = qsnap.latest_revision_id if qsnap is not None and mode == "append" else 0
    return WriteResult(version, rev_id, len(adds), rows_written)


def _remove_if_empty(root: str) -> None:
    try:
        os.rmdir(root)
    except OSError:
        pass


def _commit_write(
    log: Any,
    snapshot: Any,
    revision: Revision,
    is_new: bool,
    mode: str,
    adds: list[AddFile],
    num_rows: int,
    data_schema: pa.Schema,
    column_stats: Mapping[str, Any] | str | None,
    txn_app_id: str | None,
    txn_version: int | None,
    configuration: Mapping[str, str] | None = None,
) -> int:
    """One Delta commit for the write.

    A new table is created with its files in one commit (version 0, holding the revision in its
    metadata, or only the staging revision when nothing was written). On an existing
    table a `metaData` action is written only when the revision changes or on overwrite, and an
    overwrite removes every live file of the snapshot the write was planned on (and declares it
    read the whole table, so a concurrent append makes it fail rather than be silently dropped).
    """
    import json

    from use.delta.actions import remove_actions
    from use.delta.schema import schema_to_json
    from use.delta.transaction import Transaction
    from use.qbeast.revision import staging_revision

    extra = {COLUMN_STATS_KEY: _column_stats_text(column_stats)}
    wrote = bool(num_rows) and bool(revision.transformations)
    metadata_action: Metadata | None = None
    removes: list[Any] = []
    if snapshot is None:
        declared = revision if wrote else staging_revision(
            revision.table_id, revision.columns, revision.desired_cube_size, int(time.time() * 1000)
        )
        conf = configuration_with_revision(configuration or {}, declared, add_staging=True, overwrite=True, extra=extra)
        if txn_app_id is None:
            log.create(data_schema, configuration=conf, adds=adds, operation="WRITE")
            return 0
        snapshot = log.create(data_schema, configuration=conf)  # the txn marker needs a commit of its own
    else:
        overwrite = mode == "overwrite"
        base = configuration if overwrite and configuration is not None else snapshot.metadata.configuration
        if wrote and (is_new or overwrite):
            conf = configuration_with_revision(base, revision, add_staging=True, overwrite=overwrite, extra=extra)
            schema_string = schema_to_json(data_schema) if overwrite else snapshot.metadata.schema_string
            metadata_action = replace(snapshot.metadata, configuration=conf, schema_string=schema_string)
        elif overwrite and configuration is not None:
            # Replaced by no rows: the new properties and schema, only the staging revision left.
            declared = staging_revision(revision.table_id, revision.columns, revision.desired_cube_size, int(time.time() * 1000))
            conf = configuration_with_revision(base, declared, add_staging=True, overwrite=True, extra=extra)
            metadata_action = replace(snapshot.metadata, configuration=conf, schema_string=schema_to_json(data_schema))
        if mode == "overwrite":
            removes = remove_actions(snapshot.files, data_change=True)
    if not (adds or removes or metadata_action is not None or txn_app_id is not None):
        return int(snapshot.version)
    # The transaction is based on the snapshot the write was planned on, so every commit since then
    # goes through the conflict checks.
    txn = Transaction(log, snapshot)
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
        {"mode": _MODES[mode], "partitionBy": json.dumps([])},
        {"numFiles": str(len(adds)), "numOutputRows": str(num_rows), "numRemovedFiles": str(len(removes))},
    )


def _column_stats_text(column_stats: Mapping[str, Any] | str | None) -> str:
    import json

    if column_stats is None:
        return ""
    if isinstance(column_stats, str):
        return column_stats
    return json.dumps(dict(column_stats), separators=(",", ":"))


def index_into_revision(
    spark: SparkSession,
    df: DataFrame,
    qsnap: QbeastSnapshot,
    *,
    data_change: bool = False,
    input_bytes: int | None = None,
) -> IndexedWrite:
    """Index rows (e.g. of staging files) into the table's latest revision with the full write
    algorithm, writing files but not committing.

    When the rows leave the latest revision's space (or the table has only the staging revision),
    a new revision is made and its `metaData` action returned; otherwise the existing cube weights
    are respected. On failure the files written so far are deleted.
    """
    if not qsnap.revisions:
        from use.errors import NotAQbeastTableError

        raise NotAQbeastTableError(
            f"{qsnap.table_root} has no Qbeast revisions; convert it or write it with the Qbeast writer first"
        )
    root = qsnap.table_root
    latest = qsnap.revisions[qsnap.latest_revision_id]
    data_schema = _arrow_schema(df)
    _check_schema_compatible(data_schema, qsnap.schema, root)
    df = df.select(*[df[c] for c in qsnap.schema.names])
    data_schema = _arrow_schema(df)
    transformers = parse_column_specs(list(latest.columns), data_schema, existing=latest)
    stats = _collect_stats(df, transformers)
    revision, is_new = compute_revision_change(
        latest, transformers, stats, latest.desired_cube_size, None, latest.table_id, int(time.time() * 1000)
    )
    num_rows = int(stats.get("count") or 0)
    if not num_rows:
        return IndexedWrite((), None, latest.revision_id, 0)
    written: list[str] = []
    try:
        adds, rows = _index(
            spark,
            df,
            revision,
            num_rows,
            None if is_new else qsnap,
            root,
            data_schema,
            data_change,
            written,
            optimize_write=True,
            input_bytes=input_bytes,
        )
        metadata = None
        if is_new:
            conf = configuration_with_revision(qsnap.configuration, revision, add_staging=True, overwrite=False)
            metadata = _replace_configuration(qsnap, conf)
    except BaseException:
        _delete_files(root, written)
        raise
    return IndexedWrite(tuple(adds), metadata, revision.revision_id, rows)


def _replace_configuration(qsnap: QbeastSnapshot, conf: dict[str, str]) -> Metadata:
    from use.delta.log import DeltaLog

    current = DeltaLog.for_path(qsnap.table_root).snapshot(version=qsnap.version).metadata
    return replace(current, configuration=conf)


def rewrite_with_existing_weights(
    spark: SparkSession,
    df: DataFrame,
    qsnap: QbeastSnapshot,
    revision_id: int,
    *,
    data_change: bool = False,
    sampling_fraction: float | None = None,
    input_bytes: int | None = None,
) -> list[AddFile]:
    """Optimize path (§6.2): rewrite rows of one revision with the revision's existing cube
    maxWeights, regrouping each cube's scattered blocks into few files. No weight estimation (the
    tree keeps its shape); the rollup uses the actual row count per cube. Not committed; on failure
    the files written so far are deleted. With `sampling_fraction` f, cubes no sample(f) reads are
    kept out of the files it does read (sampling-aware rollup, `use.qbeast.rollup`).
    """
    if revision_id not in qsnap.revisions or revision_id == 0:
        raise InvalidArgumentError(
            f"revision {revision_id} is not an indexed revision of {qsnap.table_root} "
            f"(indexed revisions: {sorted(r for r in qsnap.revisions if r > 0)})"
        )
    revision = qsnap.revisions[revision_id]
    root = qsnap.table_root
    data_schema = _arrow_schema(df)
    _check_schema_compatible(data_schema, qsnap.schema, root)
    df = df.select(*[df[c] for c in qsnap.schema.names])
    data_schema = _arrow_schema(df)
    cube_weights, _ = _existing_index(qsnap, revision_id)
    weighted = _with_weight(df, revision)
    counts = _cube_counts(weighted, revision, cube_weights)
    if not counts:
        return []
    sample_weight = None
    if sampling_fraction is not None:
        from use.qbeast.weight import weight_from_fraction

        sample_weight = int(weight_from_fraction(float(sampling_fraction)))
    plan = rollup(
        counts, revision.desired_cube_size, revision.dimension_count, cube_weights=cube_weights, sample_weight=sample_weight
    )
    written: list[str] = []
    try:
        adds, _ = _write_files(
            spark,
            weighted,
            revision,
            cube_weights,
            plan,
            root,
            data_schema,
            data_change,
            counts,
            optimize_write=True,
            written=written,
            input_bytes=input_bytes,
        )
    except BaseException:
        _delete_files(root, written)
        raise
    return adds


def _cube_counts(weighted: DataFrame, revision: Revision, cube_weights: Mapping[str, int]) -> dict[str, int]:
    """Actual rows per cube when the rows are placed with the given cube maxWeights."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = JointLookup(CubeLookup(cube_weights), CubeLookup({"": 0}))
        parts = []
        for batch in batches:
            if not batch.num_rows:
                continue
            weights = batch.column(WEIGHT_COLUMN).to_numpy(zero_copy_only=False).astype(np.int32)
            parts.append(assign_cubes(revision.transform(batch), weights, table).cubes)
        if parts:
            counts = pa.chunked_array(parts, pa.string()).value_counts()
            yield pa.RecordBatch.from_arrays(
                [counts.field("values"), counts.field("counts").cast(pa.int64())], names=["cube", "n"]
            )

    source, _ = _one_task_per_core(weighted)
    selected = source.select(*[source[c] for c in revision.columns], source[WEIGHT_COLUMN])
    with _arrow_batches(weighted.sparkSession, _NARROW_BATCH_ROWS):
        table = selected.mapInArrow(run, "cube string, n bigint").toArrow()
    out: dict[str, int] = {}
    for cube, n in zip(table.column("cube").to_pylist(), table.column("n").to_pylist()):
        out[cube] = out.get(cube, 0) + int(n)
    return out
