"""kill -9 of a process running the service, then a restart on the same state dir: the schedules
come back, the interrupted run and the queued manual request resume, the killed task's file is an
orphan that GC removes after the retention, and delta-rs reads the same rows.

The killed process runs the real service with a runner that blocks inside its run (after leaving a
file behind, as a task killed mid-write does), so no second JVM is needed; the restart runs the real
Spark runner on the shared session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from optimize_support import deltars_rows, fragmented_qbeast
from service_support import AUTO, await_service, set_properties, wait_for
from use.optimize.config import ServiceConfig
from use.optimize.events import optimizations_table
from use.service import LocationSource, OptimizationService
from use.service.runner import SparkRunner
from use.service.state import STATE_FILE

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import os, sys, threading
from use.optimize.config import ServiceConfig
from use.service import LocationSource, OptimizationService

class BlockingRunner:
    def session_conf(self):
        return {}

    def optimize(self, start, *, stop, cancel, on_iteration):
        # What a merge task killed while writing leaves behind: a data file no commit references.
        with open(os.path.join(start.location, f"part-useopt-killed-{start.run_id}.parquet"), "wb") as f:
            f.write(b"x" * 64)
        threading.Event().wait()

auto, idle, state_dir = sys.argv[1:4]
svc = OptimizationService(LocationSource([auto, idle]), state_dir, config=ServiceConfig(1.0, 1, 3600.0), runner=BlockingRunner())
svc.start()
assert svc.wait_until(lambda s: s.table(auto) is not None and s.table(auto).run is not None, 300)
decision = svc.trigger(idle, {"use.optimization.type": "LeveledCompaction", "use.optimization.bytes-per-iter": "5000000"})
print("QUEUED" if decision.accepted else "IGNORED " + decision.reason, flush=True)
threading.Event().wait()
"""


def _age(path: str, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_kill_9_then_restart_resumes_runs_and_schedules(spark, tmp_path) -> None:
    auto = fragmented_qbeast(spark, str(tmp_path / "auto"), appends=3)
    idle = fragmented_qbeast(spark, str(tmp_path / "idle"), appends=3)
    set_properties(auto, AUTO)
    rows = {p: deltars_rows(p) for p in (auto, idle)}
    state_dir = tmp_path / "service"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    child = subprocess.Popen(
        [sys.executable, str(script), auto, idle, str(state_dir)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        line = child.stdout.readline()  # the child prints once the manual request is queued (or dies: EOF)
        assert line.strip() == "QUEUED", line
        saved = json.loads((state_dir / STATE_FILE).read_text())
        by = {t["location"]: t for t in saved["tables"]}
        assert by[auto]["run"] is not None and by[idle]["manual"] is not None
        killed_run = by[auto]["run"]["run_id"]
        orphan = os.path.join(auto, f"part-useopt-killed-{killed_run}.parquet")
        assert os.path.exists(orphan)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(60)
    assert child.returncode == -signal.SIGKILL

    # Time passes beyond the table's file retention, and GC is switched on (a property change that
    # leaves the optimization schedule alone).
    set_properties(auto, {"use.gc.enabled": "true", "delta.deletedFileRetentionDuration": "interval 1 hours"})
    _age(orphan, 2 * 3600)

    svc = OptimizationService(
        LocationSource([auto, idle]), state_dir, config=ServiceConfig(1.0, 1, 3600.0), runner=SparkRunner(spark)
    )
    svc.start()
    try:
        st = svc.table(auto)
        assert st is not None and "interrupted" in st.note and killed_run in st.note
        await_service(
            svc,
            lambda s: (
                s.table(auto).last_run is not None
                and s.table(auto).last_run.outcome == "converged"
                and s.table(idle).note == "manual optimization done"
                and s.table(auto).last_gc is not None
            ),
            "the interrupted run, the queued manual run and GC to finish",
        )
        wait_for(lambda: not os.path.exists(orphan), "GC to remove the killed task's file")
        assert svc.table(auto).last_gc.files_deleted >= 1 and svc.table(auto).continuous
        assert svc.table(idle).last_run.trigger == "manual" and svc.table(idle).state == "idle"
        for p in (auto, idle):
            assert optimizations_table(p).num_rows >= 1
            assert deltars_rows(p) == rows[p]  # delta-rs reads the same rows
    finally:
        svc.stop()
    saved = json.loads((state_dir / STATE_FILE).read_text())
    assert all(t["run"] is None for t in saved["tables"])  # a clean stop leaves no run in flight
