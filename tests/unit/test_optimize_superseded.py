"""SupersededRevisionsSelection (issue 14 §1): older revisions the latest contains are re-indexed into it."""

from __future__ import annotations

import dataclasses
from typing import Any

from _optimize_snapshots import drifting_qbeast, revision
from use.optimize.config import OptimizationConfig
from use.optimize.gain import guard
from use.optimize.plan import KIND_INDEX
from use.optimize.planner import Planner, default_chain
from use.optimize.strategies import registry
from use.qbeast.transform import HashTransformation, LinearTransformation
from use.qbeast.transformers import HashTransformer

CFG = OptimizationConfig()
SEL = registry.get("SupersededRevisions")


def cfg(**kw: Any) -> OptimizationConfig:
    return dataclasses.replace(CFG, **kw)


def _with_range(snap: Any, rid: int, lo: int, hi: int) -> Any:
    rev = dataclasses.replace(revision(rid), transformations=(LinearTransformation(lo, hi, lo, "IntegerDataType"),))
    return dataclasses.replace(snap, revisions={**snap.revisions, rid: rev})


def test_revision_contains_checks_every_column_range_and_transformer() -> None:
    wide = dataclasses.replace(revision(3), transformations=(LinearTransformation(-10, 2000, 0, "IntegerDataType"),))
    assert wide.contains(revision(1)) and revision(1).contains(revision(2))
    assert not revision(1).contains(wide)
    hashed = dataclasses.replace(
        revision(2), column_transformers=(HashTransformer("x", "IntegerDataType"),), transformations=(HashTransformation(0),)
    )
    assert not hashed.contains(revision(1)) and not revision(1).contains(hashed)


def test_older_revisions_are_reindexed_oldest_first_within_the_index_limit() -> None:
    snap = drifting_qbeast(3)
    plan = guard(SEL.select(snap, CFG), snap, CFG)
    assert [t.kind for t in plan.tasks] == [KIND_INDEX]
    t = plan.tasks[0]
    assert t.paths == ("r1-a0", "r1-a1", "r2-a0", "r2-a1") and t.revision_id == 1
    assert t.gain and t.gain.read_cost == t.bytes and t.score == CFG.open_file_cost * 4 / t.bytes
    # batchBytes of two files: one task per two files, up to bytes-per-iter (at least one task)
    small = cfg(unindexed_batch_bytes=1250, bytes_per_iter=2600)
    assert [x.paths for x in SEL.select(snap, small).tasks] == [("r1-a0", "r1-a1"), ("r2-a0", "r2-a1")]
    assert [x.paths for x in SEL.select(snap, cfg(unindexed_batch_bytes=1250, bytes_per_iter=100)).tasks] == [("r1-a0", "r1-a1")]


def test_a_revision_the_latest_does_not_contain_is_left_alone() -> None:
    snap = _with_range(drifting_qbeast(3), 3, 0, 500)  # narrower than revisions 1 and 2: not contained
    assert SEL.select(snap, CFG) is None
    assert "SupersededRevisionsSelection" not in default_chain(snap, CFG)
    snap = _with_range(_with_range(drifting_qbeast(3), 1, 0, 400), 3, 0, 500)  # contains 1 only
    assert SEL.select(snap, CFG).tasks[0].paths == ("r1-a0", "r1-a1")


def test_default_chain_folds_older_revisions_before_compacting_the_latest() -> None:
    snap = drifting_qbeast(3)
    assert default_chain(snap, CFG) == ("UnindexedFilesSelection", "SupersededRevisionsSelection", "LeveledCompactionSelection")
    assert default_chain(drifting_qbeast(1), CFG) == ("UnindexedFilesSelection", "LeveledCompactionSelection")
    # a targeted revision or a revision rewrite is that revision's work only
    assert SEL.select(snap, cfg(revision_id=1)) is None and SEL.select(snap, cfg(revision_rewrite=True)) is None
    assert Planner(None, CFG).plan(snap).strategy == "SupersededRevisionsSelection"
    assert Planner(None, CFG).plan(snap, revision_id=3).strategy != "SupersededRevisionsSelection"
