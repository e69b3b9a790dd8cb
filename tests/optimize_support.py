"""Shared table builders for the optimization tests (test_optimize_*.py).

Writing a Qbeast table takes several Spark jobs, so each kind of table is built once per test run as
a template directory and copied for every test that needs it (Delta paths are relative, so a copy is
the same table). Plain Delta and staging tables are written with delta-rs, which needs no Spark.
"""

from __future__ import annotations

import atexit
import collections
import os
import shutil
import tempfile
from typing import Any

import pyarrow as pa

_TEMPLATES: dict[str, str] = {}
_ROOT = tempfile.mkdtemp(prefix="use-optimize-templates-")
atexit.register(shutil.rmtree, _ROOT, True)

CUBE_SIZE = 50
APPEND_ROWS = 200


def rows_df(spark: Any, start: int, n: int) -> Any:
    """Rows with ids [start, start+n). x and y always span the same range (every residue appears in
    each batch of >= 101 rows), so appends stay in one revision instead of widening the space."""
    return spark.range(start, start + n).selectExpr(
        "id",
        "cast((id * 7919) % 101 as double) as x",
        "cast((id * 104729) % 97 as double) as y",
        "concat('s', cast(id % 13 as string)) as s",
    )


def arrow_rows(start: int, n: int, only_s: tuple[str, ...] | None = None) -> pa.Table:
    """The same rows as `rows_df`, as Arrow (for delta-rs appends); `only_s` keeps some `s` values."""
    ids = [i for i in range(start, start + n) if only_s is None or f"s{i % 13}" in only_s]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "x": pa.array([float((i * 7919) % 101) for i in ids], pa.float64()),
            "y": pa.array([float((i * 104729) % 97) for i in ids], pa.float64()),
            "s": pa.array([f"s{i % 13}" for i in ids], pa.string()),
        }
    )


def _copy(name: str, dest: str) -> str:
    shutil.copytree(_TEMPLATES[name], dest)
    return dest


def fragmented_qbeast(spark: Any, dest: str, appends: int = 3) -> str:
    """A Qbeast table made of `appends` small appends (cube size 50): root blocks in every file."""
    name = f"fragmented-{appends}"
    if name not in _TEMPLATES:
        from use import QbeastTable

        path = os.path.join(_ROOT, name)
        # Start from the largest smaller template (its appends are this table's first ones).
        done = max((k for k in range(1, appends) if f"fragmented-{k}" in _TEMPLATES), default=0)
        if done:
            shutil.copytree(_TEMPLATES[f"fragmented-{done}"], path)
        for i in range(done, appends):
            # optimize_write: one file per planned group, so the layout (and the counts the tests
            # expect) does not depend on how many tasks wrote it.
            QbeastTable.write(
                rows_df(spark, i * APPEND_ROWS, APPEND_ROWS), path, ["x", "y"], cube_size=CUBE_SIZE, optimize_write=True
            )
        _TEMPLATES[name] = path
    return _copy(name, dest)


def random_appends_qbeast(spark: Any, dest: str, appends: int = 4, rows: int = 500, cube_size: int = 100) -> str:
    """Issue 15's table, scaled down: `appends` default (non-shuffling) appends of `rows` rows with
    x, y = rand(1)*1000, rand(2)*1000 in a fixed space, cube size `cube_size`."""
    name = f"random-{appends}-{rows}-{cube_size}"
    if name not in _TEMPLATES:
        from pyspark.sql import functions as F

        from use import QbeastTable

        path = os.path.join(_ROOT, name)
        df = spark.range(appends * rows).select(
            F.col("id"), (F.rand(1) * 1000).alias("x"), (F.rand(2) * 1000).alias("y"),
            F.concat(F.lit("s"), (F.col("id") % 13).cast("string")).alias("s"),
        )  # fmt: skip
        space = {"x_min": 0.0, "x_max": 1000.0, "y_min": 0.0, "y_max": 1000.0}
        for part in range(appends):
            QbeastTable.write(df.where(F.col("id") % appends == part), path, ["x", "y"], cube_size=cube_size, column_stats=space)
        _TEMPLATES[name] = path
    return _copy(name, dest)


def staging_qbeast(spark: Any, dest: str, appends: int = 3) -> str:
    """A Delta table written by delta-rs, converted to Qbeast (staging revision 0), then appended to
    by delta-rs: every file is unindexed."""
    name = f"staging-{appends}"
    if name not in _TEMPLATES:
        from deltalake import write_deltalake

        from use import QbeastTable

        path = os.path.join(_ROOT, name)
        write_deltalake(path, arrow_rows(0, 150))
        QbeastTable.convert(spark, path, ["x", "y"], cube_size=CUBE_SIZE)
        for i in range(1, appends + 1):
            write_deltalake(path, arrow_rows(i * 150, 150), mode="append")
        _TEMPLATES[name] = path
    return _copy(name, dest)


def plain_delta(dest: str, appends: int = 6, partitioned: bool = True) -> str:
    """A plain Delta table of many small delta-rs appends, optionally partitioned by `s`."""
    name = f"delta-{appends}-{partitioned}"
    if name not in _TEMPLATES:
        from deltalake import write_deltalake

        path = os.path.join(_ROOT, name)
        for i in range(appends):
            write_deltalake(
                path,
                arrow_rows(i * 40, 40, ("s0", "s1", "s2") if partitioned else None),
                mode="append",
                partition_by=["s"] if partitioned else None,
            )
        _TEMPLATES[name] = path
    return _copy(name, dest)


def table_rows(spark: Any, path: str) -> collections.Counter:
    """The table's rows as a multiset, read through the USE reader (live files only)."""
    from use.qbeast.reader import read

    return collections.Counter(tuple(r) for r in read(spark, path).select("id", "x", "y", "s").collect())


def deltars_rows(path: str) -> collections.Counter:
    """The table's rows as a multiset, read by delta-rs (the independent reader; partition values
    included)."""
    from deltalake import DeltaTable

    return expected_rows([DeltaTable(path).to_pyarrow_table()])


def expected_rows(tables: list[pa.Table]) -> collections.Counter:
    out: collections.Counter = collections.Counter()
    for t in tables:
        out.update(zip(*(t.column(c).to_pylist() for c in ("id", "x", "y", "s")), strict=False))
    return out


def directory_state(path: str) -> dict[str, tuple[int, int]]:
    """Every file under `path` (the log included) with size and mtime: equal states = nothing written."""
    out: dict[str, tuple[int, int]] = {}
    for base, _, names in os.walk(path):
        for n in names:
            full = os.path.join(base, n)
            st = os.stat(full)
            out[os.path.relpath(full, path)] = (st.st_size, st.st_mtime_ns)
    return out


def data_files(path: str) -> set[str]:
    """Parquet files on disk (relative), live or not."""
    return {k for k in directory_state(path) if k.endswith(".parquet") and not k.startswith("_delta_log")}


def commit_actions(path: str, version: int) -> list[dict[str, Any]]:
    import json

    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as fh:
        return [json.loads(line) for line in fh if line.strip()]
