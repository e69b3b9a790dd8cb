"""PLAN and STATS without Spark: what the planner would do next on a table, and its layout figures.

Relyt's PLAN task is light (metadata only) and runs on resident resources; its MERGE tasks are the
heavy ones. The service does the same: before a due table runs, `probe` reads the latest snapshot
and plans it with the configuration the run would use. The plan's best task score (estimated read
cost saved per byte rewritten) is the table's scheduling weight, and an empty plan means the run is
not started at all. After each run `probe` is called again for the STATS: the layout figures the
status tables show.

Seam for `use.insights`: the layout health score (0-100) comes from the `health` function given to
`probe` (None leaves `LayoutFigures.health_score` unset); the server passes the insights function
when that module lands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from use.optimize.config import OptimizationConfig
from use.optimize.loop_core import with_planning_time
from use.optimize.planner import Planner
from use.optimize.task_metrics import num_records
from use.qbeast.snapshot import QbeastSnapshot
from use.service.records import Estimate, LayoutFigures, Settings
from use.service.sources import delta_log

__all__ = ["probe", "layout_figures", "HealthFn", "ProbeFn"]

#: Layout health score (0-100) of a snapshot; the `use.insights` seam.
HealthFn = Callable[[QbeastSnapshot], "float | None"]
#: What the service calls: (location, manual settings, session defaults, now) -> (plan estimate, figures).
ProbeFn = Callable[[str, Settings, Mapping[str, str], float], "tuple[Estimate, LayoutFigures]"]


def probe(
    location: str,
    settings: Settings | Mapping[str, str] = (),
    session_defaults: Mapping[str, str] | None = None,
    now: float = 0.0,
    *,
    health: HealthFn | None = None,
) -> tuple[Estimate, LayoutFigures]:
    """Plan the table at `location` as a run would (its properties, the session's
    `spark.qbeast.use.optimization.*` defaults, then `settings`) and measure its layout.

    Raises what reading the log or parsing the configuration raises (TableNotFoundError,
    CorruptLogError, ConfigError, ...): the service records it as the table's failure.
    """
    log = delta_log(location)
    snap = log.snapshot()
    qsnap = QbeastSnapshot.from_delta(snap)
    overrides = dict(settings.items() if isinstance(settings, Mapping) else settings)
    config = OptimizationConfig.from_properties(snap.configuration, overrides, spark_conf=session_defaults or {})
    if now > 0:
        # the inputs of time-aware rules (tiering.max-wait, tiering.idle-after), as a run's loop passes
        # them: without them a quiet table's time-factor work was never found by the service's plan
        # check, so no run started for it
        config = with_planning_time(config, log, now)
    plan = Planner(None, config).plan(qsnap)
    best = max((float(t.score) for t in plan.tasks), default=0.0)
    estimate = Estimate(best, int(plan.bytes), len(plan.tasks), int(snap.version))
    figures = layout_figures(qsnap, len(plan.tasks), int(plan.bytes), now, health=health)
    return estimate, figures


def layout_figures(
    qsnap: QbeastSnapshot, pending_tasks: int, pending_bytes: int, now: float, *, health: HealthFn | None = None
) -> LayoutFigures:
    """Files, bytes, rows, revisions, cubes and blocks of the snapshot, vectorized over its tables."""
    files: pa.Table = qsnap.files
    blocks: pa.Table = qsnap.blocks
    nbytes = int(pc.sum(files.column("size")).as_py() or 0) if files.num_rows else 0
    cubes = blocks.group_by(["revision_id", "cube_id"]).aggregate([]).num_rows if blocks.num_rows else 0
    score: Any = health(qsnap) if health is not None else None
    return LayoutFigures(
        version=int(qsnap.version),
        files=int(files.num_rows),
        bytes=nbytes,
        records=num_records(files, qsnap.schema),
        revisions=len(qsnap.revisions),
        cubes=int(cubes),
        blocks=int(blocks.num_rows),
        pending_tasks=int(pending_tasks),
        pending_bytes=int(pending_bytes),
        measured_at=float(now),
        health_score=None if score is None else float(score),
    )
