"""The continuous optimization service: tables keep themselves optimized from their properties.

Modules, one job each; only `runner` runs Spark:

* `registry`  the table registry (pull from a `TableSource`, push of catalog events)
* `sources`   sources over storage: tables by location, properties from each Delta log
* `schedule`  the scheduling rules as a pure state machine (time injected)
* `probe`     PLAN and STATS without Spark: the next plan's score and the layout figures
* `runner`    a run on Spark: the optimizer loop in the service's FAIR pool, with a job group
* `gc`        vacuum and expired-log cleanup of tables with `use.gc.enabled=true`
* `state`     the state file in the data dir (atomic writes, recovery after kill -9)
* `status`    the Arrow tables operators see (service_status, per-table states)
* `service`   the service thread that ties them together (`OptimizationService`)
* `active`    the service running in this driver, if any (what the SQL surface asks)
"""

from __future__ import annotations

from use.service.records import IDLE, RUNNING, SCHEDULED, ManualDecision, TableState
from use.service.registry import ALTERED, CREATED, DROPPED, TableEvent, TableInfo, TableRegistry, TableSource
from use.service.service import OptimizationService
from use.service.sources import LocationSource
from use.service.status import SERVICE_STATUS_SCHEMA, TABLE_STATE_SCHEMA

__all__ = [
    "ALTERED",
    "CREATED",
    "DROPPED",
    "IDLE",
    "RUNNING",
    "SCHEDULED",
    "LocationSource",
    "ManualDecision",
    "OptimizationService",
    "SERVICE_STATUS_SCHEMA",
    "TABLE_STATE_SCHEMA",
    "TableEvent",
    "TableInfo",
    "TableRegistry",
    "TableSource",
    "TableState",
]
