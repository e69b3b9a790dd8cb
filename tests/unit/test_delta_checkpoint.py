"""Checkpoints (ours read by delta-rs, multi-part, missing parts, _last_checkpoint) and log cleanup."""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from use.delta import AddFile, DeltaLog
from use.delta.actions import remove_actions
from use.delta.predicates import Comparison
from use.delta.skipping import files_matching
from use.delta.stats_parse import parse_stats
from use.errors import CorruptLogError, VersionNotFoundError

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])
DAY_MS = 86_400_000


def add(log: DeltaLog, i: int, tags: dict[str, str] | None = None) -> int:
    rel = f"p={i % 3}/f{i}.parquet"
    full = os.path.join(log.table_root, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    pq.write_table(pa.table({"id": pa.array([i], pa.int64())}), full)
    txn = log.start_transaction()
    txn.add(AddFile(rel, os.path.getsize(full), int(time.time() * 1000), True, {"p": str(i % 3)}, '{"numRecords":1}', tags))
    return txn.commit("WRITE")


def files_of(snap) -> list[tuple]:
    cols = ["path", "size", "partition_values", "tags", "stats"]
    return sorted(tuple(str(r[c]) for c in cols) for r in snap.files.select(cols).to_pylist())


def log_names(log: DeltaLog) -> list[str]:
    return sorted(os.listdir(log.log_dir))


def test_default_interval_and_last_checkpoint(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"])
    for i in range(1, 11):
        add(log, i, {"revision": "1"} if i % 2 else None)
    assert f"{10:020d}.checkpoint.parquet" in log_names(log)
    last = json.load(open(os.path.join(log.log_dir, "_last_checkpoint")))
    assert last["version"] == 10 and last["numOfAddFiles"] == 10 and last["size"] == 12
    fresh = DeltaLog.for_path(table_path).snapshot()
    assert fresh.state.checkpoint_version == 10
    dt = DeltaTable(table_path)
    assert dt.version() == 10
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == list(range(1, 11))
    # The checkpoint holds exactly the JSON replay's state.
    os.rename(os.path.join(log.log_dir, f"{10:020d}.checkpoint.parquet"), os.path.join(table_path, "cp.parquet"))
    replayed = DeltaLog.for_path(table_path).snapshot()
    assert replayed.state.checkpoint_version is None
    assert files_of(replayed) == files_of(fresh)
    assert replayed.metadata == fresh.metadata and replayed.protocol == fresh.protocol


@pytest.mark.parametrize("hint", ["[10]", '"00000000000000000010"', "null", "{not json"])
def test_unreadable_last_checkpoint_is_only_a_hint(table_path, hint):
    """A `_last_checkpoint` that is not a JSON object is ignored and rewritten, never a failed checkpoint."""
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"], {"delta.checkpointInterval": "100"})
    add(log, 1)
    with open(os.path.join(log.log_dir, "_last_checkpoint"), "w") as f:
        f.write(hint)
    log.checkpoint()
    last = json.load(open(os.path.join(log.log_dir, "_last_checkpoint")))
    assert last["version"] == 1 and last["numOfAddFiles"] == 1
    assert DeltaLog.for_path(table_path).snapshot().state.checkpoint_version == 1


def test_checkpoint_keeps_tombstones_txns_and_domains(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"], {"delta.checkpointInterval": "100"})
    for i in range(4):
        add(log, i)
    snap = log.snapshot()
    txn = log.start_transaction()
    txn.set_app_transaction("app", 42)
    txn.add(*remove_actions(snap.files.slice(0, 2), data_change=True))
    txn.commit("DELETE")
    # An old tombstone, beyond the 7-day retention: dropped from the checkpoint.
    txn = log.start_transaction()
    txn.add(
        *remove_actions(
            log.snapshot().files.slice(0, 1), data_change=False, deletion_timestamp=int(time.time() * 1000) - 8 * DAY_MS
        )
    )
    txn.commit("OPTIMIZE")
    with open(os.path.join(log.log_dir, f"{7:020d}.json"), "w") as fh:
        fh.write(
            json.dumps(
                {
                    "protocol": {
                        "minReaderVersion": 1,
                        "minWriterVersion": 7,
                        "writerFeatures": ["domainMetadata", "appendOnly", "invariants"],
                    }
                }
            )
            + "\n"
        )
        fh.write(json.dumps({"domainMetadata": {"domain": "delta.clustering", "configuration": "{}", "removed": False}}) + "\n")
    before = DeltaLog.for_path(table_path).snapshot()
    assert before.tombstones.num_rows == 2 and before.all_tombstones.num_rows == 3
    assert before.domain_metadata == {"delta.clustering": "{}"}
    assert log.checkpoint() == 7
    after = DeltaLog.for_path(table_path).snapshot()
    assert after.state.checkpoint_version == 7
    assert files_of(after) == files_of(before)
    assert after.app_transaction_version("app") == 42
    assert after.domain_metadata == {"delta.clustering": "{}"}
    assert after.all_tombstones.num_rows == 2
    assert sorted(after.tombstones.column("path").to_pylist()) == sorted(before.tombstones.column("path").to_pylist())
    assert after.protocol == before.protocol
    dt = DeltaTable(table_path)
    assert dt.version() == 7 and dt.transaction_version("app") == 42
    assert len(dt.to_pyarrow_table()) == 1


def split_into_parts(log: DeltaLog, version: int, parts: int) -> list[str]:
    """Rewrite our classic checkpoint as a multi-part one (as Spark writes for large tables)."""
    classic = os.path.join(log.log_dir, f"{version:020d}.checkpoint.parquet")
    table = pq.read_table(classic)
    os.remove(classic)
    names = []
    per = -(-table.num_rows // parts)
    for i in range(parts):
        name = f"{version:020d}.checkpoint.{i + 1:010d}.{parts:010d}.parquet"
        pq.write_table(table.slice(i * per, per), os.path.join(log.log_dir, name))
        names.append(name)
    return names


def test_multi_part_checkpoint(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"], {"delta.checkpointInterval": "5"})
    for i in range(7):
        add(log, i)
    expected = files_of(log.snapshot())
    names = split_into_parts(log, 5, 3)
    for v in range(6):
        os.remove(os.path.join(log.log_dir, f"{v:020d}.json"))
    snap = DeltaLog.for_path(table_path).snapshot()
    assert snap.state.checkpoint_version == 5
    assert files_of(snap) == expected
    assert DeltaLog.for_path(table_path).snapshot(version=5).files.num_rows == 5
    # A missing part makes the checkpoint unusable; with the older commits gone that is an error.
    os.remove(os.path.join(log.log_dir, names[1]))
    before = log_names(log)
    with pytest.raises(CorruptLogError, match=names[1].replace(".", r"\.")):
        DeltaLog.for_path(table_path).snapshot()
    assert log_names(log) == before


def test_incomplete_checkpoint_ignored_when_commits_remain(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"], {"delta.checkpointInterval": "5"})
    for i in range(6):
        add(log, i)
    expected = files_of(log.snapshot())
    names = split_into_parts(log, 5, 2)
    os.remove(os.path.join(log.log_dir, names[0]))
    snap = DeltaLog.for_path(table_path).snapshot()
    assert snap.state.checkpoint_version is None and files_of(snap) == expected


def test_corrupt_checkpoint_file(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"], {"delta.checkpointInterval": "2"})
    add(log, 1)
    add(log, 2)
    with open(os.path.join(log.log_dir, f"{2:020d}.checkpoint.parquet"), "wb") as fh:
        fh.write(b"not parquet")
    with pytest.raises(CorruptLogError, match="cannot be read as parquet"):
        DeltaLog.for_path(table_path).snapshot()


def age(log: DeltaLog, versions: range, days: int) -> None:
    ts = time.time() - days * 86400
    for v in versions:
        for name in (f"{v:020d}.json", f"{v:020d}.checkpoint.parquet"):
            p = os.path.join(log.log_dir, name)
            if os.path.exists(p):
                os.utime(p, (ts + v, ts + v))


def test_expired_log_cleanup(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"], {"delta.checkpointInterval": "5", "delta.logRetentionDuration": "interval 2 days"})
    for i in range(1, 13):
        add(log, i)
    age(log, range(0, 8), days=10)  # versions 0..7 are old; checkpoint 5 is the newest one before the cutoff
    expected = files_of(log.snapshot())
    for i in range(13, 16):
        add(log, i)  # version 15 checkpoints and cleans up
    names = log_names(log)
    assert f"{15:020d}.checkpoint.parquet" in names
    kept = sorted(int(n[:20]) for n in names if n.endswith(".json"))
    assert kept == list(range(5, 16))
    assert f"{5:020d}.checkpoint.parquet" in names
    fresh = DeltaLog.for_path(table_path)
    assert len(files_of(fresh.snapshot())) == len(expected) + 3
    assert fresh.snapshot(version=5).files.num_rows == 5
    with pytest.raises(VersionNotFoundError, match="available versions are 5 to 15"):
        fresh.snapshot(version=4)
    assert [h.version for h in fresh.history()][-1] == 5
    assert DeltaTable(table_path).version() == 15
    assert DeltaTable(table_path, version=6).version() == 6


def test_cleanup_disabled_and_explicit(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"], {"delta.checkpointInterval": "3", "delta.enableExpiredLogCleanup": "false"})
    for i in range(1, 4):
        add(log, i)
    age(log, range(0, 4), days=60)
    for i in range(4, 7):
        add(log, i)  # checkpoint at 6, but cleanup is disabled
    assert f"{0:020d}.json" in log_names(log)
    assert log.cleanup_expired_logs(retention_ms=90 * DAY_MS) == []  # nothing that old
    assert log.cleanup_expired_logs() == [f"{v:020d}.json" for v in range(0, 3)]
    assert DeltaLog.for_path(table_path).snapshot().files.num_rows == 6
    assert DeltaLog.for_path(table_path).snapshot(version=3).files.num_rows == 3


def test_write_stats_as_json_false(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"], {"delta.checkpointInterval": "2", "delta.checkpoint.writeStatsAsJson": "false"})
    add(log, 1)
    add(log, 2)
    snap = DeltaLog.for_path(table_path).snapshot()
    assert snap.state.checkpoint_version == 2
    assert snap.files.column("stats").null_count == 2
    assert DeltaTable(table_path).version() == 2


def test_delta_rs_checkpoint_of_our_table(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"], {"delta.checkpointInterval": "100"})
    for i in range(1, 6):
        add(log, i, {"revision": "1", "blocks": '[{"cubeId":"","minWeight":-2147483648}]'} if i % 2 else None)
    snap = log.snapshot()
    txn = log.start_transaction()
    txn.add(*remove_actions(snap.files.slice(0, 1), data_change=True))
    txn.commit("DELETE")
    replayed = DeltaLog.for_path(table_path).snapshot()
    DeltaTable(table_path).create_checkpoint()
    from_rs = DeltaLog.for_path(table_path).snapshot()
    assert from_rs.state.checkpoint_version == 6
    assert files_of(from_rs) == files_of(replayed)
    assert from_rs.tombstones.column("path").to_pylist() == replayed.tombstones.column("path").to_pylist()
    assert from_rs.metadata == replayed.metadata


# --- reading adds without copying them ----------------------------------------------------------------


def _table_with_every_action_kind(table_path: str) -> DeltaLog:
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["p"], {"delta.checkpointInterval": "100"})
    for i in range(6):
        add(log, i, {"revision": "1"} if i % 2 else None)
    txn = log.start_transaction()
    txn.set_app_transaction("app", 3)
    txn.add(*remove_actions(log.snapshot().files.slice(0, 2), data_change=True))
    txn.commit("DELETE")
    return log


def _runs(col: pa.ChunkedArray) -> list[tuple[int, int]]:
    """(first, last) row of each run of non-null rows."""
    valid = col.is_valid().to_pylist()
    runs: list[tuple[int, int]] = []
    for i, v in enumerate(valid):
        if v and (not runs or runs[-1][1] != i - 1):
            runs.append((i, i))
        elif v:
            runs[-1] = (runs[-1][0], i)
    return runs


def _buffer_addresses(col: pa.ChunkedArray) -> set[int]:
    return {b.address for chunk in col.chunks for b in chunk.buffers() if b is not None}


def test_checkpoint_groups_each_action_kind_in_one_run_and_reads_them_without_copy(table_path):
    from use.delta.checkpoint import _non_null_rows

    log = _table_with_every_action_kind(table_path)
    log.checkpoint()
    table = pq.read_table(os.path.join(log.log_dir, f"{7:020d}.checkpoint.parquet"))
    for name in ("add", "remove", "metaData", "protocol", "txn"):
        assert len(_runs(table.column(name))) == 1, name
    add_col = table.column("add")
    rows = _non_null_rows(add_col)
    assert rows.null_count == 0 and len(rows) == 4
    assert rows.to_pylist() == add_col.filter(add_col.is_valid()).to_pylist()
    # A slice of what parquet gave us: no buffer of its own (the stats strings are not copied).
    assert _buffer_addresses(rows) <= _buffer_addresses(add_col)


def test_checkpoint_with_interleaved_actions_is_read_the_same(table_path):
    """Checkpoints written by others need not group rows by action kind: the reader filters them."""
    log = _table_with_every_action_kind(table_path)
    log.checkpoint()
    expected = DeltaLog.for_path(table_path).snapshot()
    path = os.path.join(log.log_dir, f"{7:020d}.checkpoint.parquet")
    table = pq.read_table(path)
    order = list(range(table.num_rows))
    adds = [i for i in order if table.column("add")[i].is_valid]
    rems = [i for i in order if table.column("remove")[i].is_valid]
    rest = [i for i in order if i not in adds and i not in rems]
    interleaved = [adds[0], rems[0], *rest, adds[1], rems[1], *adds[2:]]
    assert sorted(interleaved) == order
    shuffled = table.take(interleaved)
    assert len(_runs(shuffled.column("add"))) > 1 and len(_runs(shuffled.column("remove"))) > 1
    pq.write_table(shuffled, path, row_group_size=3)  # several row groups: chunked columns
    snap = DeltaLog.for_path(table_path).snapshot()
    assert snap.state.checkpoint_version == 7
    assert files_of(snap) == files_of(expected)
    assert sorted(snap.all_tombstones.column("path").to_pylist()) == sorted(expected.all_tombstones.column("path").to_pylist())
    assert snap.app_transaction_version("app") == 3 and snap.metadata == expected.metadata


def test_non_null_rows_cases():
    from use.delta.checkpoint import _non_null_rows

    def chunked(*chunks: list) -> pa.ChunkedArray:
        return pa.chunked_array([pa.array(c, pa.int64()) for c in chunks], pa.int64())

    assert _non_null_rows(chunked([1, 2], [3])).to_pylist() == [1, 2, 3]
    assert _non_null_rows(chunked([None, None], [None])).to_pylist() == []
    middle = chunked([None, 1], [2, 3], [None])  # one run across chunk boundaries: sliced
    out = _non_null_rows(middle)
    assert out.to_pylist() == [1, 2, 3] and _buffer_addresses(out) <= _buffer_addresses(middle)
    assert _non_null_rows(chunked([1, None], [2, None, 3])).to_pylist() == [1, 2, 3]  # interleaved: filtered
    assert _non_null_rows(chunked([None, 1], [None, 2])).to_pylist() == [1, 2]
    assert _non_null_rows(chunked()).to_pylist() == []


# --- checkpoint details --------------------------------------------------------------------------------


def _rewrite_checkpoint(path: str, fix) -> None:
    t = pq.read_table(path)
    pq.write_table(fix(t), path)


def test_checkpoint_stats_kept_only_as_stats_parsed(tmp_path):
    # delta.checkpoint.writeStatsAsJson=false / writeStatsAsStruct=true: the checkpoint's adds carry
    # `stats_parsed` and no `stats`; skipping must still have the bounds.
    root = str(tmp_path / "t")
    log = DeltaLog.for_path(root)
    log.create(pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC"))]))
    txn = log.start_transaction()
    txn.add(
        *[
            AddFile(
                f"f{i}.parquet",
                10,
                1,
                stats=json.dumps(
                    {
                        "numRecords": 5,
                        "minValues": {"id": i * 10, "ts": f"2024-01-0{i + 1}T00:00:00.000Z"},
                        "maxValues": {"id": i * 10 + 4, "ts": f"2024-01-0{i + 1}T10:00:00.000Z"},
                        "nullCount": {"id": 0, "ts": 0},
                    }
                ),
            )
            for i in range(3)
        ]
    )
    txn.commit("WRITE")
    json_snap = DeltaLog.for_path(root).snapshot()
    cp = os.path.join(log.log_dir, f"{1:020d}.checkpoint.parquet")
    log.checkpoint(json_snap)
    parsed_t = pa.struct(
        [
            ("numRecords", pa.int64()),
            ("minValues", pa.struct([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC"))])),
            ("maxValues", pa.struct([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC"))])),
            ("nullCount", pa.struct([("id", pa.int64()), ("ts", pa.int64())])),
        ]
    )

    def to_struct_stats(t: pa.Table) -> pa.Table:
        add = t.column("add").combine_chunks()
        values = []
        for s in add.field("stats").to_pylist():
            if s is None:
                values.append(None)
                continue
            d = json.loads(s)
            for k in ("minValues", "maxValues"):
                d[k]["ts"] = dt.datetime.fromisoformat(d[k]["ts"].replace("Z", "+00:00"))
            values.append(d)
        fields = [add.type.field(i) for i in range(add.type.num_fields) if add.type.field(i).name != "stats"]
        children = [add.field(f.name) for f in fields] + [pa.array(values, parsed_t)]
        new_add = pa.StructArray.from_arrays(children, fields=fields + [pa.field("stats_parsed", parsed_t)], mask=add.is_null())
        return t.set_column(t.column_names.index("add"), "add", new_add)

    _rewrite_checkpoint(cp, to_struct_stats)
    for v in range(2):
        os.remove(os.path.join(log.log_dir, f"{v:020d}.json"))
    snap = DeltaLog.for_path(root).snapshot()
    assert snap.state.checkpoint_version == 1
    mine = parse_stats(snap.files, snap.schema).sort_by("min.id")
    expected = parse_stats(json_snap.files, json_snap.schema).sort_by("min.id")
    assert mine.equals(expected)
    paths = snap.files.column("path").to_pylist()
    keep = files_matching(snap.files, Comparison("id", ">=", 20), snap.schema).to_pylist()
    assert [p for p, k in zip(paths, keep, strict=False) if k] == ["f2.parquet"]
    rs = pa.table(DeltaTable(root).get_add_actions(flatten=True))
    assert sorted(rs.column("num_records").to_pylist()) == [5, 5, 5]


def test_checkpoint_metadata_without_schema_is_corrupt(tmp_path):
    # A checkpoint holds a missing schemaString as null; it was read as the schema text "None".
    root = str(tmp_path / "t")
    log = DeltaLog.for_path(root)
    log.create(SCHEMA)
    log.checkpoint()
    cp = os.path.join(log.log_dir, f"{0:020d}.checkpoint.parquet")

    def drop_schema(t: pa.Table) -> pa.Table:
        md = t.column("metaData").combine_chunks()
        fields = [md.type.field(i) for i in range(md.type.num_fields)]
        children = [pa.nulls(len(md), pa.string()) if f.name == "schemaString" else md.field(f.name) for f in fields]
        fields = [f.with_nullable(True) for f in fields]
        return t.set_column(
            t.column_names.index("metaData"), "metaData", pa.StructArray.from_arrays(children, fields=fields, mask=md.is_null())
        )

    _rewrite_checkpoint(cp, drop_schema)
    os.remove(os.path.join(log.log_dir, f"{0:020d}.json"))
    with pytest.raises(CorruptLogError, match="schemaString must be a string"):
        DeltaLog.for_path(root).snapshot()
