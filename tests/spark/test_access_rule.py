"""The shim's confined file access (`use.sql.UseAccess`): its rule decides every case as the Python
reference does (`use.server.access`, tests/access_support.py), and a session enforces it only when
`spark.qbeast.use.allowedRoots` is set (the Python API's sessions work as ever)."""

from __future__ import annotations

import pytest

from access_support import rule_cases
from use.optimize.keys import ALLOWED_ROOTS_KEY
from use.server.access import is_allowed, normalize


def test_the_shims_rule_decides_every_case_as_pythons(spark, tmp_path) -> None:
    rule = spark.sparkContext._jvm.use.sql.UseAccess
    cases = rule_cases(tmp_path)
    differ = [(path, roots) for path, roots, _ in cases if bool(rule.isAllowed(path, list(roots))) != is_allowed(path, roots)]
    assert differ == []
    wrong = [(path, roots, allowed) for path, roots, allowed in cases if bool(rule.isAllowed(path, list(roots))) != allowed]
    assert wrong == []
    for path, _, _ in cases:
        if "://" not in path or path.startswith("file:"):
            assert rule.normalize(path) == normalize(path), path


def test_a_session_without_allowed_roots_reads_anywhere_and_one_with_them_is_confined(spark, tmp_path) -> None:
    outside, inside = tmp_path / "outside", tmp_path / "inside"
    for d in (outside, inside):
        d.mkdir()
        (d / "a.txt").write_text(f"{d.name}\n")
    assert [r.value for r in spark.sql(f"SELECT * FROM text.`{outside}/a.txt`").collect()] == ["outside"]
    confined = spark.newSession()
    confined.conf.set(ALLOWED_ROOTS_KEY, str(inside))
    assert [r.value for r in confined.sql(f"SELECT * FROM text.`{inside}/a.txt`").collect()] == ["inside"]
    with pytest.raises(Exception, match=r"USE_ACCESS_DENIED_ERROR.*outside.*--allowed-root"):
        confined.sql(f"SELECT * FROM text.`{outside}/a.txt`").collect()
    with pytest.raises(Exception, match=r"USE_ACCESS_DENIED_ERROR.*SET spark.sql.legacy.allowNonEmptyLocationInCTAS"):
        confined.sql("SET spark.sql.legacy.allowNonEmptyLocationInCTAS=true")
    with pytest.raises(Exception, match="USE_ACCESS_DENIED_ERROR"):
        confined.sql(f"CREATE TABLE confined_t USING parquet LOCATION '{outside}/t' AS SELECT 1 AS a")
    assert not (outside / "t").exists()
    spark.sql("SET spark.sql.legacy.allowNonEmptyLocationInCTAS=false")  # the unconfined session: as ever


def test_a_sessions_user_reaches_its_jobs_descriptions(spark) -> None:
    from use.optimize.keys import SESSION_USER_KEY

    session = spark.newSession()
    session.conf.set(SESSION_USER_KEY, "erin")  # what `use serve` sets as a JDBC session opens
    sc = spark.sparkContext
    sc.setLocalProperty("spark.job.description", "SELECT sum(id) FROM range(1000)")  # as the Thrift server does
    try:
        session.sql("SELECT sum(id) FROM range(1000)").collect()
    finally:
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    descriptions = [jobs.apply(i).description() for i in range(jobs.length())]  # a Scala Seq of JobData
    shown = [d.get() for d in descriptions if d.isDefined()]
    assert "[user erin] SELECT sum(id) FROM range(1000)" in shown, shown
