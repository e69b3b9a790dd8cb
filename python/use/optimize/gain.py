"""The fixed-point guard: what a merge task's rewrite can gain, and no task that gains nothing.

The service runs the optimizer every interval, forever, so a strategy that selected work its
rewrite cannot improve would rewrite and commit without end. Every strategy's plan passes through
`guard` (the planner applies it before the first non-empty plan of the chain wins). A task is kept
only if

* a task of several files stays within its IO limit (`io_limit`: `task-max-bytes`, or `batchBytes`
  for indexing), and
* its rewrite can reduce files, blocks or read cost, estimated from the snapshot's metadata
  (`Gain`), by the kind of rewrite it asks for:
  - index: the staging files leave revision 0, which every query reads in full, or the files of a
    superseded revision join the latest one, beside which every query of its space also opens them
    (SupersededRevisionsSelection): always a gain, and the selection empties as they go;
  - cluster (ZOrder, Hilbert): the strategy selects only a partition's files not yet clustered by
    its key and its small ZCubes, so its selection is the gain; a Z-order clusters a partition as a
    whole (Delta's OPTIMIZE ZORDER BY), so it is bounded by bytes-per-iter per plan, not by the
    per-task limit;
  - binpack: it writes at least `MIN_FILES_SAVED` (2) fewer files than it reads
    (ceil(bytes / max-file-size) <= files - 2: `worth_merging`); a sorted binpack (ClusterKeyOverlap)
    also gains when its files' key ranges overlap, since its sorted outputs do not;
  - compact: some cube has blocks in two or more of its files (the rewrite puts every cube in one
    file), or, with `sampling-fraction` configured, one of its files makes `sample(f)` read rows it
    drops (every compaction is then sampling-aware and separates them: SamplingOverheadReduction's
    criterion, `overhead_per_file`).

Why two files: a rewrite is a commit, and a commit is one more file in the log that every reader
opens until the next checkpoint. A merge that saves each later read one data file open buys that
with one log file open: nothing is gained, however small the files (two files of a few hundred
bytes each score as healthy as one, see `use.insights.health`, which counts a group of files within
one file of its ideal as ideal through `files_after_merging`). A `small-files.count-threshold` of 2
asks for merges of two files (Delta's auto compaction with `minNumFiles=2`): one file is then enough.

So a table on which no strategy of the chain finds a gain is at its fixed point: the planner returns
an empty plan and an optimize call commits nothing. The kept tasks carry their `Gain`, which the
optimize loop checks against what the committed rewrite did (files and blocks; read cost is not
measurable from a commit and is left to the next plan).

One-shot plans (an explicit file list, a revision rewrite) are requests to rewrite exactly those
files: they only pass the IO-limit check, and are one-shot by themselves (the loop runs them once; a
revision rewrite selects nothing once the revision is rewritten, see `revision_rewrite_plan`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.optimize.config import OptimizationConfig
from use.optimize.plan import KIND_BINPACK, KIND_CLUSTER, KIND_COMPACT, KIND_INDEX, KIND_RELABEL, Gain, MergeTask, Plan
from use.optimize.strategies._common import distinct, io_limit, output_files
from use.optimize.strategies.overlap import build_sweep
from use.optimize.strategies.sampling import overhead_per_file

#: A merge (binpack) must write at least this many fewer files than it reads to be worth its commit
#: (module docstring), unless the table asks for merges of two files (`min_files_saved`).
MIN_FILES_SAVED = 2


def min_files_saved(config: OptimizationConfig) -> int:
    """The files a merge must save: `MIN_FILES_SAVED`, or 1 where `small-files.count-threshold` is 2,
    an explicit request to merge two small files (Delta's `autoCompact.minNumFiles=2` sets it)."""
    return min(MIN_FILES_SAVED, config.small_files_count_threshold - 1)


def worth_merging(files_in: int, files_out: int, config: OptimizationConfig) -> bool:
    """Whether merging `files_in` files into `files_out` saves enough file opens to be worth a commit."""
    return files_in - files_out >= min_files_saved(config)


def files_after_merging(files: int, ideal: int, config: OptimizationConfig) -> int:
    """How many files the optimizer leaves a group (a partition's files, a revision's) of `files`
    files whose ideal is `ideal`: the ideal once merging there is worth it, else as they are. The
    health score's ideal, so that the score and the guard agree on what is worth rewriting."""
    return ideal if worth_merging(files, ideal, config) else files


def task_rows(snapshot: Any, tasks: Sequence[MergeTask]) -> list[np.ndarray]:
    """Rows of `snapshot.files` of every task's paths, in the task's order (all tasks resolved in one
    pass); a path that is not a live file is left out (strategies only plan live files; explicit
    lists are checked before)."""
    if not tasks:
        return []
    flat = [p for t in tasks for p in t.paths]
    paths = pa.array(flat, pa.string())
    stored = snapshot.files.column("path")
    stored = stored.combine_chunks() if isinstance(stored, pa.ChunkedArray) else stored
    if len(set(flat)) == len(flat):
        # Few task paths against many files: hash the task paths, scan the files once.
        rows = np.flatnonzero(np.asarray(pc.is_in(stored, value_set=paths).to_numpy(zero_copy_only=False), dtype=bool))
        pos = np.asarray(
            pc.index_in(stored.take(pa.array(rows, pa.int64())), value_set=paths).to_numpy(zero_copy_only=False), dtype=np.int64
        )
        found = np.full(len(flat), -1, dtype=np.int64)
        found[pos] = rows
    else:
        found = np.asarray(pc.index_in(paths, value_set=stored).fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    parts = np.split(found, np.cumsum([t.num_files for t in tasks])[:-1])
    return [p[p >= 0] for p in parts]


def redundant_blocks(snapshot: Any, rows: Sequence[np.ndarray]) -> np.ndarray:
    """Per group of file rows: blocks beyond one per cube among those files (what a compaction that
    puts each cube in one file removes). Vectorized over all groups at once."""
    out = np.zeros(len(rows), dtype=np.int64)
    blocks: pa.Table = snapshot.blocks
    if not rows or blocks.num_rows == 0:
        return out
    owner = np.repeat(np.arange(len(rows), dtype=np.int64), [r.size for r in rows])
    flat = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    if flat.size == 0:
        return out
    # only the blocks of the tasks' files (one hash lookup), sorted by file
    file_index = blocks.column("file_index")
    mine = np.flatnonzero(
        np.asarray(pc.is_in(file_index, value_set=pa.array(flat, pa.int64())).to_numpy(zero_copy_only=False), dtype=bool)
    )
    fi = np.asarray(file_index.take(pa.array(mine, pa.int64())).to_numpy(zero_copy_only=False), dtype=np.int64)
    by_file = np.argsort(fi, kind="stable")
    order, fi = mine[by_file], fi[by_file]
    # blocks of every (group, file) pair: a file in two groups counts for both
    lo = np.searchsorted(fi, flat, side="left")
    hi = np.searchsorted(fi, flat, side="right")
    counts = hi - lo
    if not counts.any():
        return out
    # the concatenated ranges [lo, hi) of every pair, without a Python loop
    total = int(counts.sum())
    block_rows = order[np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(lo, counts)]
    block_owner = np.repeat(owner, counts)
    cube = blocks.column("cube_id").take(pa.array(block_rows, pa.int64()))
    rid = blocks.column("revision_id").take(pa.array(block_rows, pa.int64()))
    key = pc.binary_join_element_wise(pc.cast(rid, pa.string()), cube, "/")
    enc = pc.dictionary_encode(key.combine_chunks() if isinstance(key, pa.ChunkedArray) else key)
    code = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    ncodes = max(1, len(enc.dictionary))
    per_group = np.bincount(block_owner, minlength=len(rows))
    per_cube = np.bincount(distinct(block_owner * ncodes + code) // ncodes, minlength=len(rows))
    return (per_group - per_cube).astype(np.int64)


def _overlap_read_cost(snapshot: Any, task: MergeTask, rows: np.ndarray, config: OptimizationConfig) -> float:
    """Read cost a sorted rewrite of these files saves: a lookup where `depth` of them overlap reads
    `depth` files before and one after (ClusterKeyOverlap's score numerator)."""
    if rows.size < 2:
        return 0.0
    sweep = build_sweep(snapshot, task.sort_columns[0], np.sort(rows))
    if sweep is None:
        return 0.0
    depth = int(sweep.depth(np.ones(sweep.files.size, dtype=np.int64)).max())
    return float(max(0, depth - 1) * (config.open_file_cost + task.bytes / max(1, task.num_files)))


def estimate(snapshot: Any, tasks: Sequence[MergeTask], config: OptimizationConfig) -> list[Gain]:
    """The `Gain` of each task's rewrite, from the snapshot's metadata (see the module docstring)."""
    # Only compactions and sorted binpacks need their files' metadata.
    need = [i for i, t in enumerate(tasks) if t.kind == KIND_COMPACT or (t.kind == KIND_BINPACK and t.sort_columns)]
    rows: dict[int, np.ndarray] = dict(zip(need, task_rows(snapshot, [tasks[i] for i in need]), strict=False))
    compact = [i for i in need if tasks[i].kind == KIND_COMPACT]
    redundant = dict(zip(compact, redundant_blocks(snapshot, [rows[i] for i in compact]).tolist(), strict=False))
    overhead: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    gains: list[Gain] = []
    for i, task in enumerate(tasks):
        if task.kind == KIND_RELABEL:
            # nothing is rewritten: the files join the latest revision's tree, where its
            # consolidation can merge them with the cubes they now share (measured by the next plan)
            gains.append(Gain(read_cost=float(task.num_files)))
            continue
        if task.kind in (KIND_INDEX, KIND_CLUSTER):
            # Clustering selects only files not yet clustered by its key (or small ZCubes of it):
            # the strategy's selection is its fixed point, and the files' key ranges are the gain.
            gains.append(Gain(read_cost=float(task.bytes)))
            continue
        files_out = output_files(task.bytes, config.max_file_size)
        if task.kind == KIND_BINPACK:
            read = _overlap_read_cost(snapshot, task, rows[i], config) if task.sort_columns else 0.0
            files = task.num_files - files_out if worth_merging(task.num_files, files_out, config) else 0
            gains.append(Gain(files=files, read_cost=read))
            continue
        read = 0.0
        if config.sampling_fraction is not None and task.revision_id > 0:
            if task.revision_id not in overhead:
                overhead[task.revision_id] = overhead_per_file(snapshot, task.revision_id, config.sampling_fraction)
            is_overhead, overhead_bytes = overhead[task.revision_id]
            if is_overhead[rows[i]].any():
                read = float(overhead_bytes[rows[i]].sum())
        # A compaction's output files depend on its rollup, not on max-file-size: only blocks and
        # read cost are claimed for it.
        gains.append(Gain(blocks=int(redundant[i]), read_cost=read))
    return gains


def guard(plan: Plan, snapshot: Any, config: OptimizationConfig) -> Plan:
    """`plan` without the tasks that exceed their IO limit or gain nothing, each kept task carrying
    its `Gain`. One-shot plans keep every task within the limit (they were asked for)."""
    if plan.is_empty:
        return plan
    kept: list[MergeTask] = []
    for task, gain in zip(plan.tasks, estimate(snapshot, plan.tasks, config), strict=False):
        if task.num_files > 1 and task.kind != KIND_CLUSTER and task.bytes > io_limit(task.kind, config):
            continue
        if not gain and not plan.one_shot:
            continue
        kept.append(dataclasses.replace(task, gain=gain))
    return Plan(tuple(kept), plan.strategy, plan.snapshot_version, one_shot=plan.one_shot)
