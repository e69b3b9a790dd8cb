"""Merge tasks on real tables: rows preserved exactly, blocks/tags right, the event in the same commit,
no stray files when a task does not commit."""

from __future__ import annotations

import collections
import json
import os

import pyarrow.parquet as pq
import pytest

from optimize_support import (
    arrow_rows,
    commit_actions,
    deltars_rows,
    directory_state,
    expected_rows,
    fragmented_qbeast,
    plain_delta,
    staging_qbeast,
    table_rows,
)
from use import DeltaTable, QbeastTable
from use.delta import DeltaLog
from use.delta.storage import absolute_path
from use.optimize.config import OptimizationConfig
from use.optimize.events import EVENT_TAG, OptimizationEvent
from use.optimize.executor import run_task
from use.optimize.loop_core import CONVERGED
from use.optimize.planner import Planner
from use.optimize.task_metrics import COMMITTED
from use.qbeast.reader import load_snapshot, read
from use.qbeast.snapshot import QbeastSnapshot


def _blocks_per_cube(path: str, revision_id: int) -> collections.Counter:
    blocks = load_snapshot(path).blocks.to_pydict()
    return collections.Counter(c for c, r in zip(blocks["cube_id"], blocks["revision_id"], strict=False) if r == revision_id)


def _check_commit(path: str, version: int, revision_id: int | None) -> OptimizationEvent:
    """The commit is a dataChange=false rewrite whose event describes exactly its removes and adds."""
    actions = commit_actions(path, version)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    removes = [a["remove"] for a in actions if "remove" in a]
    adds = [a["add"] for a in actions if "add" in a]
    assert info["operation"] == "OPTIMIZE"
    assert info["operationMetrics"]["numRemovedFiles"] == str(len(removes))
    assert info["operationMetrics"]["numAddedFiles"] == str(len(adds))
    assert info["isolationLevel"] in ("SnapshotIsolation", "WriteSerializable")
    assert removes and adds and not any(a["dataChange"] for a in removes + adds)
    event = OptimizationEvent.from_json(info["tags"][EVENT_TAG])
    assert event.input_files_stats is not None and event.output_files_stats is not None
    assert sorted(event.input_files_stats.files) == sorted(r["path"] for r in removes)
    assert sorted(event.output_files_stats.files) == sorted(a["path"] for a in adds)
    assert event.input_files_stats.bytes == sum(r["size"] for r in removes)
    assert event.output_files_stats.bytes == sum(a["size"] for a in adds)
    assert event.input_files_stats.element_count == event.output_files_stats.element_count > 0
    assert event.output_files_stats.num_blocks >= len(adds)
    assert event.started_at <= event.finished_at and event.process_time_ms >= 0
    assert event.table_id == os.path.abspath(path)
    for add in adds:
        rows = pq.read_metadata(absolute_path(path, add["path"])).num_rows
        assert json.loads(add["stats"])["numRecords"] == rows
        if revision_id is not None:
            assert add["tags"]["revision"] == str(revision_id)
            blocks = json.loads(add["tags"]["blocks"])
            assert sum(b["elementCount"] for b in blocks) == rows
            assert all(list(b) == ["cubeId", "minWeight", "maxWeight", "elementCount"] for b in blocks)
            assert all(b["minWeight"] <= b["maxWeight"] for b in blocks)
    return event


def _sample_equals_filtered_read(spark, path: str, f: float) -> None:
    """Block metadata must not make the sampling reader drop rows: a sample equals the filtered full read."""
    from pyspark.sql import functions as F

    from use.qbeast.weight import weight_from_fraction

    full = read(spark, path).filter(F.hash("x", "y") < F.lit(int(weight_from_fraction(f)))).count()
    assert read(spark, path, sample=f).count() == full


def test_leveled_compaction_preserves_rows_reduces_blocks_and_records_events(spark, tmp_path) -> None:
    # Four appends of 200 rows (cube size 50): the root's blocks in the level-1 files total
    # 47+27+15+12 = 101 >= 10^2, so the seeds' level rule itself selects them.
    path = fragmented_qbeast(spark, str(tmp_path / "t"), appends=4)
    before = table_rows(spark, path)
    blocks_before = _blocks_per_cube(path, 1)
    assert blocks_before[""] == 4  # every append left a block in the root

    # the seeds' order (level rule first); with size tiers, the default, consolidation goes first
    result = QbeastTable.for_path(spark, path).optimize(**{"tiering.ratio": "0"})

    assert result.outcome == CONVERGED and result.committed
    assert result.committed[0].reason.startswith("level 1 cube '' (depth 0): 4 blocks, 101 elements >= 10^2")
    assert table_rows(spark, path) == before
    blocks_after = _blocks_per_cube(path, 1)
    assert blocks_after[""] == 1 and max(blocks_after.values()) < max(blocks_before.values())
    assert sum(blocks_after.values()) < sum(blocks_before.values())
    for m in result.committed:
        assert m.kind == "compact" and m.blocks_out < m.blocks_in and m.rows > 0
        event = _check_commit(path, m.version, revision_id=1)
        assert event.revision_id == 1 and event.optimization_name == m.strategy
        assert event.input_files_stats.num_blocks == m.blocks_in
    _sample_equals_filtered_read(spark, path, 0.3)
    # The events are readable back, one per committed rewrite, oldest first.
    events = QbeastTable.for_path(spark, path).optimizations().collect()
    assert [e["output_files_stats"]["num_files"] for e in events] == [m.files_out for m in result.committed]
    assert all(e["revision_id"] == 1 for e in events)


def test_inner_cube_consolidation_reaches_what_the_level_rule_cannot(spark, tmp_path) -> None:
    # Three appends: root blocks 47+27+15 = 89 < 10^2 at level 1, so no level group qualifies, but
    # the root is an inner cube spread over 3 files: the consolidation rule merges it.
    path = fragmented_qbeast(spark, str(tmp_path / "t"))
    before = table_rows(spark, path)
    blocks_before = _blocks_per_cube(path, 1)
    assert blocks_before[""] == 3
    untiered = OptimizationConfig(tiering_ratio=0)  # every fragmented inner cube into one file
    assert (
        Planner(None, untiered).plan(load_snapshot(path)).tasks[0].reason.startswith("consolidation: inner cube '' (depth 0, 89")
    )

    result = QbeastTable.for_path(spark, path).optimize(**{"tiering.ratio": "0"})

    assert result.outcome == CONVERGED and result.committed
    assert all(m.reason.startswith("consolidation") for m in result.committed)
    assert table_rows(spark, path) == before
    blocks_after = _blocks_per_cube(path, 1)
    # every inner cube (maxWeight below MaxValue) ends in exactly one file; nothing is selected any more
    from use.qbeast.weight import MAX_WEIGHT

    qsnap = load_snapshot(path)
    blocks = qsnap.blocks.to_pydict()
    inner = {c for c, w in zip(blocks["cube_id"], blocks["max_weight"], strict=False) if w < MAX_WEIGHT}
    assert inner and all(blocks_after[c] == 1 for c in inner)
    assert sum(blocks_after.values()) < sum(blocks_before.values())
    assert Planner(None, untiered).plan(qsnap).is_empty
    for m in result.committed:
        assert m.blocks_out < m.blocks_in
        _check_commit(path, m.version, revision_id=1)
    _sample_equals_filtered_read(spark, path, 0.3)


def test_sampling_overhead_reduction_separates_what_the_sample_skips(spark, tmp_path) -> None:
    """sample(0.1) of the three-append table reads files mixing the root and its children (which it
    needs) with grandchildren (all weights >= Weight(0.1)); the rewrite puts those apart, once."""
    from use.optimize.config import OptimizationConfig
    from use.optimize.strategies import SamplingOverheadReduction
    from use.qbeast.reader import plan_read

    path = fragmented_qbeast(spark, str(tmp_path / "t"))
    before = table_rows(spark, path)
    config = OptimizationConfig(sampling_fraction=0.1)
    assert SamplingOverheadReduction().select(load_snapshot(path), config) is not None
    sample_bytes = plan_read(spark, load_snapshot(path), sample=0.1).bytes

    result = QbeastTable.for_path(spark, path).optimize(strategy="SamplingOverheadReduction", sampling_fraction="0.1")

    assert result.committed and all(m.strategy == "SamplingOverheadReduction" for m in result.committed)
    assert table_rows(spark, path) == before
    qsnap = load_snapshot(path)
    assert SamplingOverheadReduction().select(qsnap, config) is None  # nothing a rewrite could still change
    assert plan_read(spark, qsnap, sample=0.1).bytes < sample_bytes
    for m in result.committed:
        _check_commit(path, m.version, revision_id=1)
    _sample_equals_filtered_read(spark, path, 0.1)


def test_unindexed_files_are_indexed_into_a_new_revision(spark, tmp_path) -> None:
    path = staging_qbeast(spark, str(tmp_path / "t"))
    expected = expected_rows([arrow_rows(i * 150, 150) for i in range(4)])
    assert set(load_snapshot(path).files.column("revision_id").to_pylist()) == {0}

    result = QbeastTable.for_path(spark, path).optimize()

    assert result.committed and all(m.kind == "index" for m in result.committed)
    assert {m.revision_id for m in result.committed} == {1}  # the revision written into, as the event says
    qsnap = load_snapshot(path)
    assert set(qsnap.files.column("revision_id").to_pylist()) == {1}
    assert table_rows(spark, path) == expected
    version = result.committed[0].version
    metadata = [a["metaData"] for a in commit_actions(path, version) if "metaData" in a]
    assert metadata and "qbeast.revision.1" in metadata[0]["configuration"]  # new revision in the same commit
    event = _check_commit(path, version, revision_id=1)
    assert event.revision_id == 1 and event.input_files_stats.num_blocks == 4  # one root block per staging file


def test_a_failed_commit_deletes_the_written_files(spark, tmp_path, monkeypatch) -> None:
    path = plain_delta(str(tmp_path / "t"))
    before = directory_state(path)
    log = DeltaLog.for_path(path)
    snap = log.snapshot()
    qsnap = QbeastSnapshot.from_delta(snap)
    planner = Planner()
    task = planner.plan(qsnap).tasks[0]

    from use.delta.transaction import Transaction

    def broken_commit(self, *args, **kwargs):
        raise OSError("disk full while writing the commit")

    monkeypatch.setattr(Transaction, "commit", broken_commit)
    with pytest.raises(OSError, match="disk full"):
        run_task(spark, log, snap, qsnap, task, planner.config)
    assert directory_state(path) == before  # no stray data files, no commit


def test_a_merge_task_commits_against_the_snapshot_it_was_planned_on(spark, tmp_path) -> None:
    """A task planned before a concurrent append still commits (rebased), and the append survives."""
    from deltalake import write_deltalake

    path = plain_delta(str(tmp_path / "t"))
    expected = deltars_rows(path)
    log = DeltaLog.for_path(path)
    snap = log.snapshot()
    qsnap = QbeastSnapshot.from_delta(snap)
    planner = Planner()
    task = planner.plan(qsnap).tasks[0]
    extra = arrow_rows(10_000, 20, ("s0", "s1", "s2"))
    write_deltalake(path, extra, mode="append", partition_by=["s"])

    metrics = run_task(spark, log, snap, qsnap, task, planner.config)

    assert metrics.status == COMMITTED and metrics.version == snap.version + 2
    assert metrics.files_out < metrics.files_in and metrics.rows > 0
    expected.update(expected_rows([extra]))
    assert deltars_rows(path) == expected
    live = set(log.snapshot().files.column("path").to_pylist())
    assert not (set(task.paths) & live)


def test_a_rewrite_that_loses_rows_is_never_committed(spark, tmp_path, monkeypatch) -> None:
    from use.errors import RowCountMismatchError
    from use.optimize import executor

    path = plain_delta(str(tmp_path / "t"))
    before = directory_state(path)
    real_rewrite = executor._rewrite

    def lossy_rewrite(spark, df, qsnap, task, config, *rest):  # a bug that drops a row while rewriting
        return real_rewrite(spark, df.filter("id % 2 = 0"), qsnap, task, config, *rest)

    monkeypatch.setattr(executor, "_rewrite", lossy_rewrite)
    with pytest.raises(RowCountMismatchError, match="rows from"):
        DeltaTable.for_path(spark, path).optimize()
    assert directory_state(path) == before
