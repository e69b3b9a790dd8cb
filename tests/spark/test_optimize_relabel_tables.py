"""Superseded revisions moved into the latest by their tags on a real table (`use.qbeast.relabel`):
nothing is rewritten, every read answers as before, delta-rs reads the same rows, a file holding a
row at the old maximum is re-indexed instead, and a concurrent remove abandons the move."""

from __future__ import annotations

from typing import Any

import pytest

from optimize_support import deltars_rows, table_rows
from use.delta import DeltaLog
from use.delta.actions import remove_actions
from use.delta.transaction import Transaction
from use.optimize.executor import run_task
from use.optimize.loop import optimize_path
from use.optimize.loop_core import CONVERGED
from use.optimize.plan import KIND_RELABEL
from use.optimize.planner import Planner
from use.optimize.request import OptimizeRequest
from use.optimize.task_metrics import ABANDONED, COMMITTED
from use.qbeast.reader import load_snapshot
from use.qbeast.relabel import alignment


def _append(spark: Any, path: str, seed: int, lo: int, hi: int, start: int, rows: int = 300, exact_max: bool = False) -> None:
    """Long x in [lo, hi] (both ends present), y in [20, 80) (never near y's edges, so y never widens)."""
    from pyspark.sql import functions as F

    from use import QbeastTable

    x = (F.lit(lo) + F.floor(F.rand(seed) * (hi - lo))).cast("long")
    df = spark.range(start, start + rows).select(
        F.col("id"),
        F.when(F.col("id") == start, F.lit(lo).cast("long"))
        .when(F.col("id") == start + 1, F.lit(hi).cast("long"))
        .otherwise(x)
        .alias("x"),
        (F.lit(20.0) + F.rand(seed + 99) * 60).alias("y"),
        F.lit("s").alias("s"),
    )
    if not exact_max:
        df = df.filter(F.col("x") < hi).union(df.filter(F.col("x") == hi).withColumn("x", F.lit(hi - 1).cast("long")))
    QbeastTable.write(df, path, ["x", "y"], cube_size=50)


def _drifted(spark: Any, path: str, edge_file: bool = False) -> None:
    """rev1 [0, 100]; rev2 [0, M] (the first widening, by the margin or the distance moved); a file
    of rev2 holding x = M when `edge_file`; rev3 [0, 4 M]: M grown 4 times (the second widening
    upward, a power of two from the same minimum)."""
    _append(spark, path, 1, 0, 100, 0, exact_max=True)
    _append(spark, path, 2, 50, 120, 1000)
    if edge_file:
        top = int(load_snapshot(path).revisions[2].transformations[0].max_number)
        _append(spark, path, 3, top - 10, top, 2000, rows=60, exact_max=True)
    _append(spark, path, 4, 100, 200, 3000)


def test_a_revision_grown_by_a_power_of_two_moves_by_its_tags_and_reads_are_unchanged(spark, tmp_path) -> None:
    from use import QbeastTable

    path = str(tmp_path / "t")
    _drifted(spark, path)
    before = load_snapshot(path)
    revs = {r: (t.transformations[0].min_number, t.transformations[0].max_number) for r, t in before.revisions.items() if r}
    assert sorted(revs) == [1, 2, 3] and revs[1] == (0, 100) and revs[3] == (0, 4 * revs[2][1]), revs
    assert alignment(before.revisions[2], before.revisions[3]).shifts == (2, 0)
    assert alignment(before.revisions[1], before.revisions[3]) is None  # rev1 is re-indexed
    rev2_paths = set(before.files.filter(before.files.column("revision_id").to_numpy() == 2).column("path").to_pylist())
    rows = table_rows(spark, path)
    reference = str(tmp_path / "once")
    QbeastTable.write(spark.read.format("qbeast").load(path), reference, ["x", "y"], cube_size=50)

    result = optimize_path(spark, OptimizeRequest(path, max_iterations=40))
    assert result.outcome == CONVERGED
    moved = [m for m in result.committed if m.kind == KIND_RELABEL]
    assert len(moved) == 1 and moved[0].files_in == len(rev2_paths) and moved[0].bytes_in == moved[0].bytes_out == 0
    assert moved[0].revision_id == 3
    after = load_snapshot(path)
    assert set(after.files.column("revision_id").to_pylist()) == {3}
    history = DeltaLog.for_path(path).history()
    relabel_commit = next(h for h in history if h.parameters.get("kind") == KIND_RELABEL)
    assert relabel_commit.metrics["numRemovedFiles"] == "0"
    assert table_rows(spark, path) == rows and deltars_rows(path) == rows
    ours, once = QbeastTable.for_path(spark, path), QbeastTable.for_path(spark, reference)
    for f in (0.02, 0.2, 0.7):
        assert sorted(r.id for r in ours.read(sample=f).collect()) == sorted(r.id for r in once.read(sample=f).collect()), f
    for cond in ("x >= 139 AND x < 141", "x = 100", "x >= 60 AND x < 70 AND y < 40", "x > 190"):
        assert sorted(r.id for r in ours.read(filter=cond).collect()) == sorted(r.id for r in once.read(filter=cond).collect()), (
            cond
        )
        assert sorted(r.id for r in ours.read(sample=0.3, filter=cond).collect()) == sorted(
            r.id for r in once.read(sample=0.3, filter=cond).collect()
        ), cond


def test_a_file_holding_the_old_maximum_is_reindexed_and_not_moved(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _drifted(spark, path, edge_file=True)
    qsnap = load_snapshot(path)
    files = qsnap.files
    rev2 = files.filter(files.column("revision_id").to_numpy() == 2)
    assert rev2.num_rows >= 2
    plan = Planner().plan(qsnap)
    by_kind = {t.kind: set(t.paths) for t in plan.tasks}
    assert KIND_RELABEL in by_kind and "index" in by_kind
    # the edge file (ids from 2000, x up to 140 = rev2's maximum) goes to the re-index with rev1's files
    edge = {p for p in rev2.column("path").to_pylist() if p not in by_kind[KIND_RELABEL]}
    assert edge and edge <= by_kind["index"]
    rows = table_rows(spark, path)
    assert optimize_path(spark, OptimizeRequest(path, max_iterations=40)).outcome == CONVERGED
    assert table_rows(spark, path) == rows and deltars_rows(path) == rows


def test_a_concurrent_remove_of_a_file_to_move_abandons_the_move(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _drifted(spark, path)
    log = DeltaLog.for_path(path)
    snap = log.snapshot()
    qsnap = load_snapshot(path)
    planner = Planner()
    task = next(t for t in planner.plan(qsnap).tasks if t.kind == KIND_RELABEL)
    # a concurrent DELETE removes one of the files the move is about to re-add
    files = snap.files
    row = files.column("path").to_pylist().index(task.paths[0])
    txn = Transaction(log, log.snapshot())
    txn.add(*remove_actions(files.slice(row, 1), data_change=True))
    deleted = txn.commit("DELETE", {"predicate": "[]"})
    rows = deltars_rows(path)

    m = run_task(spark, log, snap, qsnap, task, planner.config)
    assert m.status == ABANDONED and m.version is None and m.error == "ConcurrentDeleteReadError"
    assert log.snapshot().version == deleted  # nothing committed: the removed file did not come back
    assert task.paths[0] not in log.snapshot().files.column("path").to_pylist()
    assert deltars_rows(path) == rows
    # planned again, the move goes through
    qsnap = load_snapshot(path)
    task = next(t for t in planner.plan(qsnap).tasks if t.kind == KIND_RELABEL)
    assert run_task(spark, log, log.snapshot(), qsnap, task, planner.config).status == COMMITTED
    assert deltars_rows(path) == rows


def test_drifting_timestamps_move_by_their_tags_and_time_ranges_read_the_same_rows(spark, tmp_path) -> None:
    """Timestamps are the commonest drift: each day of events a little past the last."""
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from use import QbeastTable

    path, reference = str(tmp_path / "t"), str(tmp_path / "once")
    day = 86_400
    for k in range(6):  # day k's events span [k/2, k/2 + 1) days from the start
        df = spark.range(k * 300, (k + 1) * 300).select(
            F.col("id"),
            F.timestamp_seconds(F.lit(1_700_000_000 + k * day // 2) + F.floor(F.rand(k) * day)).alias("ts"),
            (F.rand(50 + k) * 60 + 20).alias("y"),
        )
        QbeastTable.write(df, path, ["ts", "y"], cube_size=50)
    qsnap = load_snapshot(path)
    revs = [qsnap.revisions[r] for r in sorted(qsnap.revisions) if r]
    assert any(alignment(a, b) is not None for a, b in zip(revs, revs[1:], strict=False)), [r.transformations[0] for r in revs]
    QbeastTable.write(spark.read.format("qbeast").load(path), reference, ["ts", "y"], cube_size=50)

    result = optimize_path(spark, OptimizeRequest(path, max_iterations=40))
    assert result.outcome == CONVERGED and any(m.kind == KIND_RELABEL for m in result.committed)
    ours, once = QbeastTable.for_path(spark, path), QbeastTable.for_path(spark, reference)
    for cond in (None, "ts >= timestamp'2023-11-15 12:00:00' AND ts < timestamp'2023-11-16 06:00:00'",
                 "ts > timestamp'2023-11-16 20:00:00'", "ts < timestamp'2023-11-15 00:00:00' AND y > 50"):  # fmt: skip
        for f in (None, 0.1, 0.5):
            got = sorted(r.id for r in ours.read(sample=f, filter=cond).select("id").collect())
            assert got == sorted(r.id for r in once.read(sample=f, filter=cond).select("id").collect()), (cond, f)
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == list(range(1800))


def test_a_relabel_task_of_a_revision_that_does_not_align_is_refused_and_nothing_changes(spark, tmp_path) -> None:
    import dataclasses

    from optimize_support import directory_state
    from use.errors import InvalidArgumentError

    path = str(tmp_path / "t")
    _drifted(spark, path)
    log = DeltaLog.for_path(path)
    qsnap = load_snapshot(path)
    planner = Planner()
    task = next(t for t in planner.plan(qsnap).tasks if t.kind == KIND_RELABEL)
    # rev1's files ([0, 100] -> [0, 4 M] is no power of two): they must be re-indexed, not moved
    rev1 = qsnap.files.filter(qsnap.files.column("revision_id").to_numpy() == 1).column("path").to_pylist()
    bad = dataclasses.replace(task, revision_id=1, paths=tuple(rev1), num_files=len(rev1))
    before = directory_state(path)
    with pytest.raises(InvalidArgumentError, match="re-index them"):
        run_task(spark, log, log.snapshot(), qsnap, bad, planner.config)
    assert directory_state(path) == before  # no file deleted, no commit
