"""Optimization racing writers: the writer always wins, no row is lost or duplicated.

* Appends (delta-rs and the Qbeast writer, in threads) run while the optimize loop rewrites the
  table: every append lands, the loop never fails because of them, and at least one optimization
  commit is rebased over concurrent appends (so the race really happened).
* A file being rewritten is removed concurrently: the task is abandoned, its written files are
  deleted, and the loop re-plans from a fresh snapshot.
"""

from __future__ import annotations

import collections
import threading

from optimize_support import (
    CUBE_SIZE,
    arrow_rows,
    data_files,
    deltars_rows,
    fragmented_qbeast,
    plain_delta,
    rows_df,
    table_rows,
)
from use import QbeastTable
from use.delta import DeltaLog
from use.delta.actions import remove_actions
from use.delta.transaction import Transaction
from use.optimize.executor import run_task
from use.optimize.loop_core import CONVERGED, run_loop
from use.optimize.planner import Planner
from use.optimize.task_metrics import ABANDONED, COMMITTED
from use.qbeast.snapshot import QbeastSnapshot


def test_appends_during_optimization_all_land_and_nothing_fails(spark, tmp_path, monkeypatch) -> None:
    from deltalake import write_deltalake

    path = fragmented_qbeast(spark, str(tmp_path / "t"))
    expected = table_rows(spark, path)
    optimizing = threading.Event()  # set when the first merge task starts planning
    finished = threading.Event()
    errors: list[BaseException] = []
    appended: list = []

    def deltars_appender() -> None:
        try:
            optimizing.wait(timeout=120)
            for i in range(6):
                batch = arrow_rows(100_000 + i * 50, 50)
                write_deltalake(path, batch, mode="append")
                appended.append(batch)
                finished.wait(timeout=0.2)  # pace the appends across the optimization
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    def spark_appender() -> None:
        try:
            optimizing.wait(timeout=120)
            QbeastTable.write(rows_df(spark, 200_000, 120), path, ["x", "y"], cube_size=CUBE_SIZE)
            appended.append(("spark", 200_000, 120))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=deltars_appender), threading.Thread(target=spark_appender)]
    for t in threads:
        t.start()
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    original_plan = Planner.plan

    def plan_and_signal(self, snapshot, **kwargs):
        optimizing.set()  # the appenders start once the optimization has read its first snapshot
        return original_plan(self, snapshot, **kwargs)

    monkeypatch.setattr(Planner, "plan", plan_and_signal)
    try:
        result = optimize_path(spark, OptimizeRequest(path, max_iterations=12))
    finally:
        monkeypatch.undo()
        finished.set()
        for t in threads:
            t.join(timeout=300)
    assert not errors, errors
    assert len(appended) == 7
    # The loop was not failed by the appends: it converged; a task that lost a race (e.g. to a commit
    # that changed the metadata) was abandoned and re-planned, never raised.
    assert result.outcome == CONVERGED and result.committed
    assert all(m.status == COMMITTED or m.error in ("MetadataChangedError",) for m in result.iterations)
    # The race happened: some optimization commit landed after commits it had not read.
    assert any(m.version > m.read_version + 1 for m in result.committed)

    for batch in appended:
        if isinstance(batch, tuple):
            _, start, n = batch
            expected.update(tuple(r) for r in rows_df(spark, start, n).select("id", "x", "y", "s").collect())
        else:
            expected.update(zip(*(batch.column(c).to_pylist() for c in ("id", "x", "y", "s")), strict=False))
    assert table_rows(spark, path) == expected
    # Whatever the appends left unoptimized, a later run finishes without losing anything.
    assert QbeastTable.for_path(spark, path).optimize(max_iterations=4).outcome in (CONVERGED, "max_iterations")
    assert table_rows(spark, path) == expected


def test_a_concurrently_removed_input_abandons_the_task_and_the_loop_replans(spark, tmp_path) -> None:
    path = plain_delta(str(tmp_path / "t"))
    log = DeltaLog.for_path(path)
    planner = Planner()
    on_disk = data_files(path)
    victims: list[str] = []
    rows_after_delete: collections.Counter = collections.Counter()

    def snapshot_fn():
        snap = log.snapshot()
        return snap, QbeastSnapshot.from_delta(snap)

    def plan_fn(state):
        return planner.plan(state[1])

    def execute_fn(task, state):
        snap, qsnap = state
        if not victims:
            # A user's DELETE removes one of the files this task is about to rewrite.
            files = snap.files
            row = files.column("path").to_pylist().index(task.paths[0])
            txn = Transaction(log, log.snapshot())
            txn.add(*remove_actions(files.slice(row, 1), data_change=True))
            txn.commit("DELETE", {"predicate": "[]"})
            victims.append(task.paths[0])
            rows_after_delete.update(deltars_rows(path))
        return run_task(spark, log, snap, qsnap, task, planner.config)

    result = run_loop(snapshot_fn=snapshot_fn, plan_fn=plan_fn, execute_fn=execute_fn)

    assert result.outcome == CONVERGED
    first = result.iterations[0]
    assert first.status == ABANDONED and first.version is None and first.error == "ConcurrentDeleteDeleteError"
    assert all(m.status == COMMITTED for m in result.iterations[1:]) and len(result.committed) == 3
    # The abandoned task's outputs were deleted: every parquet file on disk is an original or committed.
    live = {p for p in log.snapshot().files.column("path").to_pylist()}
    assert data_files(path) == on_disk | live
    # Re-planned from the fresh snapshot: the deleted file stays deleted and was not resurrected.
    assert victims[0] not in live
    assert deltars_rows(path) == rows_after_delete
