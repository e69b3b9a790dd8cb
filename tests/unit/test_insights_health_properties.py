"""The health score, `ideal_files` and the plan agree, over many small table shapes.

A seeded generator draws small tables (partitions, file counts and sizes for plain Delta; cubes
spread over files, staging files for Qbeast) and checks the properties docs/insights.md states:
the parts add up to 100 - score, `ideal_files` is at least one file per non-empty partition (and a
revision's rows in cubes of its size), and the score and the default plan agree on whether anything
is worth rewriting.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

import use.insights as insights
from _optimize_snapshots import MAX_W, MIN_W, delta_snapshot, files_table, qbeast_snapshot
from use.insights.health import HEALTH_PARTS, health
from use.optimize.config import OptimizationConfig
from use.optimize.planner import plan
from use.qbeast.snapshot import QbeastSnapshot

SHAPES = 200
CUBE_SIZE = 100  # the synthetic revision's desired cube size
# (cube, depth, parent) of a one-column tree
CUBES = (("", 0, None), ("A", 1, ""), ("g", 1, ""), ("AA", 2, "A"), ("Ag", 2, "A"))


def plain_shapes(seed: int) -> Iterator[tuple[QbeastSnapshot, OptimizationConfig, list[int]]]:
    """Plain Delta tables of 0-3 partition columns' values, 0-5 files each of 100 B - 50 KB, with the
    default max-file-size or one of 20-200 KB; yields the table, its config and each partition's bytes."""
    rng = np.random.default_rng(seed)
    for _ in range(SHAPES):
        partitions = int(rng.integers(0, 4))
        paths: list[str] = []
        sizes: list[int] = []
        values: list[dict[str, str | None]] = []
        per_partition: list[int] = []
        for p in range(max(1, partitions)):
            n = int(rng.integers(0 if partitions else 1, 6))
            drawn = rng.integers(100, 50_000, n).tolist()
            paths += [f"p={p}/f{i}" for i in range(n)]
            sizes += drawn
            values += [{"p": str(p)} if partitions else {}] * n
            per_partition += [sum(drawn)] if n else []
        if not paths:
            paths, sizes, values, per_partition = ["p=0/f0"], [500], [{"p": "0"}], [500]
        props = {"use.optimization.max-file-size": str(int(rng.integers(20_000, 200_000)))} if rng.random() < 0.4 else {}
        yield (
            delta_snapshot(files_table(paths, sizes, partitions=values)),
            OptimizationConfig.from_properties(props),
            per_partition,
        )


def qbeast_shapes(seed: int) -> Iterator[QbeastSnapshot]:
    """One-revision Qbeast tables: the first 1-5 cubes of a one-column tree (inner cubes full, leaves
    1-99 rows), each cube's blocks in 1-2 of 1-4 files of 1-50 KB, sometimes a staging file."""
    rng = np.random.default_rng(seed)
    for _ in range(SHAPES):
        nfiles = int(rng.integers(1, 5))
        cubes = CUBES[: int(rng.integers(1, len(CUBES) + 1))]
        cut: dict[str, int] = {}
        blocks: list[tuple[int, int, str, int, int, int, int]] = []
        for cube, depth, parent in cubes:
            low = MIN_W if parent is None else cut[parent]
            inner = any(p == cube for _, _, p in cubes)
            cut[cube] = low + (MAX_W - low) // 3 if inner else MAX_W
            for f in sorted(set(rng.integers(0, nfiles, int(rng.integers(1, 3))).tolist())):
                blocks.append((f, 1, cube, depth, low, cut[cube], CUBE_SIZE if inner else int(rng.integers(1, CUBE_SIZE))))
        used = sorted({b[0] for b in blocks})
        renumber = {f: i for i, f in enumerate(used)}
        blocks = [(renumber[b[0]], *b[1:]) for b in blocks]
        sizes = rng.integers(1_000, 50_000, len(used)).tolist()
        revisions = [1] * len(used)
        if rng.random() < 0.3:
            blocks.append((len(sizes), 0, "", 0, MIN_W, MAX_W, int(rng.integers(1, 50))))
            sizes.append(int(rng.integers(100, 5_000)))
            revisions.append(0)
        yield qbeast_snapshot(files_table([f"f{i}" for i in range(len(sizes))], sizes, revisions=revisions), blocks)


def _check_parts(snap: QbeastSnapshot, config: OptimizationConfig) -> None:
    table = health(snap, config)
    assert set(table.parts) <= set(HEALTH_PARTS) and "scan" in table.parts
    assert all(v >= 0 for v in table.parts.values())
    assert sum(table.parts.values()) == pytest.approx(100.0 - table.score, abs=1e-9)
    for row in insights.layout(snap, config).to_pylist():
        parts = dict(row["health_parts"])
        assert sum(parts.values()) == pytest.approx(100.0 - row["health_score"], abs=1e-9)


def test_plain_delta_tables_score_100_exactly_when_their_plan_is_empty() -> None:
    checked = 0
    for snap, config, per_partition in plain_shapes(36):
        _check_parts(snap, config)
        (row,) = insights.layout(snap, config).to_pylist()
        assert row["ideal_files"] >= len(per_partition)
        empty = plan(snap, config).is_empty
        score = insights.health_score(snap, config)
        if not empty:
            assert score < 100.0, "a plan with work must show in the score"
        if all(b <= config.max_file_size for b in per_partition):
            # each partition's files fit one file: the greedy bins are the ideal, so both agree
            assert empty == (score == 100.0), (snap.files.column("size").to_pylist(), score)
            checked += 1
    assert checked > SHAPES // 2


def test_qbeast_tables_with_an_empty_plan_are_healthy() -> None:
    empty_plans = 0
    for snap in qbeast_shapes(37):
        _check_parts(snap, OptimizationConfig())
        for row in insights.layout(snap).to_pylist():
            if row["num_files"]:
                assert row["ideal_files"] >= max(1, math.ceil(row["rows"] / CUBE_SIZE))
        if plan(snap).is_empty:
            empty_plans += 1
            # what is left is the bytes of other cubes a sample reads along in a file it opens
            assert insights.health_score(snap) >= 99.0
    assert empty_plans > SHAPES // 4


def test_the_two_shapes_a_new_user_tried() -> None:
    # two files of 477 B: one file more than ideal, which a merge would trade for a log file
    tiny = delta_snapshot(files_table(["a", "b"], [477, 477]))
    (row,) = insights.layout(tiny).to_pylist()
    assert (row["ideal_files"], row["health_score"], dict(row["health_parts"])) == (1, 100.0, {"scan": 0.0})
    assert plan(tiny).is_empty
    # three partitions of two files each: three files are ideal, and none is worth a merge
    parts = delta_snapshot(files_table([f"f{i}" for i in range(6)], [2700] * 6, partitions=[{"p": str(i % 3)} for i in range(6)]))
    (row,) = insights.layout(parts).to_pylist()
    assert (row["ideal_files"], row["health_score"]) == (3, 100.0) and plan(parts).is_empty
    # a third file in each partition is worth it: three merges, and the scan's parts say what it costs
    more = delta_snapshot(files_table([f"f{i}" for i in range(9)], [2700] * 9, partitions=[{"p": str(i % 3)} for i in range(9)]))
    (row,) = insights.layout(more).to_pylist()
    c = OptimizationConfig().open_file_cost
    assert row["ideal_files"] == 3 and len(plan(more).tasks) == 3
    assert row["health_score"] == pytest.approx(100 * (9 * 2700 + 3 * c) / (9 * 2700 + 9 * c))
    assert dict(row["health_parts"]) == {"scan": pytest.approx(100 - row["health_score"])}
    # a count threshold of 2 asks for merges of two files (Delta's autoCompact.minNumFiles=2): both follow it
    pairs = OptimizationConfig.from_properties({"use.optimization.small-files.count-threshold": "2"})
    (row,) = insights.layout(tiny, pairs).to_pylist()
    assert row["health_score"] < 100.0 and len(plan(tiny, pairs).tasks) == 1
