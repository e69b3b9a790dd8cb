"""The sampling-aware rollup option (`use.qbeast.rollup.rollup(..., sample_weight=...)`) that the
SamplingOverheadReduction rewrite relies on: cubes no sample(f) reads never share a file with cubes
it does read."""

from __future__ import annotations

import pytest

from use.errors import InvalidArgumentError
from use.qbeast.rollup import rollup
from use.qbeast.weight import MAX_WEIGHT, weight_from_fraction


def w(f: float) -> int:
    return int(weight_from_fraction(f))


# Two dimensions: one symbol per level. Root maxWeight 0.05; A 0.2, Q 0.1 (children of the root).
WEIGHTS = {"": w(0.05), "A": w(0.2), "Q": w(0.1), "g": w(0.3), "AA": w(0.3), "AQ": MAX_WEIGHT,
           "Ag": MAX_WEIGHT, "AAA": MAX_WEIGHT, "QA": MAX_WEIGHT}  # fmt: skip


def test_without_a_sample_weight_the_rollup_is_upstreams() -> None:
    sizes = {"": 100, "A": 10, "Q": 10, "AA": 5, "g": 200}
    assert rollup(sizes, 100, 2) == rollup(sizes, 100, 2, cube_weights=WEIGHTS)
    assert rollup(sizes, 100, 2).group_of["AA"] == ""


def test_non_sampled_children_are_kept_out_of_a_sampled_parents_file() -> None:
    sizes = {"": 100, "A": 10, "Q": 10, "AA": 5, "AQ": 4, "Ag": 3, "AAA": 2, "QA": 7, "g": 200}
    plan = rollup(sizes, 100, 2, cube_weights=WEIGHTS, sample_weight=w(0.15))
    g = plan.group_of
    # A and Q (parent: the root, 0.05 < W(0.15)) may hold sampled rows: rolled into the root as usual;
    # so does QA (its parent Q has maxWeight 0.1 < W(0.15)).
    assert g["A"] == g["Q"] == g["QA"] == ""
    # AA, AQ, Ag (parent A: 0.2 >= W(0.15)) hold only rows >= W(0.15): pooled in one file of their
    # own, AAA rolled into AA first.
    assert g["AAA"] == g["AA"] == g["AQ"] == g["Ag"] != ""
    assert g["g"] == "g"
    assert plan.num_files == 3
    assert plan.file_of("AAAA", 2) == plan.file_of("AA", 2) != plan.file_of("", 2)


def test_a_fraction_below_every_parent_weight_changes_nothing_but_the_pool() -> None:
    sizes = {"": 100, "A": 10, "Q": 10}
    # W(0.01) is below the root's maxWeight: A and Q hold no sampled rows; they share one pool file.
    plan = rollup(sizes, 100, 2, cube_weights=WEIGHTS, sample_weight=w(0.01))
    assert plan.group_of["A"] == plan.group_of["Q"] == "A" and plan.num_files == 2
    # W(0.5) is above every parent weight here: everything is sampled, upstream grouping.
    assert rollup(sizes, 100, 2, cube_weights=WEIGHTS, sample_weight=w(0.5)) == rollup(sizes, 100, 2)


def test_a_sample_weight_needs_the_cube_weights() -> None:
    with pytest.raises(InvalidArgumentError, match="cube_weights"):
        rollup({"": 1}, 100, 2, sample_weight=w(0.1))
