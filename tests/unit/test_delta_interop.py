"""Interop with delta-rs (the `deltalake` package), both directions, on real files.

Tables this project writes (data files from `write_data_file`, commits, removes, checkpoints every
10 commits, vacuum) must read the same in delta-rs; commits delta-rs makes must read the same here;
and the stats each side writes must be usable for skipping by the other.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import time
import urllib.parse

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")

from use.delta import DeltaLog  # noqa: E402
from use.delta.datafile import write_data_file  # noqa: E402
from use.delta.predicates import And, Comparison, IsNull  # noqa: E402
from use.delta.skipping import files_matching  # noqa: E402
from use.delta.vacuum import vacuum  # noqa: E402

UTC = dt.UTC
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("ts", pa.timestamp("us", "UTC")),
        ("amount", pa.decimal128(10, 2)),
        ("score", pa.float64()),
        ("part", pa.string()),
    ]
)
DATA_SCHEMA = pa.schema([f for f in SCHEMA if f.name != "part"])


def _batch(start: int, n: int, rng: np.random.Generator) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table(
        {
            "id": ids,
            "name": [f"name-{i:05d}" + ("x" * 40 if i % 7 == 0 else "") for i in ids],
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=int(i) * 1001) for i in ids],
                pa.timestamp("us", "UTC"),
            ),
            "amount": pa.array([decimal.Decimal(int(i)).scaleb(-2) for i in ids], pa.decimal128(10, 2)),
            "score": pa.array([None if i % 5 == 0 else float(rng.normal()) for i in ids], pa.float64()),
        },
        schema=DATA_SCHEMA,
    )


def _our_rows(root: str, version: int | None = None) -> pa.Table:
    """The table's rows as this project sees them (live files + partition values)."""
    snap = DeltaLog.for_path(root).snapshot(version=version)
    parts = []
    for path, pv in zip(snap.files.column("path").to_pylist(), snap.files.column("partition_values").to_pylist(), strict=False):
        t = pq.read_table(os.path.join(root, urllib.parse.unquote(path)), schema=DATA_SCHEMA)
        parts.append(t.append_column("part", pa.array([dict(pv)["part"]] * t.num_rows, pa.string())))
    return pa.concat_tables(parts).sort_by("id") if parts else SCHEMA.empty_table()


def _rs_rows(table) -> pa.Table:
    return table.to_pyarrow_table().select(SCHEMA.names).cast(SCHEMA).sort_by("id")


def _rs_paths(table) -> set[str]:
    return {urllib.parse.unquote(p) for p in pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()}


def _our_paths(root: str, version: int | None = None) -> set[str]:
    return {urllib.parse.unquote(p) for p in DeltaLog.for_path(root).snapshot(version=version).files.column("path").to_pylist()}


@pytest.fixture(scope="module")
def our_table(tmp_path_factory):
    """25 commits made here: appends to two partitions (one needing URL escaping), some removes."""
    root = str(tmp_path_factory.mktemp("interop") / "ours")
    log = DeltaLog.for_path(root)
    log.create(SCHEMA, partition_columns=("part",))
    rng = np.random.default_rng(3)
    next_id = 0
    for i in range(25):
        txn = log.start_transaction()
        part = ["a", "b c:d"][i % 2]
        add = write_data_file(root, _batch(next_id, 40, rng), schema=DATA_SCHEMA, partition_values={"part": part})
        next_id += 40
        txn.add(add)
        if i % 6 == 5:
            victim = txn.snapshot.files.slice(0, 1)
            path = victim.column("path")[0].as_py()
            pv = dict(victim.column("partition_values")[0].as_py())
            from use.delta import RemoveFile

            txn.add(
                RemoveFile(
                    path=path,
                    deletion_timestamp=int(time.time() * 1000),
                    partition_values=pv,
                    size=victim.column("size")[0].as_py(),
                )
            )
            txn.commit("DELETE", {"predicate": "[]"})
        else:
            txn.commit("WRITE", {"mode": "Append"})
    return root


def test_delta_rs_reads_our_commits_removes_and_checkpoints(our_table):
    root = our_table
    log_dir = os.path.join(root, "_delta_log")
    assert os.path.exists(os.path.join(log_dir, f"{10:020d}.checkpoint.parquet"))
    assert os.path.exists(os.path.join(log_dir, f"{20:020d}.checkpoint.parquet"))
    rs = deltalake.DeltaTable(root)
    assert rs.version() == DeltaLog.for_path(root).snapshot().version == 25
    assert _rs_paths(rs) == _our_paths(root)
    assert _rs_rows(rs).equals(_our_rows(root))
    for v in (7, 10, 13, 20):  # time travel around and across checkpoints
        old = deltalake.DeltaTable(root, version=v)
        assert _rs_paths(old) == _our_paths(root, v)
        assert _rs_rows(old).equals(_our_rows(root, v))
    assert rs.history(1)[0]["operation"] in ("WRITE", "DELETE")


def test_delta_rs_uses_our_stats(our_table):
    root = our_table
    rs = deltalake.DeltaTable(root)
    actions = pa.table(rs.get_add_actions(flatten=True))
    snap = DeltaLog.for_path(root).snapshot()
    ours = {
        urllib.parse.unquote(p): s
        for p, s in zip(snap.files.column("path").to_pylist(), snap.files.column("stats").to_pylist(), strict=False)
    }
    # delta-rs parsed every file's stats into typed columns.
    assert actions.column("num_records").null_count == 0
    assert set(actions.column_names) >= {"min.id", "max.id", "min.ts", "max.amount", "null_count.score", "min.name"}
    for row in actions.to_pylist():
        s = __import__("json").loads(ours[urllib.parse.unquote(row["path"])])
        assert row["min.id"] == s["minValues"]["id"] and row["max.id"] == s["maxValues"]["id"]
        assert row["null_count.score"] == s["nullCount"]["score"]
        assert row["max.amount"] == decimal.Decimal(str(s["maxValues"]["amount"]))
    # ... and prunes with them: the same files as our own skipping, and the right rows.
    dataset = rs.to_pyarrow_dataset()
    for lo, hi in ((100, 130), (0, 5), (990, 2000)):
        expr = (pads.field("id") >= lo) & (pads.field("id") < hi)
        rs_files = {os.path.basename(f.path) for f in dataset.get_fragments(filter=expr)}
        keep = files_matching(snap.files, And(Comparison("id", ">=", lo), Comparison("id", "<", hi)), snap.schema)
        our_files = {os.path.basename(urllib.parse.unquote(p)) for p in snap.files.column("path").filter(keep).to_pylist()}
        assert rs_files == our_files
        got = dataset.to_table(filter=expr).column("id").to_pylist()
        assert sorted(got) == [i for i in _our_rows(root).column("id").to_pylist() if lo <= i < hi]
    name = _our_rows(root).column("name")[41].as_py()  # a long (truncated-stats) string
    assert dataset.to_table(filter=pads.field("name") == name).num_rows == 1


def test_we_read_delta_rs_commits_and_stats(our_table, tmp_path):
    import shutil

    root = str(tmp_path / "copy")
    shutil.copytree(our_table, root)
    rng = np.random.default_rng(4)
    for k in range(3):
        data = _batch(10_000 + 100 * k, 30, rng).append_column("part", pa.array(["rs"] * 30))
        deltalake.write_deltalake(root, data.cast(SCHEMA), mode="append")
    snap = DeltaLog.for_path(root).snapshot()
    rs = deltalake.DeltaTable(root)
    assert snap.version == rs.version() == 28
    assert _our_paths(root) == _rs_paths(rs)
    assert _our_rows(root).equals(_rs_rows(rs))
    assert DeltaLog.for_path(root).history(1)[0].operation == "WRITE"
    # delta-rs's stats (microsecond timestamps, its own number rendering) drive our skipping.
    keep = files_matching(snap.files, Comparison("id", ">=", 10_100), snap.schema)
    kept = snap.files.filter(keep)
    assert kept.num_rows == 2 and all(pv == [("part", "rs")] for pv in kept.column("partition_values").to_pylist())
    ts = dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=10_205 * 1001)
    keep = files_matching(snap.files, Comparison("ts", "=", ts), snap.schema)
    assert snap.files.filter(keep).num_rows == 1
    assert not pc_any(files_matching(snap.files, IsNull("id"), snap.schema))
    # And we append after delta-rs: it reads our commit on top of its own.
    log = DeltaLog.for_path(root)
    add = write_data_file(root, _batch(20_000, 10, rng), schema=DATA_SCHEMA, partition_values={"part": "a"})
    log.start_transaction().add(add).commit("WRITE", {"mode": "Append"})
    rs = deltalake.DeltaTable(root)
    assert rs.version() == 29 and _rs_rows(rs).equals(_our_rows(root))


def pc_any(arr: pa.BooleanArray) -> bool:
    return any(arr.to_pylist())


def test_delta_rs_reads_after_our_vacuum(our_table, tmp_path):
    import shutil

    root = str(tmp_path / "vac")
    shutil.copytree(our_table, root)
    before = _our_rows(root)
    past = time.time() - 3600
    for d, _, names in os.walk(root):
        if "_delta_log" not in d:
            for n in names:
                os.utime(os.path.join(d, n), (past, past))
    res = vacuum(DeltaLog.for_path(root), retention_hours=0, enforce_retention_check=False)
    assert len(res.files) == 4  # the four removed files
    rs = deltalake.DeltaTable(root)
    assert rs.version() == 27
    assert _rs_rows(rs).equals(before) and _rs_paths(rs) == _our_paths(root)
    ops = [h["operation"] for h in rs.history(2)]
    assert ops == ["VACUUM END", "VACUUM START"]
    on_disk = set()
    for d, _, names in os.walk(root):
        if "_delta_log" not in d:
            on_disk |= {os.path.relpath(os.path.join(d, n), root) for n in names}
    assert on_disk == _rs_paths(rs)  # exactly the live files are left
