"""`use optimize`, called in-process through the dispatcher (the shared Spark session is reused)."""

from __future__ import annotations

import re

import pytest

from optimize_support import deltars_rows, directory_state, plain_delta
from use.cli import main


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
    assert len(progress) == 2 and all("BinPacking/binpack plain Delta: " in line and "-> 1 file (" in line for line in progress)
    assert not any("revision -1" in line or "blocks" in line for line in progress)  # plain files, not blocks
    header = next(i for i, line in enumerate(out) if line.split()[:2] == ["iter", "strategy"])
    assert len(out[header + 2 : header + 4]) == 2  # one table row per iteration
    assert re.fullmatch(
        r"max_iterations: 2 of 2 tasks committed, 12 files of \d+\.\d KiB \([\d,]+ B\) rewritten into 2 files of .*", out[-1]
    )
    assert deltars_rows(path) == rows


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bytes-per-iter", "lots"], "bytes-per-iter"),
        (["--bytes-per-iter", "-1"], "pass --bytes-per-iter 5000000, or leave it out"),
        (["--strategy", "NoSuchStrategy"], "NoSuchStrategy"),
        (["--strategy", "NoSuchStrategy"], "pass --strategy BinPacking, or leave it out"),
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
    assert out.strip().splitlines()[-1].startswith("done: 1 of 1 task committed, 3 files")
    assert table_rows(spark, path) == rows


def test_a_strategy_that_does_not_apply_says_why(spark, tmp_path, capsys) -> None:
    path = plain_delta(str(tmp_path / "t"))
    before = directory_state(path)
    assert main(["optimize", "--table-location", path, "--strategy", "LeveledCompaction"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("converged: nothing to optimize: LeveledCompactionSelection works on the OTree index")
    assert "is a plain Delta table" in out and "BinPacking" in out
    assert main(["optimize", "--table-location", path, "--strategy", "LeveledCompaction", "--dry-run"]) == 0
    assert "is a plain Delta table" in capsys.readouterr().out
    assert directory_state(path) == before


def test_binpacking_on_a_qbeast_table_without_staging_files_says_why(spark, tmp_path, capsys) -> None:
    from optimize_support import fragmented_qbeast

    path = fragmented_qbeast(spark, str(tmp_path / "t"))
    before = directory_state(path)
    assert main(["optimize", "--table-location", path, "--strategy", "BinPacking"]) == 0
    out = capsys.readouterr().out.strip()
    assert "BinPacking rewrites only plain files, which on a Qbeast table are its staging (revision 0) files" in out
    assert "LeveledCompactionSelection" in out and directory_state(path) == before
