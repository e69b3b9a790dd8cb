"""The `use` command line: demo, history and vacuum run for real; errors are one clear line."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from use.cli import main
from use.delta import DeltaLog
from use.delta.datafile import write_data_file


def _table(path: str, appends: int = 2) -> DeltaLog:
    log = DeltaLog.for_path(path)
    log.create(pa.schema([("id", pa.int64())]))
    for i in range(appends):
        txn = log.start_transaction()
        txn.add(write_data_file(log.table_root, pa.table({"id": pa.array([i], pa.int64())})))
        txn.commit("WRITE", parameters={"mode": "Append"})
    return log


def test_demo_delta_part(tmp_path, capsys) -> None:
    assert main(["demo", "--delta-only", "--path", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "version 3" in out and "CREATE TABLE" in out and "WRITE" in out
    assert DeltaLog.for_path(str(tmp_path / "events_delta")).snapshot().files.num_rows == 3


def test_history_lists_commits_newest_first(tmp_path, capsys) -> None:
    _table(str(tmp_path / "t"))
    assert main(["history", "--table-location", str(tmp_path / "t")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [int(line.split()[0]) for line in lines] == [2, 1, 0]


def test_vacuum_dry_run_then_forced(tmp_path, capsys) -> None:
    log = _table(str(tmp_path / "t"))
    snap = log.snapshot()
    txn = log.start_transaction()
    from use.delta.actions import remove_actions

    txn.add(*remove_actions(snap.files.slice(0, 1), data_change=True))
    txn.commit("DELETE")
    removed = os.path.join(log.table_root, snap.files.column("path")[0].as_py())
    # The default retention (7 days) keeps the just-removed file; a short one needs --force.
    assert main(["vacuum", "--table-location", log.table_root, "--dry-run"]) == 0
    assert "would delete 0 files" in capsys.readouterr().out
    assert main(["vacuum", "--table-location", log.table_root, "--retention-hours", "0"]) == 2
    assert "retention" in capsys.readouterr().err.lower() and os.path.exists(removed)
    assert main(["vacuum", "--table-location", log.table_root, "--retention-hours", "0", "--force"]) == 0
    assert "deleted 1 files" in capsys.readouterr().out and not os.path.exists(removed)


@pytest.mark.parametrize("command", ["history", "vacuum"])
def test_missing_table_is_one_clear_line(tmp_path, capsys, command) -> None:
    assert main([command, "--table-location", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"use {command}: error:") and "Traceback" not in err and len(err.splitlines()) == 1
    assert not (tmp_path / "nope").exists()


def test_history_rejects_bad_limit(tmp_path, capsys) -> None:
    _table(str(tmp_path / "t"))
    assert main(["history", "--table-location", str(tmp_path / "t"), "--limit", "0"]) == 2
    assert "--limit" in capsys.readouterr().err


def test_demo_end_to_end_on_spark(spark, tmp_path, capsys) -> None:
    assert main(["demo", "--path", str(tmp_path), "--rows", "12000"]) == 0
    out = capsys.readouterr().out
    assert "== Qbeast table" in out and "sample(0.1):" in out and "== optimize:" in out
    from use import QbeastTable

    table = QbeastTable.for_path(spark, str(tmp_path / "events_qbeast"))
    assert table.read().count() == 12000 and table.revision_ids() == [0, 1]
