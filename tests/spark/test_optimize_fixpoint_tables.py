"""The optimizer reaches a fixed point on real tables (issue 15 §1, §2): optimize until done, then a
second optimize call commits nothing; every strategy, the default chains, several table shapes.

Shapes (small, built once per run and copied): issue 15's table scaled down (4 default appends of
random x, y, cube size 100: 52 files of 1.2-3.8 KB), a table of 3 shuffled appends, a converted
table of staging files, and partitioned and unpartitioned plain Delta tables of delta-rs appends.
The pure counterpart over synthetic snapshots is test_optimize_fixpoint.py.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import pytest

from optimize_support import deltars_rows, fragmented_qbeast, plain_delta, random_appends_qbeast, staging_qbeast, table_rows
from use.delta import DeltaLog
from use.optimize.config import OptimizationConfig
from use.optimize.loop import optimize_path
from use.optimize.loop_core import CONVERGED, DONE
from use.optimize.plan import REVISION_REWRITE_TAG
from use.optimize.request import OptimizeRequest
from use.optimize.strategies._common import io_limit

_SHAPES: dict[str, Callable[[Any, str], str]] = {
    "random-appends": lambda spark, dest: random_appends_qbeast(spark, dest),
    "shuffled-appends": lambda spark, dest: fragmented_qbeast(spark, dest),
    "staging": lambda spark, dest: staging_qbeast(spark, dest),
    "delta-partitioned": lambda spark, dest: plain_delta(dest),
    "delta": lambda spark, dest: plain_delta(dest, appends=6, partitioned=False),
}

# (shape, strategy chain or None for the default, optimization settings)
_CASES: list[tuple[str, str | None, dict[str, str]]] = [
    ("random-appends", None, {}),
    ("random-appends", None, {"bytes-per-iter": "4000"}),  # issue 15 §2: 5% of the table per task
    ("random-appends", "SamplingOverheadReduction", {"sampling-fraction": "0.2"}),
    ("shuffled-appends", None, {}),
    ("shuffled-appends", "LeveledCompactionSelection", {"bytes-per-iter": "7000"}),
    ("shuffled-appends", "CubeDefragmentation", {"bytes-per-iter": "7000"}),
    ("staging", None, {}),
    ("staging", "UnindexedFilesSelection", {"autoOptimize.optimizeUnindexedFiles.batchBytes": "7000"}),
    ("staging", "BinPacking", {"bytes-per-iter": "7000"}),
    ("staging", "SmallFiles", {"small-files.count-threshold": "2"}),
    ("staging", "ClusterKeyOverlap", {"overlap.cluster-key": "x", "overlap.depth-threshold": "1", "bytes-per-iter": "7000"}),
    ("delta-partitioned", None, {"bytes-per-iter": "3500"}),
    ("delta-partitioned", "SmallFiles", {"small-files.count-threshold": "2"}),
    ("delta-partitioned", "ClusterKeyOverlap", {"overlap.cluster-key": "x", "overlap.depth-threshold": "1"}),
    ("delta", None, {}),
    ("delta", "ClusterKeyOverlap", {"overlap.cluster-key": "x", "overlap.depth-threshold": "1", "max-file-size": "4000"}),
]


def _run(spark: Any, path: str, strategy: str | None, settings: dict[str, str]):
    return optimize_path(spark, OptimizeRequest(path, strategy=strategy, overrides=settings, max_iterations=60))


@pytest.mark.parametrize(
    ("shape", "strategy", "settings"),
    _CASES,
    ids=lambda v: str(v) if not isinstance(v, dict) else ",".join(f"{k}={x}" for k, x in v.items()) or "defaults",
)
def test_optimize_until_done_then_a_second_call_commits_nothing(spark, tmp_path, shape, strategy, settings) -> None:
    path = _SHAPES[shape](spark, str(tmp_path / "t"))
    config = OptimizationConfig.from_properties({}, settings)
    first = _run(spark, path, strategy, settings)
    assert first.outcome == CONVERGED, [f"{m.strategy}: {m.files_in}->{m.files_out} files" for m in first]
    assert first.committed  # every case has work to do first
    for m in first.committed:  # §2: a task of several files stays within its IO limit
        assert m.files_in == 1 or m.bytes_in <= io_limit(m.kind, config), m
    version = DeltaLog.for_path(path).snapshot().version
    second = _run(spark, path, strategy, settings)
    assert second.outcome == CONVERGED and not second.iterations
    assert DeltaLog.for_path(path).snapshot().version == version


def test_the_issue_repro_commits_once_and_then_nothing(spark, tmp_path) -> None:
    """Issue 15 §1, scaled down: CubeDefragmentation with a bytes-per-iter below two files of most
    cubes used to rewrite one file byte for byte on every call (a new version each time, ending
    `no_progress`). Now the first call merges what fits the limit, the next calls commit nothing."""
    path = random_appends_qbeast(spark, str(tmp_path / "t"))
    rows = table_rows(spark, path)
    versions = []
    for _ in range(3):
        result = optimize_path(spark, OptimizeRequest(path, strategy="CubeDefragmentation", bytes_per_iter=4000))
        assert result.outcome == CONVERGED
        assert all(m.files_in >= 2 and m.bytes_in <= 4000 for m in result.committed)
        versions.append(DeltaLog.for_path(path).snapshot().version)
    assert versions[0] == versions[1] == versions[2]
    assert table_rows(spark, path) == rows


def test_revision_rewrite_is_one_shot_until_the_revision_changes(spark, tmp_path) -> None:
    """`revision-rewrite=true` as a setting the service would apply every interval: the first call
    rewrites the whole revision (outcome `done`), the next commits nothing; after an append the
    revision is rewritten once more. Every output carries the revision-rewrite tag in the log."""
    from use import QbeastTable

    path = random_appends_qbeast(spark, str(tmp_path / "t"))
    settings = {"revision-rewrite": "true", "bytes-per-iter": "40000"}
    files_before = DeltaLog.for_path(path).snapshot().files.num_rows
    first = _run(spark, path, "CubeDefragmentation", settings)
    assert first.outcome == DONE and sum(m.files_in for m in first.committed) == files_before
    snap = DeltaLog.for_path(path).snapshot()
    tags = snap.files.column("tags").to_pylist()
    assert all(dict(t or {}).get(REVISION_REWRITE_TAG) == str(first.committed[0].read_version) for t in tags)
    second = _run(spark, path, "CubeDefragmentation", settings)
    assert second.outcome == CONVERGED and not second.iterations
    assert DeltaLog.for_path(path).snapshot().version == snap.version

    QbeastTable.write(
        spark.range(5000, 5100).selectExpr("id", "rand(3) * 1000 as x", "rand(4) * 1000 as y", "'s0' as s"),
        path, ["x", "y"], cube_size=100, column_stats={"x_min": 0.0, "x_max": 1000.0, "y_min": 0.0, "y_max": 1000.0},
    )  # fmt: skip
    third = _run(spark, path, "CubeDefragmentation", settings)
    assert (
        third.outcome == DONE
        and sum(m.files_in for m in third.committed)
        == DeltaLog.for_path(path).snapshot(version=third.committed[0].read_version).files.num_rows
    )
    assert _run(spark, path, "CubeDefragmentation", settings).outcome == CONVERGED


def test_revision_rewrite_of_a_plain_table_is_one_shot_and_delta_rs_reads_it(spark, tmp_path) -> None:
    path = plain_delta(str(tmp_path / "t"))
    rows = deltars_rows(path)
    first = _run(spark, path, None, {"revision-rewrite": "true"})
    assert first.outcome == DONE and first.committed
    version = DeltaLog.for_path(path).snapshot().version
    assert _run(spark, path, None, {"revision-rewrite": "true"}).iterations == ()
    assert DeltaLog.for_path(path).snapshot().version == version
    assert deltars_rows(path) == rows  # the extra add tag is plain Delta: delta-rs reads the table


def test_sampling_separation_is_progress_not_no_progress(spark, tmp_path) -> None:
    """A sampling-aware rewrite of one file writes more files than it reads (it used to end the run
    `no_progress` after its first task, issue 15 §5); its gain is read cost, so the run goes on until
    nothing is selected, and the next run selects nothing."""
    path = fragmented_qbeast(spark, str(tmp_path / "t"))
    settings = {"sampling-fraction": "0.2", "bytes-per-iter": "3400"}  # one file per task
    result = _run(spark, path, "SamplingOverheadReduction", settings)
    assert result.outcome == CONVERGED and len(result.committed) >= 2
    assert all(m.files_in == 1 and m.files_out > 1 for m in result.committed)
    assert not _run(spark, path, "SamplingOverheadReduction", settings).iterations


def test_a_quiet_table_converges_to_the_layout_of_one_write_with_max_wait(spark, tmp_path) -> None:
    """Appends optimized every 2 (a service's rounds) leave rows of deeper cubes waiting in the root's
    file, which the size tiers keep there once appends stop: every sample reads them. With the time
    factor (`tiering.max-wait`) the quiet table's files reach the layout of the same rows written at
    once: a sample reads the same bytes, the range filter the same files; then nothing to do."""
    import time

    from use import QbeastTable
    from use.delta.predicates import And, Comparison
    from use.qbeast.reader import load_snapshot, plan_read

    def rows(lo: int, hi: int) -> Any:
        return spark.sql(
            "SELECT id, CAST(pmod(hash(id, 1), 1000000) AS DOUBLE) / 10000.0 AS x, "
            f"CAST(pmod(hash(id, 2), 1000000) AS DOUBLE) / 10000.0 AS y, concat('s', repeat('z', 40)) AS s FROM range({lo}, {hi})"
        )

    stats = {"x_min": 0, "x_max": 100, "y_min": 0, "y_max": 100}
    ours, once = str(tmp_path / "ours"), str(tmp_path / "once")
    for i in range(10):
        QbeastTable.write(rows(i * 1000, (i + 1) * 1000), ours, "x,y", cube_size=1000, mode="append", column_stats=stats)
        if i % 2:
            optimize_path(spark, OptimizeRequest(ours))
    QbeastTable.write(rows(0, 10_000), once, "x,y", cube_size=1000, column_stats=stats)
    strip = And(Comparison("x", ">=", 50.0), Comparison("x", "<", 51.0))

    def reads(path: str) -> tuple[int, int, int]:
        q = load_snapshot(path)
        sample, strip_read = plan_read(None, q, sample=0.01), plan_read(None, q, predicate=strip)
        return sample.bytes, strip_read.num_files, q.files.num_rows

    before, reference = reads(ours), reads(once)
    # the root's file carries the waiting rows (2.55x the bytes)
    assert before[0] > 2 * reference[0]
    assert optimize_path(spark, OptimizeRequest(ours)).outcome == CONVERGED  # the tiers alone leave them there
    # the service's plan check finds the work once the file has waited (it passes the planning time)
    from use.service.probe import probe

    assert probe(ours, {"tiering.max-wait": "1ms"}, now=time.time())[0].tasks == 1
    assert probe(ours, {"tiering.max-wait": "1h"}, now=time.time())[0].tasks == 0
    # a quiet table (no commit has changed its rows for tiering.idle-after; OPTIMIZE commits do not
    # count) gets the same layout without waiting max-wait: the probe finds it, a run reaches it
    quiet = str(tmp_path / "quiet")
    shutil.copytree(ours, quiet)
    assert probe(quiet, {"tiering.idle-after": "1ms"}, now=time.time())[0].tasks == 1
    assert probe(quiet, {"tiering.idle-after": "1h"}, now=time.time())[0].tasks == 0
    # the insights plan as the run does, planning time included: `plan` lists the task a dry run
    # plans and metastore_summary's pending_bytes counts it (they showed nothing to do before)
    from use.insights import TableIdentity, for_path, metastore_summary_row

    def insights_plan(idle_after: str) -> tuple[Any, int]:
        conf = {"spark.qbeast.use.optimization.tiering.idle-after": idle_after}
        identity = TableIdentity("spark_catalog", "default", "quiet", provider="qbeast", location=quiet)
        summary = metastore_summary_row(identity, spark_conf=conf)
        return for_path(quiet, "plan", spark_conf=conf), summary.column("pending_bytes")[0].as_py()

    planned, pending = insights_plan("1ms")
    dry = optimize_path(spark, OptimizeRequest(quiet, overrides={"tiering.idle-after": "1ms"}, dry_run=True))
    assert planned.num_rows == 1 and "quiet for tiering.idle-after" in planned.column("reason")[0].as_py()
    assert planned.column("paths")[0].as_py() and set(planned.column("paths")[0].as_py()) == set(dry.plan.tasks[0].paths)
    assert pending == dry.plan.bytes > 0
    planned, pending = insights_plan("1h")
    assert planned.num_rows == 0 and pending == 0
    result = optimize_path(spark, OptimizeRequest(quiet, overrides={"tiering.idle-after": "1ms"}))
    assert result.outcome == CONVERGED and "quiet for tiering.idle-after=0.001s" in result.iterations[0].reason
    quiet_reads = reads(quiet)
    assert quiet_reads[0] <= 1.05 * reference[0] and quiet_reads[1] <= reference[1] and quiet_reads[2] <= reference[2]
    assert table_rows(spark, quiet) == table_rows(spark, once)
    result = optimize_path(spark, OptimizeRequest(ours, overrides={"tiering.max-wait": "1ms"}))
    assert result.outcome == CONVERGED and "waited tiering.max-wait" in result.iterations[0].reason
    after = reads(ours)
    assert after[0] <= 1.05 * reference[0] and after[1] <= reference[1] and after[2] <= reference[2]
    assert optimize_path(spark, OptimizeRequest(ours, overrides={"tiering.max-wait": "1ms"})).outcome == CONVERGED
    assert table_rows(spark, ours) == table_rows(spark, once) == deltars_rows(ours)
