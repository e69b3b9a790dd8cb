"""`use optimize`, called in-process through the dispatcher (the shared Spark session is reused)."""

from __future__ import annotations

import pytest

from optimize_support import deltars_rows, directory_state, plain_delta
from use.cli import main

pytestmark = pytest.mark.spark


def test_dry_run_prints_the_plan_and_writes_nothing(spark, tmp_path, capsys) -> None:
    path = plain_delta(str(tmp_path / "t"))
    before = directory_state(path)
    assert main(["optimize", "--table-location", path, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "plan: strategy=BinPacking" in out and "binpack" in out and "total: 3 task(s)" in out
    assert directory_state(path) == before


def test_run_prints_progress_and_the_metrics_table(spark, tmp_path, capsys) -> None:
    path = plain_delta(str(tmp_path / "t"))
    rows = deltars_rows(path)
    assert main(["optimize", "--table-location", path, "--max-iterations", "2", "--bytes-per-iter", "100000"]) == 0
    out = capsys.readouterr().out.splitlines()
    progress = [line for line in out if line.startswith("iteration ")]
    assert len(progress) == 2 and all("BinPacking/binpack" in line and "-> 1 files" in line for line in progress)
    header = next(i for i, line in enumerate(out) if line.split()[:2] == ["iter", "strategy"])
    assert len(out[header + 2 : header + 4]) == 2  # one table row per iteration
    assert out[-1].startswith("max_iterations: 2 of 2 tasks committed, 12 files")
    assert deltars_rows(path) == rows


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bytes-per-iter", "lots"], "bytes-per-iter"),
        (["--bytes-per-iter", "-1"], "bytes-per-iter"),
        (["--strategy", "NoSuchStrategy"], "NoSuchStrategy"),
        (["--max-iterations", "0"], "--max-iterations"),
        (["--revision-id", "x"], "--revision-id"),
        (["--revision-id", "3"], "plain Delta table"),
    ],
)
def test_bad_flags_are_one_line_errors(spark, tmp_path, capsys, args, message) -> None:
    path = plain_delta(str(tmp_path / "t"))
    before = directory_state(path)
    assert main(["optimize", "--table-location", path, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("use optimize: error:") and message in err[0]
    assert directory_state(path) == before


def test_missing_table_is_a_one_line_error(spark, tmp_path, capsys) -> None:
    assert main(["optimize", "--table-location", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no table at" in err[0]


def test_seed_flags_rewrite_one_revision_once(spark, tmp_path, capsys) -> None:
    """The seed's CubeDefragmentation CLI flags: the whole revision is rewritten, once."""
    from optimize_support import fragmented_qbeast, table_rows

    path = fragmented_qbeast(spark, str(tmp_path / "t"))
    rows = table_rows(spark, path)
    argv = ["optimize", "--table-location", path, "--revision-id", "1", "--bytes-per-iter", "5000000", "--revision-rewrite"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "LeveledCompactionSelection/compact revision 1: 3 files" in out
    assert out.strip().splitlines()[-1].startswith("done: 1 of 1 tasks committed, 3 files")
    assert table_rows(spark, path) == rows
