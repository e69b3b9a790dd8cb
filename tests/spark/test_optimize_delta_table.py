"""`use.DeltaTable`: bin packing of plain (partitioned) Delta tables, history, optimizations, vacuum;
the result stays readable by delta-rs."""

from __future__ import annotations

import collections
import os

import pyarrow.parquet as pq

from optimize_support import commit_actions, deltars_rows, plain_delta
from use import DeltaTable
from use.optimize.events import EVENT_TAG, OptimizationEvent
from use.optimize.loop_core import CONVERGED


def _files_per_partition(table: DeltaTable) -> collections.Counter:
    pvs = table.snapshot().files.column("partition_values").to_pylist()
    return collections.Counter(dict(pv)["s"] for pv in pvs)


def test_bin_packing_merges_each_partition_and_keeps_rows_and_partition_values(spark, tmp_path) -> None:
    path = plain_delta(str(tmp_path / "t"))
    table = DeltaTable.for_path(spark, path)
    rows = deltars_rows(path)
    assert set(_files_per_partition(table).values()) == {6}

    result = table.optimize(all_tasks=True)

    assert result.outcome == CONVERGED and len(result.committed) == 3
    assert _files_per_partition(table) == {"s0": 1, "s1": 1, "s2": 1}
    assert deltars_rows(path) == rows  # delta-rs reads the rewritten table, partition values included
    for m in result.committed:
        assert m.kind == "binpack" and m.revision_id == -1 and m.files_in == 6 and m.files_out == 1
        assert m.blocks_in == 6 and m.blocks_out == 1  # plain files count as one root block each
        adds = [a["add"] for a in commit_actions(path, m.version) if "add" in a]
        assert len(adds) == 1 and "tags" not in adds[0] and adds[0]["partitionValues"]["s"] in ("s0", "s1", "s2")
        assert adds[0]["path"].startswith(f"s={adds[0]['partitionValues']['s']}/")
    history = table.history().collect()  # DESCRIBE HISTORY's rows, newest first
    assert [h.operation for h in history[:3]] == ["OPTIMIZE"] * 3
    assert history[0].operationMetrics["numRemovedFiles"] == "6" and history[0].operationMetrics["numAddedFiles"] == "1"
    event = OptimizationEvent.from_json(table.log.history(1)[0].commit_info["tags"][EVENT_TAG])
    assert event.revision_id == -1 and event.output_files_stats.num_files == 1

    events = table.optimizations().orderBy("started_at").collect()
    assert len(events) == 3 and {e["input_files_stats"]["num_files"] for e in events} == {6}

    assert table.optimize().outcome == CONVERGED and table.history(1).first().version == history[0].version  # idempotent
    vac = table.vacuum(0, dry_run=True, enforce_retention_check=False)
    assert len(vac.files) == 18  # the rewritten inputs are what a vacuum would delete


def test_unpartitioned_table_and_a_target_file_size(spark, tmp_path) -> None:
    path = plain_delta(str(tmp_path / "t"), appends=4, partitioned=False)
    table = DeltaTable.for_path(spark, path)
    rows = deltars_rows(path)
    assert table.optimizations().count() == 0  # no events yet: an empty frame with the event schema
    files = table.snapshot().files
    total = sum(files.column("size").to_pylist())
    # An explicit file list is one task; a target size of half the input splits its output in two,
    # compressed with the session's parquet codec and named for it, as Spark names its files.
    spark.conf.set("spark.sql.parquet.compression.codec", "zstd")
    try:
        result = table.optimize(files=files.column("path").to_pylist(), max_file_size=total // 2 + 1)
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")
    assert result.outcome == "done" and len(result.committed) == 1
    assert result.committed[0].files_in == 4 and result.committed[0].files_out == 2
    assert table.snapshot().num_files == 2
    for rel in table.snapshot().files.column("path").to_pylist():
        assert rel.endswith(".zstd.parquet")
        assert pq.ParquetFile(os.path.join(path, rel)).metadata.row_group(0).column(0).compression == "ZSTD"
    assert deltars_rows(path) == rows
    assert table.optimizations().count() == 1


def test_cluster_key_overlap_rewrites_into_non_overlapping_sorted_files(spark, tmp_path) -> None:
    import pyarrow.parquet as pq

    from use.delta.storage import absolute_path

    path = plain_delta(str(tmp_path / "t"), appends=4, partitioned=False)  # every file spans all of x
    table = DeltaTable.for_path(spark, path)
    rows = deltars_rows(path)
    total = sum(table.snapshot().files.column("size").to_pylist())
    result = table.optimize(strategy="ClusterKeyOverlap", overlap_cluster_key="x", max_file_size=total // 2 + 1)
    assert result.outcome == CONVERGED and len(result.committed) == 1 and result.committed[0].files_out == 2
    assert deltars_rows(path) == rows
    ranges = []
    for p in table.snapshot().files.column("path").to_pylist():
        xs = pq.read_table(absolute_path(path, p), columns=["x"]).column("x").to_pylist()
        assert xs == sorted(xs)
        ranges.append((xs[0], xs[-1]))
    (lo1, hi1), (lo2, hi2) = sorted(ranges)
    assert hi1 < lo2  # disjoint key ranges: overlap depth 1
