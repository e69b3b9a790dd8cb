"""OptimizationEvent / FileStats: seed field names, vectorized stats, JSON, reading events from a log."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

from _optimize_snapshots import MAX_W, MIN_W, blocks_table, files_table, qbeast_snapshot
from use.errors import CorruptLogError, InvalidArgumentError
from use.optimize.events import EVENT_SCHEMA, EVENT_TAG, OPTIMIZATIONS_SCHEMA, FileStats, OptimizationEvent, events_from_history

SEED = Path("/work/shared/seeds/continuous-optimization.txt")


def _seed_fields(case_class: str) -> list[str]:
    text = SEED.read_text()
    body = text[text.index(f"case class {case_class}(") :]
    body = body[: body.index(")", body.index("(") + 1) + 1]
    return re.findall(r"(\w+):", body)


SEED_EVENT_FIELDS = [
    "optimization_name", "write_id", "table_id", "revision_id", "started_at", "finished_at", "process_time_ms",
    "input_files_stats", "output_files_stats",
]  # fmt: skip
SEED_STATS_FIELDS = [
    "files", "file_levels", "element_count", "bytes", "num_files", "num_cubes", "num_blocks",
    "avg_num_blocks_per_file", "avg_block_element_count_per_file",
]  # fmt: skip


def test_field_names_exactly_as_the_seed() -> None:
    if SEED.exists():
        assert _seed_fields("OptimizationEvent") == SEED_EVENT_FIELDS
        assert _seed_fields("FileStats") == SEED_STATS_FIELDS
    assert [f.name for f in dataclasses.fields(OptimizationEvent)] == SEED_EVENT_FIELDS
    assert [f.name for f in dataclasses.fields(FileStats)] == SEED_STATS_FIELDS
    assert EVENT_SCHEMA.names == SEED_EVENT_FIELDS
    assert [f.name for f in EVENT_SCHEMA.field("input_files_stats").type] == SEED_STATS_FIELDS
    e = OptimizationEvent(optimization_name="n", write_id="w", table_id="t", started_at=1, finished_at=2)
    assert (e.revision_id, e.process_time_ms, e.input_files_stats, e.output_files_stats) == (-1, -1, None, None)
    assert EVENT_TAG == "use.optimization.event"


def _stats() -> FileStats:
    files = files_table(["f0", "f1", "f2", "f3"], [100, 200, 300, 50])
    blocks = blocks_table(
        [
            (0, 1, "", 0, MIN_W, MAX_W, 50),
            (0, 1, "A", 1, MIN_W, MAX_W, 5),
            (1, 1, "", 0, MIN_W, MAX_W, 600),
            (2, 1, "A", 1, MIN_W, MAX_W, 5),
            (2, 2, "A", 1, MIN_W, MAX_W, 3),
        ]
    )
    return FileStats.from_blocks(files, blocks)


def test_file_stats_from_blocks_hand_computed() -> None:
    s = _stats()
    assert s.files == ("f0", "f1", "f2", "f3")
    assert s.file_levels == (1, 2, 0, 0)  # max blocks 50, 600, 5; f3 has no blocks
    assert (s.element_count, s.bytes, s.num_files, s.num_blocks) == (663, 650, 4, 5)
    assert s.num_cubes == 3  # (1,""), (1,"A"), (2,"A")
    assert s.avg_num_blocks_per_file == pytest.approx(5 / 4)
    # per-file mean block size: f0 27.5, f1 600, f2 4 -> mean over files with blocks
    assert s.avg_block_element_count_per_file == pytest.approx((27.5 + 600 + 4) / 3)


def test_file_stats_edge_cases() -> None:
    empty = FileStats.from_blocks(files_table([], []), blocks_table([]))
    assert (empty.num_files, empty.bytes, empty.avg_num_blocks_per_file, empty.avg_block_element_count_per_file) == (
        0,
        0,
        0.0,
        0.0,
    )
    with pytest.raises(InvalidArgumentError, match="out of range"):
        FileStats.from_blocks(files_table(["a"], [1]), blocks_table([(3, 1, "", 0, MIN_W, MAX_W, 1)]))


def test_file_stats_from_snapshot_remaps_blocks() -> None:
    files = files_table(["a", "b", "c"], [10, 20, 30], revisions=[1, 1, 1])
    snap = qbeast_snapshot(
        files, [(0, 1, "", 0, MIN_W, MAX_W, 7), (1, 1, "", 0, MIN_W, MAX_W, 70), (2, 1, "A", 1, MIN_W, MAX_W, 700)]
    )
    s = FileStats.from_snapshot(snap, ["c", "a"])
    assert s.files == ("a", "c") and s.file_levels == (0, 2) and s.element_count == 707 and s.bytes == 40


def test_json_round_trip_and_shape() -> None:
    e = OptimizationEvent(
        optimization_name="LeveledCompactionSelection", write_id="w-1", table_id="tbl", revision_id=1,
        started_at=1_700_000_000_000, finished_at=1_700_000_000_500, process_time_ms=500,
        input_files_stats=_stats(), output_files_stats=None,
    )  # fmt: skip
    text = e.to_json()
    assert OptimizationEvent.from_json(text) == e
    obj = json.loads(text)
    assert list(obj) == SEED_EVENT_FIELDS and obj["output_files_stats"] is None
    assert list(obj["input_files_stats"]) == SEED_STATS_FIELDS
    with pytest.raises(CorruptLogError, match="not an OptimizationEvent"):
        OptimizationEvent.from_json('{"write_id": "x"}')
    with pytest.raises(CorruptLogError):
        OptimizationEvent.from_json("{nope")


def test_events_from_history_shapes() -> None:
    e1 = OptimizationEvent(
        optimization_name="a", write_id="1", table_id="t", started_at=1, finished_at=2, input_files_stats=_stats()
    )
    e2 = OptimizationEvent(optimization_name="b", write_id="2", table_id="t", started_at=3, finished_at=4)
    entries = [
        {"tags": {EVENT_TAG: e1.to_json()}},
        {"operation": "WRITE", "tags": {}},
        {"commitInfo": {"tags": {EVENT_TAG: e2.to_json(), "other": "x"}}},
        {"operation": "CREATE TABLE"},
    ]
    t = events_from_history(entries)
    assert t.schema == OPTIMIZATIONS_SCHEMA and t.num_rows == 2
    assert OPTIMIZATIONS_SCHEMA.names == SEED_EVENT_FIELDS + ["version"]
    assert t.column("version").to_pylist() == [None, None]  # bare commitInfo dicts do not say
    assert t.column("optimization_name").to_pylist() == ["a", "b"]
    assert t.column("input_files_stats").to_pylist()[0]["files"] == ["f0", "f1", "f2", "f3"]
    assert t.column("output_files_stats").to_pylist() == [None, None]
    assert events_from_history([]).schema == OPTIMIZATIONS_SCHEMA
    with pytest.raises(CorruptLogError, match="commit 12 has a malformed use.optimization.event"):
        events_from_history([{"version": 12, "tags": {EVENT_TAG: "{}"}}])


def test_events_from_a_real_delta_log(tmp_path: Path) -> None:
    from use.delta.log import DeltaLog

    log = DeltaLog.for_path(str(tmp_path / "t"))
    log.create(pa.schema([("id", pa.int64())]))
    event = OptimizationEvent(
        optimization_name="BinPacking", write_id="w", table_id="t", started_at=5, finished_at=9, process_time_ms=4
    )
    txn = log.start_transaction()
    txn.commit("OPTIMIZE", tags={EVENT_TAG: event.to_json()})
    table = events_from_history(log.history())
    assert table.num_rows == 1 and table.column("version").to_pylist() == [1]
    assert OptimizationEvent.from_dict(table.to_pylist()[0]) == event
