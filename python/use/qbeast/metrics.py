"""Index metrics of a Qbeast table: how close each revision's OTree is to its ideal shape. Pure.

A well-built OTree has inner cubes of about `desiredCubeSize` rows, shallow depth, few blocks per
file and files in few size levels; appends and concurrent writes drift away from that, and these
numbers are what a user (or the optimizer) looks at to see how far. Everything is computed on the
snapshot's block table with numpy (no per-block Python objects), per revision.

Cube status follows the format (spec §3.0): a cube's maxWeight is the minimum of its blocks'
maxWeight and its size the sum of their element counts; a cube is a leaf when its maxWeight is
`MAX_WEIGHT`, otherwise it is inner (full). A file's level is `floor(log10(largest block
elementCount))`, the leveled-compaction classification of the optimization guide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.qbeast.weight import MAX_WEIGHT, fraction


@dataclass(frozen=True)
class SizeStats:
    """Distribution of a set of sizes (cube element counts or blocks per file)."""

    count: int
    min: float
    max: float
    avg: float
    stddev: float
    p25: float = 0.0
    p50: float = 0.0
    p75: float = 0.0

    @classmethod
    def of(cls, values: np.ndarray) -> SizeStats:
        v = np.asarray(values, dtype=np.float64)
        if v.size == 0:
            return cls(0, 0.0, 0.0, 0.0, 0.0)
        q = np.percentile(v, [25, 50, 75])
        return cls(int(v.size), float(v.min()), float(v.max()), float(v.mean()), float(v.std()), *map(float, q))

    def line(self) -> str:
        if self.count == 0:
            return "none"
        return (
            f"count={self.count} avg={self.avg:,.1f} std={self.stddev:,.1f} min={self.min:,.0f} "
            f"p25={self.p25:,.0f} p50={self.p50:,.0f} p75={self.p75:,.0f} max={self.max:,.0f}"
        )


@dataclass(frozen=True)
class LevelStats:
    """Cubes at one tree depth."""

    depth: int
    cube_count: int
    avg_size: float
    std_size: float
    avg_normalized_weight: float


@dataclass(frozen=True, repr=False)
class IndexMetrics:
    """One revision's OTree, summarized (prints, and shows in a REPL, as text)."""

    revision_id: int
    indexed_columns: tuple[str, ...]
    dimension_count: int
    desired_cube_size: int
    row_count: int
    file_count: int
    block_count: int
    cube_count: int
    depth: int  # number of tree levels holding cubes (max cube depth + 1; 0 when empty)
    avg_fanout: float  # present children per cube that has any
    depth_on_balance: float  # depth / depth of a complete tree with this many cubes (1.0 is ideal)
    inner_cube_sizes: SizeStats
    leaf_cube_sizes: SizeStats
    inner_size_vs_desired: float  # avg inner cube size / desired (1.0 is ideal)
    inner_l1_dev: float  # mean |size - desired| / desired over inner cubes
    blocks_per_file: SizeStats
    blocks_per_cube: SizeStats
    file_levels: Mapping[int, int]  # level -> number of files
    levels: tuple[LevelStats, ...]

    def __str__(self) -> str:
        lines = [
            f"OTree index metrics, revision {self.revision_id}",
            f"  indexed columns   : {', '.join(self.indexed_columns) or '-'} ({self.dimension_count} dims)",
            f"  desired cube size : {self.desired_cube_size:,}",
            f"  rows / files      : {self.row_count:,} rows in {self.file_count:,} files, {self.block_count:,} blocks",
            f"  cubes / depth     : {self.cube_count:,} cubes, depth {self.depth}, "
            f"avg fan-out {self.avg_fanout:.2f}, depth on balance {self.depth_on_balance:.2f}",
            f"  inner cube sizes  : {self.inner_cube_sizes.line()}",
            f"                      avg/desired {self.inner_size_vs_desired:.3f}, l1 dev {self.inner_l1_dev:.3f}",
            f"  leaf cube sizes   : {self.leaf_cube_sizes.line()}",
            f"  blocks per file   : {self.blocks_per_file.line()}",
            f"  blocks per cube   : {self.blocks_per_cube.line()}",
            "  file levels       : " + (", ".join(f"L{k}={v}" for k, v in sorted(self.file_levels.items())) or "none"),
            "  per depth         : depth cubes avg_size std_size avg_weight",
        ]
        for lv in self.levels:
            lines.append(
                f"                      {lv.depth:>5} {lv.cube_count:>5} {lv.avg_size:>8,.0f} {lv.std_size:>8,.0f} "
                f"{lv.avg_normalized_weight:.4f}"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.__str__()


def _file_levels(file_idx: np.ndarray, counts: np.ndarray) -> dict[int, int]:
    """Histogram of floor(log10(largest block elementCount)) per file (files of empty blocks: level 0)."""
    if file_idx.size == 0:
        return {}
    uniq, inv = np.unique(file_idx, return_inverse=True)
    largest = np.zeros(uniq.size, dtype=np.int64)
    np.maximum.at(largest, inv, counts)
    levels = np.floor(np.log10(np.maximum(largest, 1))).astype(np.int64)
    lv, n = np.unique(levels, return_counts=True)
    return {int(a): int(b) for a, b in zip(lv, n, strict=False)}


def revision_metrics(blocks: pa.Table, revision: Any, revision_id: int, empty: pa.Table | None = None) -> IndexMetrics:
    """Metrics of one revision over the block rows that belong to it; `empty`, its empty blocks
    (`use.qbeast.weight_records`), lower the weight of the cubes holding rows and count as nothing."""
    columns = tuple(revision.columns)
    d = max(1, len(columns))
    desired = int(revision.desired_cube_size)
    file_idx = blocks.column("file_index").to_numpy().astype(np.int64)
    counts = blocks.column("element_count").to_numpy().astype(np.int64)
    max_w = blocks.column("max_weight").to_numpy().astype(np.int64)
    depths_b = blocks.column("depth").to_numpy().astype(np.int64)

    if blocks.num_rows == 0:
        empty = SizeStats.of(np.zeros(0))
        return IndexMetrics(
            revision_id, columns, len(columns), desired, 0, 0, 0, 0, 0, 0.0, 0.0, empty, empty, 0.0, 0.0, empty, empty, {}, ()
        )

    # Distinct cubes via Arrow's dictionary encoding: Python strings only for the distinct cubes.
    encoded = blocks.column("cube_id").combine_chunks().dictionary_encode()
    inv = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    cubes = np.array(encoded.dictionary.to_pylist(), dtype=object)
    n_cubes = cubes.size
    size = np.zeros(n_cubes, dtype=np.int64)
    np.add.at(size, inv, counts)
    weight = np.full(n_cubes, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(weight, inv, max_w)
    if empty is not None and empty.num_rows:
        where = np.asarray(pc.index_in(empty.column("cube_id"), value_set=encoded.dictionary).fill_null(-1), dtype=np.int64)
        recorded = np.asarray(empty.column("max_weight").to_numpy(zero_copy_only=False), dtype=np.int64)
        np.minimum.at(weight, where[where >= 0], recorded[where >= 0])
    depth = np.zeros(n_cubes, dtype=np.int64)
    depth[inv] = depths_b
    nblocks = np.bincount(inv, minlength=n_cubes)
    leaf = weight >= MAX_WEIGHT
    inner = ~leaf
    nw = np.where(leaf, desired / np.maximum(size, 1), fraction(np.minimum(weight, MAX_WEIGHT)))

    # Fan-out: present children per present parent (parent string = drop the last level).
    spl = (d + 5) // 6
    parents = np.array([c[:-spl] if len(c) else None for c in cubes], dtype=object)
    has_parent = np.array([p is not None for p in parents])
    present = set(cubes.tolist())
    child_of_present = np.array([p in present for p in parents[has_parent]], dtype=bool)
    n_parents = len({p for p in parents[has_parent][child_of_present]})
    avg_fanout = float(child_of_present.sum()) / n_parents if n_parents else 0.0

    tree_depth = int(depth.max()) + 1
    fan = 2**d
    complete = math.log(n_cubes * (fan - 1) + 1, fan) if fan > 1 else float(n_cubes)
    depth_on_balance = tree_depth / max(1.0, math.ceil(complete - 1e-9))

    inner_sizes = size[inner]
    inner_stats = SizeStats.of(inner_sizes)
    per_file = np.bincount(np.unique(file_idx, return_inverse=True)[1])

    levels = []
    for lv in np.unique(depth):
        sel = depth == lv
        levels.append(LevelStats(int(lv), int(sel.sum()), float(size[sel].mean()), float(size[sel].std()), float(nw[sel].mean())))

    return IndexMetrics(
        revision_id=revision_id,
        indexed_columns=columns,
        dimension_count=len(columns),
        desired_cube_size=desired,
        row_count=int(counts.sum()),
        file_count=int(np.unique(file_idx).size),
        block_count=int(blocks.num_rows),
        cube_count=int(n_cubes),
        depth=tree_depth,
        avg_fanout=avg_fanout,
        depth_on_balance=depth_on_balance,
        inner_cube_sizes=inner_stats,
        leaf_cube_sizes=SizeStats.of(size[leaf]),
        inner_size_vs_desired=(inner_stats.avg / desired) if inner_stats.count and desired else 0.0,
        inner_l1_dev=float(np.mean(np.abs(inner_sizes - desired)) / desired) if inner_sizes.size and desired else 0.0,
        blocks_per_file=SizeStats.of(per_file),
        blocks_per_cube=SizeStats.of(nblocks),
        file_levels=_file_levels(file_idx, counts),
        levels=tuple(levels),
    )


def index_metrics(qsnap: Any) -> dict[int, IndexMetrics]:
    """Metrics for every revision of the table, keyed by revision id (staging 0 included when present:
    its files are single root blocks, so it shows how much data is waiting to be indexed)."""
    blocks: pa.Table = qsnap.blocks
    rev_col = blocks.column("revision_id").to_numpy() if blocks.num_rows else np.zeros(0, dtype=np.int64)
    out: dict[int, IndexMetrics] = {}
    for rid in sorted(qsnap.revisions):
        rows = np.nonzero(rev_col == rid)[0]
        sub = blocks.take(pa.array(rows, type=pa.int64()))
        if rid == 0 and sub.num_rows == 0:
            continue
        empty = qsnap.empty_blocks.filter(pc.equal(qsnap.empty_blocks.column("revision_id"), int(rid)))
        out[int(rid)] = revision_metrics(sub, qsnap.revisions[rid], int(rid), empty)
    return out
