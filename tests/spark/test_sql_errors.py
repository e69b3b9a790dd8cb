"""Every bad SQL input on Delta/Qbeast tables is one clean error and changes nothing: no metastore
entry, no log commit, no file."""

from __future__ import annotations

import os

import pytest

from sql_support import location, refused, state


def _tables(spark) -> list[str]:
    return sorted(r.tableName for r in spark.sql("SHOW TABLES").collect() if not r.isTemporary)


def _warehouse_db(spark, db: str) -> str:
    from use.delta.storage import resolve_table_root

    return os.path.join(resolve_table_root(spark.conf.get("spark.sql.warehouse.dir")), f"{db}.db")


@pytest.mark.parametrize(
    "statement, match",
    [
        ("CREATE TABLE b (x INT) USING qbeast OPTIONS ('columnsToIndex'='x', 'cubeSise'='10')", "unknown option 'cubeSise'"),
        ("CREATE TABLE b (x INT) USING delta OPTIONS ('columnsToIndex'='x')", "unknown option 'columnsToIndex' for USING delta"),
        ("CREATE TABLE b (x INT) USING qbeast OPTIONS ('columnsToIndex'='nope')", "USE_INDEX_COLUMN_ERROR.*nope"),
        ("CREATE TABLE b (x INT) USING qbeast", "USE_INDEX_COLUMN_ERROR.*columnsToIndex"),
        ("CREATE TABLE b (x INT) USING qbeast OPTIONS ('columnsToIndex'='x', 'cubeSize'='-4')", "cubeSize"),
        ("CREATE TABLE b (x INT, p INT) USING qbeast OPTIONS ('columnsToIndex'='x') PARTITIONED BY (p)", "cannot be partitioned"),
        ("CREATE TABLE b (x INT) USING delta TBLPROPERTIES ('use.optimization.bytes-per-iter'='-1')", "USE_CONFIG_ERROR"),
        ("CREATE TABLE b (x INT) USING delta TBLPROPERTIES ('delta.enableDeletionVectors'='true')", "deletionVectors"),
        (
            "CREATE TABLE b USING delta AS SELECT id, 1 / (id - id) AS boom FROM range(0, 8, 1, 4)",
            "USE_SPARK_ERROR.*DIVIDE_BY_ZERO",
        ),
        ("CREATE TABLE b (x INT) USING delta PARTITIONED BY (bucket(4, x))", "PARTITIONED BY"),
    ],
)
def test_bad_create_statements(spark, db, statement, match) -> None:
    with refused(match):
        spark.sql(statement)
    assert _tables(spark) == []
    assert not os.path.exists(os.path.join(_warehouse_db(spark, db), "b"))


def test_location_with_no_table(spark, db, tmp_path) -> None:
    empty = tmp_path / "empty"
    with refused("USE_TABLE_NOT_FOUND_ERROR.*no Delta table at LOCATION"):
        spark.sql(f"CREATE TABLE e USING delta LOCATION '{empty}'")
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "data.parquet").write_bytes(b"not a table")
    with refused("not empty and holds no Delta table"):
        spark.sql(f"CREATE TABLE e (x INT) USING delta LOCATION '{stray}'")
    assert _tables(spark) == [] and not empty.exists() and sorted(os.listdir(stray)) == ["data.parquet"]


def test_qbeast_location_that_is_plain_delta(spark, db, tmp_path) -> None:
    import deltalake
    import pyarrow as pa

    path = str(tmp_path / "plain")
    deltalake.write_deltalake(path, pa.table({"x": [1, 2]}))
    before = state(path)
    with refused("USE_NOT_A_QBEAST_TABLE_ERROR.*USING delta"):
        spark.sql(f"CREATE TABLE p USING qbeast LOCATION '{path}'")
    assert state(path) == before and _tables(spark) == []


@pytest.mark.parametrize(
    "statement", ["MERGE WITH SCHEMA EVOLUTION INTO t USING (SELECT 1 AS a) s ON t.a = s.a WHEN MATCHED THEN DELETE"]
)
def test_unsupported_dml(spark, db, statement) -> None:
    spark.sql("CREATE TABLE t (a INT) USING delta")
    spark.sql("INSERT INTO t VALUES (1)")
    before = state(location(spark, "t"))
    with refused(r"\[USE_NOT_SUPPORTED_ERROR\] MERGE WITH SCHEMA EVOLUTION on Delta/Qbeast tables is not supported yet"):
        spark.sql(statement)
    assert state(location(spark, "t")) == before


def test_a_table_whose_data_is_gone(spark, db, tmp_path) -> None:
    import shutil

    path = tmp_path / "gone"
    spark.sql(f"CREATE TABLE g (a INT) USING delta LOCATION '{path}'")
    shutil.rmtree(path)
    with refused("USE_TABLE_NOT_FOUND_ERROR.*DROP TABLE to unregister it"):
        spark.sql("SELECT * FROM g").collect()
    spark.sql("DROP TABLE g")
    assert _tables(spark) == []


def test_errors_without_the_python_side(spark, db) -> None:
    from use.sql.bridge import register_bridge

    spark.sql("CREATE TABLE t (a INT) USING delta")
    jvm_bridge = spark.sparkContext._jvm.use.sql.Bridge
    jvm_bridge.unregister()
    try:
        with refused(r"\[USE_NOT_INSTALLED_ERROR\].*use.sql.install\(spark\)"):
            spark.sql("SELECT * FROM t").collect()
    finally:
        register_bridge(spark)
    assert spark.sql("SELECT * FROM t").collect() == []


def test_use_errors_carry_a_sqlstate(spark, db, tmp_path) -> None:
    """BI tools branch on the SQLSTATE's class; USE's errors have one like Spark's own."""
    from pyspark.errors import AnalysisException

    spark.sql("CREATE TABLE t (a INT) USING delta")
    for statement, expected in [
        ("CREATE TABLE b (x INT) USING qbeast", "22023"),  # a bad value (the columns to index)
        (f"CREATE TABLE b USING delta LOCATION '{tmp_path / 'none'}'", "42P01"),  # no table there
        ("CREATE TABLE b (x BIGINT) USING delta LOCATION '{root}'", "42K09"),  # columns differ from the log's
        (
            "MERGE WITH SCHEMA EVOLUTION INTO t USING (SELECT 1 AS a) s ON t.a = s.a WHEN MATCHED THEN DELETE",
            "0A000",
        ),  # not supported (JVM side)
        ("SELECT * FROM t VERSION AS OF 5", "22023"),
        ("CREATE TABLE b USING delta AS SELECT 1 / (id - id) AS boom FROM range(2)", "22012"),  # Spark's, from a nested job
    ]:
        with pytest.raises(AnalysisException) as info:
            spark.sql(statement.replace("{root}", location(spark, "t"))).collect()
        assert info.value.getSqlState() == expected, (statement, str(info.value))


def test_every_error_class_follows_one_naming_rule() -> None:
    """Error classes are what SQL clients branch on, so they follow one rule everywhere:
    `USE_<NAME>_ERROR`, the Python side's named after its `use.errors` class, the shim's own
    (`UseException.Kinds`) after the `use.errors` class that means the same when there is one.
    Every class named in the shim, the bridge, the README, the docs, the golden files and these
    tests is one of those."""
    import inspect
    import re
    from pathlib import Path

    from use import errors
    from use.sql.bridge import error_kind

    root = Path(__file__).resolve().parents[2]
    rule = re.compile(r"USE_(?:[A-Z0-9]+_)*ERROR")
    python_kinds = {
        error_kind(cls.__new__(cls)) for cls in vars(errors).values() if inspect.isclass(cls) and issubclass(cls, errors.UseError)
    }
    bridge = (root / "python/use/sql/bridge.py").read_text()
    python_kinds |= set(re.findall(r'"(USE_[A-Z0-9_]+)"', bridge))
    scala = {p: p.read_text() for p in (root / "jvm-shim/src/main/scala").rglob("*.scala")}
    kinds_object = scala[root / "jvm-shim/src/main/scala/use/sql/Bridge.scala"].split("object Kinds {", 1)[1].split("}", 1)[0]
    shim_kinds = set(re.findall(r'"(USE_[A-Z0-9_]+)"', kinds_object))
    assert shim_kinds and python_kinds
    for kind in sorted(python_kinds | shim_kinds):
        assert rule.fullmatch(kind), kind
    # a kind the shim shares with a use.errors class is spelled as the Python side spells it
    assert {"USE_TABLE_NOT_FOUND_ERROR", "USE_INVALID_ARGUMENT_ERROR"} <= shim_kinds & python_kinds
    for path, text in scala.items():  # the shim names classes only through UseException.Kinds
        outside = text.replace(kinds_object, "") if path.name == "Bridge.scala" else text
        assert not re.findall(r'"USE_[A-Z0-9_]*"', outside), path
    known = python_kinds | shim_kinds
    environment = {
        "USE_DELTA_MIRRORS",
        "USE_SPARK_MASTER",
        "USE_QBEAST_SPARK_JARS",
        "USE_SHARED_DATA",
    }  # variables, not error classes
    named = [root / "README.md", *(root / "docs").rglob("*.md"), *(root / "sql").glob("*.out")]
    named += [*(root / "tests").rglob("test_sql_*.py"), *(root / "tests").rglob("test_serve*.py")]
    for path in named:
        for kind in set(re.findall(r"\bUSE_[A-Z0-9_]+\b", path.read_text())) - environment:
            assert kind in known, (path.name, kind)


def test_a_spark_error_without_a_message_is_named_not_none(spark) -> None:
    """A Spark job cancelled under a statement (a stream stopped mid-batch) fails with an exception
    that has no message; SQL users got "[USE_SPARK_ERROR] None"."""
    from types import SimpleNamespace

    from use.sql.bridge import _spark_message

    jvm = spark.sparkContext._jvm
    cancelled = SimpleNamespace(java_exception=jvm.java.util.concurrent.CancellationException())
    assert _spark_message(cancelled) == (
        "java.util.concurrent.CancellationException without a message: a Spark job of this statement failed or was cancelled"
    )
    spark_error = SimpleNamespace(
        java_exception=jvm.java.lang.RuntimeException("outer", jvm.org.apache.spark.SparkException("the cause"))
    )
    assert _spark_message(spark_error) == "the cause"
