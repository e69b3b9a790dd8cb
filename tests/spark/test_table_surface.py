"""What a Python user sees of `QbeastTable` and `DeltaTable`: properties, optimize progress and
results, metrics, events and history as readable text or DataFrames, quantile columns, and errors
that name the Python way out."""

from __future__ import annotations

import re

import pytest

from optimize_support import directory_state, fragmented_qbeast, plain_delta
from use import DeltaTable, QbeastTable
from use.errors import CLI, PYTHON, ConfigError, InvalidArgumentError, TableNotFoundError, VacuumRetentionError

# --- properties ---------------------------------------------------------------------------------------


def test_set_and_unset_properties_from_python(spark, tmp_path) -> None:
    path = fragmented_qbeast(spark, str(tmp_path / "q"), appends=1)
    qt = QbeastTable.for_path(spark, path)
    version = qt.snapshot().version
    assert (
        qt.set_properties({"use.optimization.bytes-per-iter": 100_000, "use.optimization.revision-rewrite": False}) == version + 1
    )
    props = qt.properties()
    assert props["use.optimization.bytes-per-iter"] == "100000" and props["use.optimization.revision-rewrite"] == "false"
    assert qt.set_properties({"use.optimization.bytes-per-iter": "100000"}) is None  # nothing changes: no commit
    assert qt.unset_properties("use.optimization.bytes-per-iter", ["use.optimization.revision-rewrite"]) == version + 2
    assert not any(k.startswith("use.") for k in qt.properties())
    assert [r.operation for r in qt.history(2).collect()] == ["UNSET TBLPROPERTIES", "SET TBLPROPERTIES"]

    dt = DeltaTable.for_path(spark, plain_delta(str(tmp_path / "d")))
    dt.set_properties(foo="bar")  # simple names as keywords
    assert dt.properties()["foo"] == "bar"


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda t: t.set_properties({"use.optimization.bytes-per-iter": "10GB"}), ConfigError, "bytes-per-iter"),
        (lambda t: t.set_properties({"use.optimization.max-file-size": 0}), ConfigError, "max-file-size"),
        (lambda t: t.set_properties({"delta.logRetentionDuration": "forever"}), Exception, "logRetentionDuration"),
        (lambda t: t.set_properties({"qbeast.lastRevisionID": "7"}), ConfigError, "Qbeast index metadata"),
        (lambda t: t.set_properties({"x": [1, 2]}), InvalidArgumentError, "string, number or boolean"),
        (lambda t: t.set_properties(), InvalidArgumentError, "set_properties"),
        (lambda t: t.unset_properties("use.optimization.type"), ConfigError, "no such property"),
        (lambda t: t.unset_properties("qbeast.revision.1"), ConfigError, "Qbeast index metadata"),
    ],
)
def test_bad_property_changes_leave_the_table_as_it_was(spark, tmp_path, call, error, message) -> None:
    path = fragmented_qbeast(spark, str(tmp_path / "q"), appends=1)
    qt = QbeastTable.for_path(spark, path)
    before = directory_state(path)
    with pytest.raises(error, match=message):
        call(qt)
    assert directory_state(path) == before


# --- optimize: progress, result, events -------------------------------------------------------------


def test_python_optimize_prints_progress_and_a_readable_result(spark, tmp_path, capsys) -> None:
    path = plain_delta(str(tmp_path / "d"))
    dt = DeltaTable.for_path(spark, path)
    result = dt.optimize(max_iterations=2, bytes_per_iter=100_000)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith(("iteration 1: ", "iteration 2: ")) for line in lines)
    assert all("BinPacking/binpack plain Delta: " in line and "blocks" not in line for line in lines)
    text = str(result)
    assert "revision -1" not in text and "plain Delta" in text.splitlines()[2]
    assert re.search(r"^max_iterations: 2 of 2 tasks committed, 12 files of .+ KiB \([\d,]+ B\) rewritten", text, re.M)

    seen = []
    dt.optimize(max_iterations=1, progress=seen.append)  # a callable gets the metrics instead
    dt.optimize(max_iterations=1, progress=False)
    assert capsys.readouterr().out == "" and len(seen) == 1 and seen[0].iteration == 1
    with pytest.raises(InvalidArgumentError, match="progress must be"):
        dt.optimize(progress="loud")

    events = dt.optimizations()
    from pyspark.sql.types import TimestampType

    assert isinstance(events.schema["started_at"].dataType, TimestampType)
    assert isinstance(events.schema["finished_at"].dataType, TimestampType)
    assert events.count() == 3 and events.first().started_at.year >= 2024  # the last run found nothing left


def test_qbeast_optimize_takes_all_tasks_like_the_other_surfaces(spark, tmp_path) -> None:
    path = fragmented_qbeast(spark, str(tmp_path / "q"))
    qt = QbeastTable.for_path(spark, path)
    plan = qt.optimize(dry_run=True, progress=False).plan
    result = qt.optimize(all_tasks=True, max_iterations=len(plan.tasks), progress=False)
    assert len(result.iterations) == len(plan.tasks) and result.committed
    with pytest.raises(InvalidArgumentError, match="all_tasks"):
        qt.optimize(all_tasks="yes", progress=False)


def test_a_strategy_that_does_not_apply_is_explained_in_the_result(spark, tmp_path) -> None:
    path = plain_delta(str(tmp_path / "d"))
    result = DeltaTable.for_path(spark, path).optimize(strategy="LeveledCompaction", progress=False)
    assert result.outcome == "converged" and not result.iterations
    assert "LeveledCompactionSelection works on the OTree index of a Qbeast table" in result.note
    assert str(result) == f"converged: {result.note}"


# --- metrics -----------------------------------------------------------------------------------------


def test_index_metrics_print_as_text(spark, tmp_path) -> None:
    qt = QbeastTable.for_path(spark, fragmented_qbeast(spark, str(tmp_path / "q"), appends=1))
    metrics = qt.index_metrics()
    text = str(metrics)
    assert text.startswith("OTree index metrics, revision 1") and "IndexMetrics(" not in text and "SizeStats(" not in text
    assert repr(metrics) == text and repr(metrics[1]) == str(metrics[1]) and metrics[1].revision_id == 1


# --- quantiles ---------------------------------------------------------------------------------------


def test_quantile_columns_as_the_error_says(spark, tmp_path) -> None:
    df = spark.range(2000).selectExpr("cast(id as double) as x", "concat('k', cast(id % 97 as string)) as s")
    path = str(tmp_path / "q")
    with pytest.raises(InvalidArgumentError) as info:
        QbeastTable.write(df, path, ["x", "s:quantiles"], cube_size=200)
    message = str(info.value)
    assert "s_quantiles" in message and "column_stats={'s_quantiles': QbeastTable.compute_quantiles(df, 's')}" in message
    assert not (tmp_path / "q").exists()

    quantiles = QbeastTable.compute_quantiles(df, "s", num_quantiles=10)
    assert quantiles == sorted(quantiles) and quantiles[0] == "k0" and len(quantiles) > 2
    xq = QbeastTable.compute_quantiles(df, "x", num_quantiles=4)
    assert xq[0] == 0.0 and xq[-1] == 1999.0 and len(xq) == 5
    QbeastTable.write(df, path, ["x", "s:quantiles"], cube_size=200, column_stats={"s_quantiles": quantiles})
    qt = QbeastTable.for_path(spark, path)
    assert qt.read(filter="s = 'k5'").count() == 21 and qt.read().count() == 2000
    for bad, message in [("nope", "not a column"), ("x", "num_quantiles")]:
        with pytest.raises(InvalidArgumentError, match=message):
            QbeastTable.compute_quantiles(df, bad, num_quantiles=0)


def test_linear_on_strings_suggests_quantiles_with_their_stats(spark) -> None:
    from use.errors import UnsupportedTypeError

    df = spark.range(3).selectExpr("cast(id as string) as s")
    with pytest.raises(UnsupportedTypeError) as info:
        QbeastTable.write(df, "/nonexistent/never", ["s:linear"])
    assert "s:quantiles" in str(info.value) and "column_stats={'s_quantiles'" in str(info.value)
    assert "column_stats" not in info.value.for_surface(CLI)


# --- errors name the Python way out -------------------------------------------------------------------


def test_bad_filter_is_one_typed_error_without_a_spark_error_log(spark, tmp_path, capfd) -> None:
    qt = QbeastTable.for_path(spark, fragmented_qbeast(spark, str(tmp_path / "q"), appends=1))
    capfd.readouterr()
    for bad in ("zz > 3", "x >>= 3"):
        with pytest.raises(InvalidArgumentError, match="filter"):
            qt.read(filter=bad)
    captured = capfd.readouterr()
    assert "QueryContextLogger" not in captured.err and '"level": "ERROR"' not in captured.err
    assert qt.read(filter="x > 3").count() > 0  # good filters still work


def test_python_errors_name_python_calls(spark, tmp_path) -> None:
    path = plain_delta(str(tmp_path / "d"))
    dt = DeltaTable.for_path(spark, path)
    with pytest.raises(VacuumRetentionError) as info:
        dt.vacuum(0)
    assert "enforce_retention_check=False" in str(info.value) and "--force" not in str(info.value)
    assert "--force" in info.value.for_surface(CLI)
    from use.delta import DeltaLog

    with pytest.raises(TableNotFoundError) as missing:
        DeltaLog.for_path(str(tmp_path / "none")).snapshot()
    assert "DeltaTable.write(df, path)" in str(missing.value) and "--table-location" not in str(missing.value)
    assert missing.value.hints[PYTHON] in str(missing.value)
