"""ClusterKeyOverlap: merge the files whose min/max ranges on a key overlap deepest (Relyt, Snowflake).

Each file's Delta stats give an interval [min, max] on the cluster key. The overlap depth at a key
value is the number of files whose interval contains it (closed intervals: touching ranges overlap,
because both files may hold that value); Snowflake's clustering depth of a well-clustered table is 1.
Within each partition (partitions never overlap each other: pruning separates them first) the depth
is computed by one vectorized sweep: the 2n interval endpoints sorted by (partition, value, start
before end), depth = running sum of +1/-1.

When the maximum depth exceeds `overlap.depth-threshold`, the files covering the deepest point are
merged into one task (sorted by the key on rewrite: `sort_columns`), smallest first within
`task-max-bytes` (two or more). The selected files are taken out of the sweep (no new sort: only the
running sum is recomputed) and the next deepest set is chosen, until `bytes-per-iter`. When the two
smallest files covering the deepest point exceed the limit together, no task can merge there: the
largest of them is taken out of the sweep (it cannot be merged within the limit at that point, and
keeping the small ones keeps their chances elsewhere) and the sweep goes on. Files without
min/max stats on the key are never selected. Like the other plain strategies it only touches files
without an index (plain Delta files, Qbeast staging files).
Score: `(depth - 1) * (open_file_cost + bytes / files) / bytes` (a lookup in the overlapped range reads
`depth` files before the merge and one after).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta.stats import resolve_path
from use.delta.stats_parse import parse_stats, stat_column
from use.errors import ConfigError
from use.optimize.keys import PREFIX
from use.optimize.plan import KIND_BINPACK, MergeTask, PartitionValues, Plan
from use.optimize.strategies._common import merge_prefix, partition_groups, paths_of, plain_revision, sizes_of, sort_files
from use.optimize.strategies.binpacking import plain_files
from use.optimize.strategies.registry import register

if TYPE_CHECKING:
    from use.optimize.config import OptimizationConfig

_MAX_TASKS_PER_PLAN = 256


@dataclass(frozen=True)
class OverlapSweep:
    """Sorted endpoints of the candidate files' key intervals, ready for repeated depth queries.

    `files` are rows of snapshot.files; `start_pos`/`end_pos` the positions of each file's two
    endpoints in the sorted event order; `is_start`/`event_file` describe each event.
    """

    files: np.ndarray
    groups: np.ndarray
    partitions: list[PartitionValues]
    event_file: np.ndarray
    is_start: np.ndarray
    start_pos: np.ndarray
    end_pos: np.ndarray

    def depth(self, alive: np.ndarray) -> np.ndarray:
        """Overlap depth after each event, counting only `alive` files (per position of `files`)."""
        step = np.where(self.is_start, 1, -1) * alive[self.event_file]
        return np.cumsum(step)

    def covering(self, pos: int, alive: np.ndarray) -> np.ndarray:
        """Positions (into `files`) of the alive files whose interval contains the event at `pos`."""
        return np.flatnonzero(alive & (self.start_pos <= pos) & (self.end_pos > pos))


def resolve_cluster_key(schema: pa.Schema | None, key: str) -> tuple[str, ...]:
    """The column path of `overlap.cluster-key` in the table's schema; ConfigError naming the
    columns when it is none of them (the strategy when it runs, ALTER TABLE when it is set)."""
    path = resolve_path(schema, key) if schema is not None and len(schema) else None
    if path is None:
        names = ", ".join(schema.names) if schema is not None else "(no schema)"
        raise ConfigError(f"{PREFIX}overlap.cluster-key={key!r} is not a column of the table (columns: {names})")
    return path


def key_intervals(snapshot: Any, key: str, idx: np.ndarray) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """(files with both bounds known, their mins, their maxs) on `key` from the Delta stats."""
    schema = getattr(snapshot, "schema", None)
    path = resolve_cluster_key(schema, key)
    files = snapshot.files.select(["stats"])
    if idx.size != files.num_rows or (idx.size and (idx[0] != 0 or idx[-1] != idx.size - 1)):
        files = files.take(pa.array(idx, pa.int64()))
    stats = parse_stats(files, schema, [key])
    mn_name, mx_name = stat_column("min", path), stat_column("max", path)
    if mn_name not in stats.column_names:
        raise ConfigError(
            f"{PREFIX}overlap.cluster-key={key!r} has no min/max statistics (its type cannot be ordered); "
            "choose a number, date, timestamp or string column"
        )
    mn, mx = stats.column(mn_name).combine_chunks(), stats.column(mx_name).combine_chunks()
    ok = pc.and_(pc.is_valid(mn), pc.is_valid(mx))
    keep = np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
    return idx[keep], mn.filter(ok), mx.filter(ok)


def build_sweep(snapshot: Any, key: str, idx: np.ndarray) -> OverlapSweep | None:
    files, mn, mx = key_intervals(snapshot, key, idx)
    n = files.size
    if n == 0:
        return None
    groups, partitions = partition_groups(snapshot, files)
    pos = np.arange(n, dtype=np.int64)
    g = np.concatenate([groups, groups])
    v = pa.concat_arrays([mn, mx])
    t = np.concatenate([np.zeros(n, np.int8), np.ones(n, np.int8)])  # start before end at equal values
    if pa.types.is_integer(v.type) or pa.types.is_floating(v.type) or pa.types.is_temporal(v.type):
        # numeric keys sort faster in numpy, in their own dtype (no float rounding of int64). Starts
        # are the first half of the events, so a stable sort by value puts them before equal ends.
        order = np.argsort(v.to_numpy(zero_copy_only=False), kind="stable")
        if len(partitions) > 1:
            order = order[np.argsort(g[order], kind="stable")]
    else:
        events = pa.table({"g": g, "v": v, "t": t})
        order = pc.sort_indices(events, sort_keys=[("g", "ascending"), ("v", "ascending"), ("t", "ascending")]).to_numpy()
    event_file = np.concatenate([pos, pos])[order]
    is_start = order < n
    where = np.empty(2 * n, dtype=np.int64)
    where[order] = np.arange(2 * n)
    return OverlapSweep(files, groups, partitions, event_file, is_start, where[:n], where[n:])


def max_overlap_depth(snapshot: Any, key: str) -> int:
    """The table's maximum overlap depth on `key` over its plain files (0 for no files with stats)."""
    sweep = build_sweep(snapshot, key, plain_files(snapshot))
    if sweep is None:
        return 0
    return int(sweep.depth(np.ones(sweep.files.size, dtype=np.int64)).max())


@register("ClusterKeyOverlap", "ClusterKey")
class ClusterKeyOverlap:
    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = True
    applies_to_delta: ClassVar[bool] = True

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        key = config.overlap_cluster_key
        if key is None:
            raise ConfigError(
                f"ClusterKeyOverlap needs {PREFIX}overlap.cluster-key: set it to the column whose overlap to reduce"
            )
        sweep = build_sweep(snapshot, key, plain_files(snapshot))
        if sweep is None:
            return None
        sizes_all = sizes_of(snapshot)
        alive = np.ones(sweep.files.size, dtype=np.int64)
        tasks: list[MergeTask] = []
        total = 0
        rid = plain_revision(snapshot)
        # Each round either plans a task or takes one file out of the sweep: at most one per file.
        for _ in range(sweep.files.size):
            if len(tasks) >= _MAX_TASKS_PER_PLAN:
                break
            depth = sweep.depth(alive)
            p = int(np.argmax(depth))
            d = int(depth[p])
            if d <= config.overlap_depth_threshold:
                break
            cover = sweep.covering(p, alive.astype(bool))
            rows = sort_files(snapshot, sweep.files[cover], [("size", "ascending")])
            sizes = sizes_all[rows]
            k = merge_prefix(sizes, config.task_limit)
            if k == 0:  # no two files covering this point fit the limit: drop the largest of them
                alive[cover[np.flatnonzero(sweep.files[cover] == rows[-1])[0]]] = 0
                continue
            nbytes = int(sizes[:k].sum())
            if tasks and total + nbytes > config.bytes_per_iter:
                break
            # positions of the chosen rows inside the sweep, to take them out of the next round
            chosen = cover[np.isin(sweep.files[cover], rows[:k])]
            alive[chosen] = 0
            total += nbytes
            score = (k - 1) * (config.open_file_cost + nbytes / k) / max(1, nbytes)
            reason = f"overlap depth {d} on {key} (threshold {config.overlap_depth_threshold}): merge {k} of the {cover.size} overlapping files"
            tasks.append(
                MergeTask(self.name, rid, paths_of(snapshot, rows[:k]), nbytes, k, score, reason, KIND_BINPACK,
                          sweep.partitions[int(sweep.groups[cover[0]])], (key,))
            )  # fmt: skip
        if not tasks:
            return None
        return Plan(tuple(tasks), self.name, snapshot.version)
