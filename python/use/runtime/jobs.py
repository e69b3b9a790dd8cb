"""Job groups of USE's own Spark work: a stop cancels a group, and the cleanup of a failed write waits
for the group's tasks (a cancelled job returns to the driver while its tasks may still write files)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: The thread-local properties a job group sets (`SparkContext.setJobGroup`), restored by `job_group`.
JOB_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def await_job_group_tasks(spark: SparkSession, timeout_s: float = 60.0) -> bool:
    """Wait until no task of this thread's Spark job group is running (True), or `timeout_s` passed.

    A cancelled or failed job returns to the driver at once while its tasks are still running on
    the executors: a task that is not interrupted stops only at its next check, and on its way out it
    may still write or delete files. Cleanup that deletes what a failed write wrote must come after
    them, or it races them (and a file created after the cleanup is left behind). Without a job group
    there is nothing to tell this thread's jobs by: returns at once (USE's writes and merge tasks
    always run in one, see `job_group`). Spark has no event for it, so
    the status tracker is polled."""
    sc = spark.sparkContext
    group = sc.getLocalProperty("spark.jobGroup.id")
    if not group:
        return True
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout_s
    while True:
        active = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                active += stage.numActiveTasks if stage is not None else 0
        if active == 0:
            return True
        if time.monotonic() >= deadline:
            log.warning("%d task(s) of job group %s still running after %.0f s", active, group, timeout_s)
            return False
        time.sleep(0.02)


@contextlib.contextmanager
def job_group(spark: SparkSession, group: str, description: str, *, keep_existing: bool = False) -> Iterator[str]:
    """Run the block's Spark jobs of this thread in job group `group` (yielded), then restore the
    thread's previous group and description. With `keep_existing`, a group the caller already set
    (a Thrift server's statement, a service run) is kept and yielded instead.

    A job group is what tells this thread's jobs apart: a stop cancels it, and the cleanup of a failed
    write waits for its tasks (`await_job_group_tasks`) before deleting what they wrote."""
    sc = spark.sparkContext
    current = sc.getLocalProperty("spark.jobGroup.id")
    if keep_existing and current:
        yield current
        return
    previous = {key: sc.getLocalProperty(key) for key in JOB_PROPERTIES}
    sc.setJobGroup(group, description)
    try:
        yield group
    finally:
        for key, value in previous.items():
            set_local_property(spark, key, value)


def set_local_property(spark: SparkSession, key: str, value: str | None) -> None:
    """Set this thread's Spark local property `key`; None removes it (Spark's contract)."""
    # pyspark's stub types the value as str, but Spark takes null as "remove the property"
    spark.sparkContext.setLocalProperty(key, value)  # type: ignore[arg-type]
