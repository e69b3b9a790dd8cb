"""The session USE builds: PySpark's own error reporting keeps working around USE's helpers."""

from __future__ import annotations

import pytest


def test_query_errors_stay_spark_errors_after_quiet_query_errors(spark) -> None:
    from pyspark.errors import ArithmeticException

    from use.runtime.query_errors import quiet_query_errors

    with quiet_query_errors():
        pass
    # PySpark logs an error with a SQL context through its query-error logger before raising it; a
    # plain logger under that name used to turn every such error into a TypeError.
    with pytest.raises(ArithmeticException, match="DIVIDE_BY_ZERO"):
        spark.sql("SELECT id / (id - id) FROM range(1)").collect()


def test_await_job_group_tasks_returns_once_the_cancelled_jobs_tasks_have_ended(spark, tmp_path) -> None:
    """A cancelled job returns to the driver while its tasks still run: cleanup after a failed write
    waits for them (`use.qbeast.write_scope.discard_write`), else a task ending later races it."""
    import os
    import threading
    import time

    from use.runtime.jobs import await_job_group_tasks

    sc = spark.sparkContext
    group = "use-test-await-group"
    release = tmp_path / "release"
    marker = str(tmp_path / "ended")

    def slow(rows):
        # the task ends only once the test has cancelled its job (it creates `release` after)
        while not os.path.exists(str(release)):
            time.sleep(0.01)
        open(f"{marker}-{os.getpid()}-{threading.get_ident()}", "w").close()
        yield from rows

    failed: list[BaseException] = []

    def run() -> None:
        sc.setJobGroup(group, "slow job")
        try:
            spark.range(1, numPartitions=1).rdd.mapPartitions(slow).collect()
        except BaseException as exc:  # noqa: BLE001 - the cancellation is the point
            failed.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    tracker = sc.statusTracker()

    def running() -> int:
        return sum(
            tracker.getStageInfo(s).numActiveTasks
            for j in tracker.getJobIdsForGroup(group)
            for s in (tracker.getJobInfo(j).stageIds if tracker.getJobInfo(j) else ())
            if tracker.getStageInfo(s) is not None
        )

    deadline = time.monotonic() + 60
    while running() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # the job is submitted from another thread: poll Spark's tracker
    assert running() == 1
    sc.cancelJobGroup(group)
    worker.join(60)
    assert failed  # the job has returned to the driver, cancelled, while its task still runs
    assert running() == 1 and not any(p.name.startswith("ended") for p in tmp_path.iterdir())
    release.touch()
    previous = sc.getLocalProperty("spark.jobGroup.id")
    sc.setJobGroup(group, "the cleanup's thread")
    try:
        assert await_job_group_tasks(spark)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", previous)  # type: ignore[arg-type]
    assert running() == 0 and any(p.name.startswith("ended") for p in tmp_path.iterdir())
    sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
