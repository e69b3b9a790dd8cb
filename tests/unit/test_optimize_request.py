"""`OptimizeRequest`: every argument of an optimization checked once, when the request is built, each
bad value a typed error naming the argument as the caller's surface spells it (the Python keyword,
the command-line flag, the CALL argument, the table property's key), with that surface's hint."""

from __future__ import annotations

import dataclasses
import types

import pytest

from use.errors import CLI, PYTHON, SQL, ConfigError, InvalidArgumentError, UnknownStrategyError
from use.optimize.request import OptimizeRequest

KNOWN = (
    "BinPacking, ClusterKeyOverlap, CubeDefragmentation, Hilbert, LeveledCompactionSelection, SamplingOverheadReduction, "
    "SmallFiles, SupersededRevisionsSelection, UnindexedFilesSelection, ZOrder"
)
BYTES = "expected a positive integer number of bytes, e.g. 5000000"


@pytest.mark.parametrize(
    ("surface", "arguments", "error", "message"),
    [
        # the Python keyword arguments of t.optimize(...)
        (
            PYTHON,
            {"dry_run": "yes"},
            InvalidArgumentError,
            "dry_run must be true or false, got 'yes'; pass dry_run=True or False",
        ),
        (
            PYTHON,
            {"max_iterations": 0},
            InvalidArgumentError,
            "max_iterations must be a positive integer (the merge tasks to run at most), got 0; pass max_iterations=10, "
            "or None for no limit",
        ),
        (
            PYTHON,
            {"all_tasks": "yes"},
            InvalidArgumentError,
            "all_tasks must be True or False, got 'yes'; pass all_tasks=True or False",
        ),
        (
            PYTHON,
            {"revision_id": -1},
            InvalidArgumentError,
            "revision_id must be a revision id (an integer >= 0; 0 is the staging revision), got -1; pass revision_id=1, "
            "or None for the latest",
        ),
        (
            PYTHON,
            {"revision_id": "1"},
            InvalidArgumentError,
            "revision_id must be an integer revision id, got '1'; pass revision_id=1, or None for the latest",
        ),
        (
            PYTHON,
            {"files": "a.parquet"},
            InvalidArgumentError,
            "files must be a list of data file paths (strings), not a single string",
        ),
        (
            PYTHON,
            {"bytes_per_iter": "lots"},
            ConfigError,
            f"bad value 'lots' for bytes_per_iter: {BYTES}; pass bytes_per_iter=5000000, or None for the table's "
            "use.optimization.bytes-per-iter",
        ),
        (
            PYTHON,
            {"strategy": "Bogus"},
            UnknownStrategyError,
            f"bad value 'Bogus' for strategy: unknown optimization strategy 'Bogus'; known strategies: {KNOWN}; "
            "pass strategy='BinPacking', or None for the table's strategy chain",
        ),
        (
            PYTHON,
            {"zorder_by": ""},
            ConfigError,
            "bad value '' for zorder_by: expected comma-separated column names, e.g. a,b (nested fields as a.b, "
            "`odd.name` for a name with dots); pass zorder_by='a,b'",
        ),
        (
            PYTHON,
            {"where": " "},
            InvalidArgumentError,
            "where must be a predicate on partition columns, e.g. \"p = 'a'\", got ' '; pass where=\"p = 'a'\"",
        ),
        (
            PYTHON,
            {"where": "p = 1", "files": ["a.parquet"]},
            InvalidArgumentError,
            "where and files cannot be combined: files names the data files to rewrite already",
        ),
        (
            PYTHON,
            {"zorder_by": "a", "files": ["a.parquet"]},
            InvalidArgumentError,
            "zorder_by and files cannot be combined: an explicit file list is bin-packed as it is; Z-ordering selects the "
            "files of each partition itself (give zorder_by alone)",
        ),
        (
            PYTHON,
            {"overrides": {"max_file_size": 0}},
            ConfigError,
            f"bad value '0' for max_file_size: {BYTES}",
        ),
        (
            PYTHON,
            {"overrides": "max-file-size=1"},
            InvalidArgumentError,
            "overrides must map use.optimization.* keys to values (e.g. {'max-file-size': 268435456}), got 'max-file-size=1'",
        ),
        (
            PYTHON,
            {"location": ""},
            InvalidArgumentError,
            "the table to optimize must be a path (a non-empty string), got ''; "
            "open the table with QbeastTable.for_path or DeltaTable.for_path",
        ),  # fmt: skip
        # the flags of `use optimize`: their values arrive as text
        (CLI, {"revision_id": "x"}, InvalidArgumentError, "--revision-id must be an integer, got 'x'"),
        (
            CLI,
            {"revision_id": "-1"},
            InvalidArgumentError,
            "--revision-id must be a revision id (an integer >= 0; 0 is the staging revision), got -1; pass --revision-id 1, "
            "or leave it out for the latest",
        ),
        (CLI, {"max_iterations": "many"}, InvalidArgumentError, "--max-iterations must be an integer, got 'many'"),
        (
            CLI,
            {"max_iterations": "0"},
            InvalidArgumentError,
            "--max-iterations must be a positive integer (the merge tasks to run at most), got 0; pass --max-iterations 10, "
            "or leave it out for no limit",
        ),
        (
            CLI,
            {"bytes_per_iter": "lots"},
            ConfigError,
            f"bad value 'lots' for --bytes-per-iter: {BYTES}; pass --bytes-per-iter 5000000, or leave it out for the "
            "table's use.optimization.bytes-per-iter",
        ),
        (
            CLI,
            {"strategy": "Bogus"},
            UnknownStrategyError,
            f"bad value 'Bogus' for --strategy: unknown optimization strategy 'Bogus'; known strategies: {KNOWN}; "
            "pass --strategy BinPacking, or leave it out for the table's strategy chain",
        ),
        (
            CLI,
            {"location": ""},
            InvalidArgumentError,
            "the table to optimize must be a path (a non-empty string), got ''; pass --table-location PATH",
        ),  # fmt: skip
        # the arguments of CALL use_catalog.system.optimize
        (
            SQL,
            {"dry_run": None},
            InvalidArgumentError,
            "dry_run must be true or false, got None; pass dry_run => true or false, or leave it out (false)",
        ),
        (
            SQL,
            {"max_iterations": 0},
            InvalidArgumentError,
            "max_iterations must be a positive integer (the merge tasks to run at most), got 0; pass max_iterations => 10, "
            "or leave it out for no limit",
        ),
        (
            SQL,
            {"bytes_per_iter": -5},
            ConfigError,
            f"bad value '-5' for bytes_per_iter: {BYTES}; pass bytes_per_iter => 5000000, or leave it out for the table's "
            "use.optimization.bytes-per-iter",
        ),
        (
            SQL,
            {"revision_id": -2},
            InvalidArgumentError,
            "revision_id must be a revision id (an integer >= 0; 0 is the staging revision), got -2; pass revision_id => 1, "
            "or leave it out for the latest",
        ),
        # the settings of a manual trigger or a service run, by their table-property keys
        (
            SQL,
            {"overrides": {"use.optimization.bytes-per-iter": "lots"}},
            ConfigError,
            f"bad value 'lots' for use.optimization.bytes-per-iter: {BYTES}",
        ),
        (
            SQL,
            {"overrides": {"use.optimization.type": "Bogus"}},
            UnknownStrategyError,
            f"bad value 'Bogus' for use.optimization.type: unknown optimization strategy 'Bogus'; known strategies: {KNOWN}",
        ),
    ],
)
def test_each_bad_value_is_refused_in_the_callers_terms(surface: str, arguments: dict, error: type, message: str) -> None:
    location = arguments.pop("location", "/data/t")
    with pytest.raises(error) as info:
        OptimizeRequest(location, surface=surface, **arguments)
    assert type(info.value) is error
    assert info.value.for_surface(surface) == message


def test_an_unknown_setting_names_the_closest_key() -> None:
    with pytest.raises(ConfigError) as info:
        OptimizeRequest("/data/t", overrides={"use.optimization.bytes-per-itr": 5})
    assert str(info.value).startswith(
        "unknown optimization key 'use.optimization.bytes-per-itr'; did you mean 'use.optimization.bytes-per-iter'?; known keys: "
    )


def test_a_call_s_error_says_nothing_of_other_surfaces() -> None:
    """A CALL's refusal names `arg => value`, never a Python keyword or a flag (and the reverse)."""
    with pytest.raises(ConfigError) as info:
        OptimizeRequest("/data/t", bytes_per_iter=0, surface=SQL)
    assert "bytes_per_iter=" not in info.value.for_surface(SQL) and "--" not in info.value.for_surface(SQL)
    with pytest.raises(ConfigError) as info:
        OptimizeRequest("/data/t", bytes_per_iter="0", surface=CLI)
    assert "=>" not in info.value.for_surface(CLI) and "bytes_per_iter" not in info.value.for_surface(CLI)


def test_unknown_surface_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="surface must be one of python, cli, sql, got 'web'"):
        OptimizeRequest("/data/t", surface="web")


def test_values_are_kept_normalized() -> None:
    request = OptimizeRequest(
        "/data/t", files=["a.parquet", "b.parquet"], strategy="binpacking", bytes_per_iter="100000", zorder_by=None,
        overrides={"max-file-size": "1000", "min_file_size": None}, revision_rewrite="true",
    )  # fmt: skip
    assert request.files == ("a.parquet", "b.parquet") and request.strategy == ("BinPacking",)
    assert request.bytes_per_iter == 100_000 and request.revision_rewrite is True
    assert dict(request.overrides) == {"max-file-size": "1000"}  # None: not given
    assert isinstance(request.overrides, types.MappingProxyType)
    assert OptimizeRequest("/t", zorder_by="a, b").zorder_by == ("a", "b")
    assert OptimizeRequest("/t", revision_id="2", max_iterations="3", surface=CLI).revision_id == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.dry_run = True  # type: ignore[misc]


def test_requests_with_the_same_values_are_equal() -> None:
    a = OptimizeRequest("/data/t", strategy="BinPacking", files=["x.parquet"], surface=CLI)
    b = OptimizeRequest("/data/t", strategy=["BinPacking"], files=("x.parquet",))
    assert a == b and hash(a) == hash(b)
    assert a != OptimizeRequest("/data/t", strategy="BinPacking", files=["x.parquet"], dry_run=True)


def test_what_the_run_reads() -> None:
    """`zorder_by` alone asks for the ZOrder strategy; with a strategy it is that strategy's key;
    `revision_rewrite` is a setting of the run."""
    assert OptimizeRequest("/t", zorder_by="a,b").arguments() == {
        "bytes_per_iter": None,
        "strategy": "ZOrder",
        "zorder_by": ("a", "b"),
    }
    assert OptimizeRequest("/t", zorder_by="a", strategy="Hilbert").arguments()["strategy"] == ("Hilbert",)
    request = OptimizeRequest("/t", revision_rewrite=True, overrides={"bytes-per-iter": 5})
    assert request.settings() == {"bytes-per-iter": 5, "revision-rewrite": True}
    assert OptimizeRequest("/t").settings() == {}
