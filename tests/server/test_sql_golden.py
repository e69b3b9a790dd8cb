"""The golden SQL scripts (`sql/*.sql`) through a real `use serve` and real JDBC clients: every
script through PyHive, some through beeline (the Hive JDBC driver, as BI tools use it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from golden import SQL_DIR, compare, expected_file, render, run_beeline, run_pyhive, split_statements, without_types

SCRIPTS = sorted(SQL_DIR.glob("*.sql"))
# Scripts also run through beeline: each costs one more JVM (about 3-10 s). Beeline prints a
# value with line breaks (SHOW CREATE TABLE) over several lines, which its output cannot be cut by.
BEELINE_SCRIPTS = ("errors", "sessions", "lake_errors", "procedures_errors")


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


def _recorded_rows(script: str, query: str) -> list[tuple[str, ...]]:
    """The rows `sql/<script>.out` records for `query` (cells as text)."""
    blocks = expected_file(SQL_DIR / f"{script}.sql").read_text().split("-- query\n")
    block = next(b for b in blocks if b.startswith(query + "\n"))
    lines = block.rstrip("\n").split("\n")
    assert lines[1].startswith("-- columns:"), block
    return [tuple(line.split(" | ")) for line in lines[2:]]


def test_golden_tablesample_is_qbeast_table_read_with_the_sample(spark, tmp_path) -> None:
    """The TABLESAMPLE results `sql/qbeast_tables.out` records are those of `QbeastTable.read(sample=f)`
    on a table `QbeastTable.write` indexed from the same rows (the script's INSERT)."""
    from pyspark.sql import functions as F

    from use import QbeastTable

    df = spark.range(5000).selectExpr("id AS x", "(id * 7) % 1000 AS y", "CAST(id % 5 AS STRING) AS tag")
    path = str(tmp_path / "points")
    QbeastTable.write(df, path, ["x", "y"], cube_size=500)
    qt = QbeastTable.for_path(spark, path)
    for percent in (10, 1):
        sample = qt.read(sample=percent / 100)
        n, sx, sy = sample.agg(F.count("*"), F.sum("x"), F.sum("y")).collect()[0]
        query = f"SELECT count(*) AS n, sum(x) AS sx, sum(y) AS sy FROM points TABLESAMPLE ({percent} PERCENT)"
        assert _recorded_rows("qbeast_tables", query) == [(str(n), str(sx), str(sy))]
        assert 0 < n < 5000 * percent / 100 * 3
    rows = sorted((r.x, r.y) for r in qt.read(sample=0.01).where("x < 2500").collect())
    query = "SELECT x, y FROM points TABLESAMPLE (1 PERCENT) WHERE x < 2500 ORDER BY x"
    assert _recorded_rows("qbeast_tables", query) == [(str(x), str(y)) for x, y in rows]
