"""Driver merge and top-down weight estimation (§3.3)."""

from __future__ import annotations

import pytest

from use.errors import InvalidArgumentError
from use.qbeast.estimate import estimate, estimate_block_sizes, estimate_cube_weights, merge_domains
from use.qbeast.weight import MAX_WEIGHT, MIN_WEIGHT, fraction, weight_from_fraction


def test_small_domain_is_a_single_leaf() -> None:
    assert estimate_cube_weights({"": 900.0}, 1000, 2) == {"": MAX_WEIGHT}


def test_top_down_weights_and_skipped_children() -> None:
    domains = {"": 10_000.0, "A": 2_500.0, "Q": 2_500.0, "g": 500.0, "gA": 100.0, "AA": 600.0}
    w = estimate_cube_weights(domains, 1000, 2)
    root_nw = 1000 / 10_000
    assert w[""] == weight_from_fraction(root_nw)
    assert w["A"] == weight_from_fraction(root_nw + 1000 / 2500)
    assert w["g"] == MAX_WEIGHT  # domain <= desired -> leaf
    assert "gA" not in w  # child of a leaf: skipped
    assert w["AA"] == MAX_WEIGHT
    # maxWeight never decreases downwards
    assert w[""] < w["A"] <= w["AA"]


def test_missing_parent_skips_cube() -> None:
    w = estimate_cube_weights({"": 5000.0, "AA": 3000.0}, 1000, 2)
    assert set(w) == {""}


def test_existing_inner_weights_only_go_down() -> None:
    domains = {"": 50_000.0, "A": 20_000.0}
    # The existing root weight is below the re-estimate: it is kept (weights never rise).
    low = weight_from_fraction(0.01)  # below the re-estimate 1000 / 50_000 = 0.02
    w = estimate_cube_weights(domains, 1000, 2, fixed_weights={"": low, "Q": MAX_WEIGHT})
    assert w[""] == low
    assert w["A"] == weight_from_fraction(fraction(low) + 1000 / 20_000)
    assert "Q" not in w  # an existing leaf is not fixed; it has no domain here
    # The existing root weight is above the re-estimate from the grown domain: it is lowered, so
    # the root keeps holding about the desired size.
    w = estimate_cube_weights(domains, 1000, 2, fixed_weights={"": 0})
    assert w[""] == weight_from_fraction(1000 / 50_000) and w[""] < 0
    # An existing inner cube with no domain to re-estimate from keeps its weight.
    w = estimate_cube_weights({"": 50_000.0}, 1000, 2, fixed_weights={"": weight_from_fraction(0.02), "g": 5})
    assert w["g"] == 5


def test_merge_domains_sums() -> None:
    assert merge_domains({"": 10.0, "A": 3.0}, {"": 5.0, "g": 1.0}) == {"": 15.0, "A": 3.0, "g": 1.0}
    assert merge_domains({"": 1.0}, None) == {"": 1.0}


def test_block_sizes() -> None:
    weights = {"": weight_from_fraction(0.1), "A": weight_from_fraction(0.5)}
    sizes = estimate_block_sizes({"": 10_000.0, "A": 2_000.0, "AA": 100.0}, weights, 2)
    assert sizes[""] == pytest.approx(1000, abs=1)
    assert sizes["A"] == pytest.approx(800, abs=1)
    assert sizes["AA"] == pytest.approx(50, abs=1)  # no estimate: up to MAX_WEIGHT


def test_estimate_end_to_end_uniform() -> None:
    # A uniform 2-d dataset of 64k rows: the domain of a depth-k cube is 64k / 4^k.
    domains = {"": 64_000.0}
    for a in "AQgw":
        domains[a] = 16_000.0
        for b in "AQgw":
            domains[a + b] = 4_000.0
    est = estimate(domains, 4_000, 2)
    assert est.cube_weights["AA"] == MAX_WEIGHT
    assert est.block_sizes[""] == pytest.approx(4_000, rel=0.01)
    assert est.block_sizes["A"] == pytest.approx(4_000, rel=0.01)
    assert sum(est.block_sizes.values()) == pytest.approx(64_000, rel=0.01)
    assert fraction(MIN_WEIGHT) == 0.0


def test_bad_cube_size() -> None:
    with pytest.raises(InvalidArgumentError):
        estimate_cube_weights({"": 1.0}, 0, 2)


def test_assign_cubes_matches_scalar_walk() -> None:
    import numpy as np

    from use.qbeast.cube import CubeId
    from use.qbeast.domains import CubeLookup, JointLookup, estimate_domains
    from use.qbeast.estimate import assign_cubes
    from use.qbeast.rollup import rollup

    rng = np.random.default_rng(11)
    n = 5000
    points = rng.random((n, 2))
    points[:3] = 1.0
    weights = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    domains = estimate_domains(points, weights, group_cube_size=100).to_dict()
    est = estimate(domains, 300, 2)
    plan = rollup(est.block_sizes, 300, 2)
    got = assign_cubes(points, weights, JointLookup(CubeLookup(est.cube_weights), plan.file_lookup()))
    cubes = got.cubes.to_pylist()
    for i in range(0, n, 7):
        for cube in CubeId.containers(points[i]):
            s = cube.to_string()
            if s not in est.cube_weights or weights[i] <= est.cube_weights[s]:
                break
        assert cubes[i] == s
        assert got.max_weights[i] == est.cube_weights.get(s, MAX_WEIGHT)
        assert got.files[i] == plan.file_of(s, 2)
    # Every row sits in a cube whose weight range holds it.
    assert np.all(weights <= got.max_weights)
