"""Running the Spark write tasks of an OTree write: rows to cubes and files, files to parquet, and
the block statistics of every file (qbeast-format spec §3.4-3.6). The plan comes from
`use.qbeast.index_plan`; nothing here decides where a row goes, it only follows the plan.

Where it can (`use.qbeast.jvm_write`), the rows stay in the JVM: Spark expressions transform the
indexed columns, the shim's `OTreeFileWriter` walks each row down the planned cubes and writes it
with Spark's parquet writer, and only block statistics come back. Otherwise a `mapInArrow` assigns
each row its cube and file (`_RowSplitter`) and streams the rows into their files (`_TaskFiles`,
one `use.delta.datafile.DataFileWriter` per file, memory bounded by
`spark.qbeast.index.writeBufferBytes`), computing exact block statistics on the way and returning
the `AddFile`s as rows. Full rows cross the JVM/Python boundary once and Spark never serializes
them row by row.

Without a shuffle, each task (the input coalesced to one per core) writes its own part of every
planned file its rows fall into, as a Delta write makes one file per task and partition. With
`optimize_write` the rows are shuffled by file to one write task per core instead (files spread
evenly by their estimated rows), so each planned file is written once: in the JVM path as Spark
UnsafeRows (`OTreeFileWriter.writeShuffled`), in the Arrow path packed per file as Arrow IPC blobs.
The optimizer's rewrites always shuffle (measured at 5M rows: a shuffle costs about one more plain
parquet write), or, when their input is small, write every file in one task without a shuffle.
Whether a user's write shuffles is decided by `use.qbeast.writer` (`use.qbeast.write_shuffle`).

File names are chosen on the driver before any task runs, so the caller knows every file this
write could produce and can delete them all if anything fails before its commit.
"""

from __future__ import annotations

import heapq
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from pyspark import TaskContext

from use.delta.actions import AddFile
from use.delta.datafile import DataFileWriter, local_root
from use.delta.stats import file_stats_json
from use.errors import InvalidArgumentError
from use.qbeast.blocks import Block, blocks_json
from use.qbeast.cube import cube_sort_key
from use.qbeast.domains import CubeLookup, JointLookup
from use.qbeast.estimate import assign_cubes
from use.qbeast.index_plan import (
    NARROW_BATCH_ROWS,
    WEIGHT_COLUMN,
    IndexPlan,
    arrow_batches,
    one_task_per_core,
    positive_int_conf,
)
from use.qbeast.jvm_write import JvmFile, write_in_jvm
from use.qbeast.revision import Revision
from use.qbeast.rollup import RollupPlan
from use.qbeast.weight import MAX_WEIGHT, spark_hash
from use.runtime.conf import parquet_codec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CUBE_COLUMN", "FILE_COLUMN", "delete_files", "write_files"]

CUBE_COLUMN = "_qbeastCube"
FILE_COLUMN = "_qbeastFile"
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
# Arrow batches of whole rows: up to NARROW_BATCH_ROWS rows, but no more than this many bytes.
_FULL_BATCH_BYTES = 32 << 20

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


def _write_buffer_bytes(spark: SparkSession) -> int:
    """Bytes of rows a write task holds in memory before it writes (or spills) them."""
    return positive_int_conf(spark, _WRITE_BUFFER_CONF, _DEFAULT_WRITE_BUFFER_BYTES, "bytes")


class _RowSplitter:
    """Row -> cube and file for batches of input rows, the rows then split by file.

    Shared by both write paths. Each piece holds the data columns plus the row's cube and weight
    (what the block statistics need); pieces of one call are slices of one batch sorted by file.
    """

    def __init__(self, revision: Revision, cube_weights: Mapping[str, int], plan: RollupPlan, data_names: Sequence[str]) -> None:
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
        return [(int(sorted_files[a]), rows.slice(a, b - a)) for a, b in zip(cuts[:-1], cuts[1:], strict=False)]


def _pack_task(splitter: _RowSplitter, part_keys: np.ndarray, flush_bytes: int) -> Any:
    """The rows split by file and packed as Arrow IPC blobs (a `mapInArrow` function, on the input's
    partitions), for the shuffle of the optimized-write path.

    The rows cross from the JVM into Python once, here, and stay Arrow until they are parquet: what
    the shuffle moves is a few large binary values per input batch (`part`, `file`, `rows`), not
    millions of rows that Spark would serialize one by one and convert back to Arrow for the write.
    Rows are buffered up to `flush_bytes` so each blob holds a useful share of a file.
    """

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

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
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
    table = pa.concat_tables(partials)
    grouped = table.group_by("cube").aggregate([("w_min", "min"), ("n", "sum")])
    rows = sorted(
        zip(
            grouped.column("cube").to_pylist(),
            grouped.column("w_min_min").to_pylist(),
            grouped.column("n_sum").to_pylist(),
            strict=False,
        ),
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
        name = self._file_name(file_index)
        # A retry of a task that failed after publishing its file finds the file there; the driver
        # never saw that attempt's metadata, so the file is replaced (speculative execution must
        # stay off, Spark's default, for the same reason).
        delete_files(self._settings.table_root, [name])
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
                _RESULT_SCHEMA.names, (add.path, add.size, add.modification_time, add.stats, blocks, num_rows), strict=False
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

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
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

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
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
    root = local_root(settings.table_root)
    out: dict[str, list[Any]] = {f.name: [] for f in _RESULT_SCHEMA}
    for f in files:
        stats = file_stats_json(pq.read_metadata(os.path.join(root, f.name)), settings.data_schema, nan_columns=f.nan_columns)
        blocks, num_rows = _blocks_json([f.blocks], settings.cube_weights)
        for key, value in zip(_RESULT_SCHEMA.names, (f.name, f.size, f.modification_time, stats, blocks, num_rows), strict=False):
            out[key].append(value)
    return pa.Table.from_pydict(out, schema=_RESULT_SCHEMA)


def delete_files(table_root: str, names: Iterable[str]) -> None:
    """Delete the named files of a failed write; a name that is missing was never written, and one
    that is a directory is not this write's file (its task failed on it)."""
    for name in names:
        try:
            os.unlink(os.path.join(table_root, name))
        except (FileNotFoundError, IsADirectoryError):
            pass


def write_files(
    spark: SparkSession,
    weighted: DataFrame,
    revision: Revision,
    index: IndexPlan,
    table_root: str,
    data_schema: pa.Schema,
    data_change: bool,
    *,
    optimize_write: bool,
    written: list[str],
    input_bytes: int | None = None,
    sample_files: Sequence[str] = (),
) -> tuple[list[AddFile], int]:
    """Assign the rows of `weighted` (data columns and `WEIGHT_COLUMN`) to cubes and files as
    `index` plans and write the files; returns the AddFiles (tagged) and the rows written. Every
    name a task may write goes to `written` before any task runs, so the caller can delete them if
    anything fails before its commit.

    With `optimize_write` the rows are shuffled so each file of the plan is written once, by one
    write task per core (`index.sizes`, the rows expected per cube, spread the files evenly over
    them).
    Without it, no shuffle: every task writes its own part of each file its rows fall into, so a
    file of the plan becomes up to one file per task (the input is coalesced to one task per core
    first, so there are few parts). An optimized write of at most `_SINGLE_TASK_BYTES` of input
    (`input_bytes`, when the caller knows it, as the optimizer does) needs no shuffle either: one
    task writes every file once (measured on a 178-file, 2.4 MB compaction: the shuffle's two
    stages cost more than the rows). `sample_files` (local parquet files of the input, as a
    rewrite knows them) give the JVM path the first rows it judges the dictionary columns by,
    without a Spark job.
    """
    cube_weights, plan, sizes = dict(index.cube_weights), index.rollup, index.sizes
    splitter = _RowSplitter(revision, cube_weights, plan, data_schema.names)
    settings = _FileSettings(
        table_root=table_root,
        data_schema=data_schema,
        cube_weights=cube_weights,
        data_change=data_change,
        buffer_bytes=_write_buffer_bytes(spark),
        max_open=positive_int_conf(spark, _MAX_OPEN_FILES_CONF, _DEFAULT_MAX_OPEN_FILES, "files"),
        compression=parquet_codec(spark),
    )
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    single_task = optimize_write and input_bytes is not None and 0 <= input_bytes <= _SINGLE_TASK_BYTES
    write_id = uuid.uuid4()

    def in_jvm(source: DataFrame, task_of_file: np.ndarray | None = None) -> pa.Table | None:
        files = write_in_jvm(
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
            task_of_file=task_of_file,
            sample_files=sample_files,
        )
        return None if files is None else _jvm_result(files, settings)

    if optimize_write and not single_task:
        num_tasks = max(1, min(plan.num_files, parallelism))
        file_rows = [0] * plan.num_files
        for cube, group in plan.group_of.items():
            file_rows[plan.file_of_group[group]] += int(sizes.get(cube, 0))
        task_of_file = _balanced_parts(file_rows, num_tasks)
        names = [_task_file_name(write_id, f, int(t)) for f, t in enumerate(task_of_file)]
        written.extend(names)
        result = in_jvm(weighted, task_of_file)
        if result is None:
            part_keys = _partition_keys(num_tasks)[task_of_file].astype(np.int32)
            packed = weighted.mapInArrow(_pack_task(splitter, part_keys, _PACK_BYTES), "part int, file int, rows binary")
            shuffled = packed.repartition(num_tasks, packed["part"])
            task = _shuffled_write_task(names, settings)
            # Spark's own Arrow batch sizes here: with 100,000-row input batches, a pack task sending
            # its large blobs back and the JVM feeding it more rows stalled for good on a 20M-row
            # write (Spark 4.1.1, both sides waiting on their sockets).
            result = shuffled.mapInArrow(task, _RESULT_DDL).toArrow()
    else:
        source, num_tasks = (weighted.coalesce(1), 1) if single_task else one_task_per_core(weighted)
        written.extend(_task_file_name(write_id, f, t) for t in range(num_tasks) for f in range(plan.num_files))
        result = in_jvm(source)
        if result is None:
            task = _local_write_task(splitter, write_id, settings)
            with arrow_batches(spark, NARROW_BATCH_ROWS, _FULL_BATCH_BYTES):
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
            strict=False,
        )
    ]
    return adds, int(sum(result.column("num_rows").to_pylist()))
