"""`<table>.plan`: what the optimizer would do next, one row per merge task; nothing is written.

It is the planner itself (`use.optimize.planner.Planner` with the table's `OptimizationConfig`), so
the rows are by construction the tasks `optimize(dry_run=True)` plans for the same snapshot and
settings, planning time included (`TableFacts.planning_config`: the time-aware rules,
`tiering.max-wait` and `tiering.idle-after`, need it; a config without it plans as if no file had
waited): its columns are `Plan.to_table()`'s (the dry-run rows of `CALL ... optimize`) plus the
snapshot version the plan was made on and the files of each task.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from use.insights.facts import config_of
from use.optimize.config import OptimizationConfig
from use.optimize.plan import Plan
from use.optimize.planner import Planner

__all__ = ["PLAN_SCHEMA", "next_plan", "plan"]

PLAN_SCHEMA = pa.schema(
    [
        *Plan((), "", 0).to_table().schema,
        ("snapshot_version", pa.int64()),
        ("paths", pa.list_(pa.string())),
    ]
)


def next_plan(qsnap: Any, config: OptimizationConfig | None = None, *, revision_id: int | None = None) -> Plan:
    """The plan the optimizer makes next for this snapshot (the table's own properties by default)."""
    config = config if config is not None else config_of(qsnap)
    return Planner(None, config).plan(qsnap, revision_id=revision_id)


def plan(qsnap: Any, config: OptimizationConfig | None = None, *, revision_id: int | None = None) -> pa.Table:
    """`<table>.plan`: one row per task of the next plan, best (highest score) first.

    `config` defaults to the table's properties; pass `OptimizationConfig.from_properties(props,
    spark_conf=...)` to add session defaults as `optimize()` does. ConfigError on invalid
    settings, InvalidArgumentError on a revision the table does not have.
    """
    p = next_plan(qsnap, config, revision_id=revision_id)
    versions = pa.array([p.snapshot_version] * len(p.tasks), pa.int64())
    paths = pa.array([list(t.paths) for t in p.tasks], pa.list_(pa.string()))
    table = p.to_table().append_column(PLAN_SCHEMA.field("snapshot_version"), versions)
    return table.append_column(PLAN_SCHEMA.field("paths"), paths)
