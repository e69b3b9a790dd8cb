"""Drifting appends on a real table (issue 14 §1): the optimizer folds the older revisions into the
latest one, so a sample opens fewer files. The pure counterpart is test_optimize_superseded.py."""

from __future__ import annotations

from typing import Any

import pytest

from optimize_support import table_rows
from use.optimize.loop import optimize_path
from use.optimize.loop_core import CONVERGED
from use.optimize.request import OptimizeRequest
from use.qbeast.reader import load_snapshot, plan_read


def _drifting(spark: Any, path: str, appends: int = 8, rows: int = 200) -> None:
    """Append k holds x in [0, 10 (k + 1)): every append reaches past the range and opens a revision."""
    from pyspark.sql import functions as F

    from use import QbeastTable

    for k in range(appends):
        df = spark.range(k * rows, (k + 1) * rows).select(
            F.col("id"),
            (F.rand(k) * 10 * (k + 1)).alias("x"),
            (F.rand(100 + k) * 100).alias("y"),
            F.lit("s").alias("s"),
        )
        QbeastTable.write(df, path, ["x", "y"], cube_size=100)


def test_older_revisions_are_merged_into_the_latest_and_the_sample_reads_fewer_files(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _drifting(spark, path)
    before = load_snapshot(path)
    revisions_before = set(before.files.column("revision_id").to_pylist())
    assert len(revisions_before) >= 4  # the drift opened several revisions
    sample_before = plan_read(spark, before, sample=0.01).num_files
    rows = table_rows(spark, path)

    result = optimize_path(spark, OptimizeRequest(path, max_iterations=60))
    assert result.outcome == CONVERGED
    assert "SupersededRevisionsSelection" in {m.strategy for m in result.committed}

    after = load_snapshot(path)
    assert set(after.files.column("revision_id").to_pylist()) == {after.latest_revision_id}
    assert after.latest_revision_id == max(revisions_before)  # re-indexing opened no revision
    assert plan_read(spark, after, sample=0.01).num_files < sample_before
    assert table_rows(spark, path) == rows  # the data is unchanged
    assert not optimize_path(spark, OptimizeRequest(path, max_iterations=60)).iterations  # and a second call does nothing


def test_a_bad_revision_margin_is_refused_before_anything_is_written(spark, tmp_path) -> None:
    from use import QbeastTable
    from use.delta import DeltaLog
    from use.errors import ConfigError

    path = str(tmp_path / "t")
    QbeastTable.write(spark.range(50).selectExpr("id", "cast(id as double) as x"), path, ["x"], cube_size=100)
    files = sorted(p.name for p in (tmp_path / "t").iterdir())
    version = DeltaLog.for_path(path).snapshot().version
    spark.conf.set("spark.qbeast.index.revisionMargin", "-1")
    try:
        with pytest.raises(ConfigError, match=r"spark.qbeast.index.revisionMargin must be a number from 0 to 10"):
            QbeastTable.write(spark.range(60).selectExpr("id", "cast(id * 2 as double) as x"), path, ["x"])
    finally:
        spark.conf.unset("spark.qbeast.index.revisionMargin")
    assert DeltaLog.for_path(path).snapshot().version == version
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == files


def test_drifting_appends_widen_the_range_by_as_much_as_the_data_has_moved(spark, tmp_path) -> None:
    """The writer passes the table's widening origin (issue 14 §1): each revision past the first
    widened one reaches at least twice as far beyond the first revision's edge as the one before,
    so a table drifting for long opens O(log) revisions and re-indexes each row about twice."""
    from pyspark.sql import functions as F

    from use import QbeastTable
    from use.qbeast.revision_change import widening_origin

    path = str(tmp_path / "t")
    for k in range(8):
        df = spark.range(200).select(F.col("id"), (F.rand(k) * 100 + 10 * k).alias("x"), (F.rand(50 + k) * 100).alias("y"))
        QbeastTable.write(df, path, ["x", "y"], cube_size=100)
    qsnap = load_snapshot(path)
    revs = [qsnap.revisions[r] for r in sorted(qsnap.revisions) if r > 0]
    latest = revs[-1]
    assert widening_origin(revs, latest) is revs[0]
    beyond = [r.transformations[0].max_number - revs[0].transformations[0].max_number for r in revs[1:]]
    assert all(b >= 2 * a * 0.95 for a, b in zip(beyond[1:], beyond[2:], strict=False)), beyond
    # x moved 70 past a span of 100: 4 revisions, where 10% of the span a time would take 6
    assert len(revs) <= 4, [(r.transformations[0].min_number, r.transformations[0].max_number) for r in revs]
