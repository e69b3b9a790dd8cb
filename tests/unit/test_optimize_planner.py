"""The planner chain: order, fallbacks, explicit selections, and plugging in a strategy by name."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import pytest

from _optimize_snapshots import MAX_W, MIN_W, delta_snapshot, files_table, qbeast_snapshot
from use.errors import ConfigError, InvalidArgumentError, UnknownStrategyError
from use.optimize.config import OptimizationConfig
from use.optimize.plan import KIND_BINPACK, KIND_COMPACT, KIND_INDEX, MergeTask, Plan
from use.optimize.planner import Planner, default_chain
from use.optimize.strategies import registry

CFG = OptimizationConfig()


def cfg(**kw: Any) -> OptimizationConfig:
    return dataclasses.replace(CFG, **kw)


def _table(with_staging: bool = True, fragmented: bool = True):
    """Revision 1 with a fragmented root cube (files a, b) and optionally two staging files."""
    paths = ["a", "b", "c"] + (["s1", "s2"] if with_staging else [])
    revs = [1, 1, 1] + ([0, 0] if with_staging else [])
    files = files_table(paths, [10, 20, 30] + ([5, 6] if with_staging else []), mtimes=list(range(len(paths))), revisions=revs)
    ec = 5 if fragmented else 1
    blocks = [(0, 1, "", 0, MIN_W, MAX_W, ec), (1, 1, "", 0, MIN_W, MAX_W, ec), (2, 1, "A", 1, MIN_W, MAX_W, 1)]
    blocks += [(i, 0, "", 0, MIN_W, MAX_W, 1) for i in range(3, len(paths))]
    return qbeast_snapshot(files, blocks)


def test_default_chain_qbeast_prioritizes_unindexed_files() -> None:
    snap = _table()
    assert default_chain(snap, CFG) == ("UnindexedFilesSelection", "LeveledCompactionSelection")
    plan = Planner(None, CFG).plan(snap)
    assert plan.strategy == "UnindexedFilesSelection" and plan.tasks[0].kind == KIND_INDEX
    assert plan.tasks[0].paths == ("s1", "s2")
    # once no staging files remain, leveled compaction of the latest revision runs
    plan = Planner(None, CFG).plan(_table(with_staging=False))
    assert plan.strategy == "LeveledCompactionSelection" and plan.tasks[0].paths == ("a", "b")


def test_default_chain_variants() -> None:
    snap = _table()
    assert default_chain(snap, cfg(optimize_unindexed_prioritize=False)) == (
        "LeveledCompactionSelection",
        "UnindexedFilesSelection",
    )
    assert Planner(None, cfg(optimize_unindexed_prioritize=False)).plan(snap).strategy == "LeveledCompactionSelection"
    assert default_chain(snap, cfg(optimize_unindexed_enabled=False)) == ("LeveledCompactionSelection",)
    assert default_chain(snap, cfg(revision_id=0)) == ("UnindexedFilesSelection",)
    assert default_chain(snap, cfg(auto_optimize_revision_id=0, optimize_unindexed_enabled=False)) == ()
    assert default_chain(snap, cfg(type="CubeDefragmentation")) == ("UnindexedFilesSelection", "CubeDefragmentation")
    assert default_chain(snap, cfg(revision_rewrite=True)) == ("LeveledCompactionSelection",)
    plain = delta_snapshot(files_table(["x", "y"], [1, 2]))
    assert default_chain(plain, CFG) == ("BinPacking", "SmallFiles")
    assert default_chain(plain, cfg(type="LeveledCompactionSelection")) == ("BinPacking", "SmallFiles")
    assert default_chain(plain, cfg(type="SmallFiles")) == ("SmallFiles",)


def test_not_prioritized_unindexed_runs_when_leveled_has_nothing() -> None:
    snap = _table(fragmented=False)
    plan = Planner(None, cfg(optimize_unindexed_prioritize=False)).plan(snap)
    assert plan.strategy == "UnindexedFilesSelection"


def test_first_strategy_with_work_wins_and_empty_plan_when_none() -> None:
    snap = _table(with_staging=False, fragmented=False)
    plan = Planner(["SmallFiles", "LeveledCompaction", "CubeDefragmentation"], CFG).plan(snap)
    assert plan.is_empty and not plan and plan.strategy == "SmallFiles,LeveledCompactionSelection,CubeDefragmentation"
    assert "nothing to optimize" in plan.render()
    plan = Planner(["UnindexedFilesSelection", "LeveledCompaction"], CFG).plan(_table(with_staging=False))
    assert plan.strategy == "LeveledCompactionSelection"


def test_plain_delta_fallback_bin_packing_then_small_files() -> None:
    files = files_table(["a", "b", "c"], [1, 2, 3], partitions=[{"p": "1"}, {"p": "2"}, {"p": "3"}])
    snap = delta_snapshot(files)
    # one file per partition: nothing to bin-pack; SmallFiles counts small files table-wide but cannot
    # merge across partitions either -> empty plan
    assert Planner(None, cfg(small_files_count_threshold=2)).plan(snap).is_empty
    files = files_table(["a", "b", "c"], [1, 2, 3])
    snap = delta_snapshot(files)
    assert Planner(None, CFG).plan(snap).strategy == "BinPacking"
    # bin packing disabled by a tiny min-file-size: small files take over
    plan = Planner(None, cfg(min_file_size=1, small_files_count_threshold=3)).plan(snap)
    assert plan.strategy == "SmallFiles" and plan.tasks[0].paths == ("a", "b", "c")
    assert plan.tasks[0].kind == KIND_BINPACK and plan.tasks[0].revision_id == -1


def test_strategies_from_config() -> None:
    snap = _table()
    c = OptimizationConfig.from_properties({"use.optimization.strategies": "LeveledCompaction,UnindexedFiles"})
    assert Planner(None, c).chain(snap) == ("LeveledCompactionSelection", "UnindexedFilesSelection")
    assert Planner(None, c).plan(snap).strategy == "LeveledCompactionSelection"
    # an explicit chain wins over the configured one
    assert Planner(["BinPacking"], c).chain(snap) == ("BinPacking",)


def test_unknown_or_empty_chain() -> None:
    with pytest.raises(UnknownStrategyError, match=r"'Nope'.*known strategies: BinPacking"):
        Planner(["BinPacking", "Nope"], CFG)
    with pytest.raises(InvalidArgumentError, match="empty"):
        Planner([], CFG)


def test_explicit_files() -> None:
    snap = _table()
    plan = Planner(None, CFG).plan(snap, files=["c", "s2", "/tmp/synthetic/a"])
    assert plan.one_shot and plan.strategy == "ExplicitFiles"
    by_rev = {t.revision_id: t for t in plan.tasks}
    assert by_rev[1].paths == ("a", "c") and by_rev[1].kind == KIND_COMPACT
    assert by_rev[0].paths == ("s2",) and by_rev[0].kind == KIND_INDEX
    with pytest.raises(InvalidArgumentError, match=r"2 of the given files are not live.*gone\.parquet, x/y"):
        Planner(None, CFG).plan(snap, files=["a", "gone.parquet", "x/y"])
    with pytest.raises(InvalidArgumentError, match="not in revision 1: s2"):
        Planner(None, CFG).plan(snap, files=["a", "s2"], revision_id=1)
    with pytest.raises(InvalidArgumentError, match="empty"):
        Planner(None, CFG).plan(snap, files=[])


def test_explicit_files_url_encoded_and_plain_delta() -> None:
    files = files_table(["d=a%20b/f1.parquet", "d=a%20b/f2.parquet"], [1, 2], partitions=[{"d": "a b"}] * 2)
    snap = delta_snapshot(files)
    plan = Planner(None, CFG).plan(snap, files=["d=a b/f1.parquet", "d=a%20b/f2.parquet"])
    assert plan.tasks[0].paths == ("d=a%20b/f1.parquet", "d=a%20b/f2.parquet")
    assert plan.tasks[0].partition_dict == {"d": "a b"} and plan.tasks[0].kind == KIND_BINPACK


def test_revision_selection() -> None:
    files = files_table(["r1a", "r1b", "r2a", "r2b"], [1] * 4, revisions=[1, 1, 2, 2])
    blocks = [(i, r, "", 0, MIN_W, MAX_W, 5) for i, r in enumerate([1, 1, 2, 2])]
    snap = qbeast_snapshot(files, blocks, revision_ids=(1, 2))
    # revision 2 contains revision 1 (same space): the default chain folds revision 1 into it first
    first = Planner(None, CFG).plan(snap).tasks[0]
    assert (first.paths, first.kind, first.strategy) == (("r1a", "r1b"), KIND_INDEX, "SupersededRevisionsSelection")
    assert Planner(["LeveledCompactionSelection"], CFG).plan(snap).tasks[0].paths == ("r2a", "r2b")
    assert Planner(None, CFG).plan(snap, revision_id=1).tasks[0].paths == ("r1a", "r1b")
    with pytest.raises(
        InvalidArgumentError, match=r"revision_id=5: the table has no such revision; its revisions are \[0, 1, 2\]"
    ):
        Planner(None, CFG).plan(snap, revision_id=5)
    with pytest.raises(ConfigError, match=r"use.optimization.revision-id=9"):
        Planner(None, cfg(revision_id=9)).plan(snap)
    with pytest.raises(ConfigError, match=r"use.optimization.autoOptimize.revisionId=9"):
        Planner(None, cfg(auto_optimize_revision_id=9)).plan(snap)
    with pytest.raises(InvalidArgumentError, match="plain Delta table"):
        Planner(None, CFG).plan(delta_snapshot(files_table(["x"], [1])), revision_id=1)
    with pytest.raises(InvalidArgumentError, match="integer"):
        Planner(None, CFG).plan(snap, revision_id="1")  # type: ignore[arg-type]


def test_registry_plug_in_without_touching_the_planner() -> None:
    @registry.register("EveryOtherFile", "EveryOther")
    class EveryOtherFile:
        name: ClassVar[str]
        applies_to_qbeast: ClassVar[bool] = True
        applies_to_delta: ClassVar[bool] = True

        def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
            paths = tuple(snapshot.files.column("path").to_pylist()[::2])
            task = MergeTask(self.name, -1, paths, 0, len(paths), 0.0, "test", KIND_BINPACK)
            return Plan((task,), self.name, snapshot.version)

    try:
        assert "EveryOtherFile" in registry.names()
        snap = delta_snapshot(files_table(["a", "b", "c", "d", "e"], [10**10] * 5))
        plan = Planner(["everyother"], CFG).plan(snap)
        assert plan.strategy == "EveryOtherFile" and plan.tasks[0].paths == ("a", "c", "e")
        # the config accepts it as use.optimization.type, and the default chain uses it
        c = OptimizationConfig.from_properties({"use.optimization.type": "EveryOtherFile"})
        assert Planner(None, c).plan(snap).strategy == "EveryOtherFile"
        with pytest.raises(InvalidArgumentError, match="already registered"):
            registry.register("everyotherfile")(type("Dup", (), {"select": lambda self, s, c: None}))
    finally:
        registry.unregister("EveryOtherFile")
    assert "EveryOtherFile" not in registry.names()
    with pytest.raises(UnknownStrategyError):
        registry.get("EveryOther")
