"""Insights of real tables written with Spark (and delta-rs): they agree with the log, the snapshot and
the optimizer; their schemas go through Spark's Python data sources unchanged."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

import use.insights as insights
from insights_support import set_properties
from optimize_support import commit_actions, directory_state, fragmented_qbeast, plain_delta, staging_qbeast
from use import DeltaTable, QbeastTable
from use.errors import InvalidArgumentError
from use.optimize.config import OptimizationConfig
from use.optimize.events import EVENT_TAG
from use.qbeast.reader import load_snapshot

PLAN_COLUMNS = ["task", "strategy", "kind", "revision_id", "num_files", "bytes", "score", "partition_values", "reason"]


def _log_events(path: str) -> list[tuple[int, dict]]:
    """(version, event JSON) of every commit, read straight from the commit files."""
    out = []
    log_dir = os.path.join(path, "_delta_log")
    for name in sorted(n for n in os.listdir(log_dir) if n.endswith(".json") and n[:20].isdigit()):
        version = int(name[:20])
        for action in commit_actions(path, version):
            tags = action.get("commitInfo", {}).get("tags") or {}
            if EVENT_TAG in tags:
                out.append((version, json.loads(tags[EVENT_TAG])))
    return out


def test_a_qbeast_table_described_and_optimized(spark, tmp_path) -> None:
    path = fragmented_qbeast(spark, str(tmp_path / "t"))
    qsnap = load_snapshot(path)
    files = insights.for_path(path, "files")
    assert files.column("path").to_pylist() == qsnap.files.column("path").to_pylist()
    assert files.column("size").to_pylist() == qsnap.files.column("size").to_pylist()
    assert sum(files.column("records").to_pylist()) == 600  # three appends of 200 rows
    assert sum(files.column("num_blocks").to_pylist()) == qsnap.blocks.num_rows
    cubes = insights.for_path(path, "cubes")
    revisions = {r["revision_id"]: r for r in insights.for_path(path, "revisions").to_pylist()}
    assert sum(cubes.column("element_count").to_pylist()) == revisions[1]["rows"] == 600
    assert cubes.num_rows == revisions[1]["num_cubes"] and set(revisions) == {0, 1}
    live = set(files.column("path").to_pylist())
    assert {p for ps in cubes.column("files").to_pylist() for p in ps} == live
    (before,) = insights.for_path(path, "layout").to_pylist()
    assert before["num_files"] == revisions[1]["num_files"] and before["blocks_per_cube"] > 1
    # Files of a few KB: the 4 MiB open cost dwarfs every byte read, so the default score sees
    # nothing worth fixing. Priced by bytes alone, the fragmented samples show.
    bytes_only = OptimizationConfig(open_file_cost=0)
    health_before = insights.health_score(qsnap, bytes_only)
    assert before["health_score"] > 99 and health_before < 60

    # the plan is what optimize(dry_run=True) plans, and nothing is written by either
    state = directory_state(path)
    dry = QbeastTable.for_path(spark, path).optimize(dry_run=True).plan
    plan = insights.for_path(path, "plan")
    assert plan.select(PLAN_COLUMNS).equals(dry.to_table()) and plan.num_rows > 0
    assert plan.column("paths").to_pylist() == [list(t.paths) for t in dry.tasks]
    assert set(plan.column("snapshot_version").to_pylist()) == {qsnap.version}
    table = QbeastTable.for_path(spark, path)
    assert table.insight("plan").equals(plan) and table.insight("files").equals(files)
    with pytest.raises(InvalidArgumentError, match="the insight tables are optimizations, history"):
        table.insight("optimization")
    assert directory_state(path) == state

    result = QbeastTable.for_path(spark, path).optimize()
    events = insights.for_path(path, "optimizations")
    assert [
        (v, e) for v, e in zip(events.column("version").to_pylist(), events.drop(["version"]).to_pylist(), strict=False)
    ] == _log_events(path)
    assert events.column("version").to_pylist() == list(result.versions)
    history = insights.for_path(path, "history").to_pylist()
    assert [h["version"] for h in history if h["is_optimization"]] == list(result.versions)
    assert [h["version"] for h in history] == list(range(len(history)))
    assert insights.for_path(path, "plan").num_rows == 0  # converged: nothing planned
    (after,) = insights.for_path(path, "layout").to_pylist()
    assert after["num_blocks"] == after["num_cubes"] < before["num_blocks"]  # one block per cube
    assert after["sample_1pct_overhead"] < before["sample_1pct_overhead"]
    assert insights.health_score(load_snapshot(path), bytes_only) > health_before + 20


def test_plans_follow_the_tables_properties(spark, tmp_path) -> None:
    staged = staging_qbeast(spark, str(tmp_path / "s"))
    set_properties(staged, {"use.optimization.autoOptimize.optimizeUnindexedFiles.batchBytes": "3000"})
    dry = QbeastTable.for_path(spark, staged).optimize(dry_run=True).plan
    plan = insights.for_path(staged, "plan")
    assert plan.select(PLAN_COLUMNS).equals(dry.to_table()) and set(plan.column("kind").to_pylist()) == {"index"}

    delta = plain_delta(str(tmp_path / "d"), appends=4)
    set_properties(delta, {"use.optimization.type": "SmallFiles", "use.optimization.small-files.count-threshold": "2"})
    dry = DeltaTable.for_path(spark, delta).optimize(dry_run=True).plan
    plan = insights.for_path(delta, "plan")
    assert plan.select(PLAN_COLUMNS).equals(dry.to_table())
    assert set(plan.column("strategy").to_pylist()) == {"SmallFiles"} and plan.num_rows == 3  # one per partition
    # session defaults (spark.qbeast.use.optimization.*) count when given, as optimize() counts them
    other = plain_delta(str(tmp_path / "e"), appends=4)
    set_properties(other, {"use.optimization.type": "SmallFiles"})
    session = {"spark.qbeast.use.optimization.small-files.count-threshold": "2"}
    spark.conf.set(*next(iter(session.items())))
    try:
        dry = DeltaTable.for_path(spark, other).optimize(dry_run=True).plan
    finally:
        spark.conf.unset(next(iter(session)))
    assert len(dry) == 3 and insights.for_path(other, "plan").num_rows == 0  # the default threshold is 50 files
    assert insights.for_path(other, "plan", spark_conf=session).select(PLAN_COLUMNS).equals(dry.to_table())


def _insight_source(name: str, schema: pa.Schema):
    """A minimal Python data source over one insight (what the SQL surface's readers wrap)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader
    from pyspark.sql.pandas.types import from_arrow_schema

    class Reader(DataSourceReader):
        def __init__(self, path: str) -> None:
            self.path = path

        def read(self, partition):  # Spark's signature
            import use.insights as ins

            yield from ins.for_path(self.path, name).to_batches()

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return f"use_insight_test_{name}"

        def schema(self):
            return from_arrow_schema(schema)

        def reader(self, schema):
            return Reader(self.options["path"])

    return Source


@pytest.mark.parametrize("name", list(insights.TABLE_INSIGHTS))
def test_every_insight_schema_reads_through_a_python_data_source(spark, tmp_path, name) -> None:
    path = fragmented_qbeast(spark, str(tmp_path / "t"))
    if name in ("optimizations", "history"):
        QbeastTable.for_path(spark, path).optimize(max_iterations=1)
    expected = insights.for_path(path, name)
    source = _insight_source(name, insights.schema(name))
    spark.dataSource.register(source)
    df = spark.read.format(source.name()).option("path", path).load()
    assert [f.name for f in df.schema.fields] == insights.schema(name).names
    got = df.toArrow()
    assert got.num_rows == expected.num_rows > 0
    assert got.cast(expected.schema).equals(expected)
