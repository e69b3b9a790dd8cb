"""Tables USE writes read exactly through the format's own sampling walk (qbeast-format §5.2), the
one qbeast-spark's reader runs: from the root, a cube whose status maxWeight covers the sample ends
the descent. Every write path (appends, overwrite, each optimization strategy, DELETE/UPDATE/MERGE
into staging, re-indexing and relabelling of superseded revisions) on data with many equal values
and on skewed data; after each, every sample the walk lists holds every row with
`hash(indexed columns) < Weight(f)` (`spec_walk_support.missed_by_the_walk`, several fractions).

An append lowers a cube's maxWeight; when it writes no row into the cube (ties), no block recorded
the lower weight and the walk stopped above rows it had sent down (`use.qbeast.weight_records`).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import pytest

from spec_walk_support import FRACTIONS, LIGHTEST, ids_of_a_file_holding_a_lowest_weight, spec_walk_misses
from sql_support import location

_ROOT = tempfile.mkdtemp(prefix="use-spec-walk-")
_TEMPLATES: dict[str, str] = {}
EXACT: dict[float | str, int] = {**dict.fromkeys(FRACTIONS, 0), LIGHTEST: 0}


def _low_cardinality(spark: Any, start: int, n: int, seed: int) -> Any:
    """One indexed column of about 100 distinct values (ties far beyond the cube size of 10)."""
    r = random.Random(seed)
    return spark.createDataFrame([(start + i, r.randint(950, 1050), r.random()) for i in range(n)], "id long, y int, v double")


def _skewed(spark: Any, start: int, n: int, seed: int) -> Any:
    """Two indexed columns with skewed, repeated values (exponential and Pareto, rounded)."""
    r = random.Random(seed)
    rows = [(start + i, float(int(r.expovariate(1.0) * 3)), float(int(r.paretovariate(1.5))), r.random()) for i in range(n)]
    return spark.createDataFrame(rows, "id long, x double, y double, v double")


# shape -> (batch builder, indexed columns, cube size, rows per append)
SHAPES: dict[str, tuple[Callable[..., Any], list[str], int, int]] = {
    "low-cardinality": (_low_cardinality, ["y"], 10, 300),
    "skewed": (_skewed, ["x", "y"], 20, 400),
}


def _append(spark: Any, path: str, shape: str, i: int, rows: int | None = None, **kw: Any) -> None:
    from use import QbeastTable

    batch, columns, cube_size, n = SHAPES[shape]
    n = rows or n
    QbeastTable.write(batch(spark, i * n, n, 100 + i), path, columns_to_index=columns, cube_size=cube_size, **kw)


def _appended(spark: Any, dest: str, shape: str, appends: int, rows: int | None = None) -> str:
    """`appends` appends of `shape` (`rows` each, default the shape's; built once per run, copied)."""
    name = f"{shape}-{appends}-{rows}"
    if name not in _TEMPLATES:
        path = os.path.join(_ROOT, name)
        for i in range(appends):
            _append(spark, path, shape, i, rows, mode="append")
        _TEMPLATES[name] = path
    shutil.copytree(_TEMPLATES[name], dest)
    return dest


def _exact(spark: Any, path: str) -> None:
    missed = spec_walk_misses(spark, path)
    assert missed == EXACT, f"rows with hash < Weight(f) in files the spec's walk does not list, per f: {missed}"


@pytest.mark.parametrize("shape", SHAPES)
def test_appends(spark, tmp_path, shape) -> None:
    """Each append is exact on its own (the low-cardinality one missed rows after the second)."""
    from use.qbeast.reader import load_snapshot

    path = str(tmp_path / "t")
    for i in range(4):
        _append(spark, path, shape, i, mode="append")
        _exact(spark, path)
    qsnap = load_snapshot(path)
    # the lowered weights no row landed under are recorded, and count as no row and no block
    assert qsnap.empty_blocks.num_rows > 0
    assert sum(qsnap.blocks.column("element_count").to_pylist()) == 4 * SHAPES[shape][3]


@pytest.mark.parametrize("shape", SHAPES)
def test_overwrite_then_appends(spark, tmp_path, shape) -> None:
    path = _appended(spark, str(tmp_path / "t"), shape, appends=3)
    _append(spark, path, shape, 7, mode="overwrite")
    _exact(spark, path)
    for i in (8, 9):
        _append(spark, path, shape, i, mode="append")
    _exact(spark, path)


# (shape, strategy or None for the default chain, optimization settings): small tasks rewrite some
# of a cube's files and leave others, the case where a removed block held the cube's lowest maxWeight
_OPTIMIZATIONS: list[tuple[str, str | None, dict[str, str]]] = [
    ("low-cardinality", None, {}),
    ("skewed", None, {}),
    ("low-cardinality", "CubeDefragmentation", {"bytes-per-iter": "6000"}),
    ("skewed", "CubeDefragmentation", {"bytes-per-iter": "6000"}),
    ("skewed", "LeveledCompactionSelection", {"tiering.ratio": "0", "bytes-per-iter": "6000"}),
    ("skewed", "SamplingOverheadReduction", {"sampling-fraction": "0.2", "bytes-per-iter": "4000"}),
]


@pytest.mark.parametrize(
    ("shape", "strategy", "settings"),
    _OPTIMIZATIONS,
    ids=lambda v: str(v) if not isinstance(v, dict) else ",".join(f"{k}={x}" for k, x in v.items()) or "defaults",
)
def test_optimizations(spark, tmp_path, shape, strategy, settings) -> None:
    """The run is exact every few tasks and at its end, and so is an append after it."""
    from use.optimize.loop import CONVERGED, optimize_path
    from use.optimize.request import OptimizeRequest

    path = _appended(spark, str(tmp_path / "t"), shape, appends=4)
    for _ in range(30):
        result = optimize_path(spark, OptimizeRequest(path, strategy=strategy, overrides=settings, max_iterations=6))
        _exact(spark, path)
        if result.outcome == CONVERGED:
            break
    assert result.outcome == CONVERGED
    _append(spark, path, shape, 20, mode="append")
    _exact(spark, path)


@pytest.mark.parametrize("shape", SHAPES)
def test_deletes_updates_and_merges_into_staging(spark, tmp_path, db, shape) -> None:
    """DELETE/UPDATE/MERGE rewrite the files holding matched rows as staging files: a removed file
    held a cube's lowest maxWeight while rows stay below the cube; then the optimizer indexes the
    staging rows again."""
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    # appends large enough that some cube's rows and those its append sent below it land in different files
    path = _appended(spark, str(tmp_path / "t"), shape, appends=3, rows={"low-cardinality": 600, "skewed": 1500}[shape])
    spark.sql(f"CREATE TABLE w USING qbeast LOCATION '{path}'")
    root = location(spark, "w")
    col = SHAPES[shape][1][0]
    first = ids_of_a_file_holding_a_lowest_weight(spark, root)
    assert first is not None
    for statement in (
        lambda: f"DELETE FROM w WHERE {first}",
        lambda: f"UPDATE w SET v = v + 1 WHERE {ids_of_a_file_holding_a_lowest_weight(spark, root) or 'id % 5 = 1'}",
        lambda: "DELETE FROM w WHERE id % 7 = 3",
        lambda: f"UPDATE w SET {col} = {col} + 1 WHERE id % 13 = 2",  # an indexed column
        lambda: (
            "MERGE INTO w USING (SELECT id, v FROM w WHERE id % 17 = 1) s ON w.id = s.id "
            "WHEN MATCHED AND s.id % 2 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v * 2"
        ),
    ):
        spark.sql(statement())
        _exact(spark, root)
    optimize_path(spark, OptimizeRequest(root, strategy="UnindexedFilesSelection"))
    _exact(spark, root)
    optimize_path(spark, OptimizeRequest(root))
    _exact(spark, root)


def test_reindexing_and_relabelling_superseded_revisions(spark, tmp_path) -> None:
    """Drifting appends open revisions; the optimizer re-indexes or relabels the superseded ones'
    files into the latest, a few files per task."""
    from use import QbeastTable
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest
    from use.qbeast.reader import load_snapshot

    path = str(tmp_path / "t")
    for i in range(6):
        r = random.Random(200 + i)
        rows = [(i * 300 + k, float(int(r.expovariate(1.0) * 3)) + 4 * i, r.randint(0, 9), r.random()) for k in range(300)]
        QbeastTable.write(spark.createDataFrame(rows, "id long, x double, y int, v double"), path, ["x", "y"], cube_size=20)
        _exact(spark, path)
    assert len([r for r in load_snapshot(path).revisions if r > 0]) > 1
    for _ in range(40):
        result = optimize_path(
            spark,
            OptimizeRequest(
                path, strategy="SupersededRevisionsSelection", overrides={"bytes-per-iter": "5000"}, max_iterations=1
            ),
        )
        if not result.committed:
            break
        _exact(spark, path)
    optimize_path(spark, OptimizeRequest(path))
    _exact(spark, path)
