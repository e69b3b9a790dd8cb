"""The continuous optimization service's records: what it knows about each table (`TableState`),
its runs and their progress, the planner's estimates and layout figures, and the scheduler's
settings. All frozen: every transition of `use.service.schedule.Scheduler` replaces a record, so a
record handed to another thread (a status query, the state file) never changes under it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from use.optimize.config import ServiceConfig
from use.optimize.keys import GC_ENABLED_KEY, PREFIX

__all__ = [
    "Candidate",
    "DEFAULT_MAX_BACKOFF_S",
    "DROPPED",
    "Estimate",
    "FAILED",
    "GC_ERROR",
    "GcRecord",
    "IDLE",
    "INTERRUPTED",
    "LayoutFigures",
    "MANUAL_TRIGGER",
    "ManualDecision",
    "NOTHING_TO_DO",
    "PROPERTIES_ERROR",
    "Progress",
    "READ_ERROR",
    "RUNNING",
    "RUN_ERROR",
    "Run",
    "RunRecord",
    "RunStart",
    "SCHEDULED",
    "SCHEDULED_TRIGGER",
    "SERVICE_STOPPING",
    "SchedulerSettings",
    "Settings",
    "TableState",
    "UNSET",
    "as_settings",
    "optimization_keys",
    "relevant_properties",
]

# Per-table optimization state (the `optimization_state` the metastore_summary shows).
IDLE = "idle"
SCHEDULED = "scheduled"
RUNNING = "running"

SCHEDULED_TRIGGER = "scheduled"
MANUAL_TRIGGER = "manual"

# Outcomes recorded besides the loop's own (converged, stopped, no_progress, ...).
FAILED = "failed"
NOTHING_TO_DO = "nothing_to_do"
INTERRUPTED = "interrupted"  # the process ended during the run (kill -9); found at restart

# Stop reasons; only a service stop cancels the running task (the others let it finish).
SERVICE_STOPPING = "the service is stopping"
UNSET = "continuous optimization was unset"
DROPPED = "the table was dropped"

# What a table's `last_error` came from: the same kind succeeding again clears it (`use.service.schedule`'s docstring).
RUN_ERROR = "run"  # a run or the plan check before it
GC_ERROR = "gc"
PROPERTIES_ERROR = "properties"
READ_ERROR = "read"

DEFAULT_MAX_BACKOFF_S = 6 * 3600.0

Settings = tuple[tuple[str, str], ...]


def as_settings(values: Mapping[str, Any] | Iterable[tuple[str, Any]] | None) -> Settings:
    items = values.items() if isinstance(values, Mapping) else (values or ())
    return tuple(sorted((str(k), str(v)) for k, v in items))


def relevant_properties(properties: Mapping[str, str]) -> Settings:
    """The table properties the service acts on: `use.optimization.*` and `use.gc.enabled`."""
    return as_settings({k: v for k, v in properties.items() if k.startswith(PREFIX) or k == GC_ENABLED_KEY})


def optimization_keys(properties: Settings) -> Settings:
    return tuple(kv for kv in properties if kv[0].startswith(PREFIX))


@dataclass(frozen=True)
class SchedulerSettings:
    interval_s: float
    max_concurrent: int = 1
    gc_interval_s: float = 3600.0
    max_backoff_s: float = DEFAULT_MAX_BACKOFF_S

    @classmethod
    def from_config(cls, config: ServiceConfig) -> SchedulerSettings:
        return cls(config.optimization_interval_s, config.max_concurrent_optimizations, config.gc_interval_s)


@dataclass(frozen=True)
class Estimate:
    """What the planner would do next: its best task's score, the bytes and tasks of its plan."""

    score: float
    planned_bytes: int
    tasks: int
    version: int | None = None


@dataclass(frozen=True)
class LayoutFigures:
    """The table's layout as last measured (after each run and each plan check).

    `health_score` is the seam for `use.insights`' layout health score (0-100); None until a stats
    function that computes it is plugged in (see `use.service.probe`).
    """

    version: int | None
    files: int
    bytes: int
    records: int | None
    revisions: int
    cubes: int
    blocks: int
    pending_tasks: int
    pending_bytes: int
    measured_at: float
    health_score: float | None = None


@dataclass(frozen=True)
class Progress:
    """What a run has done so far (summed over its iterations)."""

    iterations: int = 0
    committed: int = 0
    files_in: int = 0
    files_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    rows: int = 0
    last_version: int | None = None
    strategy: str | None = None

    def add(self, metrics: Any) -> Progress:
        """Fold in one iteration (`use.optimize.task_metrics.IterationMetrics`); abandoned ones changed nothing."""
        if not metrics.committed:
            return replace(self, iterations=self.iterations + 1, strategy=metrics.strategy)
        return Progress(
            self.iterations + 1, self.committed + 1, self.files_in + metrics.files_in, self.files_out + metrics.files_out,
            self.bytes_in + metrics.bytes_in, self.bytes_out + metrics.bytes_out, self.rows + metrics.rows,
            metrics.version, metrics.strategy,
        )  # fmt: skip


@dataclass(frozen=True)
class Run:
    """A run in progress. `settings` are a manual run's (empty for scheduled runs)."""

    run_id: str
    trigger: str
    started_at: float
    settings: Settings = ()
    progress: Progress = field(default_factory=Progress)
    stop_reason: str | None = None


@dataclass(frozen=True)
class RunRecord:
    """A finished run (or a plan check that failed or found nothing for a manual request)."""

    run_id: str
    trigger: str
    started_at: float
    finished_at: float | None
    outcome: str
    progress: Progress = field(default_factory=Progress)
    error: str | None = None


@dataclass(frozen=True)
class GcRecord:
    at: float
    files_deleted: int = 0
    bytes_deleted: int = 0
    logs_deleted: int = 0
    error: str | None = None


@dataclass(frozen=True)
class TableState:
    """Everything the service knows about one table. `seq` changes with every schedule change, so a
    plan made for an older schedule (in another thread) is recognised and dropped."""

    location: str
    name: str
    properties: Settings = ()
    continuous: bool = False
    gc_enabled: bool = False
    config_error: str | None = None
    read_error: str | None = None
    seq: int = 0
    next_run_at: float | None = None
    due_since: float | None = None
    manual: Settings | None = None
    estimate: Estimate | None = None
    run: Run | None = None
    reschedule_after_run: bool = False
    dropped: bool = False
    failures: int = 0
    runs: int = 0
    last_run: RunRecord | None = None
    last_check_at: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    last_error_kind: str | None = None
    note: str | None = None
    note_at: float | None = None
    gc_next_at: float | None = None
    gc_running: bool = False
    gc_failures: int = 0
    last_gc: GcRecord | None = None
    layout: LayoutFigures | None = None

    @property
    def state(self) -> str:
        if self.run is not None:
            return RUNNING
        return SCHEDULED if self.next_run_at is not None else IDLE

    @property
    def next_trigger(self) -> str:
        return MANUAL_TRIGGER if self.manual is not None else SCHEDULED_TRIGGER

    def is_due(self, now: float) -> bool:
        return self.run is None and not self.dropped and self.next_run_at is not None and self.next_run_at <= now


@dataclass(frozen=True)
class RunStart:
    """A run the service must start now."""

    run_id: str
    location: str
    name: str
    trigger: str
    settings: Settings
    started_at: float


@dataclass(frozen=True)
class Candidate:
    """A due table to plan before it may run; `seq` ties the plan to the schedule it was made for."""

    location: str
    name: str
    trigger: str
    settings: Settings
    seq: int


@dataclass(frozen=True)
class ManualDecision:
    accepted: bool
    reason: str
    location: str
