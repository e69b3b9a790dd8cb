"""Per-table insight tables: what a table is made of and what happened to it, as Arrow tables.

Like pyiceberg's metadata tables (`table.inspect`), each function turns facts already in memory
(a `QbeastSnapshot`, the commit history) into a `pyarrow.Table` with a fixed schema, declared as a
module constant so that a reader can announce its schema before computing anything. Everything is
columnar: files and blocks stay Arrow/numpy arrays (one Python object per distinct cube at most, never
per file or block), so a snapshot of a million files stays a few arrays.

Conventions shared by every insight table (`use.insights`):
* times are `timestamp[us, UTC]` (Spark's TimestampType), except the event fields, which keep the
  seed's epoch-millisecond longs;
* `revision_id` is -1 on a plain Delta table (no revisions, as in plans and events), 0 for the
  staging (unindexed) files of a Qbeast table;
* weights are the format's int32 weights (`use.qbeast.weight`: MIN_WEIGHT..MAX_WEIGHT);
* a file's level is leveled compaction's: floor(log10(its largest block's elementCount)), 0 for an
  empty file; on a plain Delta table its only "block" is the whole file (its numRecords).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta.deletion_vectors import deleted_counts
from use.delta.stats_parse import parse_stats
from use.optimize.events import EVENT_TAG, OPTIMIZATIONS_SCHEMA, events_from_history
from use.optimize.plan import PLAIN_DELTA_REVISION
from use.optimize.strategies._common import RevisionBlocks, levels_of
from use.qbeast.cube import cube_sort_keys
from use.qbeast.java_values import jackson_dumps
from use.qbeast.revision import is_qbeast

TIMESTAMP = pa.timestamp("us", tz="UTC")
STRING_MAP = pa.map_(pa.string(), pa.string())

__all__ = [
    "CUBES_SCHEMA",
    "DETAIL_SCHEMA",
    "FILES_SCHEMA",
    "HISTORY_SCHEMA",
    "OPTIMIZATIONS_SCHEMA",
    "REVISIONS_SCHEMA",
    "cubes",
    "detail",
    "files",
    "history",
    "optimizations",
    "revisions",
]

HISTORY_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("timestamp", TIMESTAMP),
        ("operation", pa.string()),
        ("parameters", STRING_MAP),
        ("metrics", STRING_MAP),
        ("is_optimization", pa.bool_()),
        ("engine_info", pa.string()),
        ("read_version", pa.int64()),
        ("isolation_level", pa.string()),
        ("is_blind_append", pa.bool_()),
        ("user_metadata", pa.string()),
        ("user_id", pa.string()),
        ("user_name", pa.string()),
        ("cluster_id", pa.string()),
        ("job", STRING_MAP),
        ("notebook_id", pa.string()),
    ]
)

DETAIL_SCHEMA = pa.schema(
    [
        ("format", pa.string()),
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("location", pa.string()),
        ("created_at", TIMESTAMP),
        ("last_modified", TIMESTAMP),
        ("version", pa.int64()),
        ("partition_columns", pa.list_(pa.string())),
        ("clustering_columns", pa.list_(pa.string())),
        ("num_files", pa.int64()),
        ("size_in_bytes", pa.int64()),
        ("properties", STRING_MAP),
        ("min_reader_version", pa.int64()),
        ("min_writer_version", pa.int64()),
        ("table_features", pa.list_(pa.string())),
    ]
)

FILES_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("records", pa.int64()),
        ("deleted_records", pa.int64()),
        ("revision_id", pa.int64()),
        ("file_level", pa.int64()),
        ("num_blocks", pa.int64()),
        ("num_cubes", pa.int64()),
        ("min_weight", pa.int32()),
        ("max_weight", pa.int32()),
        ("modification_time", TIMESTAMP),
        ("partition_values", STRING_MAP),
    ]
)

CUBES_SCHEMA = pa.schema(
    [
        ("revision_id", pa.int64()),
        ("cube_id", pa.string()),
        ("depth", pa.int32()),
        ("element_count", pa.int64()),
        ("desired_cube_size", pa.int64()),
        ("fill", pa.float64()),
        ("is_leaf", pa.bool_()),
        ("min_weight", pa.int32()),
        ("max_weight", pa.int32()),
        ("num_blocks", pa.int64()),
        ("num_files", pa.int64()),
        ("files", pa.list_(pa.string())),
    ]
)

REVISIONS_SCHEMA = pa.schema(
    [
        ("revision_id", pa.int64()),
        ("timestamp", TIMESTAMP),
        ("is_staging", pa.bool_()),
        ("is_latest", pa.bool_()),
        ("indexed_columns", pa.list_(pa.string())),
        ("column_specs", pa.list_(pa.string())),
        ("transformations", pa.string()),
        ("desired_cube_size", pa.int64()),
        ("num_files", pa.int64()),
        ("bytes", pa.int64()),
        ("rows", pa.int64()),
        ("num_cubes", pa.int64()),
        ("depth", pa.int32()),
    ]
)


# --- shared helpers (also used by layout.py and lake.py) ------------------------------------------


def timestamps(ms: Any) -> pa.Array:
    """Epoch milliseconds (numpy, Arrow or a list, nulls allowed) -> `timestamp[us, UTC]`."""
    arr = ms if isinstance(ms, (pa.Array, pa.ChunkedArray)) else pa.array(ms, pa.int64())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return pc.multiply(arr.cast(pa.int64()), 1000).cast(TIMESTAMP)


def as_string_map(values: Mapping[str, Any] | None) -> list[tuple[str, str | None]] | None:
    """A mapping as map<string,string> entries: strings as they are, other JSON values as JSON text
    (delta-rs writes numbers and objects in operationParameters; Delta writes strings)."""
    if values is None:
        return None
    return [(str(k), v if isinstance(v, str) or v is None else json.dumps(v, separators=(",", ":"))) for k, v in values.items()]


def _np(col: Any, dtype: Any = np.int64) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=dtype)


def file_revision_ids(qsnap: Any) -> np.ndarray:
    """Each file's revision id as the insight tables show it: -1 for every file of a plain Delta table."""
    n = qsnap.files.num_rows
    if not qsnap.is_qbeast:
        return np.full(n, PLAIN_DELTA_REVISION, dtype=np.int64)
    return _np(qsnap.files.column("revision_id").fill_null(0))


def file_records(qsnap: Any) -> pa.Array:
    """numRecords per file from its Delta stats (null when unknown)."""
    files: pa.Table = qsnap.files
    if files.num_rows == 0 or "stats" not in files.column_names:
        return pa.nulls(files.num_rows, pa.int64())
    return parse_stats(files.select(["stats"]), qsnap.schema, []).column("num_records").combine_chunks().cast(pa.int64())


def file_levels(max_counts: np.ndarray) -> np.ndarray:
    """Leveled compaction's file level of each largest elementCount (0 for empty files), as
    `FileStats.file_levels` defines it."""
    levels: np.ndarray = np.maximum(levels_of(max_counts), 0)
    return levels


class BlockFacts:
    """Per-file aggregates of a snapshot's block table, computed once with numpy.

    `max_count` (largest block elementCount), `count` (sum), `num_blocks`, `num_cubes` (distinct
    cubes), `min_weight`/`max_weight` (over the file's blocks), all indexed by file row. A plain
    Delta table has no real blocks: `max_count` is its numRecords and the rest is unknown.
    """

    def __init__(self, qsnap: Any) -> None:
        n = qsnap.files.num_rows
        blocks: pa.Table = qsnap.blocks
        self.is_qbeast = bool(qsnap.is_qbeast)
        self.max_count = np.zeros(n, dtype=np.int64)
        self.count = np.zeros(n, dtype=np.int64)
        self.num_blocks = np.zeros(n, dtype=np.int64)
        self.num_cubes = np.zeros(n, dtype=np.int64)
        self.min_weight = np.zeros(n, dtype=np.int64)
        self.max_weight = np.zeros(n, dtype=np.int64)
        if not self.is_qbeast:
            self.max_count = _np(file_records(qsnap).fill_null(0))
            return
        if blocks.num_rows == 0:
            return
        fi = _np(blocks.column("file_index"))
        ec = _np(blocks.column("element_count"))
        np.maximum.at(self.max_count, fi, ec)
        self.count = np.bincount(fi, weights=ec, minlength=n).astype(np.int64)
        self.num_blocks = np.bincount(fi, minlength=n).astype(np.int64)
        # A file belongs to one revision, so its distinct cubes are its distinct cube strings.
        codes = _np(pc.dictionary_encode(blocks.column("cube_id").combine_chunks()).indices)
        width = int(codes.max()) + 1
        self.num_cubes = np.bincount(distinct(fi * width + codes) // width, minlength=n).astype(np.int64)
        self.min_weight = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        self.max_weight = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(self.min_weight, fi, _np(blocks.column("min_weight")))
        np.maximum.at(self.max_weight, fi, _np(blocks.column("max_weight")))

    @property
    def levels(self) -> np.ndarray:
        return file_levels(self.max_count)


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array, by one sort (numpy 2's hash-based
    `np.unique` is several times slower on the few hundred thousand keys of a large table)."""
    s = np.sort(values)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if s.size else s


def _nullable(values: np.ndarray, valid: np.ndarray | bool, type_: pa.DataType) -> pa.Array:
    mask = ~np.broadcast_to(np.asarray(valid, dtype=bool), values.shape)
    return pa.array(values, type_, mask=mask if mask.any() else None)


# --- optimizations and history ---------------------------------------------------------------------


def optimizations(history_entries: Iterable[Any]) -> pa.Table:
    """`<table>.optimizations`: one row per OptimizationEvent in the history, oldest commit first.

    Columns: exactly the seed's `OptimizationEvent` (`optimization_name`, `write_id`, `table_id`,
    `revision_id`, `started_at`, `finished_at`, `process_time_ms`, `input_files_stats` and
    `output_files_stats` as FileStats structs), then `version`, the commit holding the event.
    Entries are `use.delta.HistoryEntry` objects (any order); CorruptLogError on a malformed event.
    """
    entries = sorted(history_entries, key=lambda e: int(e.version))
    return events_from_history(entries)


def detail(snapshot: Any, location: str) -> pa.Table:
    """`<table>.detail`: one row describing the table as of `snapshot` (a `use.delta.Snapshot`), as
    Delta's DESCRIBE DETAIL does, in this module's names: `format` is qbeast for a table with an
    index revision, else delta; `name`/`description` are the log's metaData fields (null unless a
    writer set them: the metastore name is the catalog's); `clustering_columns` are liquid
    clustering's (the `delta.clustering` domain), empty otherwise; `table_features` the protocol's
    reader and writer features (empty for a legacy protocol: its versions say it all)."""
    meta, protocol = snapshot.metadata, snapshot.protocol
    configuration = dict(snapshot.configuration)
    clustering: list[str] = []
    raw = snapshot.domain_metadata.get("delta.clustering")
    if raw:
        try:
            columns = json.loads(raw).get("clusteringColumns") or []
            clustering = [".".join(c) if isinstance(c, list) else str(c) for c in columns]
        except (ValueError, AttributeError):
            clustering = []
    features = sorted(set(protocol.reader_features or ()) | set(protocol.writer_features or ()))
    row = {
        "format": "qbeast" if is_qbeast(configuration) else "delta",
        "id": meta.id,
        "name": meta.name,
        "description": meta.description,
        "location": location,
        "created_at": meta.created_time,
        "last_modified": int(snapshot.timestamp),
        "version": int(snapshot.version),
        "partition_columns": list(meta.partition_columns),
        "clustering_columns": clustering,
        "num_files": int(snapshot.num_files),
        "size_in_bytes": int(pc.sum(snapshot.files.column("size")).as_py() or 0),
        "properties": sorted(configuration.items()),
        "min_reader_version": int(protocol.min_reader_version),
        "min_writer_version": int(protocol.min_writer_version),
        "table_features": features,
    }
    ms = DETAIL_SCHEMA.set(5, pa.field("created_at", pa.int64())).set(6, pa.field("last_modified", pa.int64()))
    table = pa.Table.from_pylist([row], schema=ms)
    for i in (5, 6):
        table = table.set_column(i, DETAIL_SCHEMA.field(i), timestamps(table.column(i)))
    return table


def _text(info: Mapping[str, Any], key: str) -> str | None:
    """A commitInfo field that should be text, None when absent or of another type (other writers'
    commits are not ours to trust)."""
    value = info.get(key)
    return value if isinstance(value, str) else None


def history(history_entries: Iterable[Any]) -> pa.Table:
    """`<table>.history`: one row per commit still in the log, oldest first (DESCRIBE HISTORY).

    `is_optimization` marks the commits that carry an OptimizationEvent (join on `version` with
    `optimizations` for its details); `parameters`/`metrics` are the commit's operationParameters
    and operationMetrics with non-string values as JSON text.
    """
    rows = []
    for e in sorted(history_entries, key=lambda e: int(e.version)):
        info: Mapping[str, Any] = e.commit_info or {}
        read_version = info.get("readVersion")
        blind = info.get("isBlindAppend")
        rows.append(
            {
                "version": int(e.version),
                "timestamp": int(e.timestamp),
                "operation": e.operation,
                "parameters": as_string_map(e.parameters),
                "metrics": as_string_map(e.metrics),
                "is_optimization": EVENT_TAG in (info.get("tags") or {}),
                "engine_info": _text(info, "engineInfo"),
                "read_version": read_version if isinstance(read_version, int) and not isinstance(read_version, bool) else None,
                "isolation_level": _text(info, "isolationLevel"),
                "is_blind_append": blind if isinstance(blind, bool) else None,
                "user_metadata": _text(info, "userMetadata"),
                "user_id": _text(info, "userId"),
                "user_name": _text(info, "userName"),
                "cluster_id": _text(info, "clusterId"),
                "job": as_string_map(job) if isinstance(job := info.get("job"), Mapping) else None,
                "notebook_id": _text(notebook, "notebookId") if isinstance(notebook := info.get("notebook"), Mapping) else None,
            }
        )
    ms_schema = HISTORY_SCHEMA.set(1, pa.field("timestamp", pa.int64()))
    table = pa.Table.from_pylist(rows, schema=ms_schema)
    return table.set_column(1, HISTORY_SCHEMA.field("timestamp"), timestamps(table.column("timestamp")))


# --- files -------------------------------------------------------------------------------------------


def files(qsnap: Any) -> pa.Table:
    """`<table>.files`: one row per live data file, in log order.

    `records` is the file's numRecords (Delta stats; for an indexed file without stats, the sum of
    its blocks' elementCounts): the rows stored in it. `deleted_records` are those of them its
    deletion vector deletes (its cardinality; 0 without one), read from the log. Block columns (`num_blocks`, `num_cubes`, `min_weight`,
    `max_weight`) describe the file's Qbeast blocks (a staging file has one root block with the
    whole weight range) and are null on a plain Delta table, which has none.
    """
    f: pa.Table = qsnap.files
    facts = BlockFacts(qsnap)
    rids = file_revision_ids(qsnap)
    records = file_records(qsnap)
    qbeast = facts.is_qbeast
    if qbeast and records.null_count:
        indexed = (rids > 0) & (facts.num_blocks > 0)
        records = pc.if_else(pa.array(indexed & ~_np(records.is_valid(), bool)), pa.array(facts.count, pa.int64()), records)
    pv = f.column("partition_values") if "partition_values" in f.column_names else pa.nulls(f.num_rows, STRING_MAP)
    return pa.table(
        [
            f.column("path"),
            f.column("size").cast(pa.int64()),
            records,
            deleted_counts(f),
            pa.array(rids, pa.int64()),
            pa.array(facts.levels, pa.int64()),
            _nullable(facts.num_blocks, qbeast, pa.int64()),
            _nullable(facts.num_cubes, qbeast, pa.int64()),
            _nullable(facts.min_weight.clip(-(2**31), 2**31 - 1), qbeast & (facts.num_blocks > 0), pa.int32()),
            _nullable(facts.max_weight.clip(-(2**31), 2**31 - 1), qbeast & (facts.num_blocks > 0), pa.int32()),
            timestamps(f.column("modification_time")),
            pv.cast(STRING_MAP),
        ],
        schema=FILES_SCHEMA,
    )


# --- cubes ---------------------------------------------------------------------------------------------


def _cube_order(cubes: pa.Array) -> np.ndarray:
    """Positions of the distinct cube strings in cube (pre-order) order."""
    if len(cubes) == 0:
        return np.zeros(0, dtype=np.int64)
    keys = cube_sort_keys(np.array(cubes.to_pylist(), dtype="S"))
    return np.argsort(keys, kind="stable")


def _revision_cubes(qsnap: Any, rid: int, paths: pa.Array) -> pa.Table | None:
    rb = RevisionBlocks.of(qsnap, rid)
    if rb.size == 0:
        return None
    k = rb.num_cubes
    counts = rb.cube_totals()
    max_w = rb.cube_max_weight()
    min_w = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(min_w, rb.code, rb.min_weight)
    n_files = max(1, int(rb.file.max()) + 1)
    pairs = distinct(rb.code * n_files + rb.file)  # (cube, file) pairs, sorted by cube then file
    pair_cube, pair_file = pairs // n_files, pairs % n_files
    per_cube = np.bincount(pair_cube, minlength=k)
    order = _cube_order(rb.cubes)
    # Each cube's file list, in cube order: its slice of `pairs`, gathered in the new order.
    starts = np.concatenate([[0], np.cumsum(per_cube)])[:-1]
    sizes = per_cube[order]
    gather = np.repeat(starts[order] - np.concatenate([[0], np.cumsum(sizes)])[:-1], sizes) + np.arange(int(sizes.sum()))
    offsets = pa.array(np.concatenate([[0], np.cumsum(sizes)]), pa.int32())
    file_lists = pa.ListArray.from_arrays(offsets, paths.take(pa.array(pair_file[gather], pa.int64())))
    desired = int(qsnap.revisions[rid].desired_cube_size)
    o = pa.array(order, pa.int64())
    return pa.table(
        [
            pa.array(np.full(k, rid), pa.int64()),
            rb.cubes.take(o).cast(pa.string()),
            pa.array(rb.cube_depth()[order], pa.int32()),
            pa.array(counts[order], pa.int64()),
            pa.array(np.full(k, desired), pa.int64()),
            pa.array(counts[order] / desired, pa.float64()),
            pa.array(max_w[order] >= 2**31 - 1, pa.bool_()),
            pa.array(min_w[order], pa.int32()),
            pa.array(max_w[order], pa.int32()),
            pa.array(np.bincount(rb.code, minlength=k)[order], pa.int64()),
            pa.array(sizes, pa.int64()),
            file_lists,
        ],
        schema=CUBES_SCHEMA,
    )


def cubes(qsnap: Any) -> pa.Table:
    """`<table>.cubes` (Qbeast): one row per cube of every indexed revision, in revision then cube
    (pre-)order; empty for a plain Delta table.

    A cube's status folds its blocks as the format does: `element_count` is their sum, `max_weight`
    the smallest block maxWeight (its current weight cut), `min_weight` the smallest block
    minWeight. `fill` = element_count / desired_cube_size (an inner cube near 1.0 is right-sized);
    `is_leaf` = the cube still takes every weight (maxWeight = MAX_WEIGHT). `files` lists the
    distinct files holding its blocks (`num_blocks` > `num_files` only if a file holds the cube twice).
    The staging revision (0) has no tree and no rows here.
    """
    paths = qsnap.files.column("path").combine_chunks()
    parts = [t for rid in sorted(r for r in qsnap.revisions if r > 0) if (t := _revision_cubes(qsnap, rid, paths)) is not None]
    return pa.concat_tables(parts) if parts else CUBES_SCHEMA.empty_table()


# --- revisions -------------------------------------------------------------------------------------------


def revisions(qsnap: Any) -> pa.Table:
    """`<table>.revisions` (Qbeast): one row per revision (0 = staging), ascending; empty for a plain
    Delta table.

    `column_specs` are the index columns as written (`x:linear`); `transformations` is the
    revision's transformations JSON array as qbeast-spark stores it (the value ranges of the
    space); `rows` sums the blocks' elementCounts (numRecords for staging files); `depth` is the
    number of tree levels holding cubes (null for staging).
    """
    if not qsnap.revisions:
        return REVISIONS_SCHEMA.empty_table()
    rids = file_revision_ids(qsnap)
    sizes = _np(qsnap.files.column("size"))
    blocks: pa.Table = qsnap.blocks
    b_rev = _np(blocks.column("revision_id")) if blocks.num_rows else np.zeros(0, dtype=np.int64)
    b_count = _np(blocks.column("element_count")) if blocks.num_rows else np.zeros(0, dtype=np.int64)
    b_depth = _np(blocks.column("depth")) if blocks.num_rows else np.zeros(0, dtype=np.int64)
    latest = int(qsnap.latest_revision_id)
    rows = []
    for rid in sorted(qsnap.revisions):
        rev = qsnap.revisions[rid]
        in_rev = b_rev == rid
        cubes_of = blocks.column("cube_id").filter(pa.array(in_rev)) if rid > 0 and in_rev.any() else None
        rows.append(
            {
                "revision_id": int(rid),
                "timestamp": int(rev.timestamp),
                "is_staging": rid == 0,
                "is_latest": rid == latest,
                "indexed_columns": list(rev.columns),
                "column_specs": list(rev.column_specs),
                "transformations": jackson_dumps([t.to_json_obj() for t in rev.transformations]),
                "desired_cube_size": int(rev.desired_cube_size),
                "num_files": int((rids == rid).sum()),
                "bytes": int(sizes[rids == rid].sum()),
                "rows": int(b_count[in_rev].sum()),
                "num_cubes": 0 if cubes_of is None else int(pc.count_distinct(cubes_of).as_py()),
                "depth": None if rid == 0 else (int(b_depth[in_rev].max()) + 1 if in_rev.any() else 0),
            }
        )
    ms_schema = REVISIONS_SCHEMA.set(1, pa.field("timestamp", pa.int64()))
    table = pa.Table.from_pylist(rows, schema=ms_schema)
    return table.set_column(1, REVISIONS_SCHEMA.field("timestamp"), timestamps(table.column("timestamp")))
