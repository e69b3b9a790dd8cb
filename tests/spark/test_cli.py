"""The `use` command line: demo, history, vacuum and properties run for real; errors are one clear
line (exit code 2) in the command line's own terms."""

from __future__ import annotations

import json
import os
import re

import pyarrow as pa
import pytest

from optimize_support import directory_state
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


def _one_error_line(capsys, command: str) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"use {command}: error:"), captured.err
    assert "Traceback" not in captured.err
    return err[0]


# --- demo --------------------------------------------------------------------------------------------


def test_demo_delta_part(tmp_path, capsys) -> None:
    assert main(["demo", "--delta-only", "--path", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "version 3" in out and "CREATE TABLE" in out and "WRITE" in out
    assert DeltaLog.for_path(str(tmp_path / "events_delta")).snapshot().files.num_rows == 3


@pytest.mark.parametrize(
    "args, message",
    [
        (["--rows", "0"], "--rows must be at least 4"),
        (["--rows", "-5", "--delta-only"], "--rows must be at least 4"),
        (["--rows", "3"], "--rows must be at least 4"),
    ],
)
def test_demo_refuses_bad_rows_before_doing_anything(tmp_path, capsys, args, message) -> None:
    target = tmp_path / "demo"
    assert main(["demo", "--path", str(target), *args]) == 2
    assert message in _one_error_line(capsys, "demo")
    assert not target.exists()


def test_demo_refuses_a_file_or_a_non_empty_directory_as_path(tmp_path, capsys) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    assert main(["demo", "--path", str(a_file), "--delta-only"]) == 2
    assert "is a file; pass a new or empty directory" in _one_error_line(capsys, "demo")
    assert a_file.read_text() == "keep me"

    assert main(["demo", "--delta-only", "--path", str(tmp_path / "d")]) == 0
    capsys.readouterr()
    before = directory_state(str(tmp_path / "d"))
    assert main(["demo", "--delta-only", "--path", str(tmp_path / "d")]) == 2
    assert "--path " + str(tmp_path / "d") + " is not empty (it holds events_delta)" in _one_error_line(capsys, "demo")
    assert directory_state(str(tmp_path / "d")) == before

    other = tmp_path / "other"  # anything else in it: refused too, nothing written
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (other / name).parent.mkdir(exist_ok=True)
        (other / name).write_text(name)
    before = directory_state(str(other))
    assert main(["demo", "--delta-only", "--path", str(other)]) == 2
    line = _one_error_line(capsys, "demo")
    assert "is not empty (it holds a.txt, b.txt, c.txt and 1 more); pass a new or empty directory" in line
    assert directory_state(str(other)) == before


def test_demo_append_wording() -> None:
    from use.cli.demo import append_summary

    assert append_summary(10) == "10 rows in 4 appends (3 + 3 + 2 + 2)"
    assert append_summary(200_000) == "200,000 rows in 4 appends (50,000 each)"


# --- history -----------------------------------------------------------------------------------------


def test_history_is_a_table_with_a_header_and_iso_timestamps(tmp_path, capsys) -> None:
    log = _table(str(tmp_path / "t"))
    big = {f"use.optimization.key{i}": "x" * 50 for i in range(40)}  # a 2 KB parameter, as a real table has
    txn = log.start_transaction()
    txn.commit("SET TBLPROPERTIES", parameters={"properties": json.dumps(big)})
    assert main(["history", "--table-location", str(tmp_path / "t")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["version", "timestamp", "operation", "parameters", "metrics"]
    assert set(lines[1]) <= {"-", " "}
    rows = lines[2:]
    assert [int(line.split()[0]) for line in rows] == [3, 2, 1, 0]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line.split()[1]) for line in rows)
    assert max(len(line) for line in lines) < 250 and "..." in rows[0]  # the 2 KB parameter is cut

    assert main(["history", "--table-location", str(tmp_path / "t"), "--full", "--limit", "1"]) == 0
    full = capsys.readouterr().out.splitlines()
    assert len(full) == 3 and "key39" in full[2]


def test_history_rejects_bad_limit(tmp_path, capsys) -> None:
    _table(str(tmp_path / "t"))
    assert main(["history", "--table-location", str(tmp_path / "t"), "--limit", "0"]) == 2
    assert "--limit" in _one_error_line(capsys, "history")


# --- vacuum ------------------------------------------------------------------------------------------


def test_vacuum_dry_run_then_forced(tmp_path, capsys) -> None:
    log = _table(str(tmp_path / "t"))
    snap = log.snapshot()
    txn = log.start_transaction()
    from use.delta.actions import remove_actions

    txn.add(*remove_actions(snap.files.slice(0, 1), data_change=True))
    txn.commit("DELETE")
    removed = os.path.join(log.table_root, snap.files.column("path")[0].as_py())
    size = os.path.getsize(removed)
    # The default retention (7 days) keeps the just-removed file; a short one needs --force.
    assert main(["vacuum", "--table-location", log.table_root, "--dry-run"]) == 0
    assert capsys.readouterr().out.strip() == "would delete 0 files, 0 B"
    assert main(["vacuum", "--table-location", log.table_root, "--retention-hours", "0"]) == 2
    err = _one_error_line(capsys, "vacuum")
    assert "--force" in err and "--retention-hours 168" in err and "enforce_retention_check" not in err
    assert os.path.exists(removed)
    assert main(["vacuum", "--table-location", log.table_root, "--retention-hours", "0", "--force"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"deleted 1 file, {size:,} B" and not os.path.exists(removed)


def test_vacuum_reports_sizes_in_binary_units_with_exact_bytes() -> None:
    from use.delta.vacuum import VacuumResult

    text = str(VacuumResult(("a.parquet", "b.parquet"), 3 * 1024 * 1024 + 5, True))
    assert text.splitlines() == ["would delete 2 files, 3.0 MiB (3,145,733 B)", "  a.parquet", "  b.parquet"]


@pytest.mark.parametrize("command", ["history", "vacuum", "properties"])
def test_missing_table_is_one_clear_line_with_a_cli_hint(tmp_path, capsys, command) -> None:
    assert main([command, "--table-location", str(tmp_path / "nope")]) == 2
    err = _one_error_line(capsys, command)
    assert "--table-location" in err and "DeltaLog" not in err and "create(schema)" not in err
    assert not (tmp_path / "nope").exists()


# --- properties --------------------------------------------------------------------------------------


def test_properties_list_set_and_unset_in_one_commit_each(tmp_path, capsys) -> None:
    log = _table(str(tmp_path / "t"))
    path = log.table_root
    assert main(["properties", "--table-location", path]) == 0
    assert capsys.readouterr().out.strip() == "(no properties)"

    argv = ["properties", "--table-location", path, "--set", "use.optimization.bytes-per-iter=100000",
            "--set", "delta.checkpointInterval=20"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "committed version 3" and out[1].split() == ["key", "value"]
    assert {tuple(line.split()) for line in out[3:]} == {
        ("delta.checkpointInterval", "20"),
        ("use.optimization.bytes-per-iter", "100000"),
    }
    entry = log.history(1)[0]
    assert entry.operation == "SET TBLPROPERTIES" and json.loads(entry.parameters["properties"]) == {
        "delta.checkpointInterval": "20",
        "use.optimization.bytes-per-iter": "100000",
    }

    assert main(["properties", "--table-location", path, "--unset", "delta.checkpointInterval"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "committed version 4"
    assert log.snapshot().metadata.configuration == {"use.optimization.bytes-per-iter": "100000"}
    assert log.history(1)[0].operation == "UNSET TBLPROPERTIES"

    assert main(["properties", "--table-location", path, "--set", "use.optimization.bytes-per-iter=100000"]) == 0
    assert capsys.readouterr().out.startswith("nothing changed") and log.snapshot().version == 4


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "use.optimization.bytes-per-iter=lots"], "bad value 'lots' for use.optimization.bytes-per-iter"),
        (["--set", "use.optimization.bytes-per-itr=5"], "unknown optimization key"),
        (["--set", "use.optimization.type=SamplingOverheadReduction"], "sampling-fraction"),
        (["--set", "delta.checkpointInterval=soon"], "delta.checkpointInterval"),
        (["--set", "delta.nosuchthing=1"], "unknown Delta table property"),
        (["--set", "qbeast.revision.1=x"], "Qbeast index metadata"),
        (["--set", "novalue"], "--set takes key=value"),
        (["--unset", "use.optimization.type"], "no such property"),
        (["--set", "a=1", "--unset", "a"], "both set and unset"),
        (["--set", "a=1", "--set", "use.optimization.bytes-per-iter=-1"], "bytes-per-iter"),
    ],
)
def test_bad_property_changes_are_one_line_and_change_nothing(tmp_path, capsys, args, message) -> None:
    log = _table(str(tmp_path / "t"))
    before = directory_state(log.table_root)
    assert main(["properties", "--table-location", log.table_root, *args]) == 2
    assert message in _one_error_line(capsys, "properties")
    assert directory_state(log.table_root) == before


# --- the whole demo on Spark ------------------------------------------------------------------------


def test_demo_end_to_end_on_spark(spark, tmp_path, capsys) -> None:
    assert main(["demo", "--path", str(tmp_path), "--rows", "12000"]) == 0
    out = capsys.readouterr().out
    assert "12,000 rows in 4 appends (3,000 each)" in out and "sample(0.1):" in out
    assert re.search(r"^iteration 1: .* -> ", out, re.M)  # progress from the Python optimize()
    assert re.search(r"^(converged|max_iterations|no_progress): \d+ of \d+ tasks? committed", out, re.M)
    from use import QbeastTable

    table = QbeastTable.for_path(spark, str(tmp_path / "events_qbeast"))
    assert table.read().count() == 12000 and table.revision_ids() == [0, 1]


# --- python -m -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["use", "use.cli"])
def test_python_dash_m_runs_the_same_command_line(tmp_path, monkeypatch, module: str) -> None:
    """`python -m use` / `python -m use.cli` are the `use` console script (`use.cli:main`), from any
    directory: its help, its subcommands, its one-line errors and exit code 2."""
    import subprocess
    import sys

    from use.cli import build_parser

    monkeypatch.setenv("COLUMNS", "100")  # the same help width here and in the child

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", module, *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip

    helped = run("--help")
    assert helped.returncode == 0 and helped.stdout == build_parser().format_help(), helped.stderr
    refused = run("demo", "--rows", "1", "--path", str(tmp_path / "d"))
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("use demo: error: --rows must be at least 4") and len(refused.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
