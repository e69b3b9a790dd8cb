"""The service's state file (atomic, recoverable), its status tables (fixed schemas) and its GC task.
No Spark: real files and real tables."""

from __future__ import annotations

import json
import logging
import os
import time

from optimize_support import data_files
from service_support import AUTO, plain_table, set_properties
from use.delta import DeltaLog
from use.optimize.task_metrics import IterationMetrics
from use.service import SERVICE_STATUS_SCHEMA, TABLE_STATE_SCHEMA
from use.service.gc import collect_garbage
from use.service.records import Estimate, GcRecord, LayoutFigures, SchedulerSettings
from use.service.schedule import Scheduler
from use.service.state import STATE_FILE, encode, load_states, save_states, state_from_dict, state_to_dict
from use.service.status import service_status, table_states


def busy_scheduler() -> Scheduler:
    """Tables in every state: running (with progress), queued (manual), scheduled later, idle with GC."""
    s = Scheduler(SchedulerSettings(60.0, 2, 30.0))
    s.upsert("/run", "db.run", AUTO, now=0.0)
    s.upsert("/later", "db.later", {**AUTO, "use.gc.enabled": "true"}, now=0.0)
    s.upsert("/man", "db.man", {"use.optimization.bytes-per-iter": "10"}, now=0.0)
    s.upsert("/idle", "db.idle", {}, now=0.0)
    for c in s.needs_estimate(0.0):
        s.set_estimate(c.location, c.seq, Estimate(5.0 if c.location == "/run" else 1.0, 1000, 2, 3), 0.0)
    start, later = s.pick(0.0)
    assert (start.location, later.location) == ("/run", "/later")
    s.progress("/run", start.run_id, IterationMetrics(
        strategy="LeveledCompactionSelection", kind="compact", reason="r", revision_id=1, status="committed",
        read_version=3, version=4, files_in=3, bytes_in=300, min_file_size_in=100, max_file_size_in=100,
        avg_file_size_in=100.0, files_out=1, bytes_out=290, min_file_size_out=290, max_file_size_out=290,
        avg_file_size_out=290.0, cubes_in=1, cubes_out=1, blocks_in=3, blocks_out=1, rows=30, time_ms=9,
    ))  # fmt: skip
    s.finish("/later", later.run_id, 1.0, "converged")  # scheduled again one interval after its start
    s.request_manual("/man", {"use.optimization.type": "LeveledCompaction"}, 1.0)
    s.gc_started("/later")
    s.gc_finished("/later", GcRecord(2.0, files_deleted=1, bytes_deleted=10, logs_deleted=2), 2.0)
    return s


def test_state_round_trips_through_the_file(tmp_path) -> None:
    s = busy_scheduler()
    later = s.get("/later")
    s._tables["/later"] = later.__class__(**{**later.__dict__, "layout": LayoutFigures(3, 4, 5, 6, 1, 7, 8, 0, 0, 9.5, 88.0)})
    path = tmp_path / "state" / STATE_FILE
    save_states(path, encode(s.states()))
    assert os.listdir(path.parent) == [STATE_FILE]  # no temporary file left behind
    loaded = load_states(path)
    expected = [st.__class__(**{**st.__dict__, "estimate": None}) for st in s.states()]
    assert loaded == expected
    assert [state_from_dict(json.loads(json.dumps(state_to_dict(st)))) for st in s.states()] == expected
    assert json.loads(path.read_text())["format"] == 1


def test_an_unreadable_state_file_is_moved_aside(tmp_path, caplog) -> None:
    path = tmp_path / STATE_FILE
    assert load_states(path) == []  # no file yet
    path.write_text('{"format": 1, "tables": [{"location": "/t"')  # torn by hand
    with caplog.at_level(logging.WARNING, logger="use.service.state"):
        assert load_states(path) == []
    assert not path.exists() and any(p.startswith(STATE_FILE + ".unreadable-") for p in os.listdir(tmp_path))
    assert "cannot be read" in caplog.text
    path.write_text('{"format": 99, "tables": []}')
    assert load_states(path) == [] and not path.exists()


def test_status_tables_have_their_fixed_schemas() -> None:
    s = busy_scheduler()
    status = service_status(s, 3.0)
    assert status.schema == SERVICE_STATUS_SCHEMA
    rows = {r["location"]: r for r in status.to_pylist()}
    assert set(rows) == {"/run", "/man", "/later"}  # /idle has nothing scheduled
    run = rows["/run"]
    assert run["status"] == "running" and run["trigger"] == "scheduled" and run["iterations"] == 1
    assert (run["files_in"], run["files_out"], run["bytes_in"], run["last_version"]) == (3, 1, 300, 4)
    assert run["started_at"].timestamp() == 0.0 and run["run_id"]
    man = rows["/man"]
    assert man["status"] == "queued" and man["trigger"] == "manual" and man["queue_position"] == 1
    assert man["weight"] > 0 and man["waiting_since"].timestamp() == 1.0
    assert man["note"] == "manual optimization queued" and man["note_at"].timestamp() == 1.0  # why, and when
    assert [r["status"] for r in status.to_pylist()] == ["running", "queued", "scheduled"]
    assert rows["/later"]["queue_position"] is None and rows["/later"]["next_run_at"].timestamp() == 60.0

    states = table_states(s)
    assert states.schema == TABLE_STATE_SCHEMA
    by = {r["location"]: r for r in states.to_pylist()}
    assert by["/run"]["optimization_state"] == "running" and by["/idle"]["optimization_state"] == "idle"
    assert by["/man"]["optimization_state"] == "scheduled" and by["/man"]["next_trigger"] == "manual"
    assert by["/man"]["note"] == "manual optimization queued"
    assert by["/later"]["last_run_outcome"] == "converged" and by["/later"]["runs"] == 1
    assert by["/later"]["gc_enabled"] and by["/later"]["last_gc_files_deleted"] == 1 and by["/later"]["last_gc_logs_deleted"] == 2
    assert by["/idle"]["next_run_at"] is None and by["/idle"]["next_trigger"] is None
    empty = Scheduler(SchedulerSettings(60.0))
    assert service_status(empty, 0.0).schema == SERVICE_STATUS_SCHEMA and table_states(empty).num_rows == 0


def _age(path: str, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_gc_removes_orphans_after_the_retention_only(tmp_path) -> None:
    path = plain_table(str(tmp_path / "t"), {"delta.deletedFileRetentionDuration": "interval 1 hours", "use.gc.enabled": "true"})
    live = data_files(path)
    old_orphan = os.path.join(path, "part-useopt-killed-00000-0.parquet")  # a killed task's output
    young_orphan = os.path.join(path, "part-useopt-inflight-00000-0.parquet")  # a task still writing
    for p in (old_orphan, young_orphan):
        with open(p, "wb") as f:
            f.write(b"x" * 100)
    _age(old_orphan, 2 * 3600)
    record = collect_garbage(path, 123.0)
    assert (record.at, record.files_deleted, record.bytes_deleted, record.error) == (123.0, 1, 100, None)
    assert not os.path.exists(old_orphan) and os.path.exists(young_orphan)
    assert live <= data_files(path)
    history = [h.operation for h in DeltaLog.for_path(path).history()]
    assert history[:2] == ["VACUUM END", "VACUUM START"]
    # Nothing old enough: no vacuum commits.
    version = DeltaLog.for_path(path).snapshot().version
    assert collect_garbage(path, 124.0).files_deleted == 0
    assert DeltaLog.for_path(path).snapshot().version == version


def test_gc_cleans_expired_logs(tmp_path) -> None:
    path = plain_table(str(tmp_path / "t"), {"delta.logRetentionDuration": "interval 1 days", "delta.checkpointInterval": "2"})
    for i in range(4):
        set_properties(path, {"k.x": str(i)})
    log_dir = os.path.join(path, "_delta_log")
    commits = sorted(n for n in os.listdir(log_dir) if n.endswith(".json"))
    for name in commits[:-1]:
        _age(os.path.join(log_dir, name), 3 * 86400)
    before = DeltaLog.for_path(path).snapshot().configuration
    record = collect_garbage(path, 1.0)
    assert record.logs_deleted > 0
    assert DeltaLog.for_path(path).snapshot().configuration == before  # the table still reads the same
