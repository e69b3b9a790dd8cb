"""The golden SQL scripts (`sql/*.sql`) through a real `use serve` and real JDBC clients: every
script through PyHive, some through beeline (the Hive JDBC driver, as BI tools use it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from golden import SQL_DIR, compare, expected_file, render, run_beeline, run_pyhive, split_statements, without_types

SCRIPTS = sorted(SQL_DIR.glob("*.sql"))
# Scripts also run through beeline: each costs one more JVM (about 3-10 s). Beeline prints a
# value with line breaks (SHOW CREATE TABLE) over several lines, which its output cannot be cut by.
BEELINE_SCRIPTS = ("errors", "sessions")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_golden_sql_through_pyhive(use_server, script: Path, update_golden: bool) -> None:
    actual = render(run_pyhive(use_server, script))
    if update_golden:
        expected_file(script).write_text(actual)
        return
    compare(script, actual)


@pytest.mark.parametrize("name", BEELINE_SCRIPTS)
def test_golden_sql_through_beeline(use_server, name: str, update_golden: bool) -> None:
    script = SQL_DIR / f"{name}.sql"
    if update_golden:
        pytest.skip("expected files are written from PyHive's results")
    actual = render(run_beeline(use_server, script), types=False)
    compare(script, actual, without_types(expected_file(script).read_text()))


def test_split_statements_keeps_semicolons_in_quotes_and_drops_comments() -> None:
    text = "-- a comment; not a statement\nSELECT 'a;b', \"c;\" -- trailing; comment\nFROM t;\nSELECT `x;y`;\nSELECT 1"
    assert split_statements(text) == ["SELECT 'a;b', \"c;\"\nFROM t", "SELECT `x;y`", "SELECT 1"]
