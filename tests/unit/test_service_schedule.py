"""The service's scheduling rules, pure: an injected clock, no threads, no Spark, no tables.

Each test drives `Scheduler` through the seeds' rules: the interval, UNSET, changed parameters
during and outside a run, the manual trigger (accepted and ignored, with the reason), concurrency
with weights and no starvation, backoff, GC, drop, and restore after a restart.
"""

from __future__ import annotations

import itertools

import pytest

from use.errors import ConfigError, TableNotFoundError
from use.optimize.task_metrics import IterationMetrics
from use.service.records import (
    DROPPED,
    FAILED,
    IDLE,
    INTERRUPTED,
    MANUAL_TRIGGER,
    NOTHING_TO_DO,
    RUNNING,
    SCHEDULED,
    SCHEDULED_TRIGGER,
    SERVICE_STOPPING,
    UNSET,
    Estimate,
    GcRecord,
    SchedulerSettings,
)
from use.service.schedule import Scheduler, backoff_s, weight

AUTO = {"use.optimization.autoOptimize.enabled": "true"}
TYPE = {"use.optimization.type": "CubeDefragmentation", "use.optimization.bytes-per-iter": "5000000"}
I = 600.0  # the interval


def scheduler(max_concurrent: int = 1, **kw) -> Scheduler:
    ids = (f"r{i}" for i in itertools.count(1))
    return Scheduler(SchedulerSettings(I, max_concurrent, **kw), new_run_id=lambda: next(ids))


def work(score: float = 1.0, nbytes: int = 100) -> Estimate:
    return Estimate(score, nbytes, 1, 0)


NOTHING = Estimate(0.0, 0, 0, 0)


def plan_all(s: Scheduler, now: float, estimates: dict[str, Estimate] | None = None) -> None:
    """What the service does for due tables: plan each (here: the given estimate, default some work)."""
    for c in s.needs_estimate(now):
        s.set_estimate(c.location, c.seq, (estimates or {}).get(c.location, work()), now)


def run_once(s: Scheduler, loc: str, now: float, end: float, outcome: str = "converged") -> str:
    plan_all(s, now)
    starts = [st for st in s.pick(now) if st.location == loc]
    assert starts, f"{loc} did not start"
    s.finish(loc, starts[0].run_id, end, outcome)
    return starts[0].run_id


def metrics(committed: bool = True, files_in: int = 3, files_out: int = 1, version: int = 5) -> IterationMetrics:
    return IterationMetrics(
        strategy="LeveledCompactionSelection", kind="compact", reason="r", revision_id=1,
        status="committed" if committed else "abandoned", read_version=4, version=version if committed else None,
        files_in=files_in, bytes_in=300, min_file_size_in=100, max_file_size_in=100, avg_file_size_in=100.0,
        files_out=files_out, bytes_out=280, min_file_size_out=280, max_file_size_out=280, avg_file_size_out=280.0,
        cubes_in=1, cubes_out=1, blocks_in=3, blocks_out=1, rows=30, time_ms=5,
    )  # fmt: skip


# --- which tables are scheduled ---------------------------------------------------------------------


@pytest.mark.parametrize("props", [AUTO, TYPE, {**AUTO, **TYPE}])
def test_continuous_table_is_due_at_once(props) -> None:
    s = scheduler()
    s.upsert("/t", "t", props, now=100.0)
    st = s.get("/t")
    assert st.continuous and st.state == SCHEDULED and st.next_run_at == 100.0
    assert [c.location for c in s.needs_estimate(100.0)] == ["/t"]


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"use.optimization.autoOptimize.enabled": "false"},
        {"use.optimization.bytes-per-iter": "10"},
        {"delta.appendOnly": "false"},
    ],
)
def test_table_without_continuous_optimization_stays_idle(props) -> None:
    s = scheduler()
    s.upsert("/t", "t", props, now=0.0)
    assert s.get("/t").state == IDLE and s.get("/t").next_run_at is None
    assert s.needs_estimate(1e9) == [] and s.pick(1e9) == []


def test_runs_every_interval_from_the_start_of_the_previous_run() -> None:
    s = scheduler()
    s.upsert("/t", "t", AUTO, now=0.0)
    run_once(s, "/t", now=0.0, end=50.0)
    st = s.get("/t")
    assert st.state == SCHEDULED and st.next_run_at == I and st.runs == 1 and st.last_run.outcome == "converged"
    assert s.needs_estimate(I - 1) == [] and s.next_wakeup(60.0) == I
    run_once(s, "/t", now=I, end=I + 10)
    assert s.get("/t").next_run_at == 2 * I
    # A run longer than the interval: the next one is due as soon as it ends.
    run_once(s, "/t", now=2 * I, end=3.5 * I)
    assert s.get("/t").next_run_at == 3.5 * I


def test_nothing_to_do_waits_one_interval_without_a_run() -> None:
    s = scheduler()
    s.upsert("/t", "t", AUTO, now=10.0)
    plan_all(s, 10.0, {"/t": NOTHING})
    st = s.get("/t")
    assert s.pick(10.0) == [] and st.runs == 0 and st.next_run_at == 10.0 + I and st.last_check_at == 10.0


# --- UNSET and changed parameters ---------------------------------------------------------------------


def test_unset_stops_the_schedule() -> None:
    s = scheduler()
    s.upsert("/t", "t", AUTO, now=0.0)
    run_once(s, "/t", 0.0, 5.0)
    s.upsert("/t", "t", {}, now=10.0)
    st = s.get("/t")
    assert st.state == IDLE and st.next_run_at is None and s.next_wakeup(10.0) is None
    assert s.needs_estimate(1e9) == []


def test_unset_during_a_run_asks_it_to_end_after_its_task_and_schedules_nothing() -> None:
    s = scheduler()
    s.upsert("/t", "t", TYPE, now=0.0)
    plan_all(s, 0.0)
    (start,) = s.pick(0.0)
    s.upsert("/t", "t", {"use.optimization.bytes-per-iter": "5000000"}, now=3.0)  # UNSET type
    assert s.stop_requests() == [("/t", start.run_id, UNSET)]  # not SERVICE_STOPPING: the task finishes
    assert s.get("/t").state == RUNNING
    s.finish("/t", start.run_id, 4.0, "stopped")
    st = s.get("/t")
    assert st.state == IDLE and st.next_run_at is None and st.last_run.outcome == "stopped"


def test_changed_parameters_outside_a_run_reschedule_at_once() -> None:
    s = scheduler()
    s.upsert("/t", "t", TYPE, now=0.0)
    run_once(s, "/t", 0.0, 5.0)
    assert s.get("/t").next_run_at == I
    s.upsert("/t", "t", {**TYPE, "use.optimization.bytes-per-iter": "7"}, now=100.0)
    st = s.get("/t")
    assert st.next_run_at == 100.0 and st.state == SCHEDULED
    assert [c.location for c in s.needs_estimate(100.0)] == ["/t"]


def test_changed_parameters_during_a_run_wait_for_it_then_reschedule_at_once() -> None:
    s = scheduler()
    s.upsert("/t", "t", TYPE, now=0.0)
    plan_all(s, 0.0)
    (start,) = s.pick(0.0)
    s.upsert("/t", "t", {**TYPE, "use.optimization.bytes-per-iter": "7"}, now=10.0)
    assert s.stop_requests() == []  # the run is not stopped
    assert s.get("/t").state == RUNNING
    s.finish("/t", start.run_id, 30.0, "converged")
    assert s.get("/t").next_run_at == 30.0  # at once, not started + interval
    run_once(s, "/t", 30.0, 40.0)
    assert s.get("/t").next_run_at == 30.0 + I  # then the normal cadence


def test_unrelated_property_changes_and_refreshes_keep_the_schedule() -> None:
    s = scheduler()
    s.upsert("/t", "t", AUTO, now=0.0)
    run_once(s, "/t", 0.0, 5.0)
    seq = s.get("/t").seq
    s.upsert("/t", "t", {**AUTO, "delta.checkpointInterval": "5"}, now=50.0)
    s.upsert("/t", "t", {**AUTO, "use.gc.enabled": "true"}, now=60.0)
    st = s.get("/t")
    assert st.next_run_at == I and st.seq == seq and st.gc_enabled and st.gc_next_at == 60.0


def test_a_plan_for_an_older_schedule_is_dropped() -> None:
    s = scheduler()
    s.upsert("/t", "t", TYPE, now=0.0)
    (c,) = s.needs_estimate(0.0)
    s.upsert("/t", "t", {**TYPE, "use.optimization.bytes-per-iter": "7"}, now=1.0)  # while planning
    s.set_estimate(c.location, c.seq, work(), 2.0)
    assert s.pick(2.0) == [] and s.get("/t").estimate is None
    (c2,) = s.needs_estimate(2.0)
    assert c2.seq != c.seq


def test_bad_property_value_is_recorded_and_not_scheduled() -> None:
    s = scheduler()
    s.upsert("/t", "t", {"use.optimization.type": "NoSuchStrategy"}, now=5.0)
    st = s.get("/t")
    assert st.state == IDLE and "NoSuchStrategy" in st.last_error and st.last_error_at == 5.0
    s.upsert("/t", "t", {"use.gc.enabled": "maybe"}, now=6.0)
    assert "use.gc.enabled" in s.get("/t").last_error and not s.get("/t").gc_enabled


# --- manual trigger ------------------------------------------------------------------------------------


def test_manual_trigger_on_an_idle_table_runs_once_with_its_settings() -> None:
    s = scheduler()
    s.upsert("/t", "t", {}, now=0.0)
    d = s.request_manual("/t", {"use.optimization.type": "LeveledCompaction", "use.optimization.bytes-per-iter": "5000000"}, 1.0)
    assert d.accepted and d.reason == "manual optimization queued"
    assert s.get("/t").state == SCHEDULED and s.get("/t").next_trigger == MANUAL_TRIGGER
    plan_all(s, 1.0)
    (start,) = s.pick(1.0)
    assert start.trigger == MANUAL_TRIGGER
    assert dict(start.settings) == {"use.optimization.type": "LeveledCompaction", "use.optimization.bytes-per-iter": "5000000"}
    s.finish("/t", start.run_id, 2.0, "converged")
    st = s.get("/t")
    assert st.state == IDLE and st.next_run_at is None and st.note == "manual optimization done"
    assert st.last_run.trigger == MANUAL_TRIGGER and st.properties == ()  # the table's properties are untouched


def test_manual_trigger_is_ignored_while_a_run_is_in_progress() -> None:
    s = scheduler()
    s.upsert("/t", "t", {}, now=0.0)
    s.request_manual("/t", {"use.optimization.type": "LeveledCompaction"}, 0.0)
    plan_all(s, 0.0)
    (start,) = s.pick(0.0)
    d = s.request_manual("/t", {"use.optimization.type": "LeveledCompaction"}, 1.0)
    assert not d.accepted and "already running" in d.reason and start.run_id in d.reason
    assert s.get("/t").note == d.reason and s.get("/t").note_at == 1.0


def test_manual_trigger_is_ignored_when_the_table_is_continuously_optimized() -> None:
    s = scheduler()
    s.upsert("/t", "t", AUTO, now=0.0)
    run_once(s, "/t", 0.0, 1.0)
    d = s.request_manual("/t", {"use.optimization.type": "LeveledCompaction"}, 2.0)
    assert not d.accepted and "continuous optimization configured" in d.reason
    st = s.get("/t")
    assert st.note == d.reason and st.manual is None and st.next_run_at == I


def test_manual_trigger_is_ignored_when_one_is_already_queued() -> None:
    s = scheduler()
    s.upsert("/t", "t", {}, now=0.0)
    assert s.request_manual("/t", {"use.optimization.bytes-per-iter": "10"}, 0.0).accepted
    d = s.request_manual("/t", {"use.optimization.bytes-per-iter": "20"}, 0.0)
    assert not d.accepted and "already queued" in d.reason
    assert dict(s.get("/t").manual) == {"use.optimization.bytes-per-iter": "10"}


def test_manual_trigger_with_bad_settings_or_unknown_table_changes_nothing() -> None:
    s = scheduler()
    s.upsert("/t", "t", {}, now=0.0)
    before = s.get("/t")
    with pytest.raises(ConfigError, match="bytes-per-iter"):
        s.request_manual("/t", {"use.optimization.bytes-per-iter": "lots"}, 1.0)
    with pytest.raises(ConfigError, match="unknown optimization key"):
        s.request_manual("/t", {"use.optimization.bytesPerIter": "10"}, 1.0)
    with pytest.raises(TableNotFoundError, match="/nope"):
        s.request_manual("/nope", {}, 1.0)
    assert s.get("/t") == before


def test_manual_trigger_with_nothing_to_optimize_is_done_without_a_run() -> None:
    s = scheduler()
    s.upsert("/t", "t", {}, now=0.0)
    s.request_manual("/t", {}, 0.0)
    plan_all(s, 0.0, {"/t": NOTHING})
    st = s.get("/t")
    assert st.state == IDLE and st.last_run.outcome == NOTHING_TO_DO and "nothing to optimize" in st.note


def test_a_failed_manual_run_is_recorded_and_not_retried() -> None:
    s = scheduler()
    s.upsert("/t", "t", {}, now=0.0)
    s.request_manual("/t", {}, 0.0)
    plan_all(s, 0.0)
    (start,) = s.pick(0.0)
    s.finish("/t", start.run_id, 1.0, FAILED, error="OSError: disk full")
    st = s.get("/t")
    assert st.state == IDLE and st.failures == 1 and st.last_error == "OSError: disk full"
    assert st.note == "manual optimization failed: OSError: disk full"


def test_becoming_continuous_drops_a_queued_manual_request() -> None:
    s = scheduler()
    s.upsert("/t", "t", {}, now=0.0)
    s.request_manual("/t", {"use.optimization.bytes-per-iter": "10"}, 0.0)
    s.upsert("/t", "t", AUTO, now=1.0)
    st = s.get("/t")
    assert st.manual is None and st.next_trigger == SCHEDULED_TRIGGER and "dropped" in st.note


# --- concurrency, weights, starvation -------------------------------------------------------------------


def test_at_most_max_concurrent_runs_heaviest_first() -> None:
    s = scheduler(max_concurrent=2)
    for loc in ("/a", "/b", "/c"):
        s.upsert(loc, loc, AUTO, now=0.0)
    plan_all(s, 0.0, {"/a": work(0.1), "/b": work(50.0), "/c": work(5.0)})
    starts = s.pick(0.0)
    assert [st.location for st in starts] == ["/b", "/c"]
    assert s.pick(0.0) == []  # both slots taken
    assert [q.location for q in s.queue(0.0)] == ["/a"]
    s.finish("/b", starts[0].run_id, 10.0, "converged")
    assert [st.location for st in s.pick(10.0)] == ["/a"]


def test_waiting_raises_the_weight() -> None:
    assert weight(0.0, 0.0, I) == 1.0
    assert weight(10.0, 0.0, I) > weight(1.0, 0.0, I)  # benefit per byte counts
    assert weight(1.0, I, I) == 2 * weight(1.0, 0.0, I)  # doubled per interval waited
    assert weight(1.0, 3 * I, I) > weight(1000.0, 0.0, I)  # so a long wait overtakes any score
    assert weight(0.0, 1e12, I) < float("inf")
    s = scheduler()
    s.upsert("/old", "old", AUTO, now=0.0)
    s.upsert("/new", "new", AUTO, now=3 * I)
    plan_all(s, 3 * I, {"/old": work(1.0), "/new": work(1000.0)})
    assert [q.location for q in s.queue(3 * I)] == ["/old", "/new"]
    assert [q.location for q in s.queue(3 * I + 1)] == ["/old", "/new"]
    s.upsert("/newer", "newer", AUTO, now=3 * I)
    plan_all(s, 3 * I, {"/newer": work(0.5)})
    assert [q.location for q in s.queue(3 * I)] == ["/old", "/new", "/newer"]


def test_one_large_table_cannot_starve_the_others() -> None:
    """A table whose plans always score a million times more, and whose runs take a whole interval,
    still lets a low-score table run regularly (max-concurrent 1)."""
    s = scheduler(max_concurrent=1)
    s.upsert("/big", "big", AUTO, now=0.0)
    s.upsert("/small", "small", AUTO, now=0.0)
    estimates = {"/big": work(1e6, 10**12), "/small": work(1e-3, 10)}
    now, ran = 0.0, []
    for _ in range(40):
        plan_all(s, now, estimates)
        (start,) = s.pick(now)
        ran.append(start.location)
        now += I  # every run lasts one interval
        s.finish(start.location, start.run_id, now, "converged")
    gaps = [len(list(g)) for k, g in itertools.groupby(ran) if k == "/big"]
    assert ran.count("/small") >= 7 and max(gaps) <= 5, ran


# --- failures and backoff ----------------------------------------------------------------------------


def test_failures_back_off_exponentially_and_do_not_stop_the_others() -> None:
    s = scheduler(max_concurrent=1, max_backoff_s=4 * I)
    s.upsert("/bad", "bad", AUTO, now=0.0)
    s.upsert("/good", "good", AUTO, now=0.0)
    now = 0.0
    delays, good_runs = [], 0
    while len(delays) < 5:
        plan_all(s, now, {"/bad": work(100.0), "/good": work(0.0)})
        for start in s.pick(now):
            if start.location == "/bad":
                s.finish("/bad", start.run_id, now + 1, FAILED, error="CorruptLogError: bad line")
                st = s.get("/bad")
                delays.append(st.next_run_at - (now + 1))
                assert st.last_error == "CorruptLogError: bad line" and st.last_error_at == now + 1
            else:
                s.finish("/good", start.run_id, now + 1, "converged")
                good_runs += 1
        now = s.next_wakeup(now) if not s.queue(now + 1) else now + 1
    assert delays == [I, 2 * I, 4 * I, 4 * I, 4 * I]  # capped
    assert good_runs >= 5  # the other table kept running meanwhile
    assert s.get("/bad").failures == 5 and s.get("/good").failures == 0
    bad_due = s.get("/bad").next_run_at
    plan_all(s, bad_due, {"/bad": work(100.0), "/good": work(0.0)})
    s.retain(["/bad"], bad_due)
    (start,) = s.pick(bad_due)
    s.finish("/bad", start.run_id, bad_due + 1, "converged")
    assert s.get("/bad").failures == 0 and s.get("/bad").next_run_at == bad_due + I


def test_a_failed_plan_is_recorded_and_backs_off() -> None:
    s = scheduler()
    s.upsert("/t", "t", AUTO, now=0.0)
    (c,) = s.needs_estimate(0.0)
    s.plan_failed(c.location, c.seq, "CorruptLogError: unreadable", 0.0)
    st = s.get("/t")
    assert st.failures == 1 and st.next_run_at == I and st.last_run.outcome == FAILED
    assert st.last_error == "CorruptLogError: unreadable"


def test_last_error_is_what_is_wrong_now_and_a_success_of_the_same_kind_clears_it_into_the_note() -> None:
    s = scheduler(gc_interval_s=100.0)
    s.upsert("/t", "t", {**AUTO, "use.gc.enabled": "true"}, now=0.0)
    plan_all(s, 0.0)
    (start,) = s.pick(0.0)
    s.finish("/t", start.run_id, 1.0, FAILED, error="OSError: disk full")
    st = s.get("/t")
    assert (st.failures, st.last_error, st.last_error_at) == (1, "OSError: disk full", 1.0)
    s.gc_started("/t")
    s.gc_finished("/t", GcRecord(2.0), 2.0)  # a GC success says nothing about runs
    assert s.get("/t").last_error == "OSError: disk full"

    plan_all(s, I + 1.0)
    (start,) = s.pick(I + 1.0)
    s.finish("/t", start.run_id, I + 2.0, "converged")
    st = s.get("/t")
    assert (st.failures, st.last_error, st.last_error_at) == (0, None, None)
    assert st.note == "recovered after 1 failure(s); the last error was: OSError: disk full" and st.note_at == I + 2.0

    s.gc_started("/t")
    s.gc_finished("/t", GcRecord(I + 3.0, error="OSError: x"), I + 3.0)
    plan_all(s, 2 * I + 2.0)
    (start,) = s.pick(2 * I + 2.0)
    s.finish("/t", start.run_id, 2 * I + 3.0, "converged")  # a run success says nothing about GC
    assert s.get("/t").last_error == "GC: OSError: x"
    s.gc_started("/t")
    s.gc_finished("/t", GcRecord(2 * I + 4.0), 2 * I + 4.0)
    assert s.get("/t").last_error is None and "recovered after 1 failure(s)" in s.get("/t").note

    s.upsert("/t", "t", {"use.optimization.type": "NoSuchStrategy"}, now=3 * I)
    assert "NoSuchStrategy" in s.get("/t").last_error
    s.upsert("/t", "t", AUTO, now=3 * I + 1)  # the properties fixed
    st = s.get("/t")
    assert st.last_error is None and st.note.startswith("recovered; the last error was: table properties:")


def test_backoff_formula() -> None:
    assert [backoff_s(n, 10.0, 100.0) for n in (1, 2, 3, 4, 5)] == [10.0, 20.0, 40.0, 80.0, 100.0]
    assert backoff_s(3, 1000.0, 100.0) == 1000.0  # never less than one interval


# --- progress, drop, stop ------------------------------------------------------------------------------


def test_progress_adds_up_iterations() -> None:
    s = scheduler()
    s.upsert("/t", "t", AUTO, now=0.0)
    plan_all(s, 0.0)
    (start,) = s.pick(0.0)
    s.progress("/t", start.run_id, metrics(version=5))
    s.progress("/t", start.run_id, metrics(committed=False))
    s.progress("/t", start.run_id, metrics(version=7))
    p = s.get("/t").run.progress
    assert (p.iterations, p.committed, p.files_in, p.files_out, p.bytes_in, p.last_version) == (3, 2, 6, 2, 600, 7)
    s.finish("/t", start.run_id, 1.0, "converged")
    assert s.get("/t").last_run.progress == p


def test_drop_forgets_the_table_after_its_run() -> None:
    s = scheduler()
    s.upsert("/t", "t", AUTO, now=0.0)
    s.upsert("/u", "u", AUTO, now=0.0)
    plan_all(s, 0.0)
    (start,) = s.pick(0.0)
    s.remove(start.location, 1.0)
    assert s.stop_requests() == [(start.location, start.run_id, DROPPED)]
    s.finish(start.location, start.run_id, 2.0, "stopped")
    assert s.get(start.location) is None
    other = "/u" if start.location == "/t" else "/t"
    s.retain([], 3.0)
    assert s.get(other) is None and s.states() == ()


def test_a_service_stop_resumes_the_run_at_the_next_start() -> None:
    s = scheduler(max_concurrent=2)
    s.upsert("/auto", "auto", AUTO, now=0.0)
    s.upsert("/man", "man", {}, now=0.0)
    s.request_manual("/man", {"use.optimization.bytes-per-iter": "10"}, 0.0)
    plan_all(s, 0.0)
    starts = {st.location: st for st in s.pick(0.0)}
    s.stop_all()
    assert {r[2] for r in s.stop_requests()} == {SERVICE_STOPPING}
    for loc, st in starts.items():
        s.finish(loc, st.run_id, 5.0, "stopped")
    assert s.get("/auto").next_run_at == 5.0
    assert s.get("/man").next_run_at == 5.0 and dict(s.get("/man").manual) == {"use.optimization.bytes-per-iter": "10"}


# --- GC --------------------------------------------------------------------------------------------------


def test_gc_is_due_at_once_then_every_gc_interval_with_backoff() -> None:
    s = scheduler(gc_interval_s=100.0, max_backoff_s=1000.0)
    s.upsert("/t", "t", {"use.gc.enabled": "true"}, now=0.0)
    assert s.get("/t").state == IDLE  # GC alone does not schedule optimizations
    assert s.gc_due(0.0) == ["/t"]
    s.gc_started("/t")
    assert s.gc_due(0.0) == [] and s.next_wakeup(0.0) is None
    s.gc_finished("/t", GcRecord(1.0, files_deleted=2), 1.0)
    assert s.get("/t").gc_next_at == 101.0 and s.get("/t").last_gc.files_deleted == 2
    s.gc_started("/t")
    s.gc_finished("/t", GcRecord(102.0, error="OSError: x"), 102.0)
    assert s.get("/t").gc_next_at == 202.0 and s.get("/t").last_error == "GC: OSError: x"
    s.gc_started("/t")
    s.gc_finished("/t", GcRecord(203.0, error="OSError: x"), 203.0)
    assert s.get("/t").gc_next_at == 403.0
    s.upsert("/t", "t", {}, now=300.0)
    assert s.get("/t").gc_next_at is None and s.gc_due(1e9) == []


def test_next_wakeup_is_the_earliest_future_due_time() -> None:
    s = scheduler(gc_interval_s=50.0)
    assert s.next_wakeup(0.0) is None
    s.upsert("/a", "a", AUTO, now=0.0)
    run_once(s, "/a", 0.0, 1.0)
    s.upsert("/g", "g", {"use.gc.enabled": "true"}, now=0.0)
    s.gc_started("/g")
    s.gc_finished("/g", GcRecord(2.0), 2.0)
    assert s.next_wakeup(3.0) == 52.0
    assert s.next_wakeup(60.0) == I


# --- restart ---------------------------------------------------------------------------------------------


def test_restore_resumes_interrupted_runs_and_keeps_schedules() -> None:
    s = scheduler(max_concurrent=3)
    s.upsert("/run", "run", AUTO, now=0.0)
    s.upsert("/man", "man", {}, now=0.0)
    s.upsert("/later", "later", AUTO, now=0.0)
    run_once(s, "/later", 0.0, 1.0)
    s.request_manual("/man", {"use.optimization.bytes-per-iter": "10"}, 0.0)
    plan_all(s, 2.0)
    s.pick(2.0)
    assert {st.location for st in s.running()} == {"/run", "/man"}
    saved = s.states()  # what the state file holds when the process is killed

    t = scheduler()
    t.restore(saved, now=1000.0)
    assert t.get("/run").state == SCHEDULED and t.get("/run").next_run_at == 1000.0
    assert t.get("/run").last_run.outcome == INTERRUPTED and "interrupted" in t.get("/run").note
    assert dict(t.get("/man").manual) == {"use.optimization.bytes-per-iter": "10"} and t.get("/man").next_run_at == 1000.0
    assert t.get("/later").next_run_at == I  # a schedule not yet due keeps its time
    # The first refresh after the restart sees the same properties: nothing is rescheduled.
    t.upsert("/later", "later", AUTO, now=1001.0)
    assert t.get("/later").next_run_at == I
