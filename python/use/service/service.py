"""The continuous optimization service: a thread that keeps tables optimized from their properties.

One service thread runs the cycle the seeds describe (continuous-optimization.txt, "How it is
executed?"), with the rules in `use.service.schedule`:

1. refresh the registry from the table source every refresh interval (default: the optimization
   interval), so commits by other processes are seen within one interval; catalog events pushed
   with `on_event` are applied at once, from the caller's thread;
2. plan every due table (PLAN, metadata only: `use.service.probe`), which gives its scheduling
   weight or shows there is nothing to do;
3. start the heaviest planned tables, each run on its own worker thread, at most
   `spark.qbeast.use.max-concurrent-optimizations` at once (the runner puts their Spark jobs in the
   FAIR pool);
4. start GC (vacuum + expired-log cleanup) of tables with `use.gc.enabled=true` on the GC thread;
5. save the state file if anything changed, then sleep until the next due time or until woken (an
   event, a manual trigger, the end of a run, a stop).

A run that fails, and a plan that fails, is recorded on its table and retried with backoff; it never
reaches the service thread, so one bad table cannot stop the others. `stop()` asks running runs to
stop and, by default, cancels the Spark jobs of their current task (abandoned cleanly, nothing
half-committed; `use.optimize.executor.run_task`); a UNSET or a drop only asks a run to end after
its current task. Logging goes to the `use.service` logger (the server routes it to the data dir).

Seams for the server (`use serve`): `OptimizationService` has the server's `Service` shape
(`name`, `start(spark)`, `stop()`); `on_event(TableEvent)` takes catalog events; `trigger(table,
settings)` is the manual trigger; `status()` and `table_states()` are the Arrow tables behind
`service_status` and the per-table columns of `metastore_summary`; the `TableSource` given at
construction can be swapped for one over the metastore.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from use.errors import ServiceError, TableNotFoundError
from use.optimize.config import ServiceConfig
from use.optimize.keys import SPARK_OPT_PREFIX
from use.optimize.loop_core import CONFLICTS, StopToken
from use.optimize.report import format_iteration
from use.service import active
from use.service import state as state_file
from use.service.gc import collect_garbage
from use.service.probe import ProbeFn, probe
from use.service.records import (
    FAILED,
    SERVICE_STOPPING,
    GcRecord,
    ManualDecision,
    RunStart,
    SchedulerSettings,
    TableState,
)
from use.service.registry import TableChange, TableEvent, TableInfo, TableRegistry, TableSource
from use.service.schedule import Scheduler
from use.service.sources import forget_log, read_table
from use.service.status import service_status, table_states

__all__ = ["OptimizationService", "Runner"]

log = logging.getLogger("use.service")

Clock = Callable[[], float]
_RETRY_AFTER_BUG_S = 5.0
GcFn = Callable[[str, float], GcRecord]


class Runner(Protocol):
    """Runs optimizations (`use.service.runner.SparkRunner` on the server's SparkSession)."""

    def session_conf(self) -> Mapping[str, str]:
        """The session's `spark.qbeast.use.*` settings."""
        ...

    def optimize(self, start: RunStart, *, stop: StopToken, cancel: StopToken, on_iteration: Callable[[Any], None]) -> str:
        """Run the optimizer loop on `start.location`; return its outcome, raise on failure."""
        ...


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class OptimizationService:
    """See the module docstring. Thread-safe; every public method may be called from any thread."""

    name = "optimization"

    def __init__(
        self,
        source: TableSource,
        state_dir: str | Path,
        *,
        config: ServiceConfig | None = None,
        runner: Runner | None = None,
        clock: Clock = time.time,
        refresh_interval_s: float | None = None,
        probe_fn: ProbeFn = probe,
        gc_fn: GcFn = collect_garbage,
        reader: Callable[[str, str], TableInfo | None] = read_table,
    ) -> None:
        self._registry = TableRegistry(source, reader)
        self._registry.subscribe(self._on_change)
        self.state_path = Path(state_dir) / state_file.STATE_FILE
        self._config = config
        self._runner = runner
        self._clock = clock
        self._refresh_interval_s = refresh_interval_s
        self._probe = probe_fn
        self._gc = gc_fn
        self._cond = threading.Condition(threading.RLock())
        self._scheduler: Scheduler | None = None
        self._session_defaults: dict[str, str] = {}
        self._tokens: dict[str, tuple[StopToken, StopToken]] = {}
        self._workers: dict[str, threading.Thread] = {}
        self._gc_thread: threading.Thread | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._refresh_requested = True
        self._next_refresh = 0.0
        self._saved: str | None = None
        self._cycles = 0

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self, spark: Any = None) -> None:
        """Restore the saved state, start the service thread and return at once.

        `spark` is the server's SparkSession (runs go to a `SparkRunner` on it); tests may give a
        `runner` at construction instead. Settings come from the session's Spark conf unless a
        `config` was given.
        """
        with self._cond:
            if self._thread is not None:
                raise ServiceError("the optimization service is already started; stop() it before starting it again")
            if self._runner is None:
                if spark is None:
                    raise ServiceError("start(spark) needs the server's SparkSession (or construct the service with a runner)")
                # deferred: the runner imports pyspark, and this module is pure (tests drive it with their own runner)
                from use.service.runner import SparkRunner

                self._runner = SparkRunner(spark)
            conf = dict(self._runner.session_conf())
            config = self._config or ServiceConfig.from_spark_conf(conf)
            self._config = config
            self._session_defaults = {k: v for k, v in conf.items() if k.startswith(SPARK_OPT_PREFIX)}
            if self._refresh_interval_s is None:
                self._refresh_interval_s = config.optimization_interval_s
            scheduler = Scheduler(SchedulerSettings.from_config(config))
            restored = state_file.load_states(self.state_path)
            scheduler.restore(restored, self._clock())
            self._scheduler = scheduler
            self._stopping = False
            self._refresh_requested = True
            self._thread = threading.Thread(target=self._loop, name="use-optimization-service", daemon=True)
            self._thread.start()
        active.register(self)
        log.info(
            "optimization service started: interval %gs, at most %d concurrent run(s), GC interval %gs, "
            "%d table state(s) restored from %s",
            config.optimization_interval_s, config.max_concurrent_optimizations, config.gc_interval_s,
            len(restored), self.state_path,
        )  # fmt: skip

    def stop(self, *, cancel_running: bool = True, timeout: float | None = None) -> None:
        """Stop the service: running runs end (their current task cancelled, or with
        `cancel_running=False` finished first), threads are joined, the state is saved. Runs
        stopped this way resume at the next start. Idempotent."""
        with self._cond:
            thread = self._thread
            if thread is None or self._stopping:
                return
            self._stopping = True
            active.unregister(self)
            assert self._scheduler is not None
            self._scheduler.stop_all(SERVICE_STOPPING)
            for stop, cancel in self._tokens.values():
                stop.request_stop()
                if cancel_running:
                    cancel.request_stop()
            self._cond.notify_all()
        thread.join(timeout)
        with self._cond:
            workers = list(self._workers.values()) + ([self._gc_thread] if self._gc_thread else [])
        for w in workers:
            w.join(timeout)
        with self._cond:
            self._persist()
            self._thread = None
            self._cond.notify_all()
        log.info("optimization service stopped")

    @property
    def running(self) -> bool:
        with self._cond:
            return self._thread is not None and not self._stopping

    # --- inputs -----------------------------------------------------------------------------------

    def on_event(self, event: TableEvent) -> TableChange | None:
        """A catalog event (CREATE/ALTER/DROP TABLE committed in the server's session), applied at once."""
        return self._registry.on_event(event)

    def refresh_now(self) -> None:
        """Ask for a refresh from the source at the next cycle (which starts at once)."""
        with self._cond:
            self._refresh_requested = True
            self._cond.notify_all()

    def trigger(self, table: str, settings: Mapping[str, Any]) -> ManualDecision:
        """The manual trigger: one optimization of `table` (name or location) with `settings`
        (`use.optimization.*` keys), unless ignored (the decision's reason says why, and the status
        tables show it). Bad settings raise ConfigError; an unknown table TableNotFoundError."""
        info = self._registry.find(table)
        if info is None:
            info = self._registry.find(TableInfo(table, table).location)
        if info is None:
            raise TableNotFoundError(
                f"the optimization service knows no table {table!r}; give a table name or location it lists "
                "(see the status table), or create the table first"
            )
        with self._cond:
            scheduler = self._require_started()
            decision = scheduler.request_manual(info.location, settings, self._clock())
            self._persist()
            self._cond.notify_all()
        log.info("%s: %s", info.name, decision.reason)
        return decision

    # --- what operators see ----------------------------------------------------------------------

    def status(self) -> pa.Table:
        """The rows of `use_catalog.system_lake_tables.service_status` (`status.SERVICE_STATUS_SCHEMA`)."""
        with self._cond:
            return service_status(self._require_started(), self._clock())

    def table_states(self) -> pa.Table:
        """Per-table service columns of `metastore_summary` (`status.TABLE_STATE_SCHEMA`)."""
        with self._cond:
            return table_states(self._require_started())

    def table(self, table: str) -> TableState | None:
        """The state of one table (by location or name); None if the service does not know it."""
        info = self._registry.find(table)
        location = info.location if info is not None else TableInfo(table, table).location
        with self._cond:
            return self._require_started().get(location)

    @property
    def cycles(self) -> int:
        """How many service cycles have completed (a cycle refreshes if due, plans, starts runs)."""
        with self._cond:
            return self._cycles

    @property
    def registry(self) -> TableRegistry:
        return self._registry

    def wait_until(self, predicate: Callable[[OptimizationService], bool], timeout: float) -> bool:
        """Block until `predicate(service)` holds (checked at every state change) or `timeout`
        seconds pass; returns whether it holds. For tests and the server's demo."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    # --- the service thread ----------------------------------------------------------------------

    def _require_started(self) -> Scheduler:
        if self._scheduler is None:
            raise ServiceError("the optimization service is not started; call start(spark) first")
        return self._scheduler

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                refresh = self._refresh_requested or self._clock() >= self._next_refresh
            failed = False
            try:
                if refresh:
                    self._refresh()
                self._cycle()
            except Exception:  # the service must outlive any bug in one cycle
                log.exception("optimization service cycle failed; continuing")
                failed = True
            with self._cond:
                self._cycles += 1
                self._cond.notify_all()
                if failed and not self._stopping:
                    self._cond.wait(timeout=_RETRY_AFTER_BUG_S)  # no hot loop on a repeating failure
                    continue
                if self._stopping or self._refresh_requested:
                    continue
                assert self._scheduler is not None
                now = self._clock()
                if self._scheduler.needs_estimate(now):
                    continue  # a table became due (or its plan went stale) during this cycle
                wake = self._scheduler.next_wakeup(now)
                deadline = self._next_refresh if wake is None else min(wake, self._next_refresh)
                self._cond.wait(timeout=max(0.0, deadline - now))

    def _refresh(self) -> None:
        with self._cond:
            self._refresh_requested = False
            assert self._refresh_interval_s is not None
            self._next_refresh = self._clock() + self._refresh_interval_s
        try:
            self._registry.refresh()
        except Exception as exc:  # noqa: BLE001 - keep what is known; try again next interval
            log.warning(
                "listing the tables failed (%s); keeping the %d known table(s)", _describe(exc), len(self._registry.tables())
            )
            return
        tables = self._registry.tables()
        with self._cond:
            scheduler = self._require_started()
            now = self._clock()
            for info in tables.values():
                scheduler.upsert(info.location, info.name, info.properties, now, read_error=info.error)
            gone = [s.location for s in scheduler.states() if s.location not in tables]
            scheduler.retain(tables.keys(), now)
            self._apply_stops()
            self._persist()
        for loc in gone:
            forget_log(loc)

    def _on_change(self, change: TableChange) -> None:
        """Registry listener: events and refreshes reach the scheduler at once."""
        with self._cond:
            scheduler = self._scheduler
            if scheduler is None:
                return  # applied at start from the registry's tables
            now = self._clock()
            if change.after is not None:
                info = change.after
                scheduler.upsert(info.location, info.name, info.properties, now, read_error=info.error)
            else:
                scheduler.remove(change.location, now)
                log.info("%s dropped", change.before.name if change.before else change.location)
            self._apply_stops()
            self._persist()
            self._cond.notify_all()

    def _cycle(self) -> None:
        with self._cond:
            scheduler = self._require_started()
            candidates = scheduler.needs_estimate(self._clock())
        for c in candidates:
            with self._cond:
                if self._stopping:
                    return
            try:
                estimate, figures = self._probe(c.location, c.settings, self._session_defaults, self._clock())
            except Exception as exc:  # noqa: BLE001 - recorded on the table
                error = _describe(exc)
                log.warning("%s: planning failed: %s", c.name, error)
                with self._cond:
                    scheduler.plan_failed(c.location, c.seq, error, self._clock())
                continue
            with self._cond:
                scheduler.set_estimate(c.location, c.seq, estimate, self._clock(), figures)
            if estimate.tasks == 0:
                log.debug("%s: nothing to optimize", c.name)
        with self._cond:
            if self._stopping:
                return
            now = self._clock()
            for start in scheduler.pick(now):
                self._start_run(start)
            if self._gc_thread is None:
                due = scheduler.gc_due(now)
                if due:
                    for loc in due:
                        scheduler.gc_started(loc)
                    self._gc_thread = threading.Thread(target=self._gc_all, args=(due,), name="use-service-gc", daemon=True)
                    self._gc_thread.start()
            self._persist()

    def _apply_stops(self) -> None:
        """Hand the scheduler's stop requests to the runs: a service stop cancels the running task,
        anything else lets it finish."""
        assert self._scheduler is not None
        for _, run_id, reason in self._scheduler.stop_requests():
            tokens = self._tokens.get(run_id)
            if tokens is None:
                continue
            if not tokens[0].stop_requested:
                log.info("run %s: stop requested (%s)", run_id, reason)
            tokens[0].request_stop()
            if reason == SERVICE_STOPPING:
                tokens[1].request_stop()

    def _persist(self) -> None:
        """Save the state file if it changed (called under the lock after every transition)."""
        if self._scheduler is None:
            return
        content = state_file.encode(self._scheduler.states())
        if content == self._saved:
            return
        try:
            state_file.save_states(self.state_path, content)
            self._saved = content
        except OSError as exc:
            log.warning("cannot save the service state to %s: %s", self.state_path, exc)

    # --- runs ------------------------------------------------------------------------------------

    def _start_run(self, start: RunStart) -> None:
        self._tokens[start.run_id] = (StopToken(), StopToken())
        worker = threading.Thread(target=self._run, args=(start,), name=f"use-service-run-{start.run_id}", daemon=True)
        self._workers[start.run_id] = worker
        log.info("run %s: %s optimization of %s started", start.run_id, start.trigger, start.name)
        worker.start()

    def _run(self, start: RunStart) -> None:
        stop, cancel = self._tokens[start.run_id]
        outcome, error = FAILED, None
        try:
            assert self._runner is not None
            outcome = self._runner.optimize(start, stop=stop, cancel=cancel, on_iteration=lambda m: self._progress(start, m))
            if outcome == CONFLICTS:  # a conflict the loop could not resolve: a failure, retried later
                error = "ConcurrentModificationError: every merge task lost to concurrent writers; retrying later"
                log.warning("run %s of %s failed: %s", start.run_id, start.name, error)
        except Exception as exc:  # recorded on the table, retried with backoff
            error = _describe(exc)
            log.warning("run %s of %s failed: %s", start.run_id, start.name, error, exc_info=True)
        figures = None
        if error is None:
            try:  # STATS: the layout after the run, under the table's own configuration
                _, figures = self._probe(start.location, (), self._session_defaults, self._clock())
            except Exception as exc:  # noqa: BLE001 - the run itself succeeded
                log.warning("run %s of %s: layout figures not refreshed: %s", start.run_id, start.name, _describe(exc))
        with self._cond:
            assert self._scheduler is not None
            self._scheduler.finish(start.location, start.run_id, self._clock(), outcome, error=error, layout=figures)
            self._tokens.pop(start.run_id, None)
            self._workers.pop(start.run_id, None)
            self._persist()
            self._cond.notify_all()
        if error is None:
            log.info("run %s of %s ended: %s", start.run_id, start.name, outcome)

    def _progress(self, start: RunStart, metrics: Any) -> None:
        log.info("run %s of %s: %s", start.run_id, start.name, format_iteration(metrics))
        with self._cond:
            assert self._scheduler is not None
            self._scheduler.progress(start.location, start.run_id, metrics)
            self._persist()
            self._cond.notify_all()

    def _gc_all(self, locations: list[str]) -> None:
        for loc in locations:
            with self._cond:
                stopping = self._stopping
            if stopping:
                record = None
            else:
                try:
                    record = self._gc(loc, self._clock())
                    if record.files_deleted or record.logs_deleted:
                        log.info("GC of %s: %d file(s), %d bytes, %d log file(s) deleted", loc,
                                 record.files_deleted, record.bytes_deleted, record.logs_deleted)  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - recorded, retried with backoff
                    record = GcRecord(self._clock(), error=_describe(exc))
                    log.warning("GC of %s failed: %s", loc, record.error)
            with self._cond:
                assert self._scheduler is not None
                if record is None:
                    self._scheduler.gc_skipped(loc)
                else:
                    self._scheduler.gc_finished(loc, record, self._clock())
                self._persist()
                self._cond.notify_all()
        with self._cond:
            self._gc_thread = None
            self._cond.notify_all()
