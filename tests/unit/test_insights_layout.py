"""`layout` figures, the lookup overlap depth and the health score, on synthetic snapshots."""

from __future__ import annotations

import math

import pytest

import use.insights as insights
from _optimize_snapshots import MAX_W, MIN_W, files_table, qbeast_snapshot
from insights_support import fragmented, plain
from use.errors import ConfigError
from use.insights.health import path_file_counts
from use.optimize.config import OptimizationConfig
from use.optimize.strategies._common import RevisionBlocks

C = 4 * 1024**2  # the default open-file cost


def _geo(*ratios: float) -> float:
    return 100.0 * math.prod(ratios) ** (1 / len(ratios))


def test_layout_figures_per_revision() -> None:
    t = insights.layout(fragmented())
    assert t.schema == insights.LAYOUT_SCHEMA
    staging, rev1 = t.to_pylist()
    assert staging["revision_id"] == 0 and rev1["revision_id"] == 1
    assert (rev1["num_files"], rev1["bytes"], rev1["rows"], rev1["avg_file_size"], rev1["small_files"]) == (3, 600, 663, 200.0, 3)
    assert (rev1["num_cubes"], rev1["num_blocks"], rev1["max_blocks_per_cube"], rev1["depth"]) == (3, 5, 2, 3)
    assert rev1["blocks_per_cube"] == pytest.approx(5 / 3) and rev1["files_per_cube"] == pytest.approx(5 / 3)
    assert rev1["blocks_per_file"] == pytest.approx(5 / 3)
    assert sorted(rev1["file_levels"]) == [(0, 1), (1, 1), (2, 1)]
    # a lookup in 'Ag' opens f0 and f1 (root), f2 ('A' is in f0 and f2, 'Ag' in f2): 3 files on a 3-level path
    assert (rev1["overlap_columns"], rev1["overlap_depth"], rev1["ideal_overlap_depth"]) == (["x"], 3, 3)
    # The root's weight cut (-1000) is above Weight(0.1): both samples reach the root only, whose
    # block in f0 (50 of its 55 rows) is in the weight range, so they read f0; the ideal is those
    # 50 rows at f0's 100/55 bytes per row. 663 rows of 100-row cubes make 7 files ideal: 3 are fine.
    ideal = 50 * 100 / 55
    assert rev1["ideal_files"] == 7
    for label in ("1pct", "10pct"):
        assert (rev1[f"sample_{label}_files"], rev1[f"sample_{label}_bytes"]) == (1, 100)
        assert rev1[f"sample_{label}_overhead"] == pytest.approx(100 / ideal)
    sample = (ideal + C) / (100 + C)
    assert rev1["health_score"] == pytest.approx(_geo(1.0, sample, sample, 1.0))
    # staging: a sample reads every staging file, but 7 rows are less than one cube: that is ideal
    assert (staging["num_files"], staging["rows"], staging["num_cubes"], staging["overlap_depth"]) == (1, 7, None, None)
    assert (staging["sample_1pct_bytes"], staging["sample_1pct_overhead"], staging["health_score"]) == (50, 1.0, 100.0)


def test_table_health_sums_the_costs_of_its_rows() -> None:
    ideal = 50 * 100 / 55
    sample = (ideal + C + 50 + C) / (100 + C + 50 + C)
    assert insights.health_score(fragmented()) == pytest.approx(_geo(1.0, sample, sample, 1.0))  # scan: 8 ideal, 4 files


def test_plain_delta_layout_with_a_cluster_key() -> None:
    t = insights.layout(plain({"use.optimization.overlap.cluster-key": "id"}))
    (row,) = t.to_pylist()
    figures = ("revision_id", "num_files", "bytes", "rows", "small_files", "ideal_files")
    assert tuple(row[k] for k in figures) == (-1, 4, 4000, 40, 4, 1)
    assert (row["num_cubes"], row["depth"], row["sample_1pct_bytes"], row["sample_10pct_overhead"]) == (None, None, None, None)
    assert row["file_levels"] == [(1, 4)]
    assert (row["overlap_columns"], row["overlap_depth"], row["ideal_overlap_depth"]) == (["id"], 3, 1)  # [8,10] is in 3 files
    assert row["health_score"] == pytest.approx(_geo((4000 + C) / (4000 + 4 * C), 1 / 3))
    (no_key,) = insights.layout(plain()).to_pylist()
    assert no_key["overlap_depth"] is None and no_key["health_score"] == pytest.approx(_geo((4000 + C) / (4000 + 4 * C)))
    with pytest.raises(ConfigError, match="cluster-key"):
        insights.layout(plain({"use.optimization.overlap.cluster-key": "nope"}))


def test_an_ideal_layout_scores_100_and_an_empty_table_too() -> None:
    one = qbeast_snapshot(files_table(["f"], [5000], revisions=[1]), [(0, 1, "", 0, MIN_W, MAX_W, 40)])
    (row,) = insights.layout(one).to_pylist()
    assert row["health_score"] == 100.0 and row["sample_1pct_overhead"] == 1.0 and row["overlap_depth"] == 1
    assert insights.health_score(one) == 100.0
    empty = qbeast_snapshot(files_table([], []), [])
    (row,) = insights.layout(empty).to_pylist()  # the latest revision always has its row
    assert (row["revision_id"], row["num_files"], row["health_score"], row["sample_1pct_overhead"]) == (1, 0, 100.0, None)


def test_a_smaller_target_file_size_changes_what_is_ideal() -> None:
    config = OptimizationConfig.from_properties({"use.optimization.max-file-size": "1000"})
    (row,) = insights.layout(plain(), config).to_pylist()
    assert row["health_score"] == 100.0  # four 1000-byte files are the ideal for 1000-byte targets


def test_path_file_counts_count_each_file_once_along_a_path() -> None:
    # f0 holds '' and 'A' (rolled up), f1 '', f2 'AA', f3 'A' and 'Ag', f4 'g'
    snap = qbeast_snapshot(
        files_table([f"f{i}" for i in range(5)], [10] * 5, revisions=[1] * 5),
        [
            (0, 1, "", 0, MIN_W, 0, 9), (0, 1, "A", 1, 0, MAX_W, 1), (1, 1, "", 0, MIN_W, 0, 9),
            (2, 1, "AA", 2, MIN_W, MAX_W, 1), (3, 1, "A", 1, MIN_W, MAX_W, 1), (3, 1, "Ag", 2, MIN_W, MAX_W, 1),
            (4, 1, "g", 1, MIN_W, MAX_W, 1),
        ],
    )  # fmt: skip
    rb = RevisionBlocks.of(snap, 1)
    counts = dict(zip(rb.cubes.to_pylist(), path_file_counts(rb).tolist(), strict=False))
    assert counts == {"": 2, "A": 3, "g": 3, "AA": 4, "Ag": 3}
    (row,) = insights.layout(snap).to_pylist()
    assert (row["overlap_depth"], row["ideal_overlap_depth"]) == (4, 3)
