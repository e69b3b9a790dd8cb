"""Tables written by delta-rs read by us (every version), and delta-rs writing after us."""

from __future__ import annotations

import json
import os
import time
import uuid

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from use.delta import AddFile, DeltaLog, Snapshot
from use.delta.actions import remove_actions
from use.delta.predicates import Comparison
from use.delta.skipping import files_matching


def our_files(snap: Snapshot) -> set[str]:
    return set(snap.files.column("path").to_pylist())


def rs_files(path: str, version: int | None = None) -> set[str]:
    t = DeltaTable(path, version=version)
    return set(pa.table(t.get_add_actions(flatten=True)).column("path").to_pylist())


def our_rows(snap: Snapshot) -> list[int]:
    """Read the live files with pyarrow (the test's own reader) and return the sorted ids."""
    ids: list[int] = []
    for p in snap.files.column("path").to_pylist():
        ids.extend(pq.read_table(os.path.join(snap.table_root, p), columns=["id"]).column("id").to_pylist())
    return sorted(ids)


def assert_same_as_delta_rs(path: str, version: int) -> None:
    ours = DeltaLog.for_path(path).snapshot(version=version)
    theirs = DeltaTable(path, version=version)
    assert ours.version == theirs.version() == version
    assert our_files(ours) == rs_files(path, version)
    assert ours.metadata.partition_columns == tuple(theirs.metadata().partition_columns)
    assert ours.metadata.id == theirs.metadata().id
    assert ours.metadata.configuration == theirs.metadata().configuration
    assert json.loads(ours.metadata.schema_string) == json.loads(theirs.schema().to_json())
    assert ours.protocol.min_reader_version == theirs.protocol().min_reader_version
    assert ours.protocol.min_writer_version == theirs.protocol().min_writer_version
    assert our_rows(ours) == sorted(theirs.to_pyarrow_table().column("id").to_pylist())
    # Live-file attributes match too, not just the paths.
    rs = pa.table(theirs.get_add_actions(flatten=True))
    rs_sizes = dict(zip(rs.column("path").to_pylist(), rs.column("size_bytes").to_pylist(), strict=False))
    assert dict(zip(ours.files.column("path").to_pylist(), ours.files.column("size").to_pylist(), strict=False)) == rs_sizes


def data(ids: list[int], part: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "p": [part] * len(ids), "v": [float(i) for i in ids]})


def test_delta_rs_history_read_at_every_version(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, data([1, 2, 3]), partition_by=["p"], configuration={"delta.appendOnly": "false"})
    write_deltalake(path, data([4, 5], "y"), mode="append")
    write_deltalake(path, data([6], "z"), mode="append")
    DeltaTable(path).delete("id = 4")
    DeltaTable(path).create_checkpoint()
    write_deltalake(path, data([7, 8], "x"), mode="overwrite")
    write_deltalake(path, data([9], "y"), mode="append")
    DeltaTable(path).delete("id = 9")
    latest = DeltaTable(path).version()
    assert latest == 6
    assert any(n.endswith(".checkpoint.parquet") for n in os.listdir(os.path.join(path, "_delta_log")))
    for v in range(latest + 1):
        assert_same_as_delta_rs(path, v)
    snap = DeltaLog.for_path(path).snapshot()
    assert our_rows(snap) == [7, 8]
    ops = [h.operation for h in DeltaLog.for_path(path).history()]
    assert ops[0] == "DELETE" and ops[-1] in ("CREATE TABLE", "WRITE")
    assert snap.tombstones.num_rows >= 4  # overwrite and deletes left tombstones inside the retention


def test_delta_rs_checkpoint_only_tail(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, data([1]), partition_by=["p"])
    for i in range(2, 6):
        write_deltalake(path, data([i], "y"), mode="append")
    DeltaTable(path).create_checkpoint()
    fresh = DeltaLog.for_path(path)
    snap = fresh.snapshot()
    assert snap.state.checkpoint_version == 4
    assert_same_as_delta_rs(path, 4)
    assert_same_as_delta_rs(path, 2)  # older than the checkpoint: replayed from JSON


def test_delta_rs_unpartitioned_with_nulls_and_special_paths(tmp_path):
    path = str(tmp_path / "t")
    t = pa.table({"id": [1, 2, 3], "p": ["a b", None, "ü/x"], "v": [1.0, None, 3.0]})
    write_deltalake(path, t, partition_by=["p"])
    snap = DeltaLog.for_path(path).snapshot()
    pvs = sorted((dict(x)["p"] or "") for x in snap.files.column("partition_values").to_pylist())
    assert pvs == ["", "a b", "ü/x"]
    assert our_files(snap) == rs_files(path)


def test_we_write_after_delta_rs_and_delta_rs_after_us(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, data([1, 2]), partition_by=["p"])
    log = DeltaLog.for_path(path)
    snap = log.snapshot()
    # Append one file of our own.
    rel = f"p=q/part-{uuid.uuid4().hex}.parquet"
    os.makedirs(os.path.join(path, "p=q"))
    pq.write_table(pa.table({"id": pa.array([3], pa.int64()), "v": [3.0]}), os.path.join(path, rel))
    txn = log.start_transaction()
    txn.add(AddFile(rel, os.path.getsize(os.path.join(path, rel)), int(time.time() * 1000), True, {"p": "q"}, '{"numRecords":1}'))
    assert txn.commit("WRITE") == snap.version + 1
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]
    # delta-rs appends after us, then deletes one of our files' rows; we read both.
    write_deltalake(path, data([4], "q"), mode="append")
    DeltaTable(path).delete("id = 1")
    for v in range(DeltaTable(path).version() + 1):
        assert_same_as_delta_rs(path, v)
    # We remove a delta-rs file; delta-rs agrees.
    snap = log.snapshot()
    victim = snap.files.filter(pc.equal(snap.files.column("path"), sorted(our_files(snap))[0]))
    txn = log.start_transaction()
    txn.add(*remove_actions(victim, data_change=True))
    v = txn.commit("DELETE")
    assert_same_as_delta_rs(path, v)


def test_our_checkpoints_read_by_delta_rs(tmp_path):
    path = str(tmp_path / "t")
    log = DeltaLog.for_path(path)
    log.create(pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.float64())]), ["p"], {"delta.checkpointInterval": "3"})
    for i in range(1, 8):
        rel = f"p={i % 2}/part-{uuid.uuid4().hex}.parquet"
        os.makedirs(os.path.join(path, f"p={i % 2}"), exist_ok=True)
        pq.write_table(pa.table({"id": pa.array([i], pa.int64()), "v": [float(i)]}), os.path.join(path, rel))
        txn = log.start_transaction()
        txn.set_app_transaction("writer", i)
        txn.add(
            AddFile(
                rel,
                os.path.getsize(os.path.join(path, rel)),
                int(time.time() * 1000),
                True,
                {"p": str(i % 2)},
                '{"numRecords":1}',
                {"revision": "0"},
            )
        )
        txn.commit("WRITE")
    # remove one file at version 8, then a checkpoint lands at 9
    snap = log.snapshot()
    txn = log.start_transaction()
    txn.add(*remove_actions(snap.files.slice(0, 1), data_change=True))
    txn.commit("DELETE")
    txn = log.start_transaction()
    txn.commit("NOOP")
    names = os.listdir(log.log_dir)
    assert {f"{v:020d}.checkpoint.parquet" for v in (3, 6, 9)} <= set(names)
    for v in range(10):
        assert_same_as_delta_rs(path, v)
    theirs = DeltaTable(path)
    assert theirs.transaction_version("writer") == 7
    # delta-rs continues the table from our checkpoint and we read its commit.
    write_deltalake(path, data([100], "1").drop_columns([]), mode="append")
    assert_same_as_delta_rs(path, 10)
    snap = DeltaLog.for_path(path).snapshot()
    assert snap.state.checkpoint_version == 9
    assert snap.app_transaction_version("writer") == 7
    tags = [t for t in snap.files.column("tags").to_pylist() if t]
    assert tags and all(dict(t) == {"revision": "0"} for t in tags)
    assert snap.tombstones.num_rows == 1


def test_deltalake_version_is_pinned():
    assert deltalake.__version__.startswith("1.")


def test_delta_rs_schema_types_map_to_arrow(tmp_path):
    import datetime
    import decimal

    path = str(tmp_path / "t")
    t = pa.table(
        {
            "id": pa.array([1], pa.int64()),
            "i32": pa.array([1], pa.int32()),
            "f32": pa.array([1.5], pa.float32()),
            "d": pa.array([datetime.date(2024, 1, 2)], pa.date32()),
            "ts": pa.array([datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)], pa.timestamp("us", "UTC")),
            "dec": pa.array([decimal.Decimal("1.25")], pa.decimal128(9, 2)),
            "l": pa.array([[1, 2]], pa.list_(pa.int64())),
            "s": pa.array([{"x": 1, "y": "a"}], pa.struct([("x", pa.int32()), ("y", pa.string())])),
            "b": pa.array([b"x"], pa.binary()),
        }
    )
    write_deltalake(path, t)
    snap = DeltaLog.for_path(path).snapshot()
    data_schema = pq.read_schema(os.path.join(path, snap.files.column("path")[0].as_py()))
    for f in snap.schema:
        want = data_schema.field(f.name).type
        assert f.type == want or (pa.types.is_list(f.type) and f.type.value_type == want.value_type), f.name


def test_partition_columns_changed_by_delta_rs_overwrite(tmp_path):
    # delta-rs overwrites with a new partitioning: each commit's partition values are typed with the
    # partition columns in force for that commit, so no add carries a key that is not in the log.
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1, 2], "p": ["x", "y"], "q": ["a", "b"]}), partition_by=["p"])
    write_deltalake(
        path,
        pa.table({"id": [3, 4], "p": ["x", "y"], "q": ["a", "b"]}),
        partition_by=["q"],
        mode="overwrite",
        schema_mode="overwrite",
    )
    cached = DeltaLog.for_path(path)
    assert cached.snapshot(version=0).num_files == 2
    for snap in (DeltaLog.for_path(path).snapshot(), cached.snapshot()):  # a fresh replay, and one advanced from version 0
        assert snap.partition_columns == ("q",)
        pvs = {
            p: dict(v)
            for p, v in zip(
                snap.files.column("path").to_pylist(), snap.files.column("partition_values").to_pylist(), strict=False
            )
        }
        assert sorted(pvs.values(), key=str) == [{"q": "a"}, {"q": "b"}]
        rs = pa.table(DeltaTable(path).get_add_actions(flatten=True))
        assert pvs == {
            p: {"q": q} for p, q in zip(rs.column("path").to_pylist(), rs.column("partition.q").to_pylist(), strict=False)
        }
        # `p` is a data column now: its stats decide, and the file holding p = 'x' is kept.
        keep = files_matching(snap.files, Comparison("p", "=", "x"), snap.schema)
        assert snap.files.filter(keep).column("path").to_pylist() == [p for p, v in pvs.items() if v == {"q": "a"}]
    # Our checkpoint stays readable by delta-rs, and by us.
    cached.checkpoint()
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == [3, 4]
    assert_same_as_delta_rs(path, 1)
    again = DeltaLog.for_path(path).snapshot()
    assert again.state.checkpoint_version == 1
    assert sorted(dict(v)["q"] for v in again.files.column("partition_values").to_pylist()) == ["a", "b"]
    assert all(set(dict(v)) == {"q"} for v in again.files.column("partition_values").to_pylist())
