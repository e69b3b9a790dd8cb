"""The planning passes of an OTree write cost as little Spark work as they can (issue 14 §5), and
give exactly what the executor-side passes gave."""

from __future__ import annotations

import pytest

from use.qbeast import index_plan
from use.qbeast.index_plan import _input_domains, collect_stats, with_weight
from use.qbeast.revision import parse_column_specs
from use.qbeast.revision_change import compute_revision_change
from use.qbeast.writer import _arrow_schema


def _weighted(spark, n: int, cube_size: int, partitions: int):
    df = spark.range(0, n, numPartitions=partitions).selectExpr(
        "id", "rand(3) * 100 as x", "rand(4) * 50 as y", "cast(id % 7 as string) as s"
    )
    transformers = parse_column_specs(["x", "y"], _arrow_schema(df))
    revision, _ = compute_revision_change(None, transformers, collect_stats(df, transformers), cube_size, None, "/tmp/t", 0, 0.0)
    return with_weight(df, revision), revision


def _group(spark) -> str:
    return spark.sparkContext.getLocalProperty("spark.jobGroup.id")


def _jobs(spark, fn) -> tuple[object, int]:
    import uuid

    sc = spark.sparkContext
    group = f"test-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "test")
    try:
        out = fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return out, len(sc.statusTracker().getJobIdsForGroup(group))


@pytest.mark.parametrize("n, cube_size, partitions", [(30_000, 500, 4), (250_000, 2_000, 3)])
def test_domains_estimated_on_the_driver_equal_the_executors(spark, monkeypatch, n, cube_size, partitions) -> None:
    # The second case samples (250,000 rows > ESTIMATION_MIN_ROWS) and fills several buffers.
    weighted, revision = _weighted(spark, n, cube_size, partitions)
    on_driver = _input_domains(spark, weighted, revision, {}, n)
    monkeypatch.setattr(index_plan, "_DRIVER_DOMAIN_ROWS", 0)
    on_executors = _input_domains(spark, weighted, revision, {}, n)
    assert on_driver == on_executors and len(on_driver) > 10


def test_a_small_domain_estimation_runs_no_python_udf(spark, monkeypatch) -> None:
    from pyspark.sql import DataFrame

    weighted, revision = _weighted(spark, 20_000, 500, 4)

    def no_udf(*args, **kwargs):
        raise AssertionError("a Python UDF job for a 20,000-row domain estimation")

    monkeypatch.setattr(DataFrame, "mapInArrow", no_udf)
    domains, jobs = _jobs(spark, lambda: _input_domains(spark, weighted, revision, {}, 20_000))
    assert jobs == 1 and domains


def test_the_dictionary_sample_reads_one_partition(spark) -> None:
    from use.qbeast.jvm_write import _plain_columns

    df = spark.range(0, 40_000, numPartitions=8).selectExpr("id", "cast(id % 5 as string) as s", "rand(1) as x").cache()
    df.count()
    try:
        tracker = spark.sparkContext.statusTracker()
        (plain, group), _ = _jobs(spark, lambda: (_plain_columns(df, ["id", "s", "x"]), _group(spark)))
        assert plain == ["id", "x"]  # distinct values: no dictionary; s repeats: keeps it
        stages = [s for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds]
        assert sum(tracker.getStageInfo(s).numTasks for s in stages) == 1  # no task per partition, no shuffle
    finally:
        df.unpersist()
