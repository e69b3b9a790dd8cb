"""The service's scheduling rules, as a pure state machine: time is an argument, nothing runs here.

The rules are the seeds' (continuous-optimization.txt "How it is executed?" and "What happens
if...?", optimizing-tables-guide.txt "Automatic Optimization" and "Manual Trigger") plus Relyt's
scheduling weight:

* A table is *continuous* when `use.optimization.type` is set or
  `use.optimization.autoOptimize.enabled=true`; it gets a run at once and then one every interval
  (`spark.qbeast.use.optimization-interval`), measured from the start of the previous run.
* UNSET (the table is no longer continuous) stops the schedule; a run in progress is asked to stop
  after its current task (`stop_requests`). A drop does the same and forgets the table.
* Changed parameters: with a run in progress, it finishes and the table is rescheduled at once with
  the new configuration (the run itself read the old one); otherwise the table is rescheduled at once.
* Manual trigger: a one-shot run with the given settings, queued unless a run of the table is in
  progress, the table is continuous, or a manual run is already queued; the decision and its
  reason are recorded on the table (`note`) for the status tables.
* Before a due table runs, the service plans it (`needs_estimate` / `set_estimate`): nothing to do
  reschedules it without a run; otherwise the plan's best task score (estimated read cost saved per
  byte rewritten) becomes its weight, multiplied by how long it has waited (`weight`). At most
  `max_concurrent` runs at once, heaviest first.
* A failed run (or plan) is recorded with its error and retried after `interval * 2^(failures-1)`,
  capped at `max_backoff_s` (never less than one interval); a success resets the count. A failed
  manual run is recorded, not retried (it was asked for once).
* `last_error` is what is wrong with the table *now* (an operator reads a set error as a table that
  needs attention): it is set by a failed run or plan, GC, invalid properties or an unreadable log,
  and cleared, with its time, when that same thing next succeeds (a run, a GC, the properties
  fixed, the log readable again); the `note` then keeps it as history ("recovered after 2
  failure(s); the last error was: ...").
* GC (`use.gc.enabled=true`): due at once, then every `gc_interval_s`, with the same backoff.

Why the weight cannot starve a table: the score enters as `1 + log1p(score)` (a plan a million
times more valuable weighs about 15 times more), while waiting doubles the weight every interval,
and a table that just ran starts waiting from zero again. So a table waits at most about
log2(15) ~ 4 intervals longer than one with a million times its score before it runs (tests
simulate it), and tables with comparable waits run in order of benefit.

Every transition replaces a frozen `TableState`; the `Scheduler` only holds the map. It is not
thread-safe: the service calls it under its lock.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from use.errors import ConfigError, TableNotFoundError
from use.optimize.config import OptimizationConfig, gc_enabled, is_continuous
from use.service.records import (
    DROPPED,
    FAILED,
    GC_ERROR,
    INTERRUPTED,
    MANUAL_TRIGGER,
    NOTHING_TO_DO,
    PROPERTIES_ERROR,
    READ_ERROR,
    RUN_ERROR,
    SCHEDULED_TRIGGER,
    SERVICE_STOPPING,
    UNSET,
    Candidate,
    Estimate,
    GcRecord,
    LayoutFigures,
    ManualDecision,
    Run,
    RunRecord,
    RunStart,
    SchedulerSettings,
    TableState,
    as_settings,
    optimization_keys,
    relevant_properties,
)

__all__ = ["Scheduler", "weight", "backoff_s"]

_MAX_DOUBLINGS = 60.0  # 2^60: any longer wait already beats every score, and the float stays finite


def weight(score: float, waited_s: float, interval_s: float) -> float:
    """Relyt's scheduling weight (benefit per byte) raised by waiting time: doubled for every
    interval waited; see the module docstring."""
    waited = min(max(0.0, waited_s) / interval_s, _MAX_DOUBLINGS)
    return (1.0 + math.log1p(max(0.0, float(score)))) * math.pow(2.0, waited)


def backoff_s(failures: int, base_s: float, max_s: float) -> float:
    """Delay before retry number `failures` (1, 2, ...): base, 2 x base, 4 x base ..., capped."""
    return min(base_s * 2.0 ** max(0, failures - 1), max(max_s, base_s))


class Scheduler:
    """The table states and the transitions between them (see the module docstring)."""

    def __init__(self, settings: SchedulerSettings, *, new_run_id: Callable[[], str] | None = None) -> None:
        if settings.interval_s <= 0 or settings.max_concurrent < 1 or settings.gc_interval_s <= 0:
            raise ConfigError(f"scheduler settings need a positive interval and max_concurrent >= 1, got {settings}")
        self.settings = settings
        self._new_run_id = new_run_id or (lambda: uuid.uuid4().hex[:12])
        self._tables: dict[str, TableState] = {}

    # --- reading ---------------------------------------------------------------------------------

    def get(self, location: str) -> TableState | None:
        return self._tables.get(location)

    def states(self) -> tuple[TableState, ...]:
        return tuple(self._tables[k] for k in sorted(self._tables))

    def running(self) -> tuple[TableState, ...]:
        return tuple(s for s in self.states() if s.run is not None)

    def weight_of(self, state: TableState, now: float) -> float:
        waited = now - state.due_since if state.due_since is not None else 0.0
        return weight(state.estimate.score if state.estimate else 0.0, waited, self.settings.interval_s)

    def queue(self, now: float) -> list[TableState]:
        """Due tables waiting for a slot (or for their plan), heaviest first: the order `pick` takes."""
        due = [s for s in self._tables.values() if s.is_due(now)]
        return sorted(due, key=lambda s: (-self.weight_of(s, now), s.due_since or 0.0, s.location))

    def next_wakeup(self, now: float) -> float | None:
        """The earliest future time something becomes due; due work waiting for a slot or a worker
        is woken by the end of a run instead, so it is not counted (no busy loop)."""
        times = [s.next_run_at for s in self._tables.values() if s.run is None and s.next_run_at is not None]
        times += [s.gc_next_at for s in self._tables.values() if not s.gc_running and s.gc_next_at is not None]
        future = [t for t in times if t is not None and t > now]
        return min(future) if future else None

    # --- the registry's view -----------------------------------------------------------------

    def upsert(
        self, location: str, name: str, properties: Mapping[str, str], now: float, *, read_error: str | None = None
    ) -> None:
        """A table was seen (created, altered, or listed by a refresh)."""
        old = self._tables.get(location)
        relevant = relevant_properties(properties)
        base = old if old is not None else TableState(location, name)
        state = replace(base, name=name, read_error=read_error, dropped=False)
        if read_error is not None and read_error != base.read_error:
            state = self._failed(state, READ_ERROR, f"cannot read the table: {read_error}", now)
        elif read_error is None and base.read_error is not None:
            state = self._recovered(state, READ_ERROR, now)
        if old is not None and not old.dropped and relevant == old.properties:
            self._tables[location] = state
            return
        props = dict(relevant)
        config_error = None
        continuous = False
        try:
            continuous = is_continuous(props)
        except ConfigError as e:
            config_error = str(e)
        try:
            gc = gc_enabled(props)
        except ConfigError as e:
            gc, config_error = False, config_error or str(e)
        state = replace(state, properties=relevant, config_error=config_error, gc_enabled=gc)
        if config_error is not None and config_error != base.config_error:
            state = self._failed(state, PROPERTIES_ERROR, f"table properties: {config_error}", now)
        elif config_error is None and base.config_error is not None:
            state = self._recovered(state, PROPERTIES_ERROR, now)
        state = replace(state, gc_next_at=(base.gc_next_at if base.gc_enabled else now) if gc else None)
        if old is not None and not old.dropped and optimization_keys(relevant) == optimization_keys(old.properties):
            self._tables[location] = state  # only use.gc.enabled changed: the optimization schedule stays
            return
        self._tables[location] = self._reschedule(state, base, continuous, now)

    def _reschedule(self, state: TableState, base: TableState, continuous: bool, now: float) -> TableState:
        state = replace(state, continuous=continuous, seq=base.seq + 1, estimate=None)
        if state.run is not None:
            if continuous:
                return replace(state, reschedule_after_run=True)
            if state.run.trigger == SCHEDULED_TRIGGER and state.run.stop_reason is None:
                state = replace(state, run=replace(state.run, stop_reason=UNSET))
            return replace(state, reschedule_after_run=False, next_run_at=None, due_since=None)
        if continuous:
            if state.manual is not None:
                state = self._noted(state, "queued manual optimization dropped: the table now has continuous optimization", now)
            return replace(state, next_run_at=now, due_since=now, manual=None, failures=0)
        if state.manual is not None:
            return state  # a queued manual run stays queued
        return replace(state, next_run_at=None, due_since=None)

    def remove(self, location: str, now: float) -> None:
        """The table was dropped: forget it, after its running optimization (asked to stop) ends."""
        state = self._tables.get(location)
        if state is None:
            return
        if state.run is None:
            del self._tables[location]
            return
        run = state.run if state.run.stop_reason is not None else replace(state.run, stop_reason=DROPPED)
        self._tables[location] = replace(
            state, run=run, dropped=True, next_run_at=None, due_since=None, manual=None, gc_next_at=None, seq=state.seq + 1
        )

    def retain(self, locations: Iterable[str], now: float) -> None:
        """Drop every table not in `locations` (after a refresh: the registry is the list of tables)."""
        keep = set(locations)
        for loc in [loc for loc in self._tables if loc not in keep]:
            self.remove(loc, now)

    # --- manual trigger ------------------------------------------------------------------------

    def request_manual(self, location: str, settings: Mapping[str, Any], now: float) -> ManualDecision:
        """Queue a one-shot run with `settings` (`use.optimization.*` keys), or say why not.

        Bad settings raise ConfigError and change nothing; an unknown table is TableNotFoundError.
        """
        state = self._tables.get(location)
        if state is None or state.dropped:
            raise TableNotFoundError(
                f"the optimization service knows no table at {location}; check the name or location "
                "(tables appear once they have a Delta log and the service has seen them)"
            )
        wanted = as_settings(settings)
        OptimizationConfig.from_properties(dict(state.properties), dict(wanted))  # validates
        if state.run is not None:
            reason = (
                f"manual optimization ignored: an optimization of this table is already running "
                f"(run {state.run.run_id}, {state.run.trigger})"
            )
        elif state.continuous:
            reason = (
                "manual optimization ignored: the table has continuous optimization configured "
                "(use.optimization.type or use.optimization.autoOptimize.enabled); its scheduled runs follow its properties"
            )
        elif state.manual is not None:
            reason = "manual optimization ignored: a manual optimization of this table is already queued"
        else:
            reason = "manual optimization queued"
            state = replace(state, manual=wanted, next_run_at=now, due_since=now, estimate=None, seq=state.seq + 1)
            self._tables[location] = self._noted(state, reason, now)
            return ManualDecision(True, reason, location)
        self._tables[location] = self._noted(state, reason, now)
        return ManualDecision(False, reason, location)

    @staticmethod
    def _noted(state: TableState, note: str, now: float) -> TableState:
        return replace(state, note=note, note_at=now)

    @staticmethod
    def _failed(state: TableState, kind: str, error: str, now: float) -> TableState:
        """Record `error` as what is wrong with the table now (see the module docstring)."""
        return replace(state, last_error=error, last_error_at=now, last_error_kind=kind)

    @classmethod
    def _recovered(cls, state: TableState, kind: str, now: float, failures: int | None = None) -> TableState:
        """`kind` succeeded again: its error is no longer the table's (cleared, kept in the note).
        An error of another kind stays; one restored without a kind (an older state file) clears."""
        if state.last_error is None or state.last_error_kind not in (kind, None):
            return state
        after = f" after {failures} failure(s)" if failures else ""
        state = cls._noted(state, f"recovered{after}; the last error was: {state.last_error}", now)
        return replace(state, last_error=None, last_error_at=None, last_error_kind=None)

    # --- planning and picking ------------------------------------------------------------------

    def needs_estimate(self, now: float) -> list[Candidate]:
        """Due tables without a plan yet: the service plans each (outside its lock) and reports back."""
        return [
            Candidate(s.location, s.name, s.next_trigger, s.manual or (), s.seq) for s in self.queue(now) if s.estimate is None
        ]

    def set_estimate(self, location: str, seq: int, estimate: Estimate, now: float, layout: LayoutFigures | None = None) -> None:
        """The plan of a due table. Nothing to do: no run; a continuous table waits one more interval,
        a manual request is done. A plan for a schedule that changed meanwhile is dropped."""
        state = self._tables.get(location)
        if state is None or state.seq != seq or not state.is_due(now):
            return
        state = replace(state, layout=layout or state.layout, last_check_at=now)
        if estimate.tasks > 0:
            self._tables[location] = replace(state, estimate=estimate)
            return
        if state.manual is not None:
            record = RunRecord(self._new_run_id(), MANUAL_TRIGGER, now, now, NOTHING_TO_DO)
            state = replace(state, manual=None, last_run=record, runs=state.runs + 1, next_run_at=None, due_since=None)
            self._tables[location] = self._noted(state, "manual optimization: nothing to optimize", now)
            return
        nxt = now + self.settings.interval_s
        self._tables[location] = replace(state, next_run_at=nxt, due_since=nxt, estimate=None, seq=state.seq + 1)

    def plan_failed(self, location: str, seq: int, error: str, now: float) -> None:
        """Planning a due table failed (unreadable log, bad configuration): recorded, retried with backoff."""
        state = self._tables.get(location)
        if state is None or state.seq != seq or not state.is_due(now):
            return
        trigger = state.next_trigger
        record = RunRecord(self._new_run_id(), trigger, now, now, FAILED, error=error)
        self._tables[location] = self._after_run(replace(state, last_run=record, runs=state.runs + 1), trigger, error, now, now)

    def pick(self, now: float) -> list[RunStart]:
        """Start the heaviest planned due tables, up to the concurrency limit."""
        slots = self.settings.max_concurrent - len(self.running())
        if slots <= 0:
            return []
        starts: list[RunStart] = []
        for state in self.queue(now):
            if len(starts) >= slots:
                break
            if state.estimate is None or state.estimate.tasks <= 0:
                continue
            run = Run(self._new_run_id(), state.next_trigger, now, state.manual or ())
            self._tables[state.location] = replace(state, run=run, estimate=None, next_run_at=None, due_since=None)
            starts.append(RunStart(run.run_id, state.location, state.name, run.trigger, run.settings, now))
        return starts

    def progress(self, location: str, run_id: str, metrics: Any) -> None:
        state = self._tables.get(location)
        if state is None or state.run is None or state.run.run_id != run_id:
            return
        self._tables[location] = replace(state, run=replace(state.run, progress=state.run.progress.add(metrics)))

    def finish(self, location: str, run_id: str, now: float, outcome: str, *, error: str | None = None,
               layout: LayoutFigures | None = None) -> None:  # fmt: skip
        """A run ended (`outcome` from the loop), or failed with `error`."""
        state = self._tables.get(location)
        if state is None or state.run is None or state.run.run_id != run_id:
            return
        run = state.run
        record = RunRecord(run.run_id, run.trigger, run.started_at, now, FAILED if error else outcome, run.progress, error)
        state = replace(state, run=None, last_run=record, runs=state.runs + 1, layout=layout or state.layout)
        if state.dropped:
            del self._tables[location]
            return
        if run.stop_reason == SERVICE_STOPPING and error is None:
            # Resume where it stopped at the next start: due at once, a manual request queued again.
            state = replace(state, manual=run.settings if run.trigger == MANUAL_TRIGGER else state.manual)
            if state.continuous or state.manual is not None:
                state = replace(state, next_run_at=now, due_since=now)
            self._tables[location] = replace(state, seq=state.seq + 1)
            return
        self._tables[location] = self._after_run(state, run.trigger, error, run.started_at, now)

    def _after_run(self, state: TableState, trigger: str, error: str | None, started: float, now: float) -> TableState:
        """Next schedule after a run or failed plan: backoff on error, at once after a change, else one interval."""
        interval = self.settings.interval_s
        if error is not None:
            state = self._failed(replace(state, failures=state.failures + 1), RUN_ERROR, error, now)
        else:
            state = replace(self._recovered(state, RUN_ERROR, now, state.failures), failures=0)
        if trigger == MANUAL_TRIGGER:
            note = f"manual optimization failed: {error}" if error else "manual optimization done"
            state = self._noted(replace(state, manual=None), note, now)
        if state.continuous:
            if error is not None and not state.reschedule_after_run:
                nxt = now + backoff_s(state.failures, interval, self.settings.max_backoff_s)
            elif state.reschedule_after_run or trigger == MANUAL_TRIGGER:
                nxt = now
            else:
                nxt = max(started + interval, now)
        else:
            nxt = None
        return replace(state, next_run_at=nxt, due_since=nxt, reschedule_after_run=False, estimate=None, seq=state.seq + 1)

    # --- stopping --------------------------------------------------------------------------------

    def stop_all(self, reason: str = SERVICE_STOPPING) -> None:
        for state in self.running():
            assert state.run is not None
            if state.run.stop_reason is None:
                self._tables[state.location] = replace(state, run=replace(state.run, stop_reason=reason))

    def stop_requests(self) -> list[tuple[str, str, str]]:
        """(location, run_id, reason) of every running run asked to stop."""
        return [
            (s.location, s.run.run_id, s.run.stop_reason)
            for s in self.running()
            if s.run is not None and s.run.stop_reason is not None
        ]

    # --- GC --------------------------------------------------------------------------------------

    def gc_due(self, now: float) -> list[str]:
        return [
            s.location
            for s in self.states()
            if s.gc_enabled and not s.gc_running and not s.dropped and s.gc_next_at is not None and s.gc_next_at <= now
        ]

    def gc_started(self, location: str) -> None:
        state = self._tables.get(location)
        if state is not None:
            self._tables[location] = replace(state, gc_running=True)

    def gc_skipped(self, location: str) -> None:
        """A due GC was not run (the service is stopping): it stays due."""
        state = self._tables.get(location)
        if state is not None:
            self._tables[location] = replace(state, gc_running=False)

    def gc_finished(self, location: str, record: GcRecord, now: float) -> None:
        state = self._tables.get(location)
        if state is None:
            return
        state = replace(state, gc_running=False, last_gc=record)
        if record.error is not None:
            failures = state.gc_failures + 1
            state = self._failed(replace(state, gc_failures=failures), GC_ERROR, f"GC: {record.error}", now)
            nxt = now + backoff_s(failures, self.settings.gc_interval_s, self.settings.max_backoff_s)
        else:
            state = replace(self._recovered(state, GC_ERROR, now, state.gc_failures), gc_failures=0)
            nxt = now + self.settings.gc_interval_s
        self._tables[location] = replace(state, gc_next_at=nxt if state.gc_enabled else None)

    # --- restart ---------------------------------------------------------------------------------

    def restore(self, states: Iterable[TableState], now: float) -> None:
        """Take back the states saved by a previous process (`use.service.state`).

        A run that was in progress when that process ended (kill -9) is recorded as interrupted and
        resumes at once: a continuous table is due now, a manual request is queued again. Flags of
        work in flight (GC) are cleared. The next refresh reconciles the properties.
        """
        for saved in states:
            state = replace(saved, gc_running=False, dropped=False, estimate=None, reschedule_after_run=False)
            if state.run is not None:
                run = state.run
                record = RunRecord(run.run_id, run.trigger, run.started_at, None, INTERRUPTED, run.progress)
                state = replace(state, run=None, last_run=record, runs=state.runs + 1)
                if run.trigger == MANUAL_TRIGGER:
                    state = replace(state, manual=run.settings)
                if state.continuous or state.manual is not None:
                    state = replace(state, next_run_at=now, due_since=now)
                state = self._noted(state, f"run {run.run_id} was interrupted (the service ended during it); resumed", now)
            elif state.continuous and state.next_run_at is None:
                state = replace(state, next_run_at=now, due_since=now)
            self._tables[state.location] = state
