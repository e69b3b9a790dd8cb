"""Leveled compaction (the guide) and level-wise cube defragmentation (continuous optimization).

Both classify the files of one indexed revision into levels and group blocks per cube:

* file level = floor(log10(largest block elementCount of the file)): level 0 = [1, 9] elements,
  1 = [10, 99], 2 = [100, 999], ... (exact integer arithmetic; files whose blocks are all empty
  have no level and are left alone);
* per level, the blocks of that level's files are grouped by cube and their elementCounts summed;
  a group whose total is below 10^(level+1) is discarded, so merging a group always creates at least
  one file of a higher level (the guarantee that makes the process converge level by level).

`LeveledCompactionSelection` orders the remaining groups by (level, cube depth, number of blocks)
ascending and selects the files of the first group only. `CubeDefragmentation` keeps the groups of
the lowest level that has any, orders them by (cube depth, number of blocks) and takes their files,
group after group, until `bytes-per-iter`. Ties are broken by the cube id string, so a selection is
deterministic.

Both obey the per-task IO limit (`task-max-bytes`) strictly: a merge takes at least two files of
one cube (one file alone holds one block per cube: rewriting it removes no fragmentation) and never
more bytes than the limit, files taken smallest first (most files eliminated per byte). A group
whose two smallest files together exceed the limit cannot be merged within it and is skipped (the
next group is taken); a table where no group can be merged within the limit is at its fixed point
for that limit. `CubeDefragmentation` fills tasks of at most the limit group after group: a group
joins the open task when that task then holds two or more of its files, else it opens a task of its
own smallest files that fit (two or more), else it is skipped; so every task removes blocks. Score: `open_file_cost * (files_in - files_out) / bytes`.

Inner-cube consolidation (our extension, used by both strategies only when no level group
qualifies; with size tiers, the default, before the level rule: see below). The level rule cannot reach a *full* cube: a cube holding about desiredCubeSize rows
puts its file at level floor(log10(desiredCubeSize)), and its block group there only qualifies at
10x that, which an inner cube never reaches (its maxWeight keeps it near desiredCubeSize). So after
many appends the root and the other inner cubes, which every sample and every query through them
read first, stay split over a few files that the level rule leaves alone (e.g. `sample(0.01)`
reading 4 files where a one-go write reads 1). The consolidation rule takes over there:

* candidates are the inner cubes (status maxWeight below MaxValue, or blocks totalling
  >= desiredCubeSize: the estimate leaves some inner cubes a little short of desiredCubeSize) that
  are spread over >= 2 files whose two smallest fit in `task-max-bytes` together; a cube in one file
  is never selected, so a converged table selects nothing; leaves are not candidates (they travel
  with their parents' files: rollup);
* candidates are taken shallowest first (ties by cube id), and their files are added cube after cube
  while the task stays within `task-max-bytes` (a file shared by several candidates is read once);
  if the first cube's files alone exceed the limit, its smallest files that fit are taken (two or
  more);
* one task per iteration, like the level rule.

Why it stays amortized: the rewrite regroups every cube of its input files into one file (the rollup
maps a cube to exactly one output file), so each selected candidate loses at least one block and no
cube gains a block except children receiving offset rows that move down the tree; both measures
(blocks, and the depth still to travel by offsets) only decrease, so the rule terminates, and it only
ever reads files that hold a block of a fragmented inner cube. It lives inside the two leveled
strategies rather than as a separate strategy in the chain because the planner's default chain
runs `LeveledCompactionSelection` for indexed revisions and the consolidation is the completion of the
same goal (blocks per cube).

Size tiers (`tiering.ratio` > 0, the default; issue 14 §2) make consolidation cost-aware
(`_tiered_task`, `tier_tail`): a cube's files merge in LSM tiers, a cube's block in a file that also
holds one of its ancestors is no fragment (every query through the cube opens that file anyway, so
the root's file buffers the recent rows of deeper cubes), and consolidation runs before the level
rule (the seeds' order, level rule first, is `tiering.ratio=0`): otherwise new appends, which each
hold a root block, were merged together by the level rule and then again into the root's file.
For the same reason the level rule then takes only groups of leaf cubes: an inner cube's files are
the tiers' to merge (a level group of the fragments they left waiting was merged, then merged again
with the cube's larger file by the next task). Both orders only ever merge files that share a
cube's blocks, so each task removes blocks and the fixed point is kept. A tiered task also folds
in the files of deeper cubes that its rewrite's fragments (the groups its rollup would write) would
be merged with by the very next task (`_folded_files`), so those bytes are written once; the task
still starts from a fragmented cube, so this adds no task and keeps the fixed point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from use.display import format_bytes
from use.optimize.config import OptimizationConfig
from use.optimize.plan import KIND_COMPACT, MergeTask, Plan
from use.optimize.strategies._common import (
    RevisionBlocks,
    distinct,
    levels_of,
    merge_prefix,
    merge_score,
    paths_of,
    revision_rewrite_plan,
    sizes_of,
    sort_files,
    target_revision,
    two_smallest_fit,
)
from use.optimize.strategies.registry import register


@dataclass(frozen=True)
class BlockGroups:
    """Qualifying (level, cube) block groups of one revision, as parallel numpy arrays.

    Per group: `level`, `depth`, `total` (summed elementCount), `nblocks`, `cube_rank` (rank of the cube
    id string among the revision's cubes, for tie-breaking), `cube_code` (index into `cubes`) and
    `inner` (the cube is an inner cube, `RevisionBlocks.inner_cubes`).
    Per block of the revision: `block_group` (group index, -1 if the block's group was discarded or
    its file has no level) and `block_file` (row in `snapshot.files`).
    """

    level: np.ndarray
    depth: np.ndarray
    total: np.ndarray
    nblocks: np.ndarray
    cube_rank: np.ndarray
    cube_code: np.ndarray
    inner: np.ndarray
    cubes: pa.Array
    block_group: np.ndarray
    block_file: np.ndarray
    block_count: np.ndarray

    @property
    def size(self) -> int:
        return int(self.level.size)

    def cube(self, g: int) -> str:
        return str(self.cubes[int(self.cube_code[g])].as_py())

    def files_of(self, g: int) -> np.ndarray:
        return np.unique(self.block_file[self.block_group == g])

    def elements_in(self, g: int, files: np.ndarray) -> np.ndarray:
        """The group's elementCount in each of `files` (rows of `snapshot.files`)."""
        sel = self.block_group == g
        pos = np.searchsorted(files, self.block_file[sel])
        return np.bincount(pos, weights=self.block_count[sel], minlength=files.size).astype(np.int64)


def block_groups(snapshot: Any, revision_id: int) -> BlockGroups:
    """Level every file of the revision, group its blocks by (level, cube), keep the qualifying groups."""
    rb = RevisionBlocks.of(snapshot, revision_id)
    fi, ec, depth, codes, cubes = rb.file, rb.count, rb.depth, rb.code, rb.cubes
    ncubes = max(1, len(cubes))

    file_level = levels_of(rb.file_max_counts(snapshot.files.num_rows))
    level = file_level[fi]
    ok = level >= 0
    key = level * ncubes + codes
    key = np.where(ok, key, -1)
    # np.unique(key, return_index=True, return_inverse=True) by one unstable argsort (several times
    # faster on millions of blocks); `first` may be any block of its group (only the depth, a cube
    # property, is read from it)
    order = np.argsort(key)
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]]) if key.size else np.zeros(0, np.int64)
    uniq, first = sorted_key[starts], order[starts]
    inv = np.empty(key.size, dtype=np.int64)
    inv[order] = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, key.size]))
    total = np.bincount(inv, weights=ec, minlength=uniq.size)
    nblocks = np.bincount(inv, minlength=uniq.size)
    g_level = uniq // ncubes
    g_code = uniq % ncubes
    thresholds = np.power(10.0, g_level + 1)
    qualifies = (uniq >= 0) & (total >= thresholds)
    new_id = np.full(uniq.size, -1, dtype=np.int64)
    new_id[qualifies] = np.arange(int(qualifies.sum()))
    cube_rank_of_code = rb.cube_rank()
    q_code = g_code[qualifies]
    return BlockGroups(
        level=g_level[qualifies],
        depth=depth[first][qualifies],
        total=total[qualifies].astype(np.int64),
        nblocks=nblocks[qualifies].astype(np.int64),
        cube_rank=cube_rank_of_code[q_code] if len(cubes) else q_code,
        cube_code=q_code,
        inner=rb.inner_cubes(snapshot.revisions[revision_id].desired_cube_size)[q_code],
        cubes=cubes,
        block_group=new_id[inv],
        block_file=fi,
        block_count=ec,
    )


def _indexed_revision(snapshot: Any, config: OptimizationConfig) -> int | None:
    if not snapshot.is_qbeast:
        return None
    rid = target_revision(snapshot, config)
    return rid if rid > 0 else None


def _group_reason(groups: BlockGroups, g: int, prefix: str) -> str:
    lvl = int(groups.level[g])
    return (
        f"{prefix}level {lvl} cube {groups.cube(g)!r} (depth {int(groups.depth[g])}): "
        f"{int(groups.nblocks[g])} blocks, {int(groups.total[g])} elements >= 10^{lvl + 1}"
    )


def tier_tail(sizes_desc: np.ndarray, ratio: float, max_fragments: int, waited: np.ndarray | None = None) -> int:
    """Where the merge of one inner cube's files starts (files at [start, n) of `sizes_desc`, its
    files largest first): n when nothing is merged (the cube is within its tiers).

    LSM size tiers: the smallest files are merged together, and the next larger file joins them
    only once they add up to 1/`ratio` of it, so a large consolidated file is not rewritten each
    time a few small appends arrive: a merge that takes a larger file in reads at most 1 + `ratio`
    bytes per byte of the smaller ones, so a smaller ratio rewrites less, and leaves more rows
    waiting in smaller files (measured in the README, optimized every 10 appends: ratio 1.5, 2, 3, 5
    rewrote 2.89, 3.39, 3.71, 4.46x with the worst round's range reads 1.67, 1.67, 1.50, 1.50x the
    one-go files). Then, whatever the tiers, the cube keeps at most `max_fragments`
    files (reads: a query through the cube opens all of them), and a file that has `waited` (the
    time factor) is merged together with every file of the cube. A merge takes two files or more.
    `ratio` 0 merges every file of the cube (one file per inner cube, as before tiering).
    """
    n = int(sizes_desc.size)
    if n < 2:
        return n
    if ratio <= 0 or (waited is not None and bool(waited.any())):
        return 0
    start = n - 1
    tail = float(sizes_desc[start])
    while start > 0 and tail * ratio >= float(sizes_desc[start - 1]):
        start -= 1
        tail += float(sizes_desc[start])
    # more than max_fragments files left (the untouched head plus the merged tail's one file)
    start = min(start, max(0, max_fragments - 1))
    return start if n - start >= 2 else n


def consolidation_task(snapshot: Any, revision_id: int, config: OptimizationConfig, strategy: str) -> MergeTask | None:
    """The inner-cube consolidation rule (module docstring): None when no inner cube is fragmented."""
    revision = snapshot.revisions.get(revision_id)
    if revision is None:
        return None
    rb = RevisionBlocks.of(snapshot, revision_id)
    if rb.size == 0:
        return None
    nfiles = snapshot.files.num_rows
    # distinct (cube, file) pairs: a cube's blocks per file (normally one)
    pair = distinct(rb.code * nfiles + rb.file)
    p_cube, p_file = pair // nfiles, pair % nfiles
    total = rb.cube_totals()
    spread = np.bincount(p_cube, minlength=rb.num_cubes)
    inner = rb.inner_cubes(revision.desired_cube_size)
    sizes_all = sizes_of(snapshot)
    # spread >= 2 is implied: a cube in one file has no second file to fit
    fits = two_smallest_fit(p_cube, p_file, sizes_all, rb.num_cubes, config.task_limit)
    cand = np.flatnonzero(inner & fits)
    if cand.size == 0:
        return None
    cand = cand[np.lexsort((rb.cube_rank()[cand], rb.cube_depth()[cand]))]
    if config.tiering_ratio > 0:
        return _tiered_task(snapshot, revision_id, config, strategy, rb, cand, p_cube, p_file, total, spread, inner)
    rank = np.full(rb.num_cubes, -1, dtype=np.int64)
    rank[cand] = np.arange(cand.size)
    first_cube = cand[0]
    # The first candidate alone: its files smallest first within the limit (two or more: it fits).
    own = sort_files(snapshot, p_file[p_cube == first_cube], [("size", "ascending")])
    k = merge_prefix(sizes_all[own], config.task_limit)
    if k < own.size:
        files = own[:k]
        ncubes = 1
    else:
        # Later candidates add their files (each file counted at its first candidate) while the
        # running total stays within the limit.
        r = rank[p_cube]
        ok = r >= 0
        f_rank = np.full(nfiles, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(f_rank, p_file[ok], r[ok])
        involved = np.flatnonzero(f_rank < np.iinfo(np.int64).max)
        added = np.bincount(f_rank[involved], weights=sizes_all[involved], minlength=cand.size)
        ncubes = max(1, int(np.searchsorted(np.cumsum(added), config.task_limit, side="right")))
        files = sort_files(snapshot, involved[f_rank[involved] < ncubes], [("size", "ascending")])
    nbytes = int(sizes_all[files].sum())
    n = int(files.size)
    reason = (
        f"consolidation: inner cube {rb.cube_name(int(first_cube))!r} (depth {int(rb.cube_depth()[first_cube])}, "
        f"{int(total[first_cube])} elements) spread over {int(spread[first_cube])} files"
    )
    if ncubes > 1:
        reason += f"; with {ncubes - 1} more fragmented inner cube(s)"
    if k < own.size:
        reason += f"; {k} of {own.size} files within task-max-bytes={format_bytes(config.task_limit)}"
    return MergeTask(strategy, revision_id, paths_of(snapshot, files), nbytes, n, merge_score(nbytes, n, config), reason, KIND_COMPACT)


def _tiered_task(
    snapshot: Any, revision_id: int, config: OptimizationConfig, strategy: str, rb: RevisionBlocks,
    cand: np.ndarray, p_cube: np.ndarray, p_file: np.ndarray, total: np.ndarray, spread: np.ndarray, inner: np.ndarray,
) -> MergeTask | None:
    """Consolidation with size tiers (`tier_tail`): the first candidate (shallowest first) whose
    files are out of tier gives the task, its tail files merged (smallest first within the IO limit).
    The rewrite regroups every cube of those files, so the other cubes' recent fragments, which
    sit in the same small files of recent appends, are merged by the same task."""
    sizes_all = sizes_of(snapshot)
    mtime = np.asarray(snapshot.files.column("modification_time").to_numpy(zero_copy_only=False), dtype=np.int64)
    wait_ms = None
    if config.tiering_max_wait is not None and config.now_ms is not None:
        wait_ms = int(config.tiering_max_wait * 1000)
    depth = rb.cube_depth()
    # fragments in a file that also holds an ancestor of the cube cost no file open (see the helper)
    buffered = _under_an_ancestor(rb, p_cube, p_file, snapshot.files.num_rows)
    if wait_ms is not None:
        flush = _stale_buffer_task(
            snapshot, revision_id, config, strategy, rb, p_cube, p_file, buffered, mtime, wait_ms, sizes_all, inner
        )
        if flush is not None:
            return flush
    keep = ~buffered
    p_cube, p_file = p_cube[keep], p_file[keep]
    order = np.argsort(p_cube, kind="stable")
    pc_sorted, pf_sorted = p_cube[order], p_file[order]
    for cube in cand.tolist():
        lo, hi = np.searchsorted(pc_sorted, [cube, cube + 1])
        files = pf_sorted[lo:hi]
        if files.size < 2:
            continue
        files = files[np.lexsort((files, -sizes_all[files]))]  # largest first, ties by row
        waited = None
        if wait_ms is not None:
            waited = (int(config.now_ms) - mtime[files]) >= wait_ms  # type: ignore[arg-type]
            waited[0] = False  # the largest file waiting alone merges nothing
        limit_fragments = config.tiering_root_max_fragments if int(depth[cube]) == 0 else config.tiering_max_fragments
        start = tier_tail(sizes_all[files], config.tiering_ratio, limit_fragments, waited)
        if start >= files.size:
            continue
        tail = files[start:][::-1]  # smallest first
        folded = _folded_files(snapshot, revision_id, rb, int(cube), tail, pc_sorted, pf_sorted, sizes_all, config, total, inner)
        task = _merge_within_limit(
            snapshot, revision_id, config, strategy, sizes_all, np.concatenate((tail, folded)),
            lambda n, cube=cube, outside=files.size, k=tail.size: (
                f"consolidation: inner cube {rb.cube_name(int(cube))!r} (depth {int(depth[cube])}, {int(total[cube])} elements) "
                f"spread over {int(spread[cube])} files ({outside} outside its ancestors' files); merging its {min(n, k)} smallest "
                f"(size tiers, ratio {config.tiering_ratio:g})"
                + (f", with {n - k} file(s) of deeper cubes its rows would join at once" if n > k else "")
            ),
        )  # fmt: skip
        if task is not None:
            return task
    return None


def _folded_files(
    snapshot: Any, revision_id: int, rb: RevisionBlocks, top: int, files: np.ndarray, own_cube: np.ndarray,
    own_file: np.ndarray, sizes_all: np.ndarray, config: OptimizationConfig, totals: np.ndarray, inner: np.ndarray,
) -> np.ndarray:
    """The files of cubes below `top` that the merge of `files` would hand a fragment the tiers
    merge with them at once: they join the same task.

    A consolidation's rewrite puts the rows its input holds for a subtree below `top` (an append's
    rows of every depth, a buffer's) in a file of that subtree's own when they are many, and the
    next task merges that fragment into the subtree's cube file when the tiers say so: the fragment
    was written, then read and written again in the same optimization. Measured on the trade-off
    benchmark (k = 10): 1.22 bytes per byte appended, a quarter of all rewriting, were such
    fragments. So the tiers are asked before the merge. Which fragments the rewrite writes is the
    rollup's choice (`use.qbeast.rollup`: a group of fewer than desiredCubeSize rows joins its
    parent's, a whole inner cube keeps its own), so the task's rows per cube (its files' blocks) go
    through the same rollup: each group below `top` is a fragment of its cube, at the task's bytes
    per row, and a cube whose own files (`own_cube`/`own_file`: pairs of cubes and files not holding
    an ancestor of theirs, sorted by cube) with that fragment are out of tier (`tier_tail`) has those
    files folded into the task; the rollup is then asked again with them, shallowest groups first,
    until nothing more folds or the task reaches `task-max-bytes`. The rewrite then writes each
    such cube's file once, as the two tasks would have left it. `totals` and `inner` are the
    caller's per-cube `rb.cube_totals()` and `rb.inner_cubes(...)`."""
    from use.qbeast.rollup import rollup

    nfiles = int(sizes_all.size)
    none = np.zeros(0, dtype=np.int64)
    revision = snapshot.revisions.get(revision_id)
    if files.size == 0 or rb.num_cubes == 0 or config.tiering_ratio <= 0 or revision is None:
        return none
    desired, dims = int(revision.desired_cube_size), int(revision.dimension_count)
    depth, rank = rb.cube_depth(), rb.cube_rank()
    names: list[str] = rb.cubes.to_pylist()  # one string per cube (not per file or block), once
    codes = {n: c for c, n in enumerate(names)}
    top_name = names[top]
    in_task = np.zeros(nfiles, dtype=bool)
    in_task[files] = True
    checked = np.zeros(rb.num_cubes, dtype=bool)
    checked[top] = True
    out: list[np.ndarray] = []
    nbytes = float(sizes_all[files].sum())
    while nbytes < config.task_limit:
        blk = in_task[rb.file]
        rows = np.bincount(rb.code[blk], weights=rb.count[blk], minlength=rb.num_cubes)
        present = np.flatnonzero(rows > 0)
        if present.size == 0:
            break
        per_row = nbytes / float(rows.sum())
        whole = {names[c] for c in present.tolist() if inner[c] and rows[c] >= totals[c]}
        plan = rollup({names[c]: int(rows[c]) for c in present.tolist()}, desired, dims, whole=whole)
        group_rows: dict[str, float] = {}
        for c in present.tolist():
            g = plan.group_of.get(names[c])
            if g is not None:
                group_rows[g] = group_rows.get(g, 0.0) + float(rows[c])
        # a group named after a cube with no blocks has no files to fold (not in `codes`)
        below = [codes[g] for g in group_rows if g in codes and len(g) > len(top_name) and g.startswith(top_name)]
        below = [c for c in below if not checked[c]]
        if not below:
            break
        below.sort(key=lambda c: (int(depth[c]), int(rank[c])))
        folded = False
        for kid in below:
            checked[kid] = True
            lo, hi = np.searchsorted(own_cube, [kid, kid + 1])
            kf = own_file[lo:hi]
            kf = kf[~in_task[kf]]
            if kf.size == 0:
                continue
            sizes = np.concatenate((sizes_all[kf].astype(np.float64), [group_rows[names[kid]] * per_row]))
            order = np.argsort(-sizes, kind="stable")
            start = tier_tail(sizes[order], config.tiering_ratio, config.tiering_max_fragments)
            fragment_at = int(np.flatnonzero(order == kf.size)[0])
            if start >= sizes.size or fragment_at < start:
                continue
            take = order[start:]
            take = np.unique(kf[take[take < kf.size]])
            if take.size == 0:
                continue
            in_task[take] = True
            nbytes += float(sizes_all[take].sum())
            out.append(take)
            folded = True
            if nbytes >= config.task_limit:
                break
        if not folded:
            break
    return np.concatenate(out).astype(np.int64) if out else none


def _merge_within_limit(
    snapshot: Any, revision_id: int, config: OptimizationConfig, strategy: str, sizes_all: np.ndarray, files: np.ndarray,
    reason: Callable[[int], str],
) -> MergeTask | None:
    """One compaction of the leading `files` (in the given order) that fit `task-max-bytes` (two or
    more, else None), listed smallest first; `reason(n)` words it for the n files taken. `sizes_all`
    is `sizes_of(snapshot)`, which the caller already holds."""
    k = merge_prefix(sizes_all[files], config.task_limit)
    if k < 2:
        return None
    sel = sort_files(snapshot, files[:k], [("size", "ascending")])
    nbytes, n = int(sizes_all[sel].sum()), int(sel.size)
    return MergeTask(strategy, revision_id, paths_of(snapshot, sel), nbytes, n, merge_score(nbytes, n, config), reason(n), KIND_COMPACT)


def _stale_buffer_task(
    snapshot: Any, revision_id: int, config: OptimizationConfig, strategy: str, rb: RevisionBlocks,
    p_cube: np.ndarray, p_file: np.ndarray, buffered: np.ndarray, mtime: np.ndarray, wait_ms: int, sizes_all: np.ndarray,
    inner: np.ndarray,
) -> MergeTask | None:
    """The time factor for buffered rows: a file that has waited `tiering.max-wait` while holding rows
    of full inner cubes that have files of their own (rows waiting in an ancestor's file, see
    `_under_an_ancestor`) is merged with those cubes' files, so the rows move down to their cubes.

    The tiers leave such rows where they are as long as the ancestor's file is not merged for another
    reason, which, once appends stop, is forever: a converged table kept every sample reading the
    root's file with the deeper cubes' recent rows in it (2.6x the bytes of the same rows written at
    once, `benchmarks/service.py`). While appends keep coming the root's file is rewritten more often
    than it waits, so this mostly acts when a table goes quiet (Relyt's idle-time work). The shallowest
    such file goes first (the root's: every sample reads it), with the cubes' files shallowest cube
    first within `task-max-bytes`; the rewrite's rollup gives each full cube its own file again, and
    rows of deeper cubes without a file of their own move into the deepest of their ancestors' files
    in the task (the next file, after the next wait, moves them further)."""
    depth = rb.cube_depth()
    stale_file = (int(config.now_ms) - mtime) >= wait_ms  # type: ignore[arg-type]
    has_own = np.zeros(rb.num_cubes, dtype=bool)
    has_own[p_cube[~buffered]] = True
    waiting = buffered & inner[p_cube] & stale_file[p_file] & has_own[p_cube]
    if not waiting.any():
        return None
    w_cube, w_file = p_cube[waiting], p_file[waiting]
    # the file's shallowest cube decides which stale file goes first
    top = np.full(snapshot.files.num_rows, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(top, p_file, depth[p_cube])
    first = int(w_file[np.lexsort((w_file, top[w_file]))[0]])
    cubes = distinct(w_cube[w_file == first])
    own = ~buffered & np.isin(p_cube, cubes) & (p_file != first)
    o_cube, o_file = p_cube[own], p_file[own]
    ordered = o_file[np.lexsort((o_file, rb.cube_rank()[o_cube], depth[o_cube]))]
    _, at = np.unique(ordered, return_index=True)  # each file once, where its shallowest cube puts it
    files = np.concatenate(([first], ordered[np.sort(at)])).astype(np.int64)
    return _merge_within_limit(
        snapshot, revision_id, config, strategy, sizes_all, files,
        lambda n: (
            f"consolidation: a file that waited tiering.max-wait={config.tiering_max_wait:g}s holds rows of {cubes.size} full "
            f"inner cube(s) with files of their own (shallowest cube at depth {int(top[first])}); merging it with "
            f"{n - 1} of their files"
        ),
    )  # fmt: skip


def _under_an_ancestor(rb: RevisionBlocks, p_cube: np.ndarray, p_file: np.ndarray, nfiles: int) -> np.ndarray:
    """Per distinct (cube, file) pair: does the file also hold a block of a proper ancestor of the cube?

    A query reaches a cube through its ancestors (a sample through the root, a range filter through
    every cube on the path to its region), so it opens every file that holds an ancestor's block
    anyway: a cube's block in such a file costs those queries no file open, only its bytes. The tiered
    rule therefore counts a cube's fragments among its other files only, and the root's file carries
    the recent rows of the deeper cubes (a buffer) until the rollup gives them files of their own."""
    pairs = np.sort(p_cube * nfiles + p_file)
    parent = rb.parent_code()
    out = np.zeros(p_cube.size, dtype=bool)
    anc = parent[p_cube] if p_cube.size else p_cube
    while True:
        live = anc >= 0
        if not live.any():
            return out
        key = anc[live] * nfiles + p_file[live]
        pos = np.minimum(np.searchsorted(pairs, key), max(0, pairs.size - 1))
        out[np.flatnonzero(live)] |= pairs[pos] == key
        anc = np.where(live, parent[np.maximum(anc, 0)], -1)


def _consolidation_plan(snapshot: Any, rid: int, config: OptimizationConfig, strategy: str) -> Plan | None:
    task = consolidation_task(snapshot, rid, config, strategy)
    return None if task is None else Plan((task,), strategy, snapshot.version)


def _densest_within(
    groups: BlockGroups, g: int, idx: np.ndarray, sizes: np.ndarray, limit: int, k_smallest: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """A group cut by the IO limit: its files by the group's elements per byte (densest first), so
    the merged block grows the most for the bytes rewritten and reaches the next level sooner (the
    level rule's guarantee holds for the part). When the two densest files alone exceed the limit,
    the smallest files are kept (`idx`, already smallest first), as before."""
    elements = groups.elements_in(g, np.sort(idx))[np.searchsorted(np.sort(idx), idx)]
    density = elements / np.maximum(sizes, 1)
    order = np.lexsort((idx, sizes, -density))  # stable on size then row for equal densities
    d_idx, d_sizes = idx[order], sizes[order]
    k = merge_prefix(d_sizes, limit)
    if k == 0:
        return idx, sizes, k_smallest
    return d_idx, d_sizes, k


def mergeable_groups(snapshot: Any, groups: BlockGroups, limit: int) -> np.ndarray:
    """Per qualifying group: can two of its files be merged within `limit` bytes?"""
    sel = groups.block_group >= 0
    return two_smallest_fit(groups.block_group[sel], groups.block_file[sel], sizes_of(snapshot), groups.size, limit)


def _level_groups_or_plan(
    snapshot: Any, config: OptimizationConfig, name: str
) -> tuple[int, BlockGroups | None, np.ndarray, Plan | None]:
    """The steps both level-wise strategies share: pick the indexed revision, honour
    revision-rewrite, and fall back to consolidation when no level group can be merged within the
    IO limit. Returns `(revision, groups, mergeable, None)` when the caller should choose among the
    `mergeable` groups, else `(revision, None, _, plan_or_None)`."""
    none = np.zeros(0, dtype=bool)
    rid = _indexed_revision(snapshot, config)
    if rid is None:
        return -1, None, none, None
    if config.revision_rewrite:
        return rid, None, none, revision_rewrite_plan(snapshot, config, name, rid)
    if config.tiering_ratio > 0:
        # Tiered: consolidation before the level rule. New appends hold a block of the root; the
        # level rule would first merge them together and consolidation then merge that file with the
        # root's, rewriting the appended bytes twice per round; one task does both.
        first = _consolidation_plan(snapshot, rid, config, name)
        if first is not None:
            return rid, None, none, first
    groups = block_groups(snapshot, rid)
    mergeable = mergeable_groups(snapshot, groups, config.task_limit) if groups.size else none
    if config.tiering_ratio > 0 and groups.size:
        # The tiers own the inner cubes' files: a level group there would merge fragments the tiers
        # left waiting, and the next task would merge the result with the cube's larger file (both
        # rewritten in one optimization; measured: 2.98 -> 2.89x at tiering.ratio=1.5, k = 10).
        mergeable = mergeable & ~groups.inner
    if not mergeable.any():
        return rid, None, none, _consolidation_plan(snapshot, rid, config, name)
    return rid, groups, mergeable, None


@register("LeveledCompactionSelection", "LeveledCompaction")
class LeveledCompactionSelection:
    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = True
    applies_to_delta: ClassVar[bool] = False

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        rid, groups, mergeable, early = _level_groups_or_plan(snapshot, config, self.name)
        if groups is None:
            return early
        order = np.lexsort((groups.cube_rank, groups.nblocks, groups.depth, groups.level))
        g = int(order[mergeable[order]][0])
        idx = sort_files(snapshot, groups.files_of(g), [("size", "ascending")])
        sizes = sizes_of(snapshot)[idx]
        k = merge_prefix(sizes, config.task_limit)  # >= 2: the group is mergeable
        if k < idx.size:
            idx, sizes, k = _densest_within(groups, g, idx, sizes, config.task_limit, k)
        nbytes = int(sizes[:k].sum())
        reason = _group_reason(groups, g, "")
        if k < idx.size:
            reason += f"; {k} of {idx.size} files within task-max-bytes={format_bytes(config.task_limit)}"
        task = MergeTask(self.name, rid, paths_of(snapshot, idx[:k]), nbytes, k, merge_score(nbytes, k, config), reason, KIND_COMPACT)
        return Plan((task,), self.name, snapshot.version)


@register("CubeDefragmentation")
class CubeDefragmentation:
    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = True
    applies_to_delta: ClassVar[bool] = False

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        rid, groups, mergeable, early = _level_groups_or_plan(snapshot, config, self.name)
        if groups is None:
            return early
        limit = config.task_limit
        lowest = int(groups.level[mergeable].min())
        cand = np.flatnonzero(mergeable & (groups.level == lowest))
        order = cand[np.lexsort((groups.cube_rank[cand], groups.nblocks[cand], groups.depth[cand]))]
        rank = np.full(groups.size, -1, dtype=np.int64)
        rank[order] = np.arange(order.size)
        # (group rank, file) pairs of the chosen groups, by rank, then smallest file first
        bg = groups.block_group
        brank = np.where(bg >= 0, rank[np.maximum(bg, 0)], -1)
        sel = brank >= 0
        nfiles = max(1, snapshot.files.num_rows)
        pair = distinct(brank[sel] * nfiles + groups.block_file[sel])
        p_rank, p_file = pair // nfiles, pair % nfiles
        sizes_all = sizes_of(snapshot)
        o = np.lexsort((p_file, sizes_all[p_file], p_rank))
        p_rank, p_file = p_rank[o], p_file[o]
        bounds = np.searchsorted(p_rank, np.arange(order.size + 1))
        # Groups in order fill tasks of at most the limit. A group joins the open task when that
        # task then holds two or more of its files (some may be there already, brought by an earlier
        # group), else it opens a task with its own smallest files that fit (two or more), else it
        # is skipped. A file is read by one task only. Groups are taken until bytes-per-iter.
        used = np.zeros(snapshot.files.num_rows, dtype=bool)
        in_open = np.zeros(snapshot.files.num_rows, dtype=bool)
        tasks_files: list[list[int]] = []
        tasks_groups: list[list[int]] = []
        open_bytes = total = 0
        for r in range(order.size):
            files = p_file[bounds[r] : bounds[r + 1]]
            free = files[~used[files]]
            sizes = sizes_all[free]
            present = int(in_open[files].sum())
            k = int(np.searchsorted(np.cumsum(sizes), limit - open_bytes, side="right")) if tasks_files else 0
            if present + k >= 2 and k >= 1:
                take, new_task = free[:k], False
            else:
                k = merge_prefix(sizes, limit)
                if k == 0:
                    continue
                take, new_task = free[:k], True
            nbytes = int(sizes[:k].sum())
            if tasks_files and total + nbytes > config.bytes_per_iter:
                break
            if new_task:
                if tasks_files:
                    in_open[tasks_files[-1]] = False
                tasks_files.append([])
                tasks_groups.append([])
                open_bytes = 0
            tasks_files[-1].extend(take.tolist())
            tasks_groups[-1].append(r)
            used[take] = in_open[take] = True
            open_bytes += nbytes
            total += nbytes
        tasks = []
        for files_list, group_list in zip(tasks_files, tasks_groups):
            files = np.asarray(files_list, dtype=np.int64)
            nbytes, n = int(sizes_all[files].sum()), int(files.size)
            reason = _group_reason(groups, int(order[group_list[0]]), f"lowest level {lowest}: ")
            if len(group_list) > 1:
                reason += f" and {len(group_list) - 1} more cube(s) of the level"
            tasks.append(
                MergeTask(self.name, rid, paths_of(snapshot, files), nbytes, n, merge_score(nbytes, n, config),
                          reason, KIND_COMPACT)
            )  # fmt: skip
        return Plan(tuple(tasks), self.name, snapshot.version)
