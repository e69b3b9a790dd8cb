"""Shared by the insight tests: synthetic snapshots (`QbeastSnapshot.from_tables`) and small log edits."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from _optimize_snapshots import MAX_W, MIN_W, files_table, qbeast_snapshot, stats_json
from use.delta import DeltaLog
from use.optimize.events import EVENT_TAG, OptimizationEvent
from use.qbeast.snapshot import QbeastSnapshot


def fragmented() -> QbeastSnapshot:
    """Revision 1: root '' in f0 and f1, cube 'A' in f0 and f2, 'Ag' in f2; staging file s0 (7 rows)."""
    files = files_table(
        ["f0", "f1", "f2", "s0"], [100, 200, 300, 50], revisions=[1, 1, 1, 0], mtimes=[1000, 2000, 3000, 4000],
        stats=[None, stats_json("x", 1, 9, 600), None, stats_json("x", 1, 9, 7)],
    )  # fmt: skip
    return qbeast_snapshot(
        files,
        [
            (0, 1, "", 0, MIN_W, -1000, 50),
            (0, 1, "A", 1, -1000, MAX_W, 5),
            (1, 1, "", 0, -1000, MAX_W, 600),
            (2, 1, "A", 1, -1000, MAX_W, 5),  # rows of A weigh at least the root's cut
            (2, 1, "Ag", 2, -1000, MAX_W, 3),
            (3, 0, "", 0, MIN_W, MAX_W, 7),
        ],
    )


def plain(configuration: dict[str, str] | None = None) -> QbeastSnapshot:
    """A plain Delta table of four files with `id` ranges [0,10], [5,15], [8,20], [30,40]."""
    ranges = [(0, 10), (5, 15), (8, 20), (30, 40)]
    files = files_table(
        [f"d{i}" for i in range(4)], [1000] * 4, stats=[stats_json("id", lo, hi, 10) for lo, hi in ranges],
        partitions=[{"p": "a"}] * 4,
    )  # fmt: skip
    return QbeastSnapshot.from_tables(
        files=files, blocks=None, revisions={}, version=3, table_root="/tmp/plain",
        configuration=configuration or {}, schema=pa.schema([("id", pa.int64())]),
    )  # fmt: skip


def set_properties(path: str, props: dict[str, str]) -> None:
    """Commit new table properties (ALTER TABLE ... SET TBLPROPERTIES)."""
    log = DeltaLog.for_path(path)
    meta = log.snapshot().metadata
    txn = log.start_transaction()
    txn.add(dataclasses.replace(meta, configuration={**meta.configuration, **props}))
    txn.commit("SET TBLPROPERTIES")


def commit_event(path: str, name: str) -> int:
    """An OPTIMIZE commit that carries only an event (enough for the insights, which read the log)."""
    event = OptimizationEvent(optimization_name=name, write_id="w", table_id=path, started_at=1, finished_at=2)
    return DeltaLog.for_path(path).start_transaction().commit("OPTIMIZE", tags={EVENT_TAG: event.to_json()})
