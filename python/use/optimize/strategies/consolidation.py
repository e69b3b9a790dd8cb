"""Inner-cube consolidation: the rule that completes the level rule of `use.optimize.strategies.leveled`
(both leveled strategies fall back to it, or, with size tiers, try it first).

Our extension, used by both strategies only when no level group qualifies (with size tiers, the
default, before the level rule: see below). The level rule cannot reach a *full* cube: a cube
holding about desiredCubeSize rows puts its file at level floor(log10(desiredCubeSize)), and its
block group there only qualifies at 10x that, which an inner cube never reaches (its maxWeight keeps it near desiredCubeSize). So after
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
ever reads files that hold a block of a fragmented inner cube. The two leveled strategies call it
rather than it being a strategy of its own in the chain, because the planner's default chain
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
still starts from a fragmented cube, so this adds no task and keeps the fixed point. Sibling cubes
take two ratios, `tiering.ratio` and that times `tiering.stagger` (`cube_ratios`), so that the
siblings a range query crosses do not all hold a waiting fragment at the same round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from use.display import format_bytes
from use.optimize.plan import KIND_COMPACT, MergeTask, Plan
from use.optimize.strategies._common import (
    RevisionBlocks,
    distinct,
    merge_prefix,
    merge_score,
    paths_of,
    sizes_of,
    sort_files,
    two_smallest_fit,
)
from use.qbeast.rollup import rollup

if TYPE_CHECKING:
    from use.optimize.config import OptimizationConfig

__all__ = ["consolidation_plan", "consolidation_task", "cube_ratios", "tier_tail"]


@dataclass(frozen=True)
class _Cubes:
    """One revision's cubes and files as the tiered rule reads them, computed once per plan and
    shared by its steps (the tiers, the fold, the time factor), so each step takes what it adds.

    `p_cube`/`p_file`: the distinct (cube, file) pairs of the revision's blocks; per cube: `total`
    (`rb.cube_totals()`), `inner` (`rb.inner_cubes(...)`), `ratios` (`cube_ratios`); per
    file of the snapshot: `sizes` (`sizes_of`)."""

    snapshot: Any
    revision_id: int
    config: OptimizationConfig
    strategy: str
    rb: RevisionBlocks
    p_cube: np.ndarray
    p_file: np.ndarray
    sizes: np.ndarray
    total: np.ndarray
    inner: np.ndarray
    ratios: np.ndarray


def tier_tail(sizes_desc: np.ndarray, ratio: float, max_fragments: int, waited: np.ndarray | None = None) -> int:
    """Where the merge of one inner cube's files starts (files at [start, n) of `sizes_desc`, its
    files largest first): n when nothing is merged (the cube is within its tiers).

    LSM size tiers: the smallest files are merged together, and the next larger file joins them
    only once they add up to 1/`ratio` of it, so a large consolidated file is not rewritten each
    time a few small appends arrive: a merge that takes a larger file in reads at most 1 + `ratio`
    bytes per byte of the smaller ones, so a smaller ratio rewrites less, and leaves more rows
    waiting in smaller files (docs/benchmarks.md, optimized every 10 appends, one ratio for
    every cube: ratio 1.5, 2, 3, 5 rewrote 2.89, 3.39, 3.71, 4.46x with the worst round's range
    reads 1.67, 1.67, 1.50, 1.50x the one-go files; the caller staggers it: `cube_ratios`). Then, whatever the tiers, the cube keeps at most `max_fragments`
    files (reads: a query through the cube opens all of them), and a file that has `waited` (the
    time factor) is merged together with every file of the cube. A merge takes two files or more.
    `ratio` 0 merges every file of the cube (one file per inner cube, as before tiering).
    """
    n = int(sizes_desc.size)
    if n < 2:
        return n
    if ratio <= 0 or (waited is not None and bool(waited.any())):
        return 0
    # at most max_fragments files left (the untouched head plus the merged tail's one file); the
    # tail a cap forced keeps climbing the tiers like any other, else its file would reach 1/ratio
    # of the next larger one and be merged with it by the very next task (written twice: measured
    # at k = 1, drifting, a root fragment every few rounds)
    cap = max(0, max_fragments - 1)
    start = n - 1
    tail = float(sizes_desc[start])
    while start > 0 and (start > cap or tail * ratio >= float(sizes_desc[start - 1])):
        start -= 1
        tail += float(sizes_desc[start])
    return start if n - start >= 2 else n


def cube_ratios(rb: RevisionBlocks, config: OptimizationConfig) -> np.ndarray:
    """Per cube: the ratio of its size tiers, `tiering.ratio`, times `tiering.stagger` for a cube in
    an odd position among its siblings (`RevisionBlocks.sibling_parity`).

    Why staggered: rows that arrive evenly over the space fill sibling cubes at the same pace, so
    with one ratio every sibling holds a waiting fragment at the same rounds, and a range query
    across them (a strip through the space crosses half the children of every cube it reaches)
    opens one more file per sibling at once: at ratio 1.5, optimized every 10 appends, 5 files where
    the same rows written at once read 3 (round 3), 11 where they read 7. With two ratios the
    siblings merge at different rounds and such a query finds about half of them waiting at most
    (docs/optimization.md: size tiers); the cubes with the smaller ratio still rewrite less."""
    ratio = float(config.tiering_ratio)
    if config.tiering_stagger == 1.0:
        return np.full(rb.num_cubes, ratio)
    return np.where(rb.sibling_parity() == 1, ratio * float(config.tiering_stagger), ratio)


def consolidation_task(snapshot: Any, revision_id: int, config: OptimizationConfig, strategy: str) -> MergeTask | None:
    """The inner-cube consolidation rule (module docstring): None when no inner cube is fragmented."""
    revision = snapshot.revisions.get(revision_id)
    if revision is None:
        return None
    rb = RevisionBlocks.of(snapshot, revision_id)
    if rb.size == 0:
        return None
    nfiles = snapshot.files.num_rows
    # distinct (cube, file) pairs: a cube's blocks per file (normally one); a block of offsets only
    # is no fragment of its cube (`RevisionBlocks.keeps`)
    keeps = rb.keeps()
    pair = distinct(rb.code[keeps] * nfiles + rb.file[keeps])
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
        view = _Cubes(
            snapshot, revision_id, config, strategy, rb, p_cube, p_file, sizes_all, total, inner, cube_ratios(rb, config)
        )
        return _tiered_task(view, cand, spread)
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
    return MergeTask(
        strategy, revision_id, paths_of(snapshot, files), nbytes, n, merge_score(nbytes, n, config), reason, KIND_COMPACT
    )


def _tiered_task(view: _Cubes, cand: np.ndarray, spread: np.ndarray) -> MergeTask | None:
    """Consolidation with size tiers (`tier_tail`): the first candidate (shallowest first) whose
    files are out of tier gives the task, its tail files merged (smallest first within the IO limit).
    The rewrite regroups every cube of those files, so the other cubes' recent fragments, which
    sit in the same small files of recent appends, are merged by the same task."""
    config, rb, sizes_all, ratios, total = view.config, view.rb, view.sizes, view.ratios, view.total
    depth = rb.cube_depth()
    mtime = np.asarray(view.snapshot.files.column("modification_time").to_numpy(zero_copy_only=False), dtype=np.int64)
    wait_ms = config.tiering_wait_ms
    # a file written at or before this instant has waited (the wait is only set with `now_ms`)
    waited_by_ms = None if wait_ms is None or config.now_ms is None else config.now_ms - wait_ms
    # fragments in a file that also holds an ancestor of the cube cost no file open (see the helper)
    buffered = _under_an_ancestor(rb, view.p_cube, view.p_file, view.snapshot.files.num_rows)
    if waited_by_ms is not None:
        flush = _stale_buffer_task(view, buffered, mtime, waited_by_ms)
        if flush is not None:
            return flush
    keep = ~buffered
    p_cube, p_file = view.p_cube[keep], view.p_file[keep]
    order = np.argsort(p_cube, kind="stable")
    pc_sorted, pf_sorted = p_cube[order], p_file[order]
    for cube in cand.tolist():
        lo, hi = np.searchsorted(pc_sorted, [cube, cube + 1])
        files = pf_sorted[lo:hi]
        if files.size < 2:
            continue
        files = files[np.lexsort((files, -sizes_all[files]))]  # largest first, ties by row
        waited = None
        if waited_by_ms is not None:
            waited = mtime[files] <= waited_by_ms
            waited[0] = False  # the largest file waiting alone merges nothing
        limit_fragments = config.tiering_root_max_fragments if int(depth[cube]) == 0 else config.tiering_max_fragments
        start = tier_tail(sizes_all[files], float(ratios[cube]), limit_fragments, waited)
        if start >= files.size:
            continue
        tail = files[start:][::-1]  # smallest first
        folded = _folded_files(view, int(cube), tail, pc_sorted, pf_sorted)

        def reason(n: int, cube: int = int(cube), outside: int = int(files.size), k: int = int(tail.size)) -> str:
            return (
                f"consolidation: inner cube {rb.cube_name(cube)!r} (depth {int(depth[cube])}, {int(total[cube])} elements) "
                f"spread over {int(spread[cube])} files ({outside} outside its ancestors' files); merging its {min(n, k)} smallest "
                f"(size tiers, ratio {float(ratios[cube]):g})"
                + (f", with {n - k} file(s) of deeper cubes its rows would join at once" if n > k else "")
            )

        task = _merge_within_limit(view, np.concatenate((tail, folded)), reason)
        if task is not None:
            return task
    return None


def _folded_files(view: _Cubes, top: int, files: np.ndarray, own_cube: np.ndarray, own_file: np.ndarray) -> np.ndarray:
    """The files of cubes below `top` that the merge of `files` would hand a fragment the tiers merge
    with them at once: they join the same task.

    A consolidation's rewrite puts the rows its input holds for a subtree below `top` (an append's
    rows of every depth, a buffer's) in a file of that subtree's own when they are many, and the
    next task merges that fragment into the subtree's cube file when the tiers say so: the fragment
    was written, then read and written again in the same optimization. Measured on the trade-off
    benchmark (k = 10): 1.22 bytes per byte appended, a quarter of all rewriting, were such
    fragments. So the tiers are asked before the merge. Which fragments the rewrite writes is the
    rollup's choice (`use.qbeast.rollup`: a group of fewer than desiredCubeSize rows joins its
    parent's, a whole inner cube keeps its own), so the task's rows per cube (its files' blocks,
    placed as the rewrite places them: `placed_rows`) go through the same rollup: each group below
    `top` is a fragment of its cube, at the task's bytes per row, and a cube whose own files
    (`own_cube`/`own_file`: pairs of cubes and files not holding an ancestor of theirs, sorted by
    cube) with that fragment are out of tier (`tier_tail`) has those files folded into the task; the
    rollup is then asked again with them, shallowest groups first, until nothing more folds or the
    task reaches `task-max-bytes`. The rewrite then writes each such cube's file once, as the two
    tasks would have left it."""
    config, rb, sizes_all, totals, inner, ratios = view.config, view.rb, view.sizes, view.total, view.inner, view.ratios
    nfiles = int(sizes_all.size)
    none = np.zeros(0, dtype=np.int64)
    revision = view.snapshot.revisions.get(view.revision_id)
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
    tree = _Tree.of(rb)
    while nbytes < config.task_limit:
        blk = in_task[rb.file]
        in_place = np.bincount(rb.code[blk], weights=rb.count[blk], minlength=rb.num_cubes)
        rows = np.rint(placed_rows(rb, blk, tree))
        present = np.flatnonzero(rows > 0)
        if present.size == 0:
            break
        per_row = nbytes / float(rows.sum())
        # as the rewrite decides it (`use.qbeast.index_plan.whole_inner_cubes`): by the input's blocks
        whole = {names[c] for c in present.tolist() if inner[c] and in_place[c] >= totals[c]}
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
            start = tier_tail(sizes[order], float(ratios[kid]), config.tiering_max_fragments)
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


@dataclass(frozen=True)
class _Tree:
    """Per cube of a revision: status maxWeight, parent code, depth, and the share of its parent's
    rows it takes (its blocks' rows over its siblings'), for `placed_rows`."""

    max_weight: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    share: np.ndarray

    @classmethod
    def of(cls, rb: RevisionBlocks) -> _Tree:
        parent, totals = rb.parent_code(), rb.cube_totals().astype(np.float64)
        child = parent >= 0
        siblings = np.bincount(parent[child], weights=totals[child], minlength=rb.num_cubes)
        share = np.zeros(rb.num_cubes)
        share[child] = totals[child] / np.maximum(siblings[parent[child]], 1.0)
        return cls(rb.cube_max_weight().astype(np.float64), parent, rb.cube_depth(), share)


def placed_rows(rb: RevisionBlocks, blk: np.ndarray, tree: _Tree) -> np.ndarray:
    """Rows per cube that a rewrite of the blocks `blk` (a mask over `rb`'s blocks) writes, as the
    rewrite places them: a block written when its cube's maxWeight was higher than the cube's
    maxWeight now holds rows the rewrite moves down to the cube's children (the offsets of
    `use.qbeast.estimate`; `use.qbeast.index_status.counts_in_place`), and they can fill a child
    enough for the rollup to give it a file of its own. Planning has no rows, only each block's
    weight range, so a block's rows are taken as spread evenly over it: those above the cube's
    maxWeight go down, to the children in proportion to their rows in the table (where the data
    lies), and on down by the same rule; rows that reach a cube without children stay there (a new
    leaf, rolled into its parent's file). Measured on the trade-off benchmark: counted in place,
    a fold missed fragments the rewrite then wrote (rows of a depth-2 cube's block that all moved to
    its children), and the next task merged them again."""
    n = rb.num_cubes
    code, count = rb.code[blk], rb.count[blk].astype(np.float64)
    lo, hi = rb.min_weight[blk].astype(np.float64), rb.max_weight[blk].astype(np.float64)
    cur = tree.max_weight[code]
    stay = np.where(hi > cur, np.clip((cur - lo + 1.0) / np.maximum(hi - lo + 1.0, 1.0), 0.0, 1.0), 1.0)
    rows = np.bincount(code, weights=count * stay, minlength=n)
    moving = count * (1.0 - stay)
    pending = np.bincount(code, weights=moving, minlength=n)
    if not (pending > 0).any():
        return rows
    pending_hi = np.bincount(code, weights=moving * hi, minlength=n)  # amount-weighted, for the mean
    has_child = np.zeros(n, dtype=bool)
    has_child[tree.parent[tree.parent >= 0]] = True
    for d in range(int(tree.depth.max()) + 1):
        # cubes at depth d hand their pending rows to their children (at d + 1), or keep them
        at = (tree.depth == d) & (pending > 0)
        keep = at & ~has_child
        rows[keep] += pending[keep]
        kids = np.flatnonzero((tree.parent >= 0) & (tree.depth == d + 1))
        kids = kids[at[tree.parent[kids]]]
        if kids.size == 0:
            continue
        p = tree.parent[kids]
        amount = pending[p] * tree.share[kids]
        top = pending_hi[p] / pending[p]
        low = tree.max_weight[p]
        mine = tree.max_weight[kids]
        kid_stay = np.where(mine >= top, 1.0, np.clip((mine - low) / np.maximum(top - low, 1.0), 0.0, 1.0))
        rows[kids] += amount * kid_stay
        pending[kids] += amount * (1.0 - kid_stay)
        pending_hi[kids] += amount * (1.0 - kid_stay) * top
    return rows


def _merge_within_limit(view: _Cubes, files: np.ndarray, reason: Callable[[int], str]) -> MergeTask | None:
    """One compaction of the leading `files` (in the given order) that fit `task-max-bytes` (two or
    more, else None), listed smallest first; `reason(n)` words it for the n files taken."""
    k = merge_prefix(view.sizes[files], view.config.task_limit)
    if k < 2:
        return None
    sel = sort_files(view.snapshot, files[:k], [("size", "ascending")])
    nbytes, n = int(view.sizes[sel].sum()), int(sel.size)
    return MergeTask(
        view.strategy, view.revision_id, paths_of(view.snapshot, sel), nbytes, n, merge_score(nbytes, n, view.config),
        reason(n), KIND_COMPACT,
    )  # fmt: skip


def _stale_buffer_task(view: _Cubes, buffered: np.ndarray, mtime: np.ndarray, waited_by_ms: int) -> MergeTask | None:
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
    in the task (the next file, after the next wait, moves them further). `buffered` is
    `_under_an_ancestor` of the view's pairs, `mtime` the files' modification times, and a file
    modified at or before `waited_by_ms` has waited."""
    config, rb, p_cube, p_file = view.config, view.rb, view.p_cube, view.p_file
    depth = rb.cube_depth()
    stale_file = mtime <= waited_by_ms
    has_own = np.zeros(rb.num_cubes, dtype=bool)
    has_own[p_cube[~buffered]] = True
    waiting = buffered & view.inner[p_cube] & stale_file[p_file] & has_own[p_cube]
    if not waiting.any():
        return None
    w_cube, w_file = p_cube[waiting], p_file[waiting]
    # the file's shallowest cube decides which stale file goes first
    top = np.full(view.snapshot.files.num_rows, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(top, p_file, depth[p_cube])
    first = int(w_file[np.lexsort((w_file, top[w_file]))[0]])
    cubes = distinct(w_cube[w_file == first])
    own = ~buffered & np.isin(p_cube, cubes) & (p_file != first)
    o_cube, o_file = p_cube[own], p_file[own]
    ordered = o_file[np.lexsort((o_file, rb.cube_rank()[o_cube], depth[o_cube]))]
    _, at = np.unique(ordered, return_index=True)  # each file once, where its shallowest cube puts it
    files = np.concatenate(([first], ordered[np.sort(at)])).astype(np.int64)
    return _merge_within_limit(
        view, files,
        lambda n: (
            f"consolidation: a file that {_waited_words(config)} holds rows of {cubes.size} full "
            f"inner cube(s) with files of their own (shallowest cube at depth {int(top[first])}); merging it with "
            f"{n - 1} of their files"
        ),
    )  # fmt: skip


def _waited_words(config: OptimizationConfig) -> str:
    if config.quiet:
        return f"is in a table quiet for tiering.idle-after={config.tiering_idle_after:g}s"
    return f"waited tiering.max-wait={config.tiering_max_wait:g}s"


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


def consolidation_plan(snapshot: Any, rid: int, config: OptimizationConfig, strategy: str) -> Plan | None:
    task = consolidation_task(snapshot, rid, config, strategy)
    return None if task is None else Plan((task,), strategy, snapshot.version)
