"""`<table>.layout`: how far each revision's files are from an ideal layout, and one health score.

One row per revision that has files (and always the latest; staging revision 0 only when it has
files), or one row for a plain Delta table (`revision_id` -1). The figures are the ones the
strategies act on: small files, blocks and files per cube, file levels, overlap depth, and the bytes
a `sample(f)` reads against what an ideal layout would read (the reader's own file selection,
`use.qbeast.query.select_files`, decides what a sample reads).

Health score (0-100, higher is better; docs/insights.md states it for operators)
------------------------------------------------------------------------------------------------
The score prices a small workload with the read-cost model the strategies' scores already use
(Spark's and Amoro's): reading b bytes from n files costs `b + open_file_cost * n`
(`use.optimization.open-file-cost`, default 4 MiB). For each query q of the workload,
`c_q = min(1, ideal cost / actual cost)`, and

    health = 100 * (c_1 * c_2 * ... * c_k) ** (1 / k)        (geometric mean over the k queries)

An ideal layout stores b bytes of r rows in `ideal_files(b, r) = max(1, ceil(b / max-file-size),
ceil(r / desired_cube_size))` files: as large as `use.optimization.max-file-size` allows and, in a
Qbeast revision, rolled up to about one cube of rows per file as the OTree writer does (the cube
term is absent on plain Delta tables). It is counted per partition (a file never holds two), a
plain file of `min-file-size` or more counting as itself (never merged, and splitting it only adds
files). A query's ideal file count is that, unless the layout is within one file of it: a merge
saving one file open per read is not worth its commit, so the guard never plans it
(`use.optimize.gain.files_after_merging`) and the score does not count it either; so a table whose
plan is empty for want of anything worth rewriting scores 100 (docs/insights.md says where exactly).
The queries, and what is ideal for each:
* scan (every row): all B bytes of the row's files; ideal: B bytes in `ideal_files(B, rows)`.
  Rows that deletion vectors delete are read for nothing: every query's ideal (scan and samples)
  counts only the live share of its bytes and rows, `(rows - deleted_rows) / rows`.
* sample(0.01) and sample(0.1) (Qbeast revisions): the files the reader selects for the sample
  (`select_files`); ideal: only the blocks the index selects for it (`select_blocks`: the cubes the
  sample reaches, within its weight range), their rows at their files' bytes per row, ideally
  packed. What a sample reads beyond them is the layout's overhead (blocks of other cubes sharing
  its files, fragments of a cube spread over many files), which optimization removes; the shape of
  the index itself is not held against the layout. Staging files have no index, so a sample reads
  all of them; their ideal is what an index would read, `B * min(1, max(f, desired_cube_size /
  rows))` (no index serves less than its root cube): unindexed data lowers the score.
* lookup (where an overlap depth is known): the files a point lookup opens, `overlap_depth`; ideal:
  `ideal_overlap_depth` (the tree's depth for a revision: one file per level of the path; 1 for a
  plain table's cluster key); c_q is the ratio of the two.
The geometric mean is the usual summary of ratios: a query read 10x too expensively costs the same
score whichever query it is, one bad query cannot be averaged away by good ones, and a layout that
is ideal for every query scores exactly 100. Small files weigh through the open cost: files of
hundreds of MB cost a few percent, thousands of KB-sized files dominate. The table-level score
(`health_score` of `metastore_summary`) applies the same formula to the costs summed over rows.
`health_parts` splits the points lost among the queries by their share of the log of the product
(`lost_q = (100 - health) * ln c_q / sum ln c`), so they add up to 100 - health.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from use.delta.deletion_vectors import deleted_counts
from use.insights.facts import config_of
from use.insights.tables import BlockFacts, distinct, file_revision_ids
from use.optimize.config import OptimizationConfig
from use.optimize.gain import files_after_merging
from use.optimize.strategies._common import RevisionBlocks, partition_groups, sizes_of
from use.optimize.strategies.overlap import max_overlap_depth
from use.qbeast.query import select_blocks, select_files
from use.qbeast.weight import MIN_WEIGHT, weight_from_fraction

__all__ = ["HEALTH_PARTS", "LAYOUT_SCHEMA", "SAMPLE_FRACTIONS", "Health", "health", "health_score", "layout", "path_file_counts"]

#: The sample fractions whose read cost `layout` reports (columns sample_1pct_*, sample_10pct_*).
SAMPLE_FRACTIONS: tuple[tuple[str, float], ...] = (("1pct", 0.01), ("10pct", 0.1))

LAYOUT_SCHEMA = pa.schema(
    [
        ("revision_id", pa.int64()),
        ("num_files", pa.int64()),
        ("bytes", pa.int64()),
        ("rows", pa.int64()),
        ("deleted_rows", pa.int64()),
        ("avg_file_size", pa.float64()),
        ("small_files", pa.int64()),
        ("ideal_files", pa.int64()),
        ("num_cubes", pa.int64()),
        ("num_blocks", pa.int64()),
        ("blocks_per_cube", pa.float64()),
        ("max_blocks_per_cube", pa.int64()),
        ("files_per_cube", pa.float64()),
        ("blocks_per_file", pa.float64()),
        ("file_levels", pa.map_(pa.int64(), pa.int64())),
        ("depth", pa.int32()),
        ("overlap_columns", pa.list_(pa.string())),
        ("overlap_depth", pa.int64()),
        ("ideal_overlap_depth", pa.int64()),
        *[
            field
            for label, _ in SAMPLE_FRACTIONS
            for field in (
                (f"sample_{label}_files", pa.int64()),
                (f"sample_{label}_bytes", pa.int64()),
                (f"sample_{label}_overhead", pa.float64()),
            )
        ],
        ("health_score", pa.float64()),
        ("health_parts", pa.map_(pa.string(), pa.float64())),
    ]
)

#: The health workload's queries, the keys of `health_parts` (points each one costs the score).
HEALTH_PARTS: tuple[str, ...] = ("scan", *(f"sample_{label}" for label, _ in SAMPLE_FRACTIONS), "lookup")


def path_file_counts(rb: RevisionBlocks) -> np.ndarray:
    """Per cube of a revision: the distinct files a point lookup inside the cube's region opens,
    i.e. the files holding a block of the cube or of any of its ancestors.

    Counted without materializing the paths: a (cube, file) pair adds a file to the path unless a
    proper ancestor of the cube already has a block in that same file, and the counts then add up
    top-down along the parent links (one numpy pass per tree level).
    """
    k = rb.num_cubes
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    n_files = int(rb.file.max()) + 1
    pairs = distinct(rb.code * n_files + rb.file)
    cube, file = pairs // n_files, pairs % n_files
    parent = rb.parent_code()
    seen_above = np.zeros(pairs.size, dtype=bool)
    anc = parent[cube]
    live = np.flatnonzero(anc >= 0)
    while live.size:
        key = anc[live] * n_files + file[live]
        pos = np.minimum(np.searchsorted(pairs, key), pairs.size - 1)
        seen_above[live] |= pairs[pos] == key
        anc[live] = parent[anc[live]]
        live = live[anc[live] >= 0]
    own = np.bincount(cube, weights=~seen_above, minlength=k).astype(np.int64)
    depth = rb.cube_depth()
    total = np.zeros(k, dtype=np.int64)
    for d in range(int(depth.max()) + 1):
        idx = np.flatnonzero(depth == d)
        p = parent[idx]
        total[idx] = own[idx] + np.where(p >= 0, total[np.maximum(p, 0)], 0)
    return total


@dataclass(frozen=True)
class _Query:
    """One query of the health workload on one row: (ideal cost, actual cost)."""

    ideal: float
    actual: float

    @property
    def ratio(self) -> float:
        return 1.0 if self.actual <= 0 else min(1.0, self.ideal / self.actual)


@dataclass(frozen=True)
class Health:
    """A health score and its parts: the points each query of the workload costs it (they add up to
    100 - score; a query at its ideal costs 0)."""

    score: float
    parts: dict[str, float]


def _health(queries: dict[str, _Query]) -> Health:
    """The geometric mean of the queries' ratios, and each query's share of the points lost: its
    share of the log of the product (the mean of the logs is what the score exponentiates)."""
    if not queries:
        return Health(100.0, {})
    logs = {name: math.log(max(queries[name].ratio, 1e-12)) for name in HEALTH_PARTS if name in queries}
    total = sum(logs.values())
    score = 100.0 * math.exp(total / len(logs))
    lost = 100.0 - score
    return Health(score, {name: (lost * v / total if total < 0 and v < 0 else 0.0) for name, v in logs.items()})


def _ideal_files(nbytes: float, nrows: float, cube_size: int | None, config: OptimizationConfig) -> int:
    if nbytes <= 0:
        return 0
    return max(1, math.ceil(nbytes / config.max_file_size), math.ceil(nrows / cube_size) if cube_size else 0)


def _partitioned_ideal(
    qsnap: Any, sel: np.ndarray, counts: np.ndarray, cube_size: int | None, config: OptimizationConfig
) -> tuple[int, int]:
    """(ideal files, files the optimizer leaves) of the files `sel`: the ideal of each partition
    summed (a file never holds two partitions), and per partition that ideal once merging there is
    worth a rewrite, else its files as they are (`use.optimize.gain.files_after_merging`)."""
    idx = np.flatnonzero(sel)
    if idx.size == 0:
        return 0, 0
    gids, groups = partition_groups(qsnap, idx)
    sizes = sizes_of(qsnap)[idx]
    # A file of min-file-size or more is never merged (nor split: that adds opens), so it is its own ideal.
    large = sizes >= config.min_file_size_limit if cube_size is None else np.zeros(idx.size, dtype=bool)
    small = ~large
    k = len(groups)
    nbytes = np.bincount(gids[small], weights=sizes[small], minlength=k)
    nrows = np.bincount(gids[small], weights=counts[idx][small], minlength=k)
    nfiles = np.bincount(gids, minlength=k)
    nlarge = np.bincount(gids[large], minlength=k)
    ideal = [
        int(big) + _ideal_files(float(b), float(r), cube_size, config)
        for big, b, r in zip(nlarge.tolist(), nbytes.tolist(), nrows.tolist(), strict=True)
    ]
    left = [files_after_merging(int(n), i, config) for n, i in zip(nfiles.tolist(), ideal, strict=True)]
    return sum(ideal), sum(left)


def _cost(nbytes: float, nfiles: float, config: OptimizationConfig) -> float:
    return float(nbytes) + float(config.open_file_cost) * float(nfiles)


def _query(
    read_bytes: float, read_files: int, ideal_bytes: float, ideal_rows: float, cube_size: int | None, config: OptimizationConfig
) -> _Query:
    ideal_files = files_after_merging(read_files, _ideal_files(ideal_bytes, ideal_rows, cube_size, config), config)
    return _Query(_cost(ideal_bytes, ideal_files, config), _cost(read_bytes, read_files, config))


@dataclass(frozen=True)
class _Sample:
    """What sample(f) reads (`files`: per file row) and what the index needs of it (per block)."""

    files: np.ndarray
    block_bytes: np.ndarray
    block_rows: np.ndarray

    @classmethod
    def of(cls, qsnap: Any, facts: BlockFacts, f: float) -> _Sample:
        weights = (MIN_WEIGHT, int(weight_from_fraction(f)))
        read = np.asarray(select_files(qsnap, None, weights), dtype=bool)
        blocks: pa.Table = qsnap.blocks
        keep = select_blocks(blocks, qsnap.revisions, None, weights)
        fi = np.asarray(blocks.column("file_index").to_numpy(zero_copy_only=False), dtype=np.int64)
        counts = np.asarray(blocks.column("element_count").to_numpy(zero_copy_only=False), dtype=np.int64)
        rows = np.where(keep, counts, 0)
        return cls(read, rows * (sizes_of(qsnap)[fi] / np.maximum(facts.count[fi], 1)), rows)


def _cube_figures(qsnap: Any, rid: int, num_files: int) -> dict[str, Any]:
    """Blocks, cubes, depth and the point-lookup overlap of one indexed revision."""
    rb = RevisionBlocks.of(qsnap, rid)
    if rb.size == 0:
        return {}
    depth = int(rb.depth.max()) + 1
    pairs = distinct(rb.code * (int(rb.file.max()) + 1) + rb.file).size
    return {
        "num_cubes": rb.num_cubes,
        "num_blocks": rb.size,
        "blocks_per_cube": rb.size / rb.num_cubes,
        "max_blocks_per_cube": int(np.bincount(rb.code, minlength=rb.num_cubes).max()),
        "files_per_cube": pairs / rb.num_cubes,
        "blocks_per_file": rb.size / num_files if num_files else None,
        "depth": depth,
        "overlap_columns": list(qsnap.revisions[rid].columns),
        "overlap_depth": int(path_file_counts(rb).max()),
        "ideal_overlap_depth": depth,
    }


def _rows_of_layout(qsnap: Any, config: OptimizationConfig) -> tuple[list[dict[str, Any]], list[dict[str, _Query]]]:
    """The layout rows and, per row, its health workload (one query per kind)."""
    rids = file_revision_ids(qsnap)
    sizes = sizes_of(qsnap)
    facts = BlockFacts(qsnap)
    levels = facts.levels
    deleted = np.asarray(deleted_counts(qsnap.files).to_numpy(zero_copy_only=False), dtype=np.int64)
    if qsnap.is_qbeast:
        wanted = sorted(set(distinct(rids).tolist()) | {int(qsnap.latest_revision_id)})
    else:
        wanted = [-1]
    samples: dict[str, _Sample] = {}
    if qsnap.is_qbeast and qsnap.files.num_rows:
        samples = {label: _Sample.of(qsnap, facts, f) for label, f in SAMPLE_FRACTIONS}
    block_rev = np.asarray(qsnap.blocks.column("revision_id").to_numpy(zero_copy_only=False), dtype=np.int64)
    key = config.overlap_cluster_key
    key_depth = max_overlap_depth(qsnap, key) if key is not None and qsnap.files.num_rows else None

    rows: list[dict[str, Any]] = []
    workloads: list[dict[str, _Query]] = []
    for rid in wanted:
        sel = rids == rid
        n, nbytes = int(sel.sum()), int(sizes[sel].sum())
        counts = facts.count if qsnap.is_qbeast else facts.max_count
        nrows = int(counts[sel].sum())
        cube_size = int(qsnap.revisions[rid].desired_cube_size) if rid in qsnap.revisions else None
        ideal_files, left_files = _partitioned_ideal(qsnap, sel, counts, cube_size, config)
        per_level = np.bincount(levels[sel], minlength=1)
        ndeleted = int(deleted[sel].sum())
        # rows deletion vectors delete are still read by every query: the ideal reads only the live ones
        live = 1.0 if nrows <= 0 else max(0.0, (nrows - ndeleted) / nrows)
        row: dict[str, Any] = {
            "revision_id": int(rid),
            "num_files": n,
            "bytes": nbytes,
            "rows": nrows,
            "deleted_rows": ndeleted,
            "avg_file_size": nbytes / n if n else 0.0,
            "small_files": int((sizes[sel] < config.small_files_max_size).sum()),
            "ideal_files": ideal_files,
            "file_levels": [(lv, int(c)) for lv, c in enumerate(per_level.tolist()) if c],
        }
        work = {"scan": _Query(_cost(nbytes * live, left_files, config), _cost(nbytes, n, config))}
        if rid > 0:
            row.update(_cube_figures(qsnap, rid, n))
        elif key_depth is not None:
            row.update(overlap_columns=[key], overlap_depth=key_depth, ideal_overlap_depth=1)
        if row.get("overlap_depth") is not None:
            depth = int(row["overlap_depth"])
            work["lookup"] = _Query(float(files_after_merging(depth, int(row["ideal_overlap_depth"]), config)), float(depth))
        for label, f in SAMPLE_FRACTIONS if samples else ():
            sample = samples[label]
            hit = sample.files & sel
            read_bytes, read_files = int(sizes[hit].sum()), int(hit.sum())
            if rid > 0:
                in_rev = block_rev == rid
                ideal_bytes, ideal_rows = float(sample.block_bytes[in_rev].sum()), float(sample.block_rows[in_rev].sum())
            else:  # staging: what an index would read once its files are indexed
                share = f if nrows <= 0 else min(1.0, max(f, (cube_size or 0) / nrows))
                ideal_bytes, ideal_rows = nbytes * share, nrows * share
            row[f"sample_{label}_files"] = read_files
            row[f"sample_{label}_bytes"] = read_bytes
            row[f"sample_{label}_overhead"] = read_bytes / ideal_bytes if ideal_bytes > 0 else None
            work[f"sample_{label}"] = _query(read_bytes, read_files, ideal_bytes * live, ideal_rows * live, cube_size, config)
        row_health = _health(work)
        row["health_score"], row["health_parts"] = row_health.score, list(row_health.parts.items())
        rows.append(row)
        workloads.append(work)
    return rows, workloads


def layout(qsnap: Any, config: OptimizationConfig | None = None) -> pa.Table:
    """`<table>.layout`: the layout figures and health score per revision (see the module docstring).

    `config` gives open-file-cost, max-file-size, small-files.max-size and overlap.cluster-key; by
    default the table's own properties (ConfigError if they are invalid).
    """
    config = config if config is not None else config_of(qsnap)
    rows, _ = _rows_of_layout(qsnap, config)
    return pa.Table.from_pylist(rows, schema=LAYOUT_SCHEMA)


def health(qsnap: Any, config: OptimizationConfig | None = None) -> Health:
    """The table's health score and its parts: the layout's formula over the costs summed across its rows."""
    config = config if config is not None else config_of(qsnap)
    _, workloads = _rows_of_layout(qsnap, config)
    kinds = [k for k in HEALTH_PARTS if any(k in w for w in workloads)]
    return _health(
        {k: _Query(sum(w[k].ideal for w in workloads if k in w), sum(w[k].actual for w in workloads if k in w)) for k in kinds}
    )


def health_score(qsnap: Any, config: OptimizationConfig | None = None) -> float:
    """The table's health score (`health(...).score`)."""
    return health(qsnap, config).score
