"""Each strategy on hand-built snapshots: the exact files the seeds' rules select."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from _optimize_snapshots import MAX_W, MIN_W, delta_snapshot, files_table, qbeast_snapshot, stats_json
from use.errors import ConfigError
from use.optimize.config import OptimizationConfig
from use.optimize.plan import KIND_BINPACK, KIND_COMPACT, KIND_INDEX, PLAIN_DELTA_REVISION
from use.optimize.strategies import (
    BinPacking,
    ClusterKeyOverlap,
    CubeDefragmentation,
    LeveledCompactionSelection,
    SamplingOverheadReduction,
    SmallFiles,
    UnindexedFilesSelection,
)
from use.optimize.strategies._common import levels_of
from use.optimize.strategies.overlap import max_overlap_depth
from use.qbeast.weight import weight_from_fraction

CFG = OptimizationConfig()
#: The seeds' order: the level rule first, consolidation only when no level group qualifies. With size
#: tiers (the default) consolidation goes first (see test_tiered_consolidation_merges_new_appends...).
SEEDS = OptimizationConfig(tiering_ratio=0)
W = lambda f: int(weight_from_fraction(f))  # noqa: E731


def cfg(**kw: object) -> OptimizationConfig:
    return dataclasses.replace(CFG, **kw)


def selected(plan) -> list[list[str]]:
    return [list(t.paths) for t in plan.tasks]


# --- levels --------------------------------------------------------------------------------------


def test_level_table_of_the_guide() -> None:
    counts = np.array([1, 9, 10, 99, 100, 999, 1000, 9999, 10_000, 99_999, 10**15 - 1, 10**15, 0])
    assert levels_of(counts).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 14, 15, -1]


# --- LeveledCompactionSelection --------------------------------------------------------------------


def _leveled_snapshot():
    # level 0 files: a (root 5), b (root 8), c (root 9 + cube A 3); level 1: d (root 50), e (root 60), f (A 40)
    files = files_table(["a", "b", "c", "d", "e", "f"], [10, 20, 30, 40, 50, 60], revisions=[1] * 6)
    blocks = [
        (0, 1, "", 0, MIN_W, MAX_W, 5),
        (1, 1, "", 0, MIN_W, MAX_W, 8),
        (2, 1, "", 0, MIN_W, MAX_W, 9),
        (2, 1, "A", 1, MIN_W, MAX_W, 3),
        (3, 1, "", 0, MIN_W, MAX_W, 50),
        (4, 1, "", 0, MIN_W, MAX_W, 60),
        (5, 1, "A", 1, MIN_W, MAX_W, 40),
    ]
    return qbeast_snapshot(files, blocks)


def test_leveled_selects_first_group_of_lowest_level() -> None:
    plan = LeveledCompactionSelection().select(_leveled_snapshot(), SEEDS)
    # level 0: cube "" totals 22 >= 10 (kept), cube A totals 3 (discarded) -> files a, b, c
    assert selected(plan) == [["a", "b", "c"]]
    t = plan.tasks[0]
    assert (t.kind, t.revision_id, t.bytes, t.num_files, t.strategy) == (KIND_COMPACT, 1, 60, 3, "LeveledCompactionSelection")
    assert t.score == pytest.approx(CFG.open_file_cost * 2 / 60)
    assert plan.snapshot_version == 7


def test_leveled_threshold_discards_groups_below_next_level() -> None:
    # level 1 group of cube "" totals exactly 99 -> discarded; with 100 it qualifies
    for total, expect in ((99, None), (100, [["p", "q"]])):
        files = files_table(["p", "q"], [1, 1], revisions=[1, 1])
        snap = qbeast_snapshot(files, [(0, 1, "", 0, MIN_W, MAX_W, 50), (1, 1, "", 0, MIN_W, MAX_W, total - 50)])
        plan = LeveledCompactionSelection().select(snap, CFG)
        assert (None if plan is None else selected(plan)) == expect


def test_leveled_orders_by_level_then_depth_then_blocks_then_cube() -> None:
    files = files_table(["l1a", "l1b", "d2a", "d2b", "bA1", "bA2", "bB1", "bB2", "bB3"], [1] * 9, revisions=[1] * 9)
    blocks = [
        # level 1, depth 0, qualifies (100): loses to any level-0 group
        (0, 1, "", 0, MIN_W, MAX_W, 50), (1, 1, "", 0, MIN_W, MAX_W, 50),
        # level 0, depth 2, 2 blocks: loses to the depth-1 groups
        (2, 1, "AA", 2, MIN_W, MAX_W, 5), (3, 1, "AA", 2, MIN_W, MAX_W, 5),
        # level 0, depth 1: cube B with 2 blocks beats cube C with 3 blocks
        (4, 1, "C", 1, MIN_W, MAX_W, 5), (5, 1, "C", 1, MIN_W, MAX_W, 5), (6, 1, "C", 1, MIN_W, MAX_W, 5),
        (7, 1, "B", 1, MIN_W, MAX_W, 5), (8, 1, "B", 1, MIN_W, MAX_W, 5),
    ]  # fmt: skip
    plan = LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), SEEDS)
    assert selected(plan) == [["bB2", "bB3"]]


def test_leveled_ties_broken_by_cube_id() -> None:
    files = files_table(["x1", "x2", "y1", "y2"], [1] * 4, revisions=[1] * 4)
    blocks = [(0, 1, "g", 1, MIN_W, MAX_W, 5), (1, 1, "g", 1, MIN_W, MAX_W, 5),
              (2, 1, "Q", 1, MIN_W, MAX_W, 5), (3, 1, "Q", 1, MIN_W, MAX_W, 5)]  # fmt: skip
    plan = LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), CFG)
    assert selected(plan) == [["y1", "y2"]]  # "Q" < "g"


def test_leveled_io_limit_caps_the_group_smallest_files_first() -> None:
    files = files_table(["w", "x", "y", "z"], [100, 300, 200, 400], revisions=[1] * 4)
    blocks = [(i, 1, "", 0, MIN_W, MAX_W, 3) for i in range(4)]
    snap = qbeast_snapshot(files, blocks)
    assert selected(LeveledCompactionSelection().select(snap, cfg(task_max_bytes=350))) == [["w", "y"]]
    assert selected(LeveledCompactionSelection().select(snap, cfg(task_max_bytes=650))) == [["w", "y", "x"]]
    # a limit below two files merges nothing: a task of several files never exceeds it, and one
    # file alone removes no fragmentation
    assert LeveledCompactionSelection().select(snap, cfg(task_max_bytes=250)) is None
    # task-max-bytes defaults to bytes-per-iter
    assert selected(LeveledCompactionSelection().select(snap, cfg(bytes_per_iter=350))) == [["w", "y"]]


def test_leveled_io_limit_prefers_the_groups_densest_files() -> None:
    # level-0 root group (2+8+5+4 = 19 >= 10) cut by the limit: most of the group's elements per byte
    files = files_table(["a", "b", "c", "d"], [10, 10, 10, 40], revisions=[1] * 4)
    blocks = [(0, 1, "", 0, MIN_W, MAX_W, 2), (1, 1, "", 0, MIN_W, MAX_W, 8), (2, 1, "", 0, MIN_W, MAX_W, 5),
              (3, 1, "", 0, MIN_W, MAX_W, 4)]  # fmt: skip
    snap = qbeast_snapshot(files, blocks)
    plan = LeveledCompactionSelection().select(snap, cfg(task_max_bytes=20))
    assert selected(plan) == [["b", "c"]] and "2 of 4 files" in plan.tasks[0].reason
    # a bigger file with more elements but a lower density does not displace them
    blocks[3] = (3, 1, "", 0, MIN_W, MAX_W, 9)  # d: 9 elements in 40 bytes, less dense than b and c
    assert selected(LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), cfg(task_max_bytes=20))) == [["b", "c"]]
    files = files_table(["a", "b", "c", "d"], [10, 30, 10, 40], revisions=[1] * 4)
    blocks = [(0, 1, "", 0, MIN_W, MAX_W, 1), (1, 1, "", 0, MIN_W, MAX_W, 9), (2, 1, "", 0, MIN_W, MAX_W, 1),
              (3, 1, "", 0, MIN_W, MAX_W, 9)]  # fmt: skip
    # the two densest (b, d) need 70 bytes > 20: the smallest files, as without densities
    assert selected(LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), cfg(task_max_bytes=20))) == [["a", "c"]]


def test_leveled_targets_latest_or_configured_revision() -> None:
    files = files_table(["r1a", "r1b", "r2a", "r2b"], [1] * 4, revisions=[1, 1, 2, 2])
    blocks = [(i, r, "", 0, MIN_W, MAX_W, 5) for i, r in enumerate([1, 1, 2, 2])]
    snap = qbeast_snapshot(files, blocks, revision_ids=(1, 2))
    assert selected(LeveledCompactionSelection().select(snap, CFG)) == [["r2a", "r2b"]]
    assert selected(LeveledCompactionSelection().select(snap, cfg(revision_id=1))) == [["r1a", "r1b"]]
    assert selected(LeveledCompactionSelection().select(snap, cfg(auto_optimize_revision_id=1))) == [["r1a", "r1b"]]


def test_leveled_nothing_to_do() -> None:
    files = files_table(["a", "b"], [1, 1], revisions=[1, 1])
    snap = qbeast_snapshot(files, [(0, 1, "", 0, MIN_W, MAX_W, 5), (1, 1, "A", 1, MIN_W, MAX_W, 5)])
    assert LeveledCompactionSelection().select(snap, CFG) is None
    assert LeveledCompactionSelection().select(delta_snapshot(files_table(["a"], [1])), CFG) is None


def test_revision_rewrite_selects_every_file_of_the_revision() -> None:
    files = files_table(["a", "b", "c", "s"], [40, 40, 40, 5], mtimes=[3, 1, 2, 0], revisions=[1, 1, 1, 0])
    snap = qbeast_snapshot(files, [(i, 1, "", 0, MIN_W, MAX_W, 5) for i in range(3)])
    plan = LeveledCompactionSelection().select(snap, cfg(revision_rewrite=True, task_max_bytes=80))
    assert selected(plan) == [["b", "c"], ["a"]]  # oldest first, cut at task-max-bytes; staging s untouched
    assert plan.one_shot and {t.kind for t in plan.tasks} == {KIND_COMPACT}


# --- full-cube consolidation (after the level rule) -------------------------------------------------


def _consolidation_snapshot(sizes=(50, 10, 12, 40, 5)):
    """desiredCubeSize 100. No level group qualifies (level 0: root 5+4 < 10, Q 8; level 1: root 91,
    Q 95 < 100), but the root (91+5+4) and Q (95+8) are full cubes spread over several files; A (5+3)
    is spread too but not full."""
    files = files_table(["main", "p1", "p2", "q1", "q2"], list(sizes), revisions=[1] * 5)
    blocks = [
        (0, 1, "", 0, MIN_W, W(0.5), 91),
        (0, 1, "A", 1, W(0.5), MAX_W, 5),
        (1, 1, "", 0, MIN_W, MAX_W, 5),
        (1, 1, "A", 1, W(0.6), MAX_W, 3),
        (2, 1, "", 0, MIN_W, MAX_W, 4),
        (3, 1, "Q", 1, W(0.5), W(0.9), 95),
        (4, 1, "Q", 1, W(0.5), MAX_W, 8),
    ]
    return qbeast_snapshot(files, blocks)


def test_consolidation_takes_full_fragmented_cubes_by_depth_within_the_io_limit() -> None:
    """Without size tiers (tiering.ratio 0): every fragmented inner cube into one file."""
    CFG = OptimizationConfig(tiering_ratio=0)

    def cfg(**kw: object) -> OptimizationConfig:
        return dataclasses.replace(CFG, **kw)  # type: ignore[arg-type]

    snap = _consolidation_snapshot()
    plan = LeveledCompactionSelection().select(snap, CFG)
    # root first (depth 0), then Q (depth 1) while it fits; smallest files first in the task
    assert selected(plan) == [["q2", "p1", "p2", "q1", "main"]]
    t = plan.tasks[0]
    assert (t.kind, t.revision_id, t.bytes, t.strategy) == (KIND_COMPACT, 1, 117, "LeveledCompactionSelection")
    assert t.reason.startswith("consolidation: inner cube '' (depth 0, 100 elements) spread over 3 files")
    assert "1 more" in t.reason
    assert t.score == pytest.approx(CFG.open_file_cost * 4 / 117)
    # Q's files do not fit next to the root's: the root alone
    assert selected(LeveledCompactionSelection().select(snap, cfg(task_max_bytes=72))) == [["p1", "p2", "main"]]
    # the root's files alone exceed the limit: its smallest files that fit, at least two
    assert selected(LeveledCompactionSelection().select(snap, cfg(task_max_bytes=30))) == [["p1", "p2"]]
    # no two files of any fragmented inner cube fit: nothing (the root's p1+p2 need 22 bytes, Q's 45)
    assert LeveledCompactionSelection().select(snap, cfg(task_max_bytes=21)) is None
    # Q's two files fit where the root's do not: the root is skipped, Q is merged
    snap_q = _consolidation_snapshot(sizes=[50, 10, 12, 4, 5])
    assert selected(LeveledCompactionSelection().select(snap_q, cfg(task_max_bytes=9))) == [["q1", "q2"]]
    # CubeDefragmentation has the same blind spot and the same fallback
    plan = CubeDefragmentation().select(snap, cfg(task_max_bytes=72))
    assert selected(plan) == [["p1", "p2", "main"]] and plan.tasks[0].strategy == "CubeDefragmentation"


def test_consolidation_never_selects_a_cube_in_one_file() -> None:
    # after consolidating: root and Q in one file each; A still spread, but A is not full
    files = files_table(["r", "q", "a1", "a2"], [50, 40, 1, 1], revisions=[1] * 4)
    blocks = [
        (0, 1, "", 0, MIN_W, W(0.5), 100),
        (1, 1, "Q", 1, W(0.5), W(0.9), 103),
        (2, 1, "A", 1, W(0.5), MAX_W, 5),
        (3, 1, "A", 1, W(0.6), MAX_W, 3),
    ]
    assert LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), CFG) is None
    assert CubeDefragmentation().select(qbeast_snapshot(files, blocks), CFG) is None


def test_consolidation_takes_inner_cubes_short_of_desired_size_but_not_leaves() -> None:
    # I is inner (maxWeight 0.3 < MaxValue) with 91+8 = 99 < 100 elements; L is a leaf of the same size
    files = files_table(["i1", "i2", "l1", "l2"], [1] * 4, revisions=[1] * 4)
    blocks = [(0, 1, "I", 1, MIN_W, W(0.3), 91), (1, 1, "I", 1, MIN_W, MAX_W, 8),
              (2, 1, "L", 1, MIN_W, MAX_W, 91), (3, 1, "L", 1, MIN_W, MAX_W, 8)]  # fmt: skip
    assert selected(LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), CFG)) == [["i1", "i2"]]


def test_consolidation_ties_by_cube_id_and_level_rule_first() -> None:
    files = files_table(["g1", "g2", "Q1", "Q2"], [1] * 4, revisions=[1] * 4)
    blocks = [(0, 1, "g", 1, MIN_W, W(0.5), 95), (1, 1, "g", 1, MIN_W, MAX_W, 8),
              (2, 1, "Q", 1, MIN_W, W(0.5), 95), (3, 1, "Q", 1, MIN_W, MAX_W, 8)]  # fmt: skip
    plan = LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), cfg(task_max_bytes=2, tiering_ratio=0))
    assert selected(plan) == [["Q1", "Q2"]]  # "Q" < "g"
    # a qualifying level group wins over any consolidation
    blocks += [(4, 1, "w", 1, MIN_W, MAX_W, 5), (5, 1, "w", 1, MIN_W, MAX_W, 5)]
    files = files_table(["g1", "g2", "Q1", "Q2", "w1", "w2"], [1] * 6, revisions=[1] * 6)
    plan = LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), SEEDS)
    assert selected(plan) == [["w1", "w2"]] and not plan.tasks[0].reason.startswith("consolidation")


# --- CubeDefragmentation -------------------------------------------------------------------------


def _defrag_snapshot():
    # level 0: cube "" in a,b,c (22 elements), cube A in c,g (3+9=12); level 1: cube "" in d,e (110)
    files = files_table(["a", "b", "c", "g", "d", "e"], [10, 20, 30, 40, 50, 60], revisions=[1] * 6)
    blocks = [
        (0, 1, "", 0, MIN_W, MAX_W, 5),
        (1, 1, "", 0, MIN_W, MAX_W, 8),
        (2, 1, "", 0, MIN_W, MAX_W, 9),
        (2, 1, "A", 1, MIN_W, MAX_W, 3),
        (3, 1, "A", 1, MIN_W, MAX_W, 9),
        (4, 1, "", 0, MIN_W, MAX_W, 50),
        (5, 1, "", 0, MIN_W, MAX_W, 60),
    ]
    return qbeast_snapshot(files, blocks)


def test_cube_defragmentation_takes_lowest_level_groups_by_depth_until_bytes_per_iter() -> None:
    snap = _defrag_snapshot()
    plan = CubeDefragmentation().select(snap, cfg(tiering_ratio=0, bytes_per_iter=100))
    assert selected(plan) == [["a", "b", "c", "g"]]  # cube "" (depth 0) then A; c only once; level 1 never
    plan = CubeDefragmentation().select(snap, cfg(tiering_ratio=0, bytes_per_iter=60))
    assert selected(plan) == [["a", "b", "c"]]
    # within 30 bytes: cube "" merges a+b; cube A's c (30) + g (40) cannot be merged within the limit,
    # and neither file is rewritten alone (one file holds one block per cube: nothing to merge)
    plan = CubeDefragmentation().select(snap, cfg(tiering_ratio=0, bytes_per_iter=100, task_max_bytes=30))
    assert selected(plan) == [["a", "b"]]
    assert all(t.kind == KIND_COMPACT and t.revision_id == 1 for t in plan.tasks)
    # cube A joins the open task through its file c when g fits next to it (100 bytes), not otherwise
    assert selected(CubeDefragmentation().select(snap, cfg(tiering_ratio=0, bytes_per_iter=100, task_max_bytes=100))) == [
        ["a", "b", "c", "g"]
    ]
    assert selected(CubeDefragmentation().select(snap, cfg(tiering_ratio=0, bytes_per_iter=100, task_max_bytes=70))) == [
        ["a", "b", "c"]
    ]


# --- UnindexedFilesSelection ----------------------------------------------------------------------


def _staging_snapshot():
    files = files_table(
        ["s0", "s1", "s2", "s3", "i0"], [4, 3, 5, 2, 100], mtimes=[300, 100, 200, 50, 10], revisions=[0, 0, 0, 0, 1]
    )
    blocks = [(i, 0, "", 0, MIN_W, MAX_W, 1) for i in range(4)] + [(4, 1, "", 0, MIN_W, MAX_W, 1)]
    return qbeast_snapshot(files, blocks)


def test_unindexed_oldest_first_up_to_batch_bytes() -> None:
    snap = _staging_snapshot()
    plan = UnindexedFilesSelection().select(snap, CFG)
    assert selected(plan) == [["s3", "s1", "s2", "s0"]]
    t = plan.tasks[0]
    assert (t.kind, t.revision_id, t.bytes) == (KIND_INDEX, 0, 14)
    assert t.score > 1.0  # index tasks outrank pure compaction
    assert selected(UnindexedFilesSelection().select(snap, cfg(unindexed_batch_bytes=10))) == [["s3", "s1", "s2"]]
    assert selected(UnindexedFilesSelection().select(snap, cfg(unindexed_batch_bytes=9))) == [["s3", "s1"]]
    # a first file larger than the batch is taken alone
    assert selected(UnindexedFilesSelection().select(snap, cfg(unindexed_batch_bytes=1))) == [["s3"]]


def test_unindexed_from_timestamp() -> None:
    snap = _staging_snapshot()
    plan = UnindexedFilesSelection().select(snap, cfg(unindexed_from_timestamp=100, unindexed_batch_bytes=8))
    assert selected(plan) == [["s1", "s2"]]  # s3 (50) is older than fromTimestamp
    assert UnindexedFilesSelection().select(snap, cfg(unindexed_from_timestamp=301)) is None


def test_unindexed_needs_a_qbeast_table() -> None:
    assert UnindexedFilesSelection().select(delta_snapshot(files_table(["a", "b"], [1, 1])), CFG) is None


# --- SamplingOverheadReduction -------------------------------------------------------------------


def _sampling_snapshot(extra_files=(), extra_blocks=()):
    """A consistent tree (one dimension, so a cube's parent is its id minus one symbol): root "" with
    maxWeight 0.05; children A, B, C, D of the root; AA child of A (A's maxWeight is 0.2)."""
    names = ["root", "offset", "mixed", "clean", "outside", "fullcube", *extra_files]
    files = files_table(names, [100] * len(names), revisions=[1] * len(names))
    blocks = [
        (0, 1, "", 0, MIN_W, W(0.05), 100),
        # seed example 1: f=0.15, block [0.1, 0.2], cube maxWeight 0.15 (another block of the cube ends there)
        (1, 1, "B", 1, W(0.1), W(0.2), 100),
        (5, 1, "B", 1, W(0.05), W(0.15), 100),
        # seed example 2: one file, A [0.1, 0.2] sampled, AA [0.2, 0.3] not sampled
        (2, 1, "A", 1, W(0.1), W(0.2), 100),
        (2, 1, "AA", 2, W(0.2), W(0.3), 100),
        # straddles 0.15 but the cube maxWeight is the block end: nothing to remove
        (3, 1, "C", 1, W(0.1), W(0.2), 100),
        # never sampled
        (4, 1, "D", 1, W(0.5), MAX_W, 100),
        *extra_blocks,
    ]
    return qbeast_snapshot(files, blocks)


def test_sampling_overhead_seed_examples() -> None:
    snap = _sampling_snapshot()
    plan = SamplingOverheadReduction().select(snap, cfg(sampling_fraction=0.15))
    assert selected(plan) == [["mixed", "offset"]]  # mixed: ~75% overhead, offset: ~50%
    t = plan.tasks[0]
    assert t.kind == KIND_COMPACT and t.revision_id == 1
    assert t.score == pytest.approx((0.75 * 100 + 0.5 * 100) / 200, rel=1e-6)
    # bytes-per-iter per round: only the file with the most overhead
    plan = SamplingOverheadReduction().select(snap, cfg(sampling_fraction=0.15, bytes_per_iter=100))
    assert selected(plan) == [["mixed"]]


def test_sampling_overhead_skips_what_no_rewrite_can_change() -> None:
    snap = _sampling_snapshot(
        ["unlucky", "deep", "deep2"],
        [
            # E's parent (the root, maxWeight 0.05) is below W(0.15): E may hold sampled rows, so the
            # rewrite keeps E with A even though this block happens to start above W(0.15)
            (6, 1, "A", 1, W(0.1), W(0.2), 100),
            (6, 1, "E", 1, W(0.3), MAX_W, 100),
            # F has offsets above its maxWeight 0.1, but they move into F's children, which the
            # sample still reads (0.1 < W(0.15) - 1): no rewrite removes them from sampled files
            (7, 1, "F", 1, W(0.06), W(0.2), 100),
            (8, 1, "F", 1, W(0.05), W(0.1), 100),
        ],
    )
    plan = SamplingOverheadReduction().select(snap, cfg(sampling_fraction=0.15))
    assert selected(plan) == [["mixed", "offset"]]


def test_sampling_overhead_selects_nothing_once_separated() -> None:
    # The layout a sampling-aware rewrite of "mixed" and "offset" produces: AA in a file of its own,
    # B's block cut at the cube's maxWeight (its offsets went to separable children, also apart).
    files = files_table(["root", "sampled", "apart", "kids"], [100] * 4, revisions=[1] * 4)
    blocks = [
        (0, 1, "", 0, MIN_W, W(0.05), 100),
        (1, 1, "A", 1, W(0.1), W(0.2), 100),
        (1, 1, "B", 1, W(0.05), W(0.15), 150),
        (2, 1, "AA", 2, W(0.2), W(0.3), 100),
        (3, 1, "BA", 2, W(0.15), MAX_W, 25),
        (3, 1, "Bg", 2, W(0.16), MAX_W, 25),
    ]
    assert SamplingOverheadReduction().select(qbeast_snapshot(files, blocks), cfg(sampling_fraction=0.15)) is None


def test_sampling_overhead_needs_fraction() -> None:
    files = files_table(["a"], [1], revisions=[1])
    snap = qbeast_snapshot(files, [(0, 1, "", 0, MIN_W, MAX_W, 1)])
    with pytest.raises(ConfigError, match="sampling-fraction"):
        SamplingOverheadReduction().select(snap, CFG)
    assert SamplingOverheadReduction().select(snap, cfg(sampling_fraction=0.5)) is None


# --- BinPacking / SmallFiles ---------------------------------------------------------------------


def _partitioned_delta():
    files = files_table(
        ["p1/a", "p1/b", "p1/c", "p1/d", "p2/e", "p3/f", "p3/g", "p4/h", "p4/i", "pn/j", "pn/k"],
        [10, 20, 30, 45, 5, 6, 5, 60, 1, 2, 3],
        partitions=[{"p": "1"}] * 4 + [{"p": "2"}] + [{"p": "3"}] * 2 + [{"p": "4"}] * 2 + [{"p": None}, {"p": ""}],
    )
    return delta_snapshot(files)


def test_delta_defaults() -> None:
    assert CFG.max_file_size == 1024**3 and CFG.min_file_size_limit == 1024**3


def test_bin_packing_per_partition_drops_single_file_bins() -> None:
    snap = _partitioned_delta()
    plan = BinPacking().select(snap, cfg(max_file_size=50))
    # p1: sizes 10,20,30,45 -> bins [10,20] [30] [45] -> only [10,20]; p2 one file; p3 [5,6];
    # p4: 60 is not below min-file-size (=max-file-size=50), 1 alone; null and "" partitions differ
    assert selected(plan) == [["p3/g", "p3/f"], ["p1/a", "p1/b"]]
    assert [t.partition_dict for t in plan.tasks] == [{"p": "3"}, {"p": "1"}]
    assert all(t.kind == KIND_BINPACK and t.revision_id == PLAIN_DELTA_REVISION for t in plan.tasks)
    assert plan.tasks[0].score == pytest.approx(CFG.open_file_cost / 11)
    # bytes-per-iter keeps the best bins only
    assert selected(BinPacking().select(snap, cfg(max_file_size=50, bytes_per_iter=30))) == [["p3/g", "p3/f"]]
    # the per-task IO limit also bounds bins
    assert selected(BinPacking().select(snap, cfg(max_file_size=50, task_max_bytes=11))) == [["p3/g", "p3/f"]]


def test_bin_packing_min_file_size() -> None:
    plan = BinPacking().select(_partitioned_delta(), cfg(max_file_size=50, min_file_size=7))
    assert selected(plan) == [["p3/g", "p3/f"]]
    assert BinPacking().select(_partitioned_delta(), cfg(min_file_size=2)) is None


def test_bin_packing_on_qbeast_touches_only_staging_files() -> None:
    files = files_table(["s1", "s2", "i1", "i2"], [1, 2, 1, 2], revisions=[0, 0, 1, 1])
    snap = qbeast_snapshot(files, [(i, r, "", 0, MIN_W, MAX_W, 1) for i, r in enumerate([0, 0, 1, 1])])
    plan = BinPacking().select(snap, CFG)
    assert selected(plan) == [["s1", "s2"]] and plan.tasks[0].revision_id == 0


def test_small_files_threshold() -> None:
    files = files_table(["a", "b", "c", "big"], [1, 2, 3, 50])
    snap = delta_snapshot(files)
    plan = SmallFiles().select(snap, cfg(small_files_max_size=10, small_files_count_threshold=3))
    assert selected(plan) == [["a", "b", "c"]]
    assert SmallFiles().select(snap, cfg(small_files_max_size=10, small_files_count_threshold=4)) is None
    plan = SmallFiles().select(snap, cfg(small_files_max_size=10, small_files_count_threshold=3, task_max_bytes=3))
    assert selected(plan) == [["a", "b"]]  # [a,b] (3 bytes), then [c] alone is dropped


# --- ClusterKeyOverlap ---------------------------------------------------------------------------


def _overlap_snapshot(intervals, partitions=None, sizes=None):
    n = len(intervals)
    files = files_table(
        [f"f{i}" for i in range(n)],
        sizes or [10] * n,
        partitions=partitions,
        stats=[None if iv is None else stats_json("id", iv[0], iv[1]) for iv in intervals],
    )
    return delta_snapshot(files)


def test_overlap_depth_relyt_example() -> None:
    # files 0, 1, 2 overlap around id 8..10 (depth 3); file 3 is apart
    snap = _overlap_snapshot([(1, 10), (5, 15), (8, 20), (25, 30)])
    assert max_overlap_depth(snap, "id") == 3
    plan = ClusterKeyOverlap().select(snap, cfg(overlap_cluster_key="id"))
    assert selected(plan) == [["f0", "f1", "f2"]]
    t = plan.tasks[0]
    assert t.sort_columns == ("id",) and t.kind == KIND_BINPACK
    assert t.score == pytest.approx(2 * (CFG.open_file_cost + 10) / 30)
    assert ClusterKeyOverlap().select(snap, cfg(overlap_cluster_key="id", overlap_depth_threshold=3)) is None


def test_overlap_closed_intervals_partitions_and_missing_stats() -> None:
    assert max_overlap_depth(_overlap_snapshot([(1, 5), (5, 9)]), "id") == 2  # touching ranges overlap
    assert max_overlap_depth(_overlap_snapshot([(1, 5), (6, 9)]), "id") == 1
    parts = [{"d": "a"}, {"d": "b"}, {"d": "a"}]
    assert max_overlap_depth(_overlap_snapshot([(1, 10), (1, 10), (20, 30)], parts), "id") == 1
    assert max_overlap_depth(_overlap_snapshot([(1, 10), None, (2, 3)]), "id") == 2


def test_overlap_several_sets_within_limits() -> None:
    ivs = [(1, 10), (5, 15), (8, 20), (40, 50), (45, 55), (48, 60), (49, 49)]
    snap = _overlap_snapshot(ivs, sizes=[10, 10, 10, 10, 10, 10, 5])
    plan = ClusterKeyOverlap().select(snap, cfg(overlap_cluster_key="id"))
    assert sorted(selected(plan)) == [["f0", "f1", "f2"], ["f6", "f3", "f4", "f5"]]
    assert plan.tasks[0].paths == ("f6", "f3", "f4", "f5")  # depth 4: the higher score
    plan = ClusterKeyOverlap().select(snap, cfg(overlap_cluster_key="id", bytes_per_iter=40))
    assert selected(plan) == [["f6", "f3", "f4", "f5"]]
    plan = ClusterKeyOverlap().select(snap, cfg(overlap_cluster_key="id", task_max_bytes=20))
    assert selected(plan)[0] == ["f6", "f3"]  # within 20 bytes, smallest first


def test_overlap_config_errors() -> None:
    snap = _overlap_snapshot([(1, 10), (5, 15), (8, 20)])
    with pytest.raises(ConfigError, match="overlap.cluster-key"):
        ClusterKeyOverlap().select(snap, CFG)
    with pytest.raises(ConfigError, match="'nope' is not a column"):
        ClusterKeyOverlap().select(snap, cfg(overlap_cluster_key="nope"))


# --- size tiers (issue 14 §2) --------------------------------------------------------------------------


def test_tier_tail_merges_small_files_and_a_larger_one_only_once_they_reach_a_ratio_of_it() -> None:
    from use.optimize.strategies.consolidation import tier_tail

    big = np.array([1000, 100, 10, 10, 10])
    assert tier_tail(big, 4, 9) == 1  # the 10s add up to 30 >= 100/4, so 100 joins them; 130 < 1000/4
    assert tier_tail(np.array([1000, 200, 10, 10]), 4, 9) == 2  # the 10s merge; 20*4 < 200
    assert tier_tail(np.array([1000, 200, 10]), 4, 9) == 3  # one small file: within its tiers
    assert tier_tail(np.array([1000, 200, 10]), 4, 2) == 1  # three files > max 2: the two smallest merge
    # 5 * 4 < 45: within the tiers, but four files > max 3, so 45 + 5 merge, and climb on: they
    # reach 200/4, so 200 joins them (not left to the next task); 250 * 4 < 2000
    assert tier_tail(np.array([2000, 200, 45, 5]), 4, 3) == 1
    assert tier_tail(np.array([2000, 300, 45, 5]), 4, 3) == 2  # 50 * 4 < 300: the cap's merge only
    assert tier_tail(np.array([1000, 200, 10]), 0, 9) == 0  # ratio 0: every file
    assert tier_tail(np.array([1000, 200, 10]), 4, 9, np.array([False, True, False])) == 0  # waited: every file
    assert tier_tail(np.array([5]), 4, 1) == 1


def test_tiered_consolidation_leaves_a_large_file_out_until_the_small_ones_add_up() -> None:
    # the root over a large consolidated file and two small appended ones (desiredCubeSize 100)
    files = files_table(["main", "s1", "s2"], [400, 20, 30], revisions=[1] * 3, mtimes=[0, 5, 6])
    # (the small blocks add up to 9 elements: no level group qualifies, consolidation decides)
    blocks = [(0, 1, "", 0, MIN_W, W(0.5), 91), (1, 1, "", 0, MIN_W, MAX_W, 4), (2, 1, "", 0, MIN_W, MAX_W, 5)]
    snap = qbeast_snapshot(files, blocks)
    tiered = cfg(tiering_ratio=4, tiering_root_max_fragments=9)
    assert selected(LeveledCompactionSelection().select(snap, tiered)) == [["s1", "s2"]]
    assert "size tiers" in LeveledCompactionSelection().select(snap, tiered).tasks[0].reason
    # the root's fragments bound (every sample reads it): the large file joins
    assert selected(LeveledCompactionSelection().select(snap, cfg(tiering_ratio=4, tiering_root_max_fragments=1))) == [
        ["s1", "s2", "main"]
    ]
    # one small file beside the large one: within its tiers, nothing to do
    two = qbeast_snapshot(files_table(["main", "s1"], [400, 20], revisions=[1] * 2, mtimes=[0, 5]), blocks[:2])
    assert LeveledCompactionSelection().select(two, tiered) is None
    # the time factor: once s1 has waited tiering.max-wait, it is merged with the large file
    waited = dataclasses.replace(tiered, tiering_max_wait=10.0, now_ms=5 + 10_000)
    assert selected(LeveledCompactionSelection().select(two, waited)) == [["s1", "main"]]
    assert LeveledCompactionSelection().select(two, dataclasses.replace(waited, now_ms=5 + 9_999)) is None


def test_tiered_consolidation_counts_no_fragment_in_a_file_of_an_ancestor() -> None:
    # cube A (inner, depth 1) has its main block in `a` and a few recent rows in the root's file
    # `main`: every query through A opens `main` for the root anyway, so that block costs no file
    # open and the tiered rule leaves it there (the root's file buffers them); untiered, it merges
    files = files_table(["main", "a"], [400, 380], revisions=[1] * 2)
    blocks = [(0, 1, "", 0, MIN_W, W(0.5), 91), (0, 1, "A", 1, W(0.5), W(0.8), 3), (1, 1, "A", 1, W(0.5), W(0.8), 95)]
    snap = qbeast_snapshot(files, blocks)
    assert LeveledCompactionSelection().select(snap, cfg(tiering_ratio=4, tiering_max_fragments=1)) is None
    assert selected(LeveledCompactionSelection().select(snap, cfg(tiering_ratio=0))) == [["a", "main"]]
    # the same rows in a file of their own (not the root's) are a fragment: merged with A's file
    own = qbeast_snapshot(files_table(["main", "a", "b"], [400, 380, 30], revisions=[1] * 3),
                          [blocks[0], (1, 1, "A", 1, W(0.5), W(0.8), 95), (2, 1, "A", 1, W(0.5), W(0.8), 3)])  # fmt: skip
    assert selected(LeveledCompactionSelection().select(own, cfg(tiering_ratio=4, tiering_max_fragments=1))) == [["b", "a"]]


def test_rows_waiting_in_an_ancestors_file_move_down_once_it_has_waited_max_wait() -> None:
    # as above: A's 3 recent rows wait in the root's file `main`, where the tiers leave them; with
    # the time factor, once `main` has waited tiering.max-wait, it is merged with A's file
    files = files_table(["main", "a", "leaf"], [400, 380, 30], revisions=[1] * 3, mtimes=[1_000, 0, 0])
    blocks = [(0, 1, "", 0, MIN_W, W(0.5), 91), (0, 1, "A", 1, W(0.5), W(0.8), 3), (1, 1, "A", 1, W(0.5), W(0.8), 95),
              (0, 1, "Q", 1, W(0.5), MAX_W, 2), (2, 1, "Q", 1, W(0.5), MAX_W, 20)]  # fmt: skip
    snap = qbeast_snapshot(files, blocks)
    tiered = cfg(tiering_ratio=4, tiering_max_fragments=9, tiering_max_wait=10.0)
    assert LeveledCompactionSelection().select(snap, dataclasses.replace(tiered, now_ms=1_000 + 9_999)) is None
    plan = LeveledCompactionSelection().select(snap, dataclasses.replace(tiered, now_ms=1_000 + 10_000))
    # the leaf Q (no maxWeight) rolls into the root's file as a write of the whole table would: not moved
    assert selected(plan) == [["a", "main"]]
    assert "waited tiering.max-wait=10s" in plan.tasks[0].reason
    # with the time factor off the rows wait for the tiers, however old the file
    off = cfg(tiering_ratio=4, tiering_max_fragments=9, tiering_max_wait=None, now_ms=10**12)
    assert LeveledCompactionSelection().select(snap, off) is None
    # an inner cube with no file of its own has nowhere to move to: nothing selected
    alone = qbeast_snapshot(files_table(["main"], [400], revisions=[1], mtimes=[0]), blocks[:2])
    assert LeveledCompactionSelection().select(alone, dataclasses.replace(tiered, now_ms=10**12)) is None


def test_a_quiet_table_moves_its_waiting_rows_and_merges_its_fragments_at_once() -> None:
    # as above, every file written just now (max-wait 1h far off): once no commit has changed the rows
    # for tiering.idle-after, every file counts as having waited, whatever its age
    files = files_table(["main", "a", "leaf"], [400, 380, 30], revisions=[1] * 3, mtimes=[1_000, 0, 0])
    blocks = [(0, 1, "", 0, MIN_W, W(0.5), 91), (0, 1, "A", 1, W(0.5), W(0.8), 3), (1, 1, "A", 1, W(0.5), W(0.8), 95),
              (0, 1, "Q", 1, W(0.5), MAX_W, 2), (2, 1, "Q", 1, W(0.5), MAX_W, 20)]  # fmt: skip
    snap = qbeast_snapshot(files, blocks)
    base = cfg(tiering_ratio=4, tiering_max_fragments=9, tiering_max_wait=3600.0, tiering_idle_after=60.0)
    just_written = dataclasses.replace(base, now_ms=1_000 + 59_999, last_data_change_ms=1_000)
    assert not just_written.quiet and LeveledCompactionSelection().select(snap, just_written) is None
    quiet = dataclasses.replace(just_written, now_ms=1_000 + 60_000)
    assert quiet.quiet and quiet.tiering_wait_ms == 0
    plan = LeveledCompactionSelection().select(snap, quiet)
    assert selected(plan) == [["a", "main"]]
    assert "quiet for tiering.idle-after=60s" in plan.tasks[0].reason
    # idle-after off, or the last change unknown (no planning inputs): the tiers and max-wait decide
    assert LeveledCompactionSelection().select(snap, dataclasses.replace(quiet, tiering_idle_after=None)) is None
    assert LeveledCompactionSelection().select(snap, dataclasses.replace(quiet, last_data_change_ms=None)) is None
    # with max-wait off a quiet table still converges
    assert selected(LeveledCompactionSelection().select(snap, dataclasses.replace(quiet, tiering_max_wait=None))) == [
        ["a", "main"]
    ]
    # a fragment within its tiers (s1 beside the root's file) is merged too
    two = qbeast_snapshot(files_table(["main", "s1"], [400, 20], revisions=[1] * 2, mtimes=[0, 5]),
                          [(0, 1, "", 0, MIN_W, W(0.5), 91), (1, 1, "", 0, MIN_W, MAX_W, 4)])  # fmt: skip
    assert LeveledCompactionSelection().select(two, dataclasses.replace(just_written, now_ms=10)) is None
    assert selected(LeveledCompactionSelection().select(two, dataclasses.replace(quiet, now_ms=61_000))) == [["s1", "main"]]


def test_tiered_consolidation_merges_new_appends_with_the_roots_file_in_one_task() -> None:
    # the root's file (150 elements, full) and three appends of 40 root rows each: the level rule
    # alone merges the appends (level-1 group of 120 >= 100) and a later consolidation would merge
    # the result with `main` again; tiered, consolidation goes first and does it in one task
    files = files_table(["main", "s1", "s2", "s3"], [400, 50, 50, 50], revisions=[1] * 4)
    blocks = [(0, 1, "", 0, MIN_W, W(0.5), 150)] + [(i, 1, "", 0, MIN_W, W(0.5), 40) for i in (1, 2, 3)]
    snap = qbeast_snapshot(files, blocks)
    assert selected(LeveledCompactionSelection().select(snap, cfg(tiering_ratio=0))) == [["s1", "s2", "s3"]]
    tiered = LeveledCompactionSelection().select(snap, cfg(tiering_ratio=4))
    assert sorted(selected(tiered)[0]) == ["main", "s1", "s2", "s3"]
    assert tiered.tasks[0].reason.startswith("consolidation: inner cube ''")


def test_with_size_tiers_the_level_rule_leaves_an_inner_cubes_files_to_the_tiers() -> None:
    # inner cube A (desiredCubeSize 100): its file `main` and two fragments the tiers leave waiting
    # (100 x 1.5 < 240); the fragments' blocks form a qualifying level-1 group (60 + 45 >= 100), which
    # the level rule merged, undoing the tiers' wait: in the trade-off benchmark the next task merged
    # that file with the cube's larger one, so the fragments were rewritten twice in one optimization.
    # The leaf Q's level group (level 0: 6 + 5 >= 10) is still the level rule's.
    files = files_table(["main", "f1", "f2"], [1000, 240, 100], revisions=[1] * 3)
    blocks = [(0, 1, "", 0, MIN_W, W(0.2), 100), (0, 1, "A", 1, W(0.2), W(0.5), 100),
              (1, 1, "A", 1, W(0.2), W(0.5), 60), (2, 1, "A", 1, W(0.2), W(0.5), 45)]  # fmt: skip
    tiered = cfg(tiering_ratio=1.5, tiering_max_fragments=3)
    assert LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), tiered) is None
    assert CubeDefragmentation().select(qbeast_snapshot(files, blocks), tiered) is None
    # tiering off: the seeds' level rule merges the fragments, as before
    assert selected(LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), SEEDS)) == [["f2", "f1"]]
    # a leaf's level group is still merged under tiers
    files = files_table(["main", "f1", "f2", "l1", "l2"], [1000, 240, 100, 7, 6], revisions=[1] * 5)
    blocks += [(3, 1, "Q", 1, W(0.2), MAX_W, 6), (4, 1, "Q", 1, W(0.2), MAX_W, 5)]
    assert selected(LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), tiered)) == [["l2", "l1"]]


def test_sibling_parity_is_the_parity_of_the_halves_a_cube_takes_of_its_parent() -> None:
    import pyarrow as pa

    from use.optimize.strategies._common import RevisionBlocks

    none = np.zeros(0, dtype=np.int64)
    two_dims = RevisionBlocks(none, none, none, none, none, none, pa.array(["", "A", "Q", "g", "w", "gA", "gQ", "ww"]), 1)
    assert two_dims.sibling_parity().tolist() == [0, 0, 1, 1, 0, 0, 1, 0]
    # 7 dimensions: two symbols a level, the last level's both count
    seven = RevisionBlocks(none, none, none, none, none, none, pa.array(["", "AB", "BB", "AAAB", "gA"]), 2)
    assert seven.sibling_parity().tolist() == [0, 1, 0, 1, 1]


def test_staggered_tiers_give_siblings_in_odd_positions_the_larger_ratio() -> None:
    # Two sibling inner cubes in the same state: a file and a fragment half its size. A (no upper
    # half along either column: even) keeps the fragment waiting at ratio 1.5 (500 x 1.5 < 1000); Q
    # (the upper half along one column: odd) merges at 1.5 x 2 = 3. Rows arriving evenly fill
    # siblings at the same pace: with one ratio a strip across both found both waiting at once.
    files = files_table(["root", "a", "fa", "q", "fq"], [300, 1000, 500, 1000, 500], revisions=[1] * 5)
    blocks = [(0, 1, "", 0, MIN_W, W(0.2), 100), (1, 1, "A", 1, W(0.2), W(0.5), 100), (2, 1, "A", 1, W(0.2), W(0.5), 50),
              (3, 1, "Q", 1, W(0.2), W(0.5), 100), (4, 1, "Q", 1, W(0.2), W(0.5), 50)]  # fmt: skip
    snap = qbeast_snapshot(files, blocks)
    plan = LeveledCompactionSelection().select(snap, cfg(tiering_ratio=1.5, tiering_stagger=2))
    assert selected(plan) == [["fq", "q"]] and "ratio 3" in plan.tasks[0].reason
    # one ratio for every cube: both wait
    assert LeveledCompactionSelection().select(snap, cfg(tiering_ratio=1.5, tiering_stagger=1)) is None
    # the defaults are the staggered 1.5 and 2.25
    assert selected(LeveledCompactionSelection().select(snap, CFG)) == [["fq", "q"]]


def test_a_tiered_merge_takes_in_the_deeper_cubes_files_its_rows_would_join_at_once() -> None:
    # the root's file `main` and two appends, each with 20 root rows and `a_rows` of cube A, whose
    # file `a` holds A (desiredCubeSize 100). With 60 each, the root task's rollup gives A's 120 rows a
    # file of their own (a fragment of ~370 bytes at the task's ~3.1 bytes a row), which the tiers
    # would merge with `a` (370 x 3 >= 300) in the next task: it joins this one, so the fragment is
    # not written and read again
    def snap(a_size: int, a_rows: int = 60):
        files = files_table(["main", "a", "s1", "s2"], [400, a_size, 200, 200], revisions=[1] * 4)
        blocks = [(0, 1, "", 0, MIN_W, W(0.5), 100), (1, 1, "A", 1, W(0.5), W(0.8), 100)]
        for f in (2, 3):
            blocks += [(f, 1, "", 0, MIN_W, W(0.5), 20), (f, 1, "A", 1, W(0.5), W(0.8), a_rows)]
        return qbeast_snapshot(files, blocks)

    tiered = cfg(tiering_ratio=3, tiering_root_max_fragments=9)
    plan = LeveledCompactionSelection().select(snap(300), tiered)
    assert sorted(selected(plan)[0]) == ["a", "main", "s1", "s2"]
    assert "1 file(s) of deeper cubes its rows would join at once" in plan.tasks[0].reason
    # A's file over 3x the fragment: the fragment would wait in its tier, so `a` stays out
    assert sorted(selected(LeveledCompactionSelection().select(snap(1200), tiered))[0]) == ["main", "s1", "s2"]
    # 30 rows each: the rollup puts A's 60 rows in the root's file (under desiredCubeSize), so A
    # gets no fragment and `a` stays out
    assert sorted(selected(LeveledCompactionSelection().select(snap(300, 30), tiered))[0]) == ["main", "s1", "s2"]
    # never past task-max-bytes: the root's task alone fills it
    limited = cfg(tiering_ratio=3, tiering_root_max_fragments=9, task_max_bytes=800)
    assert sorted(selected(LeveledCompactionSelection().select(snap(300), limited))[0]) == ["main", "s1", "s2"]
    # tiering off (the seeds' order): no folding
    assert "deeper cubes" not in LeveledCompactionSelection().select(snap(300), cfg(tiering_ratio=0)).tasks[0].reason


def test_the_fold_reaches_a_deeper_cube_whose_parent_lives_in_the_tasks_files() -> None:
    # Optimized every 50 appends, a root task's appends hold many rows of each depth-2 cube: its
    # rollup writes them a fragment (AA: 120 rows >= desiredCubeSize 100) while the depth-1 parent's
    # few rows (A: 60) stay in the root's file, where A lives (no file of its own). AA's own file
    # `aa` and that fragment (~300 bytes at the task's 2.5 bytes a row) are out of tier, so `aa`
    # joins the task; before, the fold stopped at A (no file of its own) and a second task merged
    # AA's fragment with `aa` every round.
    files = files_table(["main", "aa", "s1", "s2"], [400, 300, 200, 200], revisions=[1] * 4)
    blocks = [(0, 1, "", 0, MIN_W, W(0.3), 100), (0, 1, "A", 1, W(0.3), W(0.6), 40), (1, 1, "AA", 2, W(0.6), W(0.9), 100)]
    for f in (2, 3):
        blocks += [(f, 1, "", 0, MIN_W, W(0.3), 20), (f, 1, "A", 1, W(0.3), W(0.6), 10), (f, 1, "AA", 2, W(0.6), W(0.9), 60)]
    tiered = cfg(tiering_ratio=3, tiering_root_max_fragments=9)
    plan = LeveledCompactionSelection().select(qbeast_snapshot(files, blocks), tiered)
    assert sorted(selected(plan)[0]) == ["aa", "main", "s1", "s2"]
    assert "1 file(s) of deeper cubes its rows would join at once" in plan.tasks[0].reason


def test_the_fold_sees_the_rows_the_rewrite_moves_down_to_a_child() -> None:
    # A's maxWeight is now W(0.6) (its block in `main`), but the appends' blocks of A were written when
    # it was W(0.9): the rewrite places their rows by weight, so about half of each (those above
    # W(0.6)) move down to A's child AA, 120 rows: a fragment of AA, which the tiers would merge with
    # `aa` at once. Counted in place (all 240 in A, none in AA) the fold missed it, and the next task
    # merged that fragment again (the trade-off benchmark, drifting, k = 10).
    from use.optimize.strategies._common import RevisionBlocks
    from use.optimize.strategies.consolidation import _Tree, placed_rows

    files = files_table(["main", "aa", "s1", "s2"], [400, 300, 200, 200], revisions=[1] * 4)
    blocks = [(0, 1, "", 0, MIN_W, W(0.3), 100), (0, 1, "A", 1, W(0.3), W(0.6), 40), (1, 1, "AA", 2, W(0.6), MAX_W, 100)]
    for f in (2, 3):
        blocks += [(f, 1, "", 0, MIN_W, W(0.3), 20), (f, 1, "A", 1, W(0.3), W(0.9), 120)]
    snap = qbeast_snapshot(files, blocks)
    rb = RevisionBlocks.of(snap, 1)
    appends = np.isin(rb.file, [2, 3])
    placed = dict(zip(rb.cubes.to_pylist(), np.rint(placed_rows(rb, appends, _Tree.of(rb))).tolist(), strict=False))
    assert placed == {"": 40, "A": 120, "AA": 120}
    # rows a block holds below its cube's maxWeight stay where they are
    assert np.array_equal(placed_rows(rb, np.isin(rb.file, [0, 1]), _Tree.of(rb)), [100, 40, 100])
    plan = LeveledCompactionSelection().select(snap, cfg(tiering_ratio=3, tiering_root_max_fragments=9))
    assert sorted(selected(plan)[0]) == ["aa", "main", "s1", "s2"]
    assert "1 file(s) of deeper cubes its rows would join at once" in plan.tasks[0].reason
