"""Per-table insight tables on small synthetic snapshots: exact values, fixed schemas."""

from __future__ import annotations

import datetime as dt
import json

import pytest

import use.insights as insights
from _optimize_snapshots import MAX_W, MIN_W
from insights_support import fragmented, plain
from use.delta.log import HistoryEntry
from use.errors import CorruptLogError, InvalidArgumentError, TableNotFoundError
from use.optimize.events import EVENT_TAG, FileStats, OptimizationEvent

UTC = dt.UTC


def _pick(row: dict, *keys: str) -> tuple:
    return tuple(row[k] for k in keys)


def test_files_of_a_qbeast_table() -> None:
    t = insights.files(fragmented())
    assert t.schema == insights.FILES_SCHEMA
    rows = t.to_pylist()
    assert [r["path"] for r in rows] == ["f0", "f1", "f2", "s0"]
    # records: numRecords where the stats have it, else (indexed files) the sum of the block counts
    assert [r["records"] for r in rows] == [55, 600, 8, 7]
    assert [r["revision_id"] for r in rows] == [1, 1, 1, 0]
    assert [r["file_level"] for r in rows] == [1, 2, 0, 0]  # largest blocks 50, 600, 5, 7
    assert [r["num_blocks"] for r in rows] == [2, 1, 2, 1]
    assert [r["num_cubes"] for r in rows] == [2, 1, 2, 1]
    assert [r["min_weight"] for r in rows] == [MIN_W, -1000, -1000, MIN_W]
    assert [r["max_weight"] for r in rows] == [MAX_W] * 4
    assert rows[1]["modification_time"] == dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=UTC)
    assert rows[0]["partition_values"] == []


def test_files_of_a_plain_delta_table() -> None:
    rows = insights.files(plain()).to_pylist()
    assert [r["revision_id"] for r in rows] == [-1] * 4
    assert [(r["records"], r["file_level"]) for r in rows] == [(10, 1)] * 4
    assert {r["num_blocks"] for r in rows} == {None} and {r["min_weight"] for r in rows} == {None}
    assert rows[0]["partition_values"] == [("p", "a")]


def test_cubes_fold_blocks_as_the_index_status_does() -> None:
    t = insights.cubes(fragmented())
    assert t.schema == insights.CUBES_SCHEMA
    rows = t.to_pylist()
    assert [r["cube_id"] for r in rows] == ["", "A", "Ag"]  # cube (pre-)order; staging has no tree
    root, a, ag = rows
    assert (root["depth"], root["element_count"], root["max_weight"], root["min_weight"]) == (0, 650, -1000, MIN_W)
    assert (root["fill"], root["is_leaf"], root["num_blocks"], root["files"]) == (6.5, False, 2, ["f0", "f1"])
    assert (a["element_count"], a["max_weight"], a["is_leaf"], a["files"], a["num_files"]) == (10, MAX_W, True, ["f0", "f2"], 2)
    assert (ag["depth"], ag["element_count"], ag["fill"], ag["files"]) == (2, 3, 0.03, ["f2"])
    assert {r["desired_cube_size"] for r in rows} == {100} and {r["revision_id"] for r in rows} == {1}
    assert insights.cubes(plain()).num_rows == 0 and insights.cubes(plain()).schema == insights.CUBES_SCHEMA


def test_revisions() -> None:
    t = insights.revisions(fragmented())
    assert t.schema == insights.REVISIONS_SCHEMA
    staging, rev1 = t.to_pylist()
    assert (staging["revision_id"], staging["is_staging"], staging["is_latest"]) == (0, True, False)
    assert (staging["num_files"], staging["bytes"], staging["rows"], staging["num_cubes"], staging["depth"]) == (
        1,
        50,
        7,
        0,
        None,
    )
    assert (rev1["num_files"], rev1["bytes"], rev1["rows"], rev1["num_cubes"], rev1["depth"]) == (3, 600, 663, 3, 3)
    assert rev1["is_latest"] and rev1["indexed_columns"] == ["x"] and rev1["column_specs"] == ["x:linear"]
    assert json.loads(rev1["transformations"])[0]["maxNumber"] == 1000
    assert rev1["desired_cube_size"] == 100 and rev1["timestamp"] == dt.datetime(1970, 1, 1, 0, 0, 1, 1000, tzinfo=UTC)
    assert insights.revisions(plain()).num_rows == 0


def _event(name: str, version_hint: int) -> OptimizationEvent:
    stats = FileStats(("a",), (1,), 10, 100, 1, 1, 1, 1.0, 10.0)
    return OptimizationEvent(
        optimization_name=name, write_id=f"w{version_hint}", table_id="t", revision_id=1, started_at=10, finished_at=20,
        process_time_ms=10, input_files_stats=stats, output_files_stats=stats,
    )  # fmt: skip


def history_entries() -> list[HistoryEntry]:
    """Newest first, as DeltaLog.history() returns them."""
    return [
        HistoryEntry(3, 4000, "OPTIMIZE", {"targetSize": 104857600, "predicate": "[]"}, {"numRemovedFiles": "2"},
                     {"operation": "OPTIMIZE", "readVersion": 2, "isBlindAppend": False, "isolationLevel": "SnapshotIsolation",
                      "engineInfo": "USE/0.1", "tags": {EVENT_TAG: _event("LeveledCompactionSelection", 3).to_json()}}),
        HistoryEntry(2, 3000, "WRITE", {"mode": "Append"}, {"numFiles": "2"},
                     {"operation": "WRITE", "readVersion": 1, "isBlindAppend": True, "engineInfo": "delta-rs:1.0",
                      "userMetadata": "job 7"}),
        HistoryEntry(1, 2000, "OPTIMIZE", {}, {}, {"tags": {EVENT_TAG: _event("BinPacking", 1).to_json()}}),
        HistoryEntry(0, 1000, "CREATE TABLE", {"partitionBy": "[]"}, {}, {"operation": "CREATE TABLE"}),
    ]  # fmt: skip


def test_history_oldest_first_with_optimizations_marked() -> None:
    t = insights.history(history_entries())
    assert t.schema == insights.HISTORY_SCHEMA
    rows = t.to_pylist()
    assert [r["version"] for r in rows] == [0, 1, 2, 3]
    assert [r["is_optimization"] for r in rows] == [False, True, False, True]
    assert rows[3]["timestamp"] == dt.datetime(1970, 1, 1, 0, 0, 4, tzinfo=UTC)
    # non-string parameter values (delta-rs writes JSON values) become JSON text
    assert dict(rows[3]["parameters"]) == {"targetSize": "104857600", "predicate": "[]"}
    assert dict(rows[2]["metrics"]) == {"numFiles": "2"}
    assert (rows[3]["engine_info"], rows[3]["read_version"], rows[3]["isolation_level"], rows[3]["is_blind_append"]) == (
        "USE/0.1", 2, "SnapshotIsolation", False)  # fmt: skip
    assert (rows[0]["engine_info"], rows[0]["read_version"], rows[0]["is_blind_append"]) == (None, None, None)
    assert [r["user_metadata"] for r in rows] == [None, None, "job 7", None]
    assert insights.history([]).schema == insights.HISTORY_SCHEMA


def test_optimizations_are_the_events_with_their_commit_version() -> None:
    t = insights.optimizations(history_entries())
    assert t.schema == insights.OPTIMIZATIONS_SCHEMA
    assert t.schema.names[:-1] == [
        "optimization_name", "write_id", "table_id", "revision_id", "started_at", "finished_at", "process_time_ms",
        "input_files_stats", "output_files_stats",
    ]  # fmt: skip
    rows = t.to_pylist()
    assert [(r["version"], r["optimization_name"]) for r in rows] == [(1, "BinPacking"), (3, "LeveledCompactionSelection")]
    assert OptimizationEvent.from_dict(rows[1]) == _event("LeveledCompactionSelection", 3)
    bad = HistoryEntry(5, 1, "OPTIMIZE", {}, {}, {"tags": {EVENT_TAG: "{"}})
    with pytest.raises(CorruptLogError, match="commit 5"):
        insights.optimizations([bad])


def test_detail_describes_a_table_written_by_delta_rs_as_describe_detail_does(tmp_path) -> None:
    import os

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    root = str(tmp_path / "t")
    first = pa.table({"a": [1, 2, 3], "p": ["x", "y", "x"]})
    write_deltalake(root, first, partition_by=["p"], name="events", description="the events",
                    configuration={"delta.appendOnly": "true"})  # fmt: skip
    write_deltalake(root, pa.table({"a": [4], "p": ["y"]}), mode="append")
    (row,) = insights.for_path(root, "detail").to_pylist()
    table = DeltaTable(root)
    assert _pick(row, "format", "name", "description", "location", "version") == ("delta", "events", "the events", root, 1)
    assert row["id"] == table.metadata().id and row["partition_columns"] == ["p"] and row["clustering_columns"] == []
    assert row["num_files"] == len(table.file_uris()) == 3
    assert row["size_in_bytes"] == sum(os.path.getsize(u.removeprefix("file://")) for u in table.file_uris())
    assert ("delta.appendOnly", "true") in row["properties"]
    protocol = table.protocol()
    assert (row["min_reader_version"], row["min_writer_version"]) == (protocol.min_reader_version, protocol.min_writer_version)
    assert row["table_features"] == sorted(set(protocol.reader_features or []) | set(protocol.writer_features or []))
    assert row["created_at"] <= row["last_modified"] and row["last_modified"].tzinfo is not None
    assert insights.for_path(root, "detail").schema == insights.schema("detail")


def test_insights_share_the_process_log_and_follow_new_commits(tmp_path) -> None:
    """Each insight query used to replay the table's log from scratch (a log of 20,000 commits: ~6 s
    per query); the process's shared log only reads the commits since the last query."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from use.delta.log_cache import forget, shared_log
    from use.insights.facts import TableFacts

    root = str(tmp_path / "t")
    write_deltalake(root, pa.table({"a": [1]}))
    assert TableFacts.load(root).log is shared_log(root) is shared_log("file://" + root)
    assert insights.for_path(root, "detail").to_pylist()[0]["num_files"] == 1
    write_deltalake(root, pa.table({"a": [2]}), mode="append")  # another writer
    assert insights.for_path(root, "detail").to_pylist()[0]["num_files"] == 2
    before = shared_log(root)
    forget(root)
    assert shared_log(root) is not before


def test_plan_is_the_planners_next_plan() -> None:
    snap = fragmented()
    t = insights.plan(snap)
    assert t.schema == insights.PLAN_SCHEMA
    (row,) = t.to_pylist()  # the staging file is indexed first (UnindexedFilesSelection is prioritized)
    assert _pick(row, "strategy", "kind", "revision_id", "num_files", "bytes") == ("UnindexedFilesSelection", "index", 0, 1, 50)
    assert (row["score"], row["snapshot_version"], row["paths"]) == (1.0, 7, ["s0"])
    # the config decides: without staging files in the chain, leveled compaction of revision 1 runs
    from use.optimize.config import OptimizationConfig

    # (size tiers at ratio 3: f0's 100 bytes reach 1/3 of f1's 200, so the root's two files merge;
    # the default 1.5 lets f0 wait; f1's root rows above the root's maxWeight move down to A in the
    # rewrite, a fragment the tiers merge with A's file f2, so f2 is folded into the task)
    off = {"use.optimization.autoOptimize.optimizeUnindexedFiles.enabled": "false"}
    assert insights.plan(snap, OptimizationConfig.from_properties(off)).num_rows == 0
    config = OptimizationConfig.from_properties({**off, "use.optimization.tiering.ratio": "3"})
    (compact,) = insights.plan(snap, config).to_pylist()  # the root cube is spread over f0 and f1
    assert _pick(compact, "strategy", "kind", "revision_id", "paths") == (
        "LeveledCompactionSelection",
        "compact",
        1,
        ["f0", "f1", "f2"],
    )
    (binpack,) = insights.plan(plain()).to_pylist()  # four 1 KB files of one partition: one bin
    assert _pick(binpack, "strategy", "kind", "revision_id", "num_files") == ("BinPacking", "binpack", -1, 4)
    assert binpack["score"] == 4 * 1024**2 * 3 / 4000 and binpack["partition_values"] == [("p", "a")]
    with pytest.raises(InvalidArgumentError, match="revision"):
        insights.plan(snap, revision_id=9)


def test_empty_tables_have_the_declared_schemas() -> None:
    from _optimize_snapshots import delta_snapshot, files_table, qbeast_snapshot

    for snap in (qbeast_snapshot(files_table([], []), []), delta_snapshot(files_table([], []))):
        for name in ("files", "cubes", "revisions", "layout", "plan"):
            assert getattr(insights, name)(snap).schema == insights.schema(name), name
        assert insights.health_score(snap) == 100.0


def test_unknown_insight_names_list_the_valid_ones(tmp_path) -> None:
    with pytest.raises(InvalidArgumentError, match="optimizations, history, detail, files, cubes, revisions, layout, plan"):
        insights.for_path(str(tmp_path), "nope")
    with pytest.raises(InvalidArgumentError, match="unknown insight table"):
        insights.schema("Files")
    with pytest.raises(InvalidArgumentError, match="insight 'files' takes no option revision_id; it accepts spark_conf"):
        insights.for_path(str(tmp_path), "files", revision_id=1)
    with pytest.raises(TableNotFoundError, match="does not exist"):
        insights.for_path(str(tmp_path / "missing"), "files")
    assert insights.schema("layout") == insights.LAYOUT_SCHEMA
    assert set(insights.LAKE_INSIGHTS) == {"metastore_summary", "optimizations"}


def test_the_insights_page_documents_every_column() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "insights.md").read_text()
    schemas = {**{n: i.schema for n, i in insights.TABLE_INSIGHTS.items()}, **insights.LAKE_INSIGHTS}
    for name, schema in schemas.items():
        assert f"| `{name}` |" in page, f"docs/insights.md: table {name}"
        for column in schema.names:
            assert column in page, f"docs/insights.md: {name}.{column}"
