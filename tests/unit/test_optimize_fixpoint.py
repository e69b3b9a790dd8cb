"""The optimizer reaches a fixed point and obeys its per-task IO limit (pure: synthetic snapshots).

Every strategy and the default chains are planned and "run" (`apply_task`, a metadata stand-in for
the executor) until the planner selects nothing; every task planned on the way must stay within its
IO limit and gain something an independent count confirms, and the final plan is empty, which is
what "a second optimize call commits nothing" means for the planner. The same on real tables, with
Spark, is in test_optimize_fixpoint_tables.py.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from _optimize_snapshots import (
    MAX_W,
    MIN_W,
    appended_qbeast,
    apply_task,
    delta_snapshot,
    drifting_qbeast,
    files_table,
    overlapping_delta,
    qbeast_snapshot,
)
from use.optimize.config import OptimizationConfig
from use.optimize.gain import estimate, guard, redundant_blocks, task_rows
from use.optimize.plan import KIND_BINPACK, KIND_COMPACT, KIND_INDEX, REVISION_REWRITE_TAG, Gain, MergeTask, Plan
from use.optimize.planner import Planner
from use.optimize.strategies import registry
from use.optimize.strategies._common import io_limit

CFG = OptimizationConfig()


def cfg(**kw: Any) -> OptimizationConfig:
    return dataclasses.replace(CFG, **kw)


def _cube_files(snap: Any, paths: tuple[str, ...]) -> Counter:
    """Per cube: how many of these files hold a block of it (an independent count, in Python)."""
    rows = {p: i for i, p in enumerate(snap.files.column("path").to_pylist())}
    wanted = {rows[p] for p in paths}
    b = snap.blocks.to_pydict()
    return Counter(c for f, c in set(zip(b["file_index"], b["cube_id"], strict=False)) if f in wanted)


def _check_task(task: MergeTask, snap: Any, config: OptimizationConfig) -> None:
    """The rules every planned task obeys (issue 15 §1 and §2)."""
    limit = io_limit(task.kind, config)
    if task.num_files > 1:
        assert task.bytes <= limit, f"{task.strategy}: {task.num_files} files, {task.bytes} B > limit {limit}"
    assert task.gain, f"{task.strategy} planned a task that gains nothing: {task}"
    if task.kind == KIND_COMPACT and config.sampling_fraction is None:
        assert max(_cube_files(snap, task.paths).values()) >= 2, "a compaction must merge two blocks of a cube"
    if task.kind == KIND_BINPACK and not task.sort_columns:
        assert task.num_files >= 2


def optimize_until_done(snap: Any, planner: Planner, max_steps: int = 300) -> tuple[Any, list[MergeTask]]:
    """Plan, apply the best task, repeat until the plan is empty (the optimize loop, without Spark)."""
    ran: list[MergeTask] = []
    for _ in range(max_steps):
        plan = planner.plan(snap)
        for task in plan.tasks:
            _check_task(task, snap, planner.config)
        if plan.is_empty:
            return snap, ran
        task = plan.tasks[0]
        ran.append(task)
        snap = apply_task(snap, task)
    raise AssertionError(f"no fixed point after {max_steps} tasks: last {ran[-3:]}")


# --- every strategy, several shapes ----------------------------------------------------------------------

_SHAPES: dict[str, Callable[[], Any]] = {
    "appends-4": lambda: appended_qbeast(4),
    "appends-9-uneven": lambda: appended_qbeast(9, root_rows=7, inner_rows=11, leaf_rows=2),
    "appends+staging": lambda: appended_qbeast(3, with_staging=5),
    "converged": lambda: appended_qbeast(1),
    "drifting-revisions": lambda: drifting_qbeast(3),
}
_DELTA_SHAPES: dict[str, Callable[[], Any]] = {
    "overlap-12": lambda: overlapping_delta(12),
    "overlap-30-partitioned": lambda: overlapping_delta(30, width=95, partitions=3),
    "apart": lambda: overlapping_delta(8, width=5),
    "one-file": lambda: overlapping_delta(1),
}
# bytes-per-iter (task-max-bytes follows it): a file of appended_qbeast is 500-1000 B
_LIMITS = {"default": {}, "two-files": {"bytes_per_iter": 2100}, "below-two-files": {"bytes_per_iter": 1000},
           "tiered": {"tiering_ratio": 4.0, "tiering_root_max_fragments": 1}}  # fmt: skip

_QBEAST_CHAINS = [
    None,  # the default chain
    ["LeveledCompactionSelection"],
    ["CubeDefragmentation"],
    ["UnindexedFilesSelection"],
    ["BinPacking"],
    ["SmallFiles"],
    ["UnindexedFilesSelection", "CubeDefragmentation"],
    ["SupersededRevisionsSelection"],
    ["SupersededRevisionsSelection", "LeveledCompactionSelection"],
]
_DELTA_CHAINS = [None, ["BinPacking"], ["SmallFiles"], ["ClusterKeyOverlap"], ["ClusterKeyOverlap", "BinPacking"]]
_DELTA_CFG = {"overlap_cluster_key": "id", "small_files_count_threshold": 2, "max_file_size": 10_000}


@pytest.mark.parametrize("limit", sorted(_LIMITS))
@pytest.mark.parametrize("shape", sorted(_SHAPES))
@pytest.mark.parametrize("chain", _QBEAST_CHAINS, ids=lambda c: "default" if c is None else "+".join(c))
def test_qbeast_strategies_reach_a_fixed_point(chain, shape, limit) -> None:
    config = cfg(small_files_count_threshold=2, **_LIMITS[limit])
    snap, ran = optimize_until_done(_SHAPES[shape](), Planner(chain, config))
    assert Planner(chain, config).plan(snap).is_empty  # a second call commits nothing
    if shape == "converged":
        assert not ran
    if chain is None and shape == "drifting-revisions" or chain and chain[0] == "SupersededRevisionsSelection":
        # every older revision was folded into the latest (its space contains theirs)
        assert set(snap.files.column("revision_id").to_pylist()) <= {0, snap.latest_revision_id}
    if chain is None and shape.startswith("appends") and limit != "below-two-files":
        assert ran  # the default chain does find work on an appended table
        assert max(Counter(snap.blocks.column("cube_id").to_pylist()).values()) < 9  # and removes blocks


@pytest.mark.parametrize("limit", ["below-two-files", "default", "two-files"])
@pytest.mark.parametrize("shape", sorted(_DELTA_SHAPES))
@pytest.mark.parametrize("chain", _DELTA_CHAINS, ids=lambda c: "default" if c is None else "+".join(c))
def test_delta_strategies_reach_a_fixed_point(chain, shape, limit) -> None:
    limits = {"default": {}, "two-files": {"bytes_per_iter": 250}, "below-two-files": {"bytes_per_iter": 150}}
    config = cfg(**_DELTA_CFG, **limits[limit])
    snap, ran = optimize_until_done(_DELTA_SHAPES[shape](), Planner(chain, config))
    assert Planner(chain, config).plan(snap).is_empty
    if shape == "one-file" or limit == "below-two-files":
        assert not ran


def test_sampling_tasks_only_select_files_with_removable_overhead() -> None:
    """SamplingOverheadReduction's gain is read cost (the stand-in does not model separation, so its
    fixed point is checked on real tables): every planned task holds an overhead file."""
    from use.optimize.strategies.sampling import overhead_per_file

    snap = appended_qbeast(4)
    for f in (0.1, 0.3, 0.6):
        config = cfg(sampling_fraction=f, bytes_per_iter=2100)
        plan = Planner(["SamplingOverheadReduction"], config).plan(snap)
        is_overhead, _ = overhead_per_file(snap, 1, f)
        for task, rows in zip(plan.tasks, task_rows(snap, plan.tasks), strict=False):
            assert task.gain.read_cost > 0 and is_overhead[rows].any()
            assert task.num_files == 1 or task.bytes <= config.task_limit


# --- the repro, as metadata ------------------------------------------------------------------------


def test_cube_defragmentation_does_not_rewrite_one_file_alone() -> None:
    """Issue 15 §1: every cube of level 2 is in 4 files of ~59 KB, bytes-per-iter 100000: no two of
    them fit one task, and one file alone holds one block per cube. The old plan rewrote one file
    byte for byte on every call; now nothing is planned for them (the small root files still merge)."""
    snap = appended_qbeast(4, root_rows=700, inner_rows=2900, leaf_rows=0, bytes_per_row=20)
    config = cfg(bytes_per_iter=100_000)
    plan = Planner(["CubeDefragmentation"], config).plan(snap)
    assert [t.paths for t in plan.tasks] == [("a0-root", "a1-root", "a2-root", "a3-root")]
    snap = apply_task(snap, plan.tasks[0])
    for chain in (["CubeDefragmentation"], ["LeveledCompactionSelection"], None):
        assert Planner(chain, config).plan(snap).is_empty
    # with a limit that fits two of them, they merge pairwise, then the pairs (4 files of the cube
    # fit once the limit allows 240 KB)
    _, ran = optimize_until_done(snap, Planner(["CubeDefragmentation"], cfg(bytes_per_iter=240_000)))
    assert ran and all(t.num_files >= 2 and t.bytes <= 240_000 for t in ran)


# --- the guard ---------------------------------------------------------------------------------------------


def _task(paths, kind=KIND_COMPACT, size=10, rid=1, **kw) -> MergeTask:
    return MergeTask("T", rid, tuple(paths), size * len(paths), len(paths), 1.0, "test", kind, **kw)


def _blocks_snapshot():
    # a: root + A; b: root; c: A; d: B
    files = files_table(["a", "b", "c", "d"], [10] * 4, revisions=[1] * 4)
    blocks = [(0, 1, "", 0, MIN_W, MAX_W, 5), (0, 1, "A", 1, MIN_W, MAX_W, 5), (1, 1, "", 0, MIN_W, MAX_W, 5),
              (2, 1, "A", 1, MIN_W, MAX_W, 5), (3, 1, "B", 1, MIN_W, MAX_W, 5)]  # fmt: skip
    return qbeast_snapshot(files, blocks)


def test_redundant_blocks_counts_blocks_beyond_one_per_cube() -> None:
    snap = _blocks_snapshot()
    groups = [np.array([0, 1, 2]), np.array([0]), np.array([1, 3]), np.array([0, 2]), np.array([], np.int64)]
    assert redundant_blocks(snap, groups).tolist() == [2, 0, 0, 1, 0]


def test_the_guard_drops_tasks_that_gain_nothing_or_exceed_the_limit() -> None:
    snap = _blocks_snapshot()
    tasks = (
        _task(["a", "b"]),  # root twice: -1 block
        _task(["d"]),  # one file: nothing
        _task(["b", "d"]),  # disjoint cubes: nothing to merge
        _task(["a", "c"], size=60),  # A twice, but 120 B > task-max-bytes 100
    )
    plan = guard(Plan(tasks, "T", snap.version), snap, cfg(bytes_per_iter=100))
    assert [t.paths for t in plan.tasks] == [("a", "b")]
    assert plan.tasks[0].gain == Gain(blocks=1)
    # a one-shot plan (explicit files, revision rewrite) keeps what was asked for, within the limit
    plan = guard(Plan(tasks, "T", snap.version, one_shot=True), snap, cfg(bytes_per_iter=100))
    assert [t.paths for t in plan.tasks] == [("a", "b"), ("d",), ("b", "d")]


def test_gains_by_kind() -> None:
    staging = qbeast_snapshot(files_table(["s1", "s2", "s3"], [40, 60, 50], revisions=[0, 0, 0]),
                              [(0, 0, "", 0, MIN_W, MAX_W, 1), (1, 0, "", 0, MIN_W, MAX_W, 1),
                               (2, 0, "", 0, MIN_W, MAX_W, 1)])  # fmt: skip
    assert estimate(staging, [_task(["s1"], KIND_INDEX, rid=0)], CFG) == [Gain(read_cost=10.0)]
    bins = [_task(["s1", "s2", "s3"], KIND_BINPACK, rid=0), _task(["s1", "s2", "s3"], KIND_BINPACK, rid=0)]
    assert estimate(staging, bins, CFG)[0] == Gain(files=2)
    assert estimate(staging, bins, cfg(max_file_size=10)) == [Gain(), Gain()]  # 30 B in 3 files of 10 B
    # two files into one save each read one file open, which the commit's log file costs it again
    assert estimate(staging, [_task(["s1", "s2"], KIND_BINPACK, rid=0)], CFG) == [Gain()]
    overlap = overlapping_delta(3)
    sorted_task = _task(["f000", "f001"], KIND_BINPACK, rid=-1, sort_columns=("id",))
    apart = _task(["f000", "f002"], KIND_BINPACK, rid=-1, sort_columns=("id",))  # [0,30] and [20,50]: overlap
    far = overlapping_delta(3, width=5)
    [g1, g2] = estimate(overlap, [sorted_task, apart], cfg(max_file_size=10))
    assert g1.read_cost > 0 and g2.read_cost > 0 and g1.files == 0
    assert not estimate(far, [sorted_task], cfg(max_file_size=10))[0]  # [0,5] and [10,15] do not overlap


def test_a_strategy_left_with_nothing_hands_over_to_the_next_one() -> None:
    @registry.register("AlwaysOneFile")
    class AlwaysOneFile:
        applies_to_qbeast = True
        applies_to_delta = True

        def select(self, snapshot, config):
            path = snapshot.files.column("path")[0].as_py()
            return Plan((MergeTask("AlwaysOneFile", 1, (path,), 10, 1, 1.0, "one file", KIND_COMPACT),), "AlwaysOneFile",
                        snapshot.version)  # fmt: skip

    try:
        snap = _blocks_snapshot()
        assert Planner(["AlwaysOneFile"], CFG).plan(snap).is_empty
        plan = Planner(["AlwaysOneFile", "LeveledCompactionSelection"], CFG).plan(snap)
        assert plan.strategy == "LeveledCompactionSelection"
    finally:
        registry.unregister("AlwaysOneFile")


# --- §2: the per-task IO limit ----------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [600, 1000, 1300, 2100, 5000])
@pytest.mark.parametrize(
    "chain",
    [["LeveledCompactionSelection"], ["CubeDefragmentation"], ["BinPacking"], ["SmallFiles"],
     ["SamplingOverheadReduction"], ["UnindexedFilesSelection"]],
    ids=lambda c: c[0],
)  # fmt: skip
def test_no_task_of_several_files_exceeds_the_limit(chain, limit) -> None:
    snap = appended_qbeast(5, root_rows=13, with_staging=4)
    config = cfg(task_max_bytes=limit, bytes_per_iter=10 * limit, unindexed_batch_bytes=limit,
                 sampling_fraction=0.3, small_files_count_threshold=2)  # fmt: skip
    for _ in range(40):
        plan = Planner(chain, config).plan(snap)
        if plan.is_empty:
            break
        for task in plan.tasks:
            _check_task(task, snap, config)
        snap = apply_task(snap, plan.tasks[0])


def test_a_file_larger_than_the_limit_is_indexed_or_separated_alone_never_merged() -> None:
    snap = appended_qbeast(2, with_staging=2)  # staging files of 2000 B, inner files of 980 B
    # indexing: a staging file larger than batchBytes is indexed alone (it could never be otherwise)
    plan = Planner(["UnindexedFilesSelection"], cfg(unindexed_batch_bytes=500)).plan(snap)
    assert [t.num_files for t in plan.tasks] == [1] and plan.tasks[0].bytes == 2000
    # merging: files larger than the limit are left alone
    for chain in (["LeveledCompactionSelection"], ["CubeDefragmentation"], ["BinPacking"]):
        assert Planner(chain, cfg(task_max_bytes=500)).plan(snap).is_empty
    # sampling separation: an overhead file larger than the limit is a task alone
    plan = Planner(["SamplingOverheadReduction"], cfg(sampling_fraction=0.3, task_max_bytes=500)).plan(snap)
    assert plan.tasks and all(t.num_files == 1 and t.bytes > 500 for t in plan.tasks)


def test_overlap_skips_points_no_two_files_can_merge_within_the_limit() -> None:
    # f0 [0,30] (1000 B) overlaps f1 and f2 (100 B); f1+f2 fit 250 B: merged; f0 never (too big)
    files = files_table(["f0", "f1", "f2", "f3"], [1000, 100, 101, 102],
                        stats=[f'{{"numRecords":1,"minValues":{{"id":{lo}}},"maxValues":{{"id":{hi}}}}}'
                               for lo, hi in ((0, 30), (5, 12), (10, 20), (11, 19))])  # fmt: skip
    snap = delta_snapshot(files)
    config = cfg(overlap_cluster_key="id", task_max_bytes=250, overlap_depth_threshold=1)
    plan = Planner(["ClusterKeyOverlap"], config).plan(snap)
    assert [t.paths for t in plan.tasks] == [("f1", "f2")]
    assert Planner(["ClusterKeyOverlap"], cfg(overlap_cluster_key="id", task_max_bytes=150)).plan(snap).is_empty


# --- revision-rewrite is one-shot -------------------------------------------------------------------------


def _tagged(snap: Any, which: set[str]) -> Any:
    files = snap.files.to_pylist()
    for f in files:
        if f["path"] in which:
            f["tags"] = [(REVISION_REWRITE_TAG, "7")]
    return dataclasses.replace(snap, files=type(snap.files).from_pylist(files, schema=snap.files.schema))


@pytest.mark.parametrize("chain", [None, ["CubeDefragmentation"], ["SamplingOverheadReduction"]], ids=str)
def test_revision_rewrite_selects_nothing_once_every_file_was_written_by_one(chain) -> None:
    snap = appended_qbeast(2)
    config = cfg(revision_rewrite=True, sampling_fraction=0.3)
    paths = set(snap.files.column("path").to_pylist())
    plan = Planner(chain, config).plan(snap)
    assert plan.one_shot and set(plan.paths) == paths and all(t.revision_rewrite for t in plan.tasks)
    assert Planner(chain, config).plan(_tagged(snap, paths)).is_empty
    # one file written since (an append, another rewrite): the whole revision again
    assert set(Planner(chain, config).plan(_tagged(snap, paths - {"a1-A"})).paths) == paths


def test_revision_rewrite_of_a_plain_table_is_one_shot_too() -> None:
    snap = overlapping_delta(4)
    config = cfg(revision_rewrite=True)
    paths = set(snap.files.column("path").to_pylist())
    assert set(Planner(None, config).plan(snap).paths) == paths
    assert Planner(None, config).plan(_tagged(snap, paths)).is_empty
