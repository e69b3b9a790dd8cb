"""RESTORE (`use.delta.restore`): one new commit back to an earlier version, read back by delta-rs;
files VACUUM deleted, bad targets and a concurrent write refuse it with the table unchanged."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from use.cli import main
from use.delta import DeltaLog
from use.delta.restore import restore
from use.errors import ConcurrentModificationError, InvalidArgumentError, VersionNotFoundError


def _three_versions(root: str) -> None:
    """v0: a=[1, 2]; v1: + [3]; v2: overwritten with another schema, a=[9] and b."""
    write_deltalake(root, pa.table({"a": [1, 2]}), configuration={"delta.appendOnly": "false"})
    write_deltalake(root, pa.table({"a": [3]}), mode="append")
    write_deltalake(root, pa.table({"a": [9], "b": ["x"]}), mode="overwrite", schema_mode="overwrite")


def _log_files(root: str) -> list[str]:
    return sorted(os.listdir(os.path.join(root, "_delta_log")))


def test_restore_to_a_version_adds_back_its_files_and_metadata_in_one_commit(tmp_path) -> None:
    root = str(tmp_path / "t")
    _three_versions(root)
    r = restore(DeltaLog.for_path(root), 1)
    assert (r.restored_version, r.version, r.num_restored_files, r.num_removed_files, r.num_files) == (1, 3, 2, 1, 2)
    table = DeltaTable(root)
    assert table.version() == 3 and sorted(table.to_pyarrow_table().column("a").to_pylist()) == [1, 2, 3]
    assert table.schema().to_arrow().names == ["a"]  # the target's schema is back
    entry = table.history(1)[0]
    assert entry["operation"] == "RESTORE" and entry["operationParameters"] == {"version": "1"}
    metrics = entry["operationMetrics"]
    assert (metrics["numRestoredFiles"], metrics["numRemovedFiles"], metrics["numOfFilesAfterRestore"]) == (2, 1, 2)
    assert metrics["tableSizeAfterRestore"] == metrics["restoredFilesSize"] == r.size
    # the history stays, and a restore is undone by another one
    assert DeltaLog.for_path(root).snapshot(version=2).num_files == 1
    again = restore(DeltaLog.for_path(root), 2)
    assert sorted(DeltaTable(root).to_pyarrow_table().column("b").to_pylist()) == ["x"] and again.version == 4
    assert "restored version 2 as version 4: 1 file" in str(again)


def test_restore_by_timestamp_and_to_the_state_the_table_is_in(tmp_path) -> None:
    root = str(tmp_path / "t")
    _three_versions(root)
    log = DeltaLog.for_path(root)
    at = log.snapshot(version=0).timestamp
    r = restore(log, timestamp=at)
    assert r.restored_version == 0 and sorted(DeltaTable(root).to_pyarrow_table().column("a").to_pylist()) == [1, 2]
    before = _log_files(root)
    same = restore(DeltaLog.for_path(root), 3)  # version 3 is what the table is now: nothing to commit
    assert same.version is None and _log_files(root) == before and str(same).startswith("nothing to restore")


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ({}, InvalidArgumentError, "exactly one of version"),
        ({"version": 1, "timestamp": "2025-01-01"}, InvalidArgumentError, "exactly one of version"),
        ({"version": -1}, InvalidArgumentError, r"an integer of 0 or more\), got -1"),
        ({"version": True}, InvalidArgumentError, "got True"),
        ({"version": 7}, VersionNotFoundError, "7"),
        ({"timestamp": "not a time"}, InvalidArgumentError, "not a time"),
    ],
)
def test_bad_targets_are_refused_and_change_nothing(tmp_path, args, error, message) -> None:
    root = str(tmp_path / "t")
    _three_versions(root)
    before = _log_files(root)
    with pytest.raises(error, match=message):
        restore(DeltaLog.for_path(root), **args)
    assert _log_files(root) == before


def test_files_vacuum_deleted_make_the_restore_fail_before_anything_is_written(tmp_path) -> None:
    root = str(tmp_path / "t")
    _three_versions(root)
    old = DeltaLog.for_path(root).snapshot(version=1).files.column("path").to_pylist()
    os.remove(os.path.join(root, old[0]))  # as VACUUM would once the retention passed
    before = _log_files(root)
    with pytest.raises(InvalidArgumentError, match=r"1 of its data files are no longer on storage .*restore a later version"):
        restore(DeltaLog.for_path(root), 1)
    assert _log_files(root) == before and DeltaTable(root).version() == 2


def test_a_write_between_reading_and_committing_is_a_conflict_not_undone(tmp_path, monkeypatch) -> None:
    """The restore read the whole table: an append it did not see must not be silently removed."""
    import use.delta.restore as module

    root = str(tmp_path / "t")
    _three_versions(root)
    real = module.Transaction

    class Racing(real):  # type: ignore[misc, valid-type]
        def commit(self, *args, **kwargs):  # another writer commits first
            write_deltalake(root, pa.table({"a": [7], "b": ["y"]}), mode="append")
            return super().commit(*args, **kwargs)

    monkeypatch.setattr(module, "Transaction", Racing)
    with pytest.raises(ConcurrentModificationError):
        restore(DeltaLog.for_path(root), 1)
    assert DeltaTable(root).version() == 3 and sorted(DeltaTable(root).to_pyarrow_table().column("a").to_pylist()) == [7, 9]


def test_use_restore_on_the_command_line(tmp_path, capsys) -> None:
    root = str(tmp_path / "t")
    _three_versions(root)
    assert main(["restore", "--table-location", root, "--version", "0"]) == 0
    assert capsys.readouterr().out.startswith("restored version 0 as version 3: 1 file")
    assert main(["restore", "--table-location", str(tmp_path / "nope"), "--version", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("use restore: error:") and "--table-location" in err and "Traceback" not in err
    shutil.rmtree(root)
