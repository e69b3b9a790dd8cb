"""The Python facade `use.tables`: one `Table` base under `QbeastTable` and `DeltaTable`, its accessors
(`t.inspect.<insight>()`, `t.optimize(...)` / `t.optimize.dry_run(...)`), the same optimize surface
on both tables with what does not apply refused, one request checked alike by the Python API, the
command line and CALL, and the old import paths."""

from __future__ import annotations

import inspect as pyinspect
import sys
import warnings

import pytest

from optimize_support import directory_state, fragmented_qbeast, plain_delta
from use import DeltaTable, QbeastTable
from use.cli import main
from use.errors import ConfigError, InvalidArgumentError, UnknownStrategyError
from use.insights import TABLE_INSIGHTS
from use.optimize.loop_core import DRY_RUN, OptimizeResult
from use.tables import Inspect, Optimize, Table

# --- one base class, two accessors --------------------------------------------------------------------


def test_both_tables_are_one_table_class_with_the_same_accessors(spark, tmp_path) -> None:
    assert issubclass(QbeastTable, Table) and issubclass(DeltaTable, Table)
    for name in ("history", "properties", "set_properties", "unset_properties", "optimizations", "vacuum", "restore",
                 "generate", "delete", "update", "insight", "optimize", "inspect", "log", "path"):  # fmt: skip
        assert getattr(QbeastTable, name) is getattr(Table, name) is getattr(DeltaTable, name), name
    qt = QbeastTable.for_path(spark, fragmented_qbeast(spark, str(tmp_path / "q"), appends=1))
    assert isinstance(qt.optimize, Optimize) and isinstance(qt.inspect, Inspect)
    assert repr(qt.optimize) == f"Optimize({qt.path!r})" and repr(qt) == f"QbeastTable({qt.path!r})"


def test_inspect_has_one_method_per_insight_table_and_serves_both_tables(spark, tmp_path) -> None:
    methods = {n for n, _ in pyinspect.getmembers(Inspect, pyinspect.isfunction) if not n.startswith("_")}
    assert methods == set(TABLE_INSIGHTS)
    qt = QbeastTable.for_path(spark, fragmented_qbeast(spark, str(tmp_path / "q"), appends=2))
    dt = DeltaTable.for_path(spark, plain_delta(str(tmp_path / "d")))
    qt.optimize(max_iterations=1, progress=False)  # an event for `optimizations`
    for table in (qt, dt):
        before = directory_state(table.path)
        for name in sorted(TABLE_INSIGHTS):
            rows = getattr(table.inspect, name)()
            assert rows.schema == TABLE_INSIGHTS[name].schema, name
            assert rows.equals(table.insight(name)), name
        assert directory_state(table.path) == before
    assert qt.inspect.optimizations().num_rows == 1 and dt.inspect.optimizations().num_rows == 0
    assert qt.inspect.plan(revision_id=1).equals(qt.insight("plan", revision_id=1))
    assert dt.inspect.files().num_rows == dt.snapshot().num_files and qt.inspect.cubes().num_rows > 0
    with pytest.raises(InvalidArgumentError, match="plain Delta table"):
        dt.inspect.plan(revision_id=1)


# --- the same optimize surface on both tables -------------------------------------------------------------


def test_the_optimize_surface_takes_every_argument_of_a_request() -> None:
    call = set(pyinspect.signature(Optimize.__call__).parameters) - {"self", "config_overrides"}
    assert call == {"revision_id", "files", "strategy", "bytes_per_iter", "zorder_by", "where", "dry_run", "max_iterations",
                    "all_tasks", "stop", "progress"}  # fmt: skip
    planned = set(pyinspect.signature(Optimize.dry_run).parameters) - {"self", "config_overrides"}
    assert planned == {"revision_id", "files", "strategy", "bytes_per_iter", "zorder_by", "where"}


def test_dry_run_plans_what_optimize_runs_first_and_writes_nothing(spark, tmp_path) -> None:
    qt = QbeastTable.for_path(spark, fragmented_qbeast(spark, str(tmp_path / "q")))
    dt = DeltaTable.for_path(spark, plain_delta(str(tmp_path / "d")))
    for table in (qt, dt):
        before = directory_state(table.path)
        planned = table.optimize.dry_run(bytes_per_iter=100_000)
        assert isinstance(planned, OptimizeResult) and planned.outcome == DRY_RUN and planned.plan.tasks
        assert planned.plan.to_table().equals(
            table.optimize(dry_run=True, bytes_per_iter=100_000, progress=False).plan.to_table()
        )
        assert directory_state(table.path) == before
        result = table.optimize(max_iterations=1, bytes_per_iter=100_000, progress=False)
        assert result.committed[0].files_in == planned.plan.tasks[0].num_files


def test_what_does_not_apply_to_a_table_is_refused_and_changes_nothing(spark, tmp_path) -> None:
    qt = QbeastTable.for_path(spark, fragmented_qbeast(spark, str(tmp_path / "q")))
    dt = DeltaTable.for_path(spark, plain_delta(str(tmp_path / "d")))
    before = (directory_state(qt.path), directory_state(dt.path))
    cases = [
        (InvalidArgumentError, r"revision_id=1: the table at .* is a plain Delta table without revisions", lambda: dt.optimize(revision_id=1)),
        (InvalidArgumentError, "plain Delta table without revisions", lambda: dt.optimize.dry_run(revision_id=1)),
        (ConfigError, "is a Qbeast table, whose index already clusters its rows", lambda: qt.optimize(zorder_by="x")),
        (ConfigError, "is a Qbeast table", lambda: qt.optimize.dry_run(zorder_by=["x", "y"])),
        (InvalidArgumentError, "has no partition columns", lambda: qt.optimize(where="x > 1")),
        (InvalidArgumentError, r"must be a predicate on the partition columns \(s\)", lambda: dt.optimize(where="x > 1")),
        (InvalidArgumentError, "zorder_by and files cannot be combined", lambda: dt.zorder("x", files=["a.parquet"])),
    ]  # fmt: skip
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()
    assert (directory_state(qt.path), directory_state(dt.path)) == before


def test_zorder_is_optimize_with_zorder_by(spark, tmp_path) -> None:
    dt = DeltaTable.for_path(spark, plain_delta(str(tmp_path / "d")))
    planned = dt.zorder(["x", "y"], dry_run=True, progress=False).plan
    assert planned.strategy == "ZOrder" and planned.to_table().equals(dt.optimize.dry_run(zorder_by="x,y").plan.to_table())
    hilbert = dt.zorder("x,y", strategy="Hilbert", where="s = 's1'", dry_run=True, progress=False).plan
    assert hilbert.strategy == "Hilbert" and len(hilbert.tasks) == 1
    result = dt.zorder(["x", "y"], progress=False)
    assert result.committed and dt.zorder(["x", "y"], progress=False).outcome == "converged"  # a second call commits nothing


def test_sample_is_the_tables_exact_sample(spark, tmp_path) -> None:
    qt = QbeastTable.for_path(spark, fragmented_qbeast(spark, str(tmp_path / "q")))
    assert sorted(qt.sample(0.3).collect()) == sorted(qt.read(sample=0.3).collect())
    assert sorted(qt.sample(0.5, filter="x < 50").collect()) == sorted(qt.read(sample=0.5, filter="x < 50").collect())


# --- one request, three surfaces ------------------------------------------------------------------------


_BYTES = "expected a positive integer number of bytes, e.g. 5000000"


@pytest.mark.parametrize(
    ("python", "flags", "call", "error", "messages"),
    [
        (
            {"bytes_per_iter": "lots"},
            ["--bytes-per-iter", "lots"],
            "bytes_per_iter => 'lots'",
            ConfigError,
            (
                f"bad value 'lots' for bytes_per_iter: {_BYTES}; pass bytes_per_iter=5000000, or None for the table's "
                "use.optimization.bytes-per-iter",
                f"bad value 'lots' for --bytes-per-iter: {_BYTES}; pass --bytes-per-iter 5000000, or leave it out for the "
                "table's use.optimization.bytes-per-iter",
                f"bad value 'lots' for bytes_per_iter: {_BYTES}; pass bytes_per_iter => 5000000, or leave it out for the "
                "table's use.optimization.bytes-per-iter",
            ),
        ),
        (
            {"max_iterations": 0},
            ["--max-iterations", "0"],
            "max_iterations => 0",
            InvalidArgumentError,
            (
                "max_iterations must be a positive integer (the merge tasks to run at most), got 0; pass max_iterations=10, "
                "or None for no limit",
                "--max-iterations must be a positive integer (the merge tasks to run at most), got 0; pass --max-iterations "
                "10, or leave it out for no limit",
                "max_iterations must be a positive integer (the merge tasks to run at most), got 0; pass max_iterations => "
                "10, or leave it out for no limit",
            ),
        ),
        (
            {"strategy": "Bogus"},
            ["--strategy", "Bogus"],
            "strategy => 'Bogus'",
            UnknownStrategyError,
            (
                "pass strategy='BinPacking', or None for the table's strategy chain",
                "pass --strategy BinPacking, or leave it out for the table's strategy chain",
                "pass strategy => 'BinPacking', or leave it out for the table's strategy chain",
            ),
        ),
    ],
)
def test_a_bad_value_is_refused_alike_by_every_surface_in_its_own_terms(
    spark, tmp_path, capsys, python, flags, call, error, messages
) -> None:
    from pyspark.errors import AnalysisException

    dt = DeltaTable.for_path(spark, plain_delta(str(tmp_path / "d")))
    before = directory_state(dt.path)
    in_python, on_cli, in_sql = messages
    with pytest.raises(error) as info:
        dt.optimize(progress=False, **python)
    assert str(info.value).endswith(in_python)
    assert main(["optimize", "--table-location", dt.path, *flags]) == 2
    assert capsys.readouterr().err.strip().endswith(on_cli)
    with pytest.raises(AnalysisException) as refused:
        spark.sql(f"CALL use_catalog.system.optimize(table => '{dt.path}', {call})").collect()
    assert str(refused.value).split("\n")[0].rstrip().endswith(in_sql)
    assert directory_state(dt.path) == before


# --- the old import paths ----------------------------------------------------------------------------------


def test_use_table_still_gives_the_tables_with_a_deprecation_warning() -> None:
    import use.table
    import use.tables

    for name, import_line in (("QbeastTable", "from use import QbeastTable"), ("DeltaTable", "from use import DeltaTable")):
        with pytest.warns(DeprecationWarning, match=f"use.table is deprecated; import {name} with `{import_line}`"):
            old = getattr(use.table, name)
        assert old is getattr(use.tables, name)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        from use.table import QbeastTable as Old  # noqa: F401
    assert [w.category for w in seen] == [DeprecationWarning] and seen[0].filename == __file__
    with pytest.raises(AttributeError, match="the Python facade is use.tables"):
        use.table.Nope


def test_the_optimizer_module_of_the_old_delta_table_names_the_new_imports() -> None:
    with pytest.raises(ImportError, match=r"use.optimize.delta_table.DeltaTable has moved: from use import DeltaTable"):
        from use.optimize.delta_table import DeltaTable as Old  # noqa: F401
    with pytest.raises(ImportError, match=r"TableSurface has moved: from use.tables import Table"):
        from use.optimize.delta_table import TableSurface  # noqa: F401
    assert "use.optimize.delta_table" in sys.modules  # the module imports; only its old names are gone
