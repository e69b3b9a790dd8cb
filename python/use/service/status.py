"""What operators see: the service's status as Arrow tables with fixed schemas.

* `SERVICE_STATUS_SCHEMA`, the rows of `use_catalog.system_lake_tables.service_status`: one row per
  table the service has work for, running runs first with their progress, then the queue (due
  tables waiting for a slot, heaviest first, `queue_position` 1 is next), then the tables scheduled
  for later. Each row carries the table's `note`, the service's latest decision on it (a manual
  trigger queued or ignored and why, a run resumed after a restart): a SQL user whose ALTER TABLE
  asked for a manual optimization has no other way to see it (the statement returns no rows).
* `TABLE_STATE_SCHEMA`: one row per table the service knows, the per-table columns
  `metastore_summary` shows (optimization state idle/scheduled/running, next run, last run, last
  error, note, GC, layout figures), joined on `location`.

Pure: built from the scheduler's states; times are UTC timestamps in milliseconds.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from use.service.records import IDLE, TableState
from use.service.schedule import Scheduler

__all__ = ["SERVICE_STATUS_SCHEMA", "TABLE_STATE_SCHEMA", "service_status", "table_states", "QUEUED"]

#: `service_status.status` of a due table waiting for a slot (besides `running` and `scheduled`).
QUEUED = "queued"

_TS = pa.timestamp("ms", tz="UTC")

SERVICE_STATUS_SCHEMA = pa.schema(
    [
        ("table_name", pa.string()),
        ("location", pa.string()),
        ("status", pa.string()),  # running, queued, scheduled
        ("trigger", pa.string()),  # scheduled, manual
        ("queue_position", pa.int32()),
        ("weight", pa.float64()),
        ("score", pa.float64()),
        ("planned_bytes", pa.int64()),
        ("waiting_since", _TS),
        ("next_run_at", _TS),
        ("run_id", pa.string()),
        ("started_at", _TS),
        ("iterations", pa.int64()),
        ("committed", pa.int64()),
        ("files_in", pa.int64()),
        ("files_out", pa.int64()),
        ("bytes_in", pa.int64()),
        ("bytes_out", pa.int64()),
        ("rows", pa.int64()),
        ("last_version", pa.int64()),
        ("strategy", pa.string()),
        ("stop_reason", pa.string()),
        ("failures", pa.int32()),  # consecutive failed runs (0 after a success)
        ("last_error", pa.string()),  # what is wrong now; null once it succeeds again (schedule docstring)
        ("last_error_at", _TS),
        ("note", pa.string()),  # the service's latest decision on the table, e.g. why a manual trigger was ignored
        ("note_at", _TS),
    ]
)

TABLE_STATE_SCHEMA = pa.schema(
    [
        ("location", pa.string()),
        ("table_name", pa.string()),
        ("optimization_state", pa.string()),  # idle, scheduled, running
        ("continuous", pa.bool_()),
        ("gc_enabled", pa.bool_()),
        ("next_run_at", _TS),
        ("next_trigger", pa.string()),
        ("runs", pa.int64()),
        ("last_run_id", pa.string()),
        ("last_run_trigger", pa.string()),
        ("last_run_started_at", _TS),
        ("last_run_finished_at", _TS),
        ("last_run_outcome", pa.string()),
        ("last_run_iterations", pa.int64()),
        ("last_run_bytes_rewritten", pa.int64()),
        ("last_check_at", _TS),
        ("failures", pa.int32()),
        ("last_error", pa.string()),
        ("last_error_at", _TS),
        ("note", pa.string()),
        ("note_at", _TS),
        ("last_gc_at", _TS),
        ("last_gc_files_deleted", pa.int64()),
        ("last_gc_bytes_deleted", pa.int64()),
        ("last_gc_logs_deleted", pa.int64()),
        ("layout_version", pa.int64()),
        ("layout_files", pa.int64()),
        ("layout_bytes", pa.int64()),
        ("layout_records", pa.int64()),
        ("layout_revisions", pa.int64()),
        ("layout_cubes", pa.int64()),
        ("layout_blocks", pa.int64()),
        ("pending_tasks", pa.int64()),
        ("pending_bytes", pa.int64()),
        ("health_score", pa.float64()),
        ("layout_measured_at", _TS),
    ]
)


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(round(seconds * 1000))


def service_status(scheduler: Scheduler, now: float) -> pa.Table:
    """The `service_status` rows (see the module docstring)."""
    rows: list[dict[str, Any]] = []
    for s in scheduler.running():
        assert s.run is not None
        p = s.run.progress
        rows.append(
            _status_row(s, "running", s.run.trigger)
            | {
                "run_id": s.run.run_id, "started_at": _ms(s.run.started_at), "iterations": p.iterations,
                "committed": p.committed, "files_in": p.files_in, "files_out": p.files_out, "bytes_in": p.bytes_in,
                "bytes_out": p.bytes_out, "rows": p.rows, "last_version": p.last_version, "strategy": p.strategy,
                "stop_reason": s.run.stop_reason,
            }
        )  # fmt: skip
    queue = scheduler.queue(now)
    for i, s in enumerate(queue, start=1):
        est = s.estimate
        rows.append(
            _status_row(s, QUEUED, s.next_trigger)
            | {
                "queue_position": i, "weight": scheduler.weight_of(s, now), "score": est.score if est else None,
                "planned_bytes": est.planned_bytes if est else None, "waiting_since": _ms(s.due_since),
            }
        )  # fmt: skip
    queued = {s.location for s in queue}
    later = [s for s in scheduler.states() if s.run is None and s.next_run_at is not None and s.location not in queued]
    for s in sorted(later, key=lambda s: (s.next_run_at, s.location)):
        rows.append(_status_row(s, "scheduled", s.next_trigger))
    return pa.Table.from_pylist(rows, schema=SERVICE_STATUS_SCHEMA)


def _status_row(s: TableState, status: str, trigger: str) -> dict[str, Any]:
    return {
        "table_name": s.name, "location": s.location, "status": status, "trigger": trigger,
        "next_run_at": _ms(s.next_run_at), "failures": s.failures, "last_error": s.last_error,
        "last_error_at": _ms(s.last_error_at), "note": s.note, "note_at": _ms(s.note_at),
    }  # fmt: skip


def table_states(scheduler: Scheduler) -> pa.Table:
    """One row per known table: the per-table service columns of `metastore_summary`."""
    rows = []
    for s in scheduler.states():
        last, gc, lay = s.last_run, s.last_gc, s.layout
        rows.append(
            {
                "location": s.location, "table_name": s.name, "optimization_state": s.state,
                "continuous": s.continuous, "gc_enabled": s.gc_enabled, "next_run_at": _ms(s.next_run_at),
                "next_trigger": s.next_trigger if s.state != IDLE else None, "runs": s.runs,
                "last_run_id": last.run_id if last else None, "last_run_trigger": last.trigger if last else None,
                "last_run_started_at": _ms(last.started_at) if last else None,
                "last_run_finished_at": _ms(last.finished_at) if last else None,
                "last_run_outcome": last.outcome if last else None,
                "last_run_iterations": last.progress.iterations if last else None,
                "last_run_bytes_rewritten": last.progress.bytes_in if last else None,
                "last_check_at": _ms(s.last_check_at), "failures": s.failures, "last_error": s.last_error,
                "last_error_at": _ms(s.last_error_at), "note": s.note, "note_at": _ms(s.note_at),
                "last_gc_at": _ms(gc.at) if gc else None, "last_gc_files_deleted": gc.files_deleted if gc else None,
                "last_gc_bytes_deleted": gc.bytes_deleted if gc else None,
                "last_gc_logs_deleted": gc.logs_deleted if gc else None,
                "layout_version": lay.version if lay else None, "layout_files": lay.files if lay else None,
                "layout_bytes": lay.bytes if lay else None, "layout_records": lay.records if lay else None,
                "layout_revisions": lay.revisions if lay else None, "layout_cubes": lay.cubes if lay else None,
                "layout_blocks": lay.blocks if lay else None, "pending_tasks": lay.pending_tasks if lay else None,
                "pending_bytes": lay.pending_bytes if lay else None, "health_score": lay.health_score if lay else None,
                "layout_measured_at": _ms(lay.measured_at) if lay else None,
            }
        )  # fmt: skip
    return pa.Table.from_pylist(rows, schema=TABLE_STATE_SCHEMA)
