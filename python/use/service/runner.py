"""Running one optimization on Spark for the service: the optimizer loop in its own FAIR pool.

A run is `use.optimize.loop.optimize_path` of an `OptimizeRequest` (the table and the run's settings)
on the service's SparkSession: plan, merge, commit, re-plan, until the planner selects nothing or a
stop is requested. What this module adds is how the run shows up in Spark:

* its jobs go to the scheduler pool `POOL` (`spark.scheduler.pool`, a thread-local property set on
  the run's thread), so with `spark.scheduler.mode=FAIR` (`use.optimize.keys.SPARK_CONF`, which the
  server applies to its session) JDBC users' queries share the executors with a merge instead of queueing behind it;
* they carry the job group `use-service-<run id>` and a description naming the table, the trigger
  and the run, so operators see in the Spark UI whose work it is (and the group is what a service
  stop cancels).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from use.optimize.keys import POOL, POOL_PROPERTY, SPARK_PREFIX
from use.optimize.loop import optimize_path
from use.optimize.loop_core import StopToken, session_conf
from use.optimize.request import OptimizeRequest
from use.runtime.jobs import set_local_property
from use.service.records import SCHEDULED_TRIGGER, RunStart

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["SparkRunner", "job_group"]

_log = logging.getLogger("use.service.runner")


def job_group(run_id: str) -> str:
    return f"use-service-{run_id}"


class SparkRunner:
    """Runs the service's optimizations on `spark` (see the module docstring)."""

    def __init__(self, spark: SparkSession, pool: str = POOL) -> None:
        self.spark = spark
        self.pool = pool
        mode = str(spark.sparkContext.getConf().get("spark.scheduler.mode", "FIFO")).upper()
        if mode != "FAIR":
            _log.warning(
                "spark.scheduler.mode is %s: optimization jobs share one FIFO queue with queries; "
                "set spark.scheduler.mode=FAIR on the session (use.optimize.keys.SPARK_CONF)",
                mode,
            )

    def session_conf(self) -> dict[str, str]:
        """The session's `spark.qbeast.use.*` settings (service settings and table-key defaults)."""
        return session_conf(self.spark, SPARK_PREFIX)

    def optimize(self, start: RunStart, *, stop: StopToken, cancel: StopToken, on_iteration: Callable[[Any], None]) -> str:
        """Run the optimizer loop on the table; returns the loop's outcome (converged, stopped, ...)."""
        set_local_property(self.spark, POOL_PROPERTY, self.pool)
        try:
            request = OptimizeRequest(start.location, overrides=dict(start.settings), auto=start.trigger == SCHEDULED_TRIGGER)
            result = optimize_path(
                self.spark,
                request,
                stop=stop,
                cancel=cancel,
                on_iteration=on_iteration,
                job_group=job_group(start.run_id),
                job_description=f"USE service: {start.trigger} optimization of {start.name} (run {start.run_id})",
            )
        finally:
            set_local_property(self.spark, POOL_PROPERTY, None)
        return result.outcome
