"""VACUUM: what is deleted, what never is, the retention check, dry runs and the log records."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pytest

from use.delta import DeltaLog
from use.delta.datafile import write_data_file
from use.delta.vacuum import vacuum
from use.errors import InvalidArgumentError, VacuumRetentionError

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])
DAY = 86_400


def _age(path: str, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def _tree(root) -> list[str]:
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/") for n in names]
    return sorted(out)


@pytest.fixture
def table(tmp_path):
    """A partitioned table: 2 live files, 1 file removed 10 days ago, 1 removed just now, junk."""
    root = str(tmp_path / "t")
    log = DeltaLog.for_path(root)
    log.create(SCHEMA, partition_columns=("p",))
    data = pa.table({"id": [1, 2]})
    live = [write_data_file(root, data, partition_values={"p": "a"}), write_data_file(root, data, partition_values={"p": "_u"})]
    old = write_data_file(root, data, partition_values={"p": "b"})
    recent = write_data_file(root, data, partition_values={"p": "c"})
    log.start_transaction().add(*live, old, recent).commit("WRITE")
    now_ms = int(time.time() * 1000)
    log.start_transaction().add(old.remove(now_ms - 10 * DAY * 1000), recent.remove(now_ms)).commit("DELETE")
    for a in (*live, old, recent):
        _age(os.path.join(root, a.path), 30 * DAY)
    # Files nobody references: an old orphan, a young orphan (maybe an in-flight write), hidden ones.
    for name, age in (
        ("orphan.parquet", 30 * DAY),
        ("young.parquet", 60),
        ("_hidden/x.parquet", 30 * DAY),
        (".tmp.parquet", 30 * DAY),
        ("_change_data/c.parquet", 30 * DAY),
        ("p=a/orphan2.parquet", 30 * DAY),
    ):
        path = os.path.join(root, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"x" * 10)
        _age(path, age)
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(b"keep me")
    _age(str(outside), 30 * DAY)
    return log, root, live, old, recent


def test_dry_run_lists_and_deletes_nothing(table):
    log, root, live, old, recent = table
    before = _tree(root)
    versions = len(log.history())
    res = vacuum(log, dry_run=True)
    assert res.dry_run is True
    assert set(res.files) == {"orphan.parquet", "_change_data/c.parquet", "p=a/orphan2.parquet", old.path}
    assert res.bytes == 30 + os.path.getsize(os.path.join(root, old.path))
    assert _tree(root) == before and len(log.history()) == versions  # nothing deleted, nothing committed


def test_vacuum_deletes_unreferenced_old_files_and_records_commits(table, tmp_path):
    log, root, live, old, recent = table
    log_files_before = sorted(os.listdir(os.path.join(root, "_delta_log")))
    res = vacuum(log)
    assert res.dry_run is False and len(res.files) == 4
    remaining = _tree(root)
    for a in live:
        assert a.path in remaining  # live files stay
    assert recent.path in remaining  # removed inside the retention: time travel may read it
    assert "young.parquet" in remaining and "_hidden/x.parquet" in remaining and ".tmp.parquet" in remaining
    assert not any(p.startswith("p=b") for p in remaining)  # emptied partition directory removed
    assert (tmp_path / "outside.parquet").exists()
    assert set(log_files_before) <= set(os.listdir(os.path.join(root, "_delta_log")))
    hist = log.history()
    end, start = hist[0], hist[1]
    assert start.operation == "VACUUM START" and end.operation == "VACUUM END"
    assert start.parameters == {"retentionCheckEnabled": "true", "defaultRetentionMillis": str(7 * DAY * 1000)}
    assert start.metrics == {"numFilesToDelete": "4", "sizeOfDataToDelete": str(res.bytes)}
    assert end.parameters == {"status": "COMPLETED"}
    assert end.metrics["numDeletedFiles"] == "4" and int(end.metrics["numVacuumedDirectories"]) >= 4
    # The vacuum commits hold only commitInfo: no data change.
    for entry in (start, end):
        path = os.path.join(root, "_delta_log", f"{entry.version:020d}.json")
        actions = [json.loads(l) for l in open(path) if l.strip()]
        assert [list(a) for a in actions] == [["commitInfo"]]
    snap = DeltaLog.for_path(root).snapshot()
    assert sorted(snap.files.column("path").to_pylist()) == sorted(a.path for a in live)
    assert vacuum(log, dry_run=True).files == ()  # idempotent


def test_retention_check_and_forced_short_retention(table):
    log, root, live, old, recent = table
    before = _tree(root)
    with pytest.raises(VacuumRetentionError, match="enforce_retention_check=False"):
        vacuum(log, retention_hours=1)
    assert _tree(root) == before
    res = vacuum(log, retention_hours=0, enforce_retention_check=False)
    assert recent.path in res.files and "young.parquet" in res.files
    start = log.history()[1]
    assert start.parameters["retentionCheckEnabled"] == "false" and start.parameters["specifiedRetentionMillis"] == "0"
    for a in live:
        assert os.path.exists(os.path.join(root, a.path))


def test_table_retention_property_and_bad_values(tmp_path):
    root = str(tmp_path / "t")
    log = DeltaLog.for_path(root)
    log.create(SCHEMA, configuration={"delta.deletedFileRetentionDuration": "interval 2 hours"})
    orphan = os.path.join(root, "o.parquet")
    open(orphan, "wb").write(b"1")
    _age(orphan, 3 * 3600)
    assert vacuum(log, dry_run=True).files == ("o.parquet",)
    assert vacuum(log, retention_hours=4, dry_run=True).files == ()
    for bad in (-1, float("nan"), "7 days", True):
        with pytest.raises(InvalidArgumentError, match="retention_hours"):
            vacuum(log, retention_hours=bad)  # type: ignore[arg-type]
    assert os.path.exists(orphan)
